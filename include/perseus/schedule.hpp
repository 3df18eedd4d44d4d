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
/// Invariant (checked by Dag::build(), src/planner/dag.cpp, which throws InputError): every
/// computation the stages need appears exactly once, on the rank that holds its stage, and
/// the per-rank orders do not deadlock.
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
/// Throws InputError when stages < 1 or microbatches < 1, or stages × microbatches > 2^20
/// (stage, microbatch) pairs.
Schedule make_1f1b(int stages, int microbatches);

/// GPipe: every stage runs all forwards, then all backwards in reverse microbatch order
/// (as torch.distributed.pipelining's ScheduleGPipe). One stage per rank.
/// Source: Huang et al., "GPipe" (NeurIPS'19). Throws InputError when stages/microbatches < 1
/// or stages × microbatches > 2^20 (stage, microbatch) pairs.
Schedule make_gpipe(int stages, int microbatches);

/// Interleaved 1F1B (virtual pipeline stages) exactly as Megatron-LM orders it
/// (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving;
/// torch.distributed.pipelining.ScheduleInterleaved1F1B gives the same order when
/// microbatches % ranks == 0). Shapes: `ranks` GPUs p, `chunks` model chunks per GPU v,
/// `microbatches` m; p·v stages, and stage c·p + r is chunk c of rank r.
/// Rank r runs the virtual microbatches k = 0..m·v−1, grouped p at a time: forward k is
/// microbatch (k div p·v)·p + k mod p of chunk (k mod p·v) div p; backward k is the same
/// microbatch of chunk v−1−(k mod p·v) div p. It runs w = min(2(p−1−r) + (v−1)p, m·v)
/// warm-up forwards, then forward w+i followed by backward i, then the remaining backwards.
/// Source: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
/// Using Megatron-LM" (SC'21) §2.2.2.
/// Throws InputError when ranks, chunks or microbatches < 1, or when microbatches is not a
/// multiple of ranks (Megatron-LM's rule for the interleaved schedule).
Schedule make_interleaved_1f1b(int ranks, int microbatches, int chunks);

/// ZB-H1: zero-bubble pipeline with 1F1B's activation memory (backward split into input
/// gradient I and weight gradient W; split_backward = true). One stage per rank.
/// Order of rank r (as torch.distributed.pipelining.ScheduleInterleavedZeroBubble with one
/// stage per rank, i.e. the paper's ZB-H1), with p = stages: w = min(p−1−r, m) warm-up
/// forwards; then the m−w remaining forwards each followed by the I of the oldest
/// microbatch; then the w cool-down I's. After every I, when more than r W's are pending,
/// the oldest pending W runs; the W's still pending at the end run last, in order.
/// So rank r defers r weight gradients, which fill the cool-down bubble of 1F1B.
/// Source: Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR'24) §3 (handcrafted ZB-H1).
/// Throws InputError when stages or microbatches < 1.
Schedule make_zb_h1(int stages, int microbatches);

/// Stages (model chunks) each rank holds, by rank: {V, V, ...} for an interleaved schedule of
/// V chunks, uneven for a hand-written placement (e.g. {3, 1}); one entry per rank. Counts
/// schedule.stage_rank (entries outside 0..ranks-1 are skipped); does not throw.
std::vector<int> stages_per_rank(const Schedule& schedule);

/// Names accepted by make_schedule(): "1f1b", "gpipe", "interleaved-1f1b", "zb-h1"
/// (see docs/schedules.md).
std::vector<std::string> schedule_names();

/// Builds the named schedule. `ranks` is the number of GPUs in the pipeline; `chunks` the
/// number of stages per GPU (interleaved schedules; must be 1 for "1f1b", "gpipe" and "zb-h1").
/// Throws InputError on unknown names or invalid sizes: chunks != 1 for a one-stage-per-GPU
/// schedule, ranks × chunks × microbatches > 2^20 (stage, microbatch) pairs, or the maker's
/// own rules (e.g. interleaved-1f1b: microbatches a multiple of ranks).
Schedule make_schedule(std::string_view name, int ranks, int microbatches, int chunks = 1);

}  // namespace perseus
