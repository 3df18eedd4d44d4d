// ZB-H1: zero-bubble pipeline parallelism with 1F1B memory (backward split into I and W).
#include <algorithm>
#include <deque>

#include <fmt/core.h>

#include "perseus/error.hpp"
#include "perseus/schedule.hpp"

namespace perseus {

Schedule make_zb_h1(int stages, int microbatches) {
  constexpr std::string_view kName = "zb-h1";
  if (stages < 1) throw InputError(fmt::format("schedule {}: stages must be >= 1, got {}", kName, stages));
  if (microbatches < 1) {
    throw InputError(fmt::format("schedule {}: microbatches must be >= 1, got {}", kName, microbatches));
  }
  const int p = stages, m = microbatches;
  Schedule s;
  s.name = std::string(kName);
  s.num_stages = p;
  s.num_microbatches = m;
  s.split_backward = true;
  s.stage_rank.resize(p);
  s.order.resize(p);
  for (int r = 0; r < p; ++r) {
    s.stage_rank[r] = r;
    auto& o = s.order[r];
    o.reserve(3 * static_cast<std::size_t>(m));
    const int warmup = std::min(p - 1 - r, m);
    const int deferred = r;  // weight gradients this rank keeps pending
    int next_f = 0, next_i = 0;
    std::deque<int> pending_w;
    auto run_i = [&] {
      o.push_back({r, next_i, InstructionKind::kBackwardInput});
      pending_w.push_back(next_i++);
      if (static_cast<int>(pending_w.size()) > deferred) {
        o.push_back({r, pending_w.front(), InstructionKind::kBackwardWeight});
        pending_w.pop_front();
      }
    };
    while (next_f < warmup) o.push_back({r, next_f++, InstructionKind::kForward});
    while (next_f < m) {
      o.push_back({r, next_f++, InstructionKind::kForward});
      run_i();
    }
    while (next_i < m) run_i();
    for (int mb : pending_w) o.push_back({r, mb, InstructionKind::kBackwardWeight});
  }
  return s;
}

}  // namespace perseus
