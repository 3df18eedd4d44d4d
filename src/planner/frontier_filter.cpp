// Dominance filter of the planner's candidate points (see frontier_filter.hpp).
#include "frontier_filter.hpp"

#include <cmath>
#include <limits>

namespace perseus::detail {

std::vector<FrontierPoint> pareto_filter(std::vector<std::pair<FrontierPoint, bool>> pts, double pipe_block_w,
                                         double rel_tol) {
  auto key = [&](const FrontierPoint& p) { return p.energy_j - pipe_block_w * p.time_s; };
  std::stable_sort(pts.begin(), pts.end(), [&](const auto& a, const auto& b) {
    return a.first.time_s != b.first.time_s ? a.first.time_s < b.first.time_s : key(a.first) < key(b.first);
  });
  double best = std::numeric_limits<double>::infinity();
  std::vector<FrontierPoint> kept;
  for (const auto& [p, is_max] : pts) {
    if (key(p) < best - rel_tol * std::abs(p.energy_j) &&
        (kept.empty() || kept.back().time_s < p.time_s)) {
      kept.push_back(p);
      best = key(p);
    }
  }
  return kept;
}

}  // namespace perseus::detail
