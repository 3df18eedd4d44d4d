// Interleaved 1F1B (virtual pipeline stages) in Megatron-LM's order.
#include <algorithm>

#include <fmt/core.h>

#include "perseus/error.hpp"
#include "perseus/schedule.hpp"

namespace perseus {

Schedule make_interleaved_1f1b(int ranks, int microbatches, int chunks) {
  constexpr std::string_view kName = "interleaved-1f1b";
  if (ranks < 1) throw InputError(fmt::format("schedule {}: ranks (GPUs) must be >= 1, got {}", kName, ranks));
  if (microbatches < 1) {
    throw InputError(fmt::format("schedule {}: microbatches must be >= 1, got {}", kName, microbatches));
  }
  if (chunks < 1) throw InputError(fmt::format("schedule {}: chunks must be >= 1, got {}", kName, chunks));
  if (microbatches % ranks != 0) {
    const int lower = microbatches / ranks * ranks, upper = lower + ranks;
    throw InputError(fmt::format(
        "schedule {}: microbatches ({}) must be a multiple of the pipeline ranks ({}), as Megatron-LM requires "
        "for the interleaved schedule; use e.g. {} microbatches",
        kName, microbatches, ranks, lower > 0 ? fmt::format("{} or {}", lower, upper) : fmt::format("{}", upper)));
  }
  const int p = ranks, v = chunks, m = microbatches;
  const int total = m * v;  // virtual microbatches per rank
  Schedule s;
  s.name = std::string(kName);
  s.num_stages = p * v;
  s.num_microbatches = m;
  s.stage_rank.resize(p * v);
  for (int c = 0; c < v; ++c)
    for (int r = 0; r < p; ++r) s.stage_rank[c * p + r] = r;
  s.order.resize(p);
  // Virtual microbatch k -> (chunk in the schedule table, microbatch): groups of p microbatches
  // run on chunk 0, then chunk 1, ... (Megatron's get_schedule_table with group size p).
  auto table_chunk = [&](int k) { return (k % (p * v)) / p; };
  auto table_mb = [&](int k) { return (k / (p * v)) * p + k % p; };
  for (int r = 0; r < p; ++r) {
    auto fwd = [&](int k) { return Computation{table_chunk(k) * p + r, table_mb(k), InstructionKind::kForward}; };
    auto bwd = [&](int k) {
      return Computation{(v - 1 - table_chunk(k)) * p + r, table_mb(k), InstructionKind::kBackward};
    };
    const int warmup = std::min(2 * (p - 1 - r) + (v - 1) * p, total);
    auto& o = s.order[r];
    o.reserve(2 * static_cast<std::size_t>(total));
    for (int k = 0; k < warmup; ++k) o.push_back(fwd(k));
    for (int i = 0; i < total - warmup; ++i) {
      o.push_back(fwd(warmup + i));
      o.push_back(bwd(i));
    }
    for (int i = total - warmup; i < total; ++i) o.push_back(bwd(i));
  }
  return s;
}

}  // namespace perseus
