// Schedule generators: synchronous 1F1B and GPipe, and the name dispatch.
#include "perseus/schedule.hpp"

#include <algorithm>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "perseus/error.hpp"

namespace perseus {

namespace {

/// Most (stage, microbatch) pairs per iteration: 2^20, i.e. ~2.1 million computations (3.1
/// million with split backward), 16 x the largest pipeline the planner is benchmarked on
/// (64 x 1024). The planner needs ~1 KB per computation (128 MiB at 131,072), so this keeps a
/// run within a few GB; beyond it a run would take hours and most of a machine's memory.
constexpr long long kMaxStageMicrobatches = 1LL << 20;

void check_stage_microbatches(std::string_view name, long long stage_microbatches, long long microbatches) {
  if (stage_microbatches * microbatches > kMaxStageMicrobatches) {
    throw InputError(fmt::format("schedule {}: {} stages x {} microbatches = {} (stage, microbatch) pairs is too large "
                                 "(at most {}: the planner needs ~1 KB per computation)",
                                 name, stage_microbatches, microbatches, stage_microbatches * microbatches,
                                 kMaxStageMicrobatches));
  }
}

void check_sizes(std::string_view name, int stages, int microbatches) {
  if (stages < 1) throw InputError(fmt::format("schedule {}: stages must be >= 1, got {}", name, stages));
  if (microbatches < 1) {
    throw InputError(fmt::format("schedule {}: microbatches must be >= 1, got {}", name, microbatches));
  }
  check_stage_microbatches(name, stages, microbatches);
}

Schedule one_stage_per_rank(std::string name, int stages, int microbatches) {
  Schedule s;
  s.name = std::move(name);
  s.num_stages = stages;
  s.num_microbatches = microbatches;
  s.stage_rank.resize(stages);
  for (int i = 0; i < stages; ++i) s.stage_rank[i] = i;
  s.order.resize(stages);
  for (auto& o : s.order) o.reserve(2 * static_cast<std::size_t>(microbatches));
  return s;
}

}  // namespace

Schedule make_1f1b(int stages, int microbatches) {
  check_sizes("1f1b", stages, microbatches);
  Schedule s = one_stage_per_rank("1f1b", stages, microbatches);
  for (int st = 0; st < stages; ++st) {
    auto& o = s.order[st];
    const int warmup = std::min(stages - st, microbatches);
    for (int m = 0; m < warmup; ++m) o.push_back({st, m, InstructionKind::kForward});
    for (int k = 0; k < microbatches; ++k) {
      o.push_back({st, k, InstructionKind::kBackward});
      if (k + warmup < microbatches) o.push_back({st, k + warmup, InstructionKind::kForward});
    }
  }
  return s;
}

Schedule make_gpipe(int stages, int microbatches) {
  check_sizes("gpipe", stages, microbatches);
  Schedule s = one_stage_per_rank("gpipe", stages, microbatches);
  for (int st = 0; st < stages; ++st) {
    for (int m = 0; m < microbatches; ++m) s.order[st].push_back({st, m, InstructionKind::kForward});
    for (int m = 0; m < microbatches; ++m) s.order[st].push_back({st, m, InstructionKind::kBackward});
  }
  return s;
}

std::vector<int> stages_per_rank(const Schedule& schedule) {
  std::vector<int> count(static_cast<std::size_t>(schedule.num_ranks()), 0);
  for (const int rank : schedule.stage_rank)
    if (rank >= 0 && rank < schedule.num_ranks()) ++count[static_cast<std::size_t>(rank)];
  return count;
}

std::vector<std::string> schedule_names() { return {"1f1b", "gpipe", "interleaved-1f1b", "zb-h1"}; }

Schedule make_schedule(std::string_view name, int ranks, int microbatches, int chunks) {
  if (ranks >= 1 && microbatches >= 1 && chunks >= 1) {
    check_stage_microbatches(name, static_cast<long long>(ranks) * chunks, microbatches);
  }
  if (name == "interleaved-1f1b") return make_interleaved_1f1b(ranks, microbatches, chunks);
  if (chunks != 1 && (name == "1f1b" || name == "gpipe" || name == "zb-h1")) {
    throw InputError(fmt::format("schedule {}: holds one stage per GPU, so chunks must be 1 (got {})", name, chunks));
  }
  if (name == "1f1b") return make_1f1b(ranks, microbatches);
  if (name == "gpipe") return make_gpipe(ranks, microbatches);
  if (name == "zb-h1") return make_zb_h1(ranks, microbatches);
  throw InputError(
      fmt::format("unknown schedule {} (expected one of: {})", quote_input(name), fmt::join(schedule_names(), ", ")));
}

}  // namespace perseus
