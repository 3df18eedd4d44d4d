// Dominance filters of the planner's candidate points (private to the library).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "perseus/frontier.hpp"

namespace perseus::detail {

/// Pareto filter of candidate points (point, is the all-max plan): time ascending, decreasing
/// energy; the result is fastest first. A slower point is kept only when it saves more than
/// rel_tol × its energy (the final frontier uses kFrontierDominanceRelTol: float noise does
/// not make a distinct plan; the LP refinement rounds use 0, so which deadlines they refine
/// does not change). With rel_tol > 0, a point whose time is within rel_tol (relative) of the
/// last kept one's and that saves energy replaces it (a point that meets the all-max plan's time
/// only within kTimeNoiseRelTol, float noise of the time's evaluation, so T_min never becomes
/// slower than the all-max time), so
/// no two kept times are equal in any printed precision. pipe_block_w = 0 (W): Pareto in (T, E). pipe_block_w = P_block × R:
/// Pareto in (T, E − pipe_block_w × T), the points that are the best choice for some deadline
/// when the GPUs block at P_block until it (energy at deadline τ = E + pipe_block_w × (τ − T)).
/// With rel_tol > 0 a slower point must also save more than kPrintedEnergyResolutionJ: frontier.csv
/// prints energies to 1e-6 J, and two rows whose E − pipe_block_w × T agree there would break the
/// documented "strictly rises as T falls" in the file (session 31's trial: a profile in kJ, so
/// energies of ~6 "J", kept a plan 1e-7 J cheaper than a faster one).
inline constexpr double kPrintedEnergyResolutionJ = 1e-6;
std::vector<FrontierPoint> pareto_filter(std::vector<std::pair<FrontierPoint, bool>> pts, double pipe_block_w = 0,
                                         double rel_tol = 0);

/// Size of the Pareto filter (pareto_filter()) of the points added so far, kept
/// incrementally (O(log n) per point when they arrive slowest first, as graph-cut steps do):
/// for PlannerOptions::max_points. Points: (time, key = energy − pipe_block_w × time).
class RunningFront {
 public:
  void add(double t, double k) {
    const auto pos = first_not_slower(t);
    if (pos != pts_.end() && pos->second <= k) return;  // a point as fast and as cheap exists
    const auto i = static_cast<std::size_t>(pos - pts_.begin());
    std::size_t lo = i;  // slower points (before i) with key >= k are now dominated
    while (lo > 0 && pts_[lo - 1].second >= k) --lo;
    const std::size_t hi = pos != pts_.end() && pos->first == t ? i + 1 : i;  // same time, more energy
    pts_.erase(pts_.begin() + static_cast<std::ptrdiff_t>(lo), pts_.begin() + static_cast<std::ptrdiff_t>(hi));
    pts_.insert(pts_.begin() + static_cast<std::ptrdiff_t>(lo), {t, k});
  }
  /// Size of the filter if (t, k) were added too.
  std::size_t size_with(double t, double k) const {
    const auto pos = first_not_slower(t);
    if (pos != pts_.end() && pos->second <= k) return pts_.size();
    // Dominated by (t, k): time >= t (a prefix) and key >= k (a suffix, keys rise as time falls).
    const auto i = pos - pts_.begin();
    auto lo = i;
    while (lo > 0 && pts_[lo - 1].second >= k) --lo;
    const auto same = pos != pts_.end() && pos->first == t ? 1 : 0;
    return pts_.size() - static_cast<std::size_t>(i - lo + same) + 1;
  }

 private:
  using Pts = std::vector<std::pair<double, double>>;  // time strictly falling, key strictly rising
  Pts::const_iterator first_not_slower(double t) const {
    return std::lower_bound(pts_.begin(), pts_.end(), t, [](const auto& p, double x) { return p.first > x; });
  }
  Pts pts_;
};

}  // namespace perseus::detail
