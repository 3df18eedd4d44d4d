// The certified planner's polish stage (PlannerOptions::polish_time_s) on the finished frontier's
// plans, worst gaps to the bound first: window search at the all-max time, whole-DAG solves on
// hull vertices, then window search everywhere (window_search.hpp; docs/planner2.md "Session 28").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>

#include <fmt/core.h>

#include "frontier_builder.hpp"
#include "frontier_filter.hpp"
#include "plan_improve.hpp"
#include "window_search.hpp"

namespace perseus {

namespace {
/// Largest DAG (computations) that gets whole-DAG solves on hull vertices, and the
/// branch-and-bound nodes each may take (WindowSearch::improve_whole_dag_on_hull()).
constexpr int kHullMilpMaxOps = 512;
constexpr int kHullMilpNodes = 100;
/// With PlannerOptions::polish_solves: the branch-and-bound nodes of each window solve (instead
/// of WindowSearchConfig::window_time_s), and the fewest window solves a capped target may take.
constexpr int kWindowNodes = 200;
constexpr int kMinTargetWindows = 10;
}  // namespace

std::vector<FrontierBuilder::PolishTarget> FrontierBuilder::polish_targets() const {
  const double pipe_w = opt_.p_block_w * f_.dag_->num_ranks();
  // Fastest first.
  const std::vector<FrontierPoint> kept = detail::pareto_filter(raw_points_, pipe_w, kFrontierDominanceRelTol);
  double t_allmax = 0;
  for (const auto& rp : raw_points_)
    if (rp.second) t_allmax = rp.first.time_s;
  std::vector<PolishTarget> targets;
  const FrontierPoint* at_allmax = nullptr;
  for (const auto& p : kept)
    if (p.time_s <= t_allmax && (at_allmax == nullptr || p.energy_j < at_allmax->energy_j)) at_allmax = &p;
  if (at_allmax != nullptr) targets.push_back({std::numeric_limits<double>::infinity(), t_allmax, *at_allmax});
  for (const auto& p : kept) {
    const double lb = f_.lower_bound_at(p.time_s);
    if (lb > 0 && !(at_allmax == &p && p.time_s == t_allmax))
      targets.push_back({100 * (p.energy_j - lb) / lb, p.time_s, p});
  }
  // And between two points, where the faster one, blocking at P_block until the deadline, is
  // the plan chosen (Frontier::max_deadline_gap_pct()): its gap grows with the deadline, largest
  // just below the slower point's time. The target is the deadline where it crosses
  // refine_gap_pct, so a new plan there leaves the interval before it within that gap; one just
  // below the slower point would land a hair faster than it and move the worst deadline by as
  // little. Ranked by the interval's largest gap; none where the faster point is itself above
  // refine_gap_pct (its own target comes first) or the whole interval is within it.
  const double thr = opt_.refine_gap_pct;
  for (std::size_t i = 0; i + 1 < kept.size(); ++i) {
    const FrontierPoint& p = kept[i];
    auto gap_at = [&](double d) {
      const double lb = f_.lower_bound_at(d);
      return lb > 0 ? 100 * (p.energy_j + pipe_w * (d - p.time_s) - lb) / lb : 0.0;
    };
    const double end = kept[i + 1].time_s * (1 - 1e-12), worst = gap_at(end);
    if (!(end > p.time_s) || !(worst > thr) || !(gap_at(p.time_s) < thr)) continue;
    double lo = p.time_s, hi = end;  // gap_at(lo) < thr < gap_at(hi): gap_at grows with d
    for (int it = 0; it < 60 && hi - lo > 1e-9 * hi; ++it) {
      const double mid = 0.5 * (lo + hi);
      (gap_at(mid) < thr ? lo : hi) = mid;
    }
    targets.push_back({worst, lo, p});
  }
  std::stable_sort(targets.begin(), targets.end(),
                   [](const PolishTarget& a, const PolishTarget& b) { return a.gap_pct > b.gap_pct; });
  return targets;
}

void FrontierBuilder::polish() {
  const bool by_time = opt_.polish_time_s > 0, by_solves = opt_.polish_solves > 0;
  if ((!by_time && !by_solves) || f_.partial()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  const double pipe_w = opt_.p_block_w * dag.num_ranks();
  detail::WindowSearchConfig window_config;
  if (by_solves) window_config.window_nodes = kWindowNodes;  // a count: the same work on any machine
  detail::WindowSearch search(dag, f_.op_candidates_, opt_.p_block_w, window_config);
  bool cancelled = false, over_budget = false;
  // In the window pass each target after the first gets at most a tenth of the budget (at
  // least kMinTargetS, or kMinTargetWindows solves), so several of the worst points improve
  // rather than one. By time, or (polish_solves) by solves: then no wall clock decides anything.
  constexpr double kMinTargetS = 1.0;
  const double target_cap_s = std::max(kMinTargetS, 0.1 * opt_.polish_time_s);
  const int target_cap_windows = std::max(kMinTargetWindows, opt_.polish_solves / 10);
  auto target_start = t0;
  bool capped = false;  // the current target has a cap
  double reported = -1;
  bool out_of_time = false;  // the whole polish is over: no more polls of opt_.cancelled
  detail::WindowSearchStats stats;
  // CBC solves left (polish_solves); the stage is over when none is.
  auto solves_left = [&] { return opt_.polish_solves - stats.windows; };
  auto solves_spent = [&] { return by_solves && solves_left() <= 0; };
  const std::function<bool()> stop = [&] {
    if (out_of_time || cancelled || over_budget) return true;
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - t0).count();
    if (by_time && elapsed >= opt_.polish_time_s) return out_of_time = true;
    // Progress: the larger share of whichever budgets are set.
    const double time_done = by_time ? elapsed / opt_.polish_time_s : 0.0;
    const double solves_done = by_solves ? static_cast<double>(stats.windows) / opt_.polish_solves : 0.0;
    report(SolveStage::kPolish, std::max(time_done, solves_done), {}, nullptr, reported);
    if (by_time && !by_solves && capped && std::chrono::duration<double>(now - target_start).count() >= target_cap_s)
      return true;
    if (over_time_budget()) return over_budget = true;
    if (opt_.cancelled && opt_.cancelled()) return cancelled = true;
    return false;
  };
  std::vector<std::uint16_t> choice(n);
  std::vector<std::vector<std::uint16_t>> polished;  // plans improved so far
  TimelineScratch timeline;
  // T (s) and E (J) of each polished plan, by the planner's evaluator (as the frontier's points).
  std::vector<double> polished_time, polished_energy;
  // The best plan so far for t's deadline: t's point's own plan, or one polished earlier that is
  // not slower than the deadline (blocking at P_block until it). Its energy at the deadline (J)
  // from the points' numbers, no timeline; the plan itself into `out` when given.
  auto best_plan_for = [&](const PolishTarget& t, std::vector<std::uint16_t>* out) {
    double e_best = t.point.energy_j + pipe_w * (t.deadline_s - t.point.time_s);
    int best = -1;
    for (std::size_t k = 0; k < polished.size(); ++k) {
      const double e = polished_energy[k] + pipe_w * (t.deadline_s - polished_time[k]);
      if (polished_time[k] <= t.deadline_s && e < e_best) {
        best = static_cast<int>(k);
        e_best = e;
      }
    }
    if (out != nullptr) *out = best < 0 ? choice_of(t.point) : polished[static_cast<std::size_t>(best)];
    return e_best;
  };
  // The polished plans nearest to a deadline in time (the fastest slower than it and the
  // slowest not slower), sped up to it (tighten()) or given its extra time (fill_slack()):
  // neighbouring deadlines' plans differ little, so this often is within refine_gap_pct
  // already, for the cost of a few timelines instead of a MILP. Replaces `c` when better;
  // returns its energy at the deadline, J.
  std::vector<double> fill_scratch, fill_latest;
  auto derive_from_neighbours = [&](double deadline_s, std::vector<std::uint16_t>& c) {
    double e_best = search.energy_at(c, deadline_s);
    int slower = -1, faster = -1;
    for (int k = 0; k < static_cast<int>(polished.size()); ++k) {
      const double tk = polished_time[k];
      if (tk > deadline_s && (slower < 0 || tk < polished_time[slower])) slower = k;
      if (tk <= deadline_s && (faster < 0 || tk > polished_time[faster])) faster = k;
    }
    for (int k : {slower, faster}) {
      if (k < 0) continue;
      std::vector<std::uint16_t> next = polished[k];
      if (polished_time[k] > deadline_s) detail::tighten(dag, f_.op_candidates_, next, deadline_s);
      detail::fill_slack(dag, f_.op_candidates_, next, fill_scratch, fill_latest, deadline_s);
      const double e = search.energy_at(next, deadline_s);
      if (e < e_best) {
        c = std::move(next);
        e_best = e;
      }
    }
    return e_best;
  };
  // One target: start from the best plan for its deadline (stored or derived from a polished
  // neighbour), improve it unless a derived plan is already within refine_gap_pct (whole-DAG
  // pass), keep it as a new point when the planner's own evaluator agrees.
  auto polish_target = [&](const PolishTarget& t, bool windows) {
    const double e_stored = best_plan_for(t, &choice);
    const double lb = f_.lower_bound_at(t.deadline_s);
    const double e_derived = derive_from_neighbours(t.deadline_s, choice);
    if (windows) {
      // polish_solves: the solves left, and a capped target's share of them.
      const int max_windows =
          by_solves ? (capped ? std::min(solves_left(), target_cap_windows) : solves_left()) : -1;
      search.improve(choice, t.deadline_s, stop, stats, max_windows);
    } else if (100 * (e_derived - lb) / lb > opt_.refine_gap_pct && !solves_spent()) {
      ++stats.windows;
      if (search.improve_whole_dag_on_hull(choice, t.deadline_s, kHullMilpNodes, stop)) ++stats.improved;
    }
    // Kept only when the planner's own evaluator agrees: not slower than the deadline, and less
    // energy at it than the best plan stored for it.
    FrontierPoint q;
    q.step = -1;
    q.time_s = timeline_and_energy(choice, q.energy_j, timeline);
    if (!(q.time_s <= t.deadline_s && q.energy_j + pipe_w * (t.deadline_s - q.time_s) < e_stored)) return;
    q.energy_before_reclaim_j = q.energy_j;
    q.stored_plan = static_cast<std::int32_t>(stored_.size());
    stored_.push_back(choice);
    polished.push_back(choice);
    polished_time.push_back(q.time_s);
    polished_energy.push_back(q.energy_j);
    raw_points_.push_back({q, false});
    ++f_.num_polished_points;
  };
  // Gap to the bound (%) at t's deadline of the best plan so far for it.
  auto gap_now = [&](const PolishTarget& t) {
    const double lb = f_.lower_bound_at(t.deadline_s);
    return 100 * (best_plan_for(t, nullptr) - lb) / lb;
  };
  // One pass: rounds over the targets, worst first, each deadline solved at most once. Within a
  // round the targets are fixed (re-ranking them after each solve chases deadlines a hair
  // apart); the next round takes the targets the new plans made. A target is solved while its
  // gap is above refine_gap_pct (every target in the window pass's first round); the pass ends
  // when a round solves nothing.
  std::set<double> tried_milp, tried_windows;
  auto over = [&] { return stop() || solves_spent(); };
  auto run_pass = [&](bool windows) {
    std::set<double>& tried = windows ? tried_windows : tried_milp;
    for (int round = 0; !over(); ++round) {
      bool solved = false;
      const auto targets = polish_targets();
      for (const PolishTarget& t : targets) {
        capped = false;
        if (over()) break;
        if (!(windows && round == 0) && !(gap_now(t) > opt_.refine_gap_pct)) continue;
        if (!tried.insert(t.deadline_s).second) continue;
        // Window searches after the first get at most target_cap_s (target_cap_windows) each.
        capped = windows && (round > 0 || &t != &targets.front());
        target_start = std::chrono::steady_clock::now();
        polish_target(t, windows);
        solved = true;
      }
      if (!solved) break;
    }
  };
  // Window search at the all-max time first (the saving there is the headline, and the plan
  // it finds moves the deadlines near T_min), then whole-DAG solves (DAGs up to
  // kHullMilpMaxOps), then window searches.
  if (const auto first = polish_targets(); !first.empty() && std::isinf(first.front().gap_pct)) {
    tried_windows.insert(first.front().deadline_s);
    polish_target(first.front(), /*windows=*/true);
  }
  if (n <= kHullMilpMaxOps) run_pass(/*windows=*/false);
  run_pass(/*windows=*/true);
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
