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
  bool back_is_max = false;  // kept.back() is the all-max plan
  for (const auto& [p, is_max] : pts) {
    if (!(key(p) < best - rel_tol * std::abs(p.energy_j))) continue;
    if (kept.empty() || kept.back().time_s < p.time_s) {
      // With a tolerance (the final frontier), a point no slower than the last kept one within
      // float noise (relative rel_tol) but cheaper replaces it: a plan 4e-16 s faster for 0.5 J
      // more is not a choice anyone needs, and the frontier's times stay strictly decreasing
      // in any printed precision. The all-max plan is replaced only by a plan within the time's
      // own evaluation noise (kTimeNoiseRelTol), so T_min is never slower than it beyond that
      // (a partial solve listed the all-max plan and a plan 4e-16 s slower for 1,800 J less
      // as two rows of one printed time, and reported the costlier one as T_min; session 27).
      if (rel_tol > 0 && !kept.empty() &&
          p.time_s <= kept.back().time_s * (1 + (back_is_max ? std::min(rel_tol, kTimeNoiseRelTol) : rel_tol))) {
        kept.back() = p;
      } else {
        kept.push_back(p);
      }
      back_is_max = is_max;
      best = key(p);
    }
  }
  return kept;
}

}  // namespace perseus::detail
