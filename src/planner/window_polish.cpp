// The certified planner's polish stage (PlannerOptions::polish_time_s): window search
// (window_search.hpp) on the finished frontier's plans, worst gaps to the bound first.
#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <stdexcept>

#include <fmt/core.h>

#include "frontier_builder.hpp"
#include "frontier_filter.hpp"
#include "window_search.hpp"

namespace perseus {


void FrontierBuilder::polish() {
  if (opt_.polish_time_s <= 0 || f_.partial()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  const double pipe_w = opt_.p_block_w * dag.num_ranks();
  // Targets: (priority, deadline, raw point). The plan at the all-max time first, then every
  // frontier point by its gap to the bound at its own time, largest first.
  const std::vector<FrontierPoint> kept = detail::pareto_filter(raw_points_, pipe_w, kFrontierDominanceRelTol);
  double t_allmax = 0;
  for (const auto& rp : raw_points_)
    if (rp.second) t_allmax = rp.first.time_s;
  struct Target {
    double priority, deadline_s;
    FrontierPoint point;
  };
  std::vector<Target> targets;
  const FrontierPoint* at_allmax = nullptr;
  for (const auto& p : kept)
    if (p.time_s <= t_allmax && (at_allmax == nullptr || p.energy_j < at_allmax->energy_j)) at_allmax = &p;
  if (at_allmax != nullptr) targets.push_back({std::numeric_limits<double>::infinity(), t_allmax, *at_allmax});
  for (const auto& p : kept) {
    const double lb = f_.lower_bound_at(p.time_s);
    if (lb > 0 && !(at_allmax == &p && p.time_s == t_allmax)) targets.push_back({(p.energy_j - lb) / lb, p.time_s, p});
  }
  std::stable_sort(targets.begin(), targets.end(),
                   [](const Target& a, const Target& b) { return a.priority > b.priority; });

  detail::WindowSearch search(dag, f_.op_candidates_, opt_.p_block_w);
  bool cancelled = false, over_budget = false;
  // Each target after the first gets at most a tenth of the budget (at least kMinTargetS), so
  // several of the worst points improve rather than one.
  constexpr double kMinTargetS = 1.0;
  const double target_cap_s = std::max(kMinTargetS, 0.1 * opt_.polish_time_s);
  auto target_start = t0;
  bool capped = false;  // the current target has a cap
  double reported = -1;
  const std::function<bool()> stop = [&] {
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - t0).count();
    if (elapsed >= opt_.polish_time_s) return true;
    report(SolveStage::kPolish, elapsed / opt_.polish_time_s, {}, nullptr, reported);
    if (capped && std::chrono::duration<double>(now - target_start).count() >= target_cap_s) return true;
    if (over_time_budget()) return over_budget = true;
    if (opt_.cancelled && opt_.cancelled()) return cancelled = true;
    return false;
  };
  detail::WindowSearchStats stats;
  std::vector<std::uint16_t> choice(n);
  std::vector<std::vector<std::uint16_t>> polished;  // plans improved so far
  TimelineScratch timeline;
  for (const Target& t : targets) {
    capped = false;
    if (stop()) break;
    capped = &t != &targets.front();
    target_start = std::chrono::steady_clock::now();
    const FrontierPoint& p = t.point;
    choice = choice_of(p);
    // A plan polished earlier meets this deadline too when it is not slower: start from the
    // best of them and the point's own plan.
    double e_best = search.energy_at(choice, t.deadline_s);
    for (const auto& prev : polished) {
      const double e = search.energy_at(prev, t.deadline_s);
      if (e < e_best) {
        choice = prev;
        e_best = e;
      }
    }
    double e_start = 0;
    const double t_start = timeline_and_energy(choice, e_start, timeline);
    if (!search.improve(choice, t.deadline_s, stop, stats)) continue;
    // Kept only when the planner's own evaluator agrees: not slower than the deadline, and less
    // energy at it than the plan it started from.
    FrontierPoint q;
    q.step = -1;
    q.time_s = timeline_and_energy(choice, q.energy_j, timeline);
    if (!(q.time_s <= t.deadline_s &&
          q.energy_j + pipe_w * (t.deadline_s - q.time_s) < e_start + pipe_w * (t.deadline_s - t_start)))
      continue;
    q.energy_before_reclaim_j = q.energy_j;
    q.stored_plan = static_cast<std::int32_t>(stored_.size());
    stored_.push_back(choice);
    polished.push_back(choice);
    raw_points_.push_back({q, false});
    ++f_.num_polished_points;
  }
  if (cancelled) throw PlanningCancelled("planning cancelled");
  if (!over_budget) report(SolveStage::kPolish, 1, {}, nullptr, reported);
  if (over_budget && !f_.partial()) {
    f_.stop_reason = Frontier::StopReason::kTimeBudget;
    f_.partial_detail =
        fmt::format("time budget of {} s reached in the polish stage after {} window subproblems ({} plans improved)",
                    opt_.time_budget_s, stats.windows, f_.num_polished_points);
  }
  f_.num_polish_windows = stats.windows;
  f_.polish_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace perseus
