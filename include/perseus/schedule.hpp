// Pipeline schedules: the per-GPU (rank) execution order of forward/backward computations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/profile.hpp"

namespace perseus {

/// One computation of one microbatch on one stage (a "forward/backward instruction").
struct Computation {
  std::int32_t stage = 0;       ///< Pipeline stage (model chunk), 0..num_stages-1.
  std::int32_t microbatch = 0;  ///< Microbatch id, 0..num_microbatches-1.
  InstructionKind kind = InstructionKind::kForward;
  friend bool operator==(const Computation&, const Computation&) = default;
};

/// A synchronous pipeline schedule for one training iteration of one pipeline.
/// A rank (GPU) runs one or more stages (chunks); `order[r]` is rank r's execution order.
/// Invariant (checked by validate_schedule / build_dag): every computation the stages
/// need appears exactly once, on the rank that holds its stage.
struct Schedule {
  std::string name;                             ///< e.g. "1f1b", "gpipe", "interleaved-1f1b".
  int num_stages = 0;                           ///< Stages (model chunks) in the pipeline.
  int num_microbatches = 0;                     ///< Microbatches per iteration.
  std::vector<int> stage_rank;                  ///< stage -> rank (GPU) holding it.
  std::vector<std::vector<Computation>> order;  ///< rank -> computations in execution order.
  bool split_backward = false;                  ///< true: backward is I + W (zero-bubble).

  int num_ranks() const { return static_cast<int>(order.size()); }
};

/// Synchronous 1F1B (PipeDream-Flush) as DeepSpeed/Megatron-LM/Merak order it:
/// stage s runs w = min(stages - s, microbatches) warm-up forwards, then alternates
/// backward k / forward k+w, then cool-down backwards. One stage per rank.
/// Source: Narayanan et al. (PipeDream-2BW, 2021); Perseus artifact `Synchronous1F1B`.
/// Throws InputError when stages < 1 or microbatches < 1.
Schedule make_1f1b(int stages, int microbatches);

/// GPipe: every stage runs all forwards, then all backwards in reverse microbatch order
/// (as torch.distributed.pipelining's ScheduleGPipe). One stage per rank.
/// Source: Huang et al., "GPipe" (NeurIPS'19). Throws InputError when stages/microbatches < 1.
Schedule make_gpipe(int stages, int microbatches);

/// Names accepted by make_schedule(): "1f1b", "gpipe", plus those registered by later
/// schedule generators (see docs/schedules.md).
std::vector<std::string> schedule_names();

/// Builds the named schedule. `ranks` is the number of GPUs in the pipeline; `chunks` the
/// number of stages per GPU (interleaved schedules; 1 otherwise).
/// Throws InputError on unknown names or invalid sizes.
Schedule make_schedule(std::string_view name, int ranks, int microbatches, int chunks = 1);

}  // namespace perseus
