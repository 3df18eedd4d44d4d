// `perseus schedule`: export a schedule as a per-rank action list (torch.distributed.pipelining notation).
#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/core.h>
#include <fmt/format.h>

#include "usage_hints.hpp"
#include "commands.hpp"
#include "option_checks.hpp"
#include "perseus/error.hpp"
#include "perseus/input_file.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/problem.hpp"
#include "perseus/schedule.hpp"
#include "perseus/schedule_io.hpp"

namespace perseus::cli {

namespace {

struct ScheduleArgs {
  std::string schedule = "1f1b";
  int stages = 0;
  int microbatches = 0;
  int chunks = 1;
  std::string out;
  bool force = false;
};

}  // namespace

void register_schedule(CLI::App& app) {
  auto a = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "schedule",
      "Write a pipeline schedule as a per-rank action list CSV ({stage}{F|B|I|W}{microbatch}, one rank per row), "
      "to diff against a framework's order; a CSV given as --schedule is validated and rewritten");
  cmd->add_option("--schedule", a->schedule, "1f1b, gpipe, interleaved-1f1b, zb-h1, or a schedule CSV to validate")
      ->capture_default_str();
  // With a schedule CSV these are optional; given, each must match the file (exit status 1).
  cmd->add_option("--stages", a->stages, "GPUs (pipeline ranks) per pipeline (with a schedule CSV: must match its rows)")
      ->check(integer_in(1, 1 << 20));
  cmd->add_option("--microbatches", a->microbatches,
                  "Microbatches per iteration (with a schedule CSV: must match the file's)")
      ->check(integer_in(1, 1 << 20));
  auto* chunks = cmd->add_option("--chunks", a->chunks,
                                 "Stages (model chunks) per GPU for interleaved-1f1b (with a schedule CSV: must match "
                                 "the file's)")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 20));
  cmd->add_option("--out", a->out, "Output CSV file (written atomically; an existing file is kept unless --force), "
                                   "or - for standard output")
      ->required()
      ->check(non_empty_path("an output file or -"));
  cmd->add_flag("--force", a->force, "Replace an existing --out file");
  cmd->callback([a, chunks] {
    // A file is replaced only with --force (optimize likewise replaces only a folder holding
    // nothing but its own earlier output): checked first, so nothing is computed in vain.
    if (a->out != "-") check_output_file(a->out, a->force, "out");
    const auto names = schedule_names();
    const bool named = std::find(names.begin(), names.end(), a->schedule) != names.end();
    // A piped schedule CSV (`--schedule /dev/stdin`) is checked like a file, as optimize reads it.
    if (!named && is_stream_path(a->schedule)) keep_stream_input(a->schedule, "schedule");
    Schedule s;
    // Not schedule_is_file(): this is_regular_file() throws on a link loop, which names the loop
    // (Cli.ASymbolicLinkLoopIsAnInputErrorNotABug); the non-throwing one reads it as "no file".
    if (!named && (std::filesystem::is_regular_file(a->schedule) || is_kept_stream(a->schedule))) {
      // --stages/--microbatches/--chunks given with a file are checked against it, never ignored.
      ProblemSpec spec;
      spec.schedule = a->schedule;
      spec.num_ranks = a->stages;
      spec.microbatches = a->microbatches;
      spec.chunks = a->chunks;
      spec.chunks_given = chunks->count() > 0;
      s = resolve_schedule(spec);
    } else {
      // Missing options are usage errors (exit status 2).
      if (!named) throw CLI::ValidationError("--schedule", unknown_schedule_message(a->schedule, names));
      if (a->stages < 1) throw CLI::ValidationError("--stages", "required with a schedule name");
      if (a->microbatches < 1) throw CLI::ValidationError("--microbatches", "required with a schedule name");
      s = make_schedule(a->schedule, a->stages, a->microbatches, a->chunks);
    }
    if (a->out == "-") {
      fmt::print("{}", format_schedule_csv(s));
      return;
    }
    write_file_atomically(a->out, format_schedule_csv(s));
    std::size_t n = 0;
    for (const auto& r : s.order) n += r.size();
    fmt::print("wrote {}: schedule {}, {} ranks, {} stages, {} microbatches, {} computations{}\n", terminal_safe(a->out), s.name,
               s.num_ranks(), s.num_stages, s.num_microbatches, n,
               s.split_backward ? " (backward split into I/W)" : "");
  });
}

}  // namespace perseus::cli
