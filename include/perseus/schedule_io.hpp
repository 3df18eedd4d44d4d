// Import/export of pipeline schedules as per-rank action lists (torch.distributed.pipelining notation).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "perseus/schedule.hpp"

namespace perseus {

/// One action in torch.distributed.pipelining notation: `{stage}{F|B|I|W}{microbatch}`,
/// e.g. "2F0" (forward of microbatch 0 on stage 2), "0I3" (input gradient), "0W3" (weight
/// gradient), "1B2" (full backward). Source: torch/distributed/pipelining/schedules.py
/// (`_Action.__repr__`).
std::string format_action(const Computation& c);

/// Parses a schedule CSV held in memory: one row per pipeline rank (GPU), rank r being the
/// r-th row; each field one action in order of execution (format_action()). This is the
/// format of torch.distributed.pipelining's `_dump_csv` / `_load_csv(format="compute_only")`.
/// Leniencies: fields are trimmed and may be quoted; empty fields (torch's idle steps) are
/// skipped; communication actions (SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD,
/// REDUCE_GRAD) are ignored, since the DAG derives communication from data dependencies;
/// blank lines and lines starting with '#' are skipped (they are not ranks).
/// The result: num_stages = largest stage + 1, num_microbatches = largest microbatch + 1,
/// stage_rank from the row each stage appears in, split_backward when I/W actions are used,
/// name = source_name.
/// Throws InputError, naming `source_name`, the line, the rank and the action, when: an
/// action is malformed or has an unknown kind letter; a stage appears on two ranks; a
/// stage id in 0..num_stages-1 or a rank has no computation; full backward (B) is mixed
/// with split backward (I/W); a computation appears twice; a computation is missing (every
/// stage needs F and B, or F, I and W, of every microbatch); or the per-rank orders
/// deadlock (a dependency cycle, found by Dag::build; the message lists where each
/// unfinished rank waits and for what).
Schedule parse_schedule_csv(std::string_view text, const std::string& source_name);

/// Reads a schedule CSV file (see parse_schedule_csv()). Throws InputError when the file
/// cannot be read or is invalid; messages start with `path`.
Schedule load_schedule_csv(const std::string& path);

/// The CSV text of `schedule`: one row per rank, actions comma-separated, no header, so
/// torch.distributed.pipelining's `_load_csv` reads it too. Round-trips through
/// parse_schedule_csv() (except `name`).
std::string format_schedule_csv(const Schedule& schedule);

/// Writes format_schedule_csv(schedule) to `path` atomically (write_file_atomically). Throws
/// InputError naming the reason when it cannot be written.
void write_schedule_csv(const Schedule& schedule, const std::string& path);

}  // namespace perseus
