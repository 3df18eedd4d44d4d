// The planner's LP stage (PlannerMode::kCertified): LP relaxation solves at sampled and
// refined deadlines give the certified lower bound LB(T) (lower_bound.hpp) and LP-rounded,
// slack-filled plans (plan_improve.hpp) into the straggler regime.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <tuple>

#include <fmt/core.h>

#include "frontier_builder.hpp"
#include "frontier_filter.hpp"
#include "plan_improve.hpp"

namespace perseus {

using detail::pareto_filter;

/// LP solve budget of the LP stage: at most kLpSolveOps / ops solves, at least kMinLpSolves
/// (and at most PlannerOptions::max_lp_solves).
constexpr int kLpSolveOps = 320000;
constexpr int kMinLpSolves = 40;
/// BoundMethod::kHullWalk: LP refinement solves (the LP stage's budget) after the walk, on DAGs
/// of up to kHullWalkLpMaxOps computations (session 26: GPT-3 A40 8 x 96's largest gap 1.10 ->
/// 0.75 % for +0.3 s; session 8 had allowed 4 solves; on 4,096 computations four solves doubled
/// the time).
constexpr int kHullWalkLpMaxOps = 2048;
/// Largest DAG (ops) on which the LP stage tries pair moves after rounding.
constexpr int kPairMovesMaxOps = 16;
/// Ruin and recreate (ruin_and_recreate_worst()): at most kRuinRecreateRounds rounds, each at
/// the kRuinRecreateDeadlines deadlines furthest (more than kRuinRecreateMinGapPct) above the
/// bound, up to kRuinRecreateTries neighbourhoods of up to kRuinRecreateMaxRuin ops per
/// deadline (kRuinRecreatePatience in a row without a gain end it), kRuinRecreateWork / ops
/// neighbourhoods in all (each costs O(ops)).
constexpr int kRuinRecreateRounds = 4;
constexpr std::size_t kRuinRecreateDeadlines = 16;
constexpr int kRuinRecreateTries = 1000;
constexpr int kRuinRecreatePatience = 200;
constexpr int kRuinRecreateMaxRuin = 24;
constexpr double kRuinRecreateMinGapPct = 0.5;
constexpr std::int64_t kRuinRecreateWork = 2000000;

FrontierBuilder::LpStage::LpStage(const Dag& dag, const std::vector<const std::vector<OperatingPoint>*>& op_raw,
                                  const PlannerOptions& opt, double t_lo_s)
    : lp(dag, op_raw, opt.p_block_w), t_lo(t_lo_s) {
  // Solves cost grows faster than linearly with the DAG: fewer on large DAGs (deterministic,
  // so the output does not depend on the machine's load).
  budget = std::min(opt.max_lp_solves, std::max(kMinLpSolves, kLpSolveOps / std::max(1, dag.num_ops())));
  budget_at_start = budget;
  // The straggler regime ends where no slower plan lowers the energy at any deadline (every
  // op at its hull minimum), or at 2 x T_min.
  t_end = std::max(t_lo, std::min(2 * t_lo, lp.flat_time_s()));
}

void FrontierBuilder::lp_solve_at(LpStage& st, double tau) const {
  if (st.was_solved(tau) || st.budget <= 0) return;
  // PlannerOptions::cancelled is called on the solve's own thread only: beside the walk, the
  // walk calls it and a cancellation reaches this stage as a stop request.
  const bool may_cancel = !st.stop.stop_possible() && opt_.cancelled;
  if (may_cancel && opt_.cancelled()) throw PlanningCancelled("planning cancelled");  // per LP solve
  if (st.stop.stop_requested()) {  // the graph-cut walk failed: its exception is on its way
    st.budget = 0;
    return;
  }
  if (over_time_budget()) {
    st.over_time_budget = true;
    st.budget = 0;
    return;
  }
  --st.budget;
  st.solved.push_back(tau);
  const Dag& dag = *f_.dag_;
  // Polled at every simplex iteration: one solve of a large LP can take minutes.
  bool cancelled = false;
  const std::function<bool()> interrupt = [&] {
    if (st.stop.stop_requested() || over_time_budget()) return true;
    cancelled = may_cancel && opt_.cancelled();
    return cancelled;
  };
  auto sol = st.lp.solve(tau, opt_.time_budget_s >= 0 || st.stop.stop_possible() || may_cancel ? interrupt
                                                                                               : std::function<bool()>{});
  if (cancelled) throw PlanningCancelled("planning cancelled");
  if (sol.interrupted) {  // the warm start is gone: no more solves
    st.over_time_budget = !st.stop.stop_requested();
    st.budget = 0;
    return;
  }
  if (!sol.feasible) return;
  st.tangents.push_back({tau, sol.bound_j, sol.slope_j_per_s});
  std::vector<std::uint16_t>& choice = st.choice;
  detail::round_lp_schedule(dag, f_.op_candidates_, sol.start_s, sol.duration_s, choice);
  FrontierPoint p;
  p.step = -1;
  timeline_and_energy(choice, p.energy_before_reclaim_j, st.timeline);
  detail::fill_slack(dag, f_.op_candidates_, choice, st.scratch, st.latest, tau);
  // Small pipelines: pair moves close most of the rounding loss (bounded work).
  const bool small = dag.num_ops() <= kPairMovesMaxOps;
  if (detail::improve_by_pairs(dag, f_.op_candidates_, opt_.p_block_w, tau, choice,
                               small ? 4 * dag.num_ops() : opt_.local_search_moves, small)) {
    detail::fill_slack(dag, f_.op_candidates_, choice, st.scratch, st.latest, tau);
  }
  p.time_s = timeline_and_energy(choice, p.energy_j, st.timeline);
  p.stored_plan = static_cast<std::int32_t>(st.stored.size());
  st.stored.push_back(choice);
  st.points.push_back({p, false});
  // The same schedule rounded to hull vertices, both ways (plan_improve.hpp): more plans,
  // kept beside the first (the final Pareto filter keeps whichever is better at each time).
  if (!st.hull) st.hull = std::make_unique<detail::HullVertices>(f_.op_candidates_, opt_.p_block_w);
  const auto this_solve = static_cast<std::ptrdiff_t>(st.stored.size() - 1);  // the plan above
  for (const auto start_at : {detail::VertexStart::kUpperWhereItFits, detail::VertexStart::kLowerVertex}) {
    detail::round_to_hull_vertices(dag, f_.op_candidates_, *st.hull, opt_.p_block_w, sol.duration_s, tau, start_at,
                                   choice, st.scratch, st.latest);
    if (std::find(st.stored.begin() + this_solve, st.stored.end(), choice) != st.stored.end())
      continue;  // the same plan as another rounding of this solve
    FrontierPoint q;
    q.step = -1;
    q.time_s = timeline_and_energy(choice, q.energy_j, st.timeline);
    q.energy_before_reclaim_j = q.energy_j;  // its slack filling is part of the vertex rounding
    q.stored_plan = static_cast<std::int32_t>(st.stored.size());
    st.stored.push_back(choice);
    st.points.push_back({q, false});
  }
  report(SolveStage::kLpSolves,
         static_cast<double>(st.budget_at_start - st.budget) / static_cast<double>(std::max(1, st.budget_at_start)),
         st.stop, st.fraction, st.reported);
}

void FrontierBuilder::lp_sample(LpStage& st) const {
  lp_solve_at(st, st.t_end);
  const int samples = std::min(32, std::max(1, st.budget / 2));
  // From the end down to T_min: each solve warm-starts from its slower neighbour's basis, so
  // the dual simplex walks the parametric path once (A100 8 x 12: ~7 ms less than ascending
  // after the end, which walked it twice; docs/planner2.md "Session 19").
  for (int k = samples - 1; k >= 0; --k) {
    const double x = static_cast<double>(k) / samples;
    lp_solve_at(st, st.t_lo + (st.t_end - st.t_lo) * x * std::sqrt(x));  // denser near T_min
  }
}

void FrontierBuilder::lp_merge(LpStage& st) {
  // In the order the solves ran, so the result is the same as pushing them one by one.
  const auto offset = static_cast<std::int32_t>(stored_.size());
  for (auto& pt : st.points) {
    pt.first.stored_plan += offset;
    raw_points_.push_back(pt);
  }
  for (auto& plan : st.stored) stored_.push_back(std::move(plan));
  for (const auto& t : st.tangents) f_.tangents_.push_back({t.deadline_s, t.bound_j, t.slope_j_per_s});
  st.points.clear();
  st.stored.clear();
  st.tangents.clear();
  std::sort(f_.tangents_.begin(), f_.tangents_.end(),
            [](const auto& a, const auto& b) { return a.deadline_s < b.deadline_s; });
  if (st.over_time_budget && !f_.partial()) {
    f_.stop_reason = Frontier::StopReason::kTimeBudget;
    f_.partial_detail = fmt::format(
        "time budget of {} s reached in the LP stage after {} LP solves: the lower bound and LP-rounded plans are "
        "from those solves only (the graph-cut frontier is complete)",
        opt_.time_budget_s, st.lp.num_solves());
  }
}

/// Calls visit(gap %, deadline s, point time s) for each kept point (fastest first) up to t_end
/// s, at its own time (deadline = point time), and at the deadline just below the next slower
/// point (the point then blocks at pipe_w W until it), against f.lower_bound_at().
template <class Visit>
void for_each_gap(const std::vector<FrontierPoint>& kept, double t_end, double pipe_w, const Frontier& f,
                  Visit&& visit) {
  for (std::size_t i = 0; i < kept.size() && kept[i].time_s <= t_end * (1 + 1e-9); ++i) {
    const double lb = f.lower_bound_at(kept[i].time_s);
    visit(100 * (kept[i].energy_j - lb) / lb, kept[i].time_s, kept[i].time_s);
    if (i + 1 == kept.size()) break;
    const double deadline = std::min(t_end, kept[i + 1].time_s * (1 - 1e-9));
    if (deadline <= kept[i].time_s) continue;
    const double lb2 = f.lower_bound_at(deadline);
    visit(100 * (kept[i].energy_j + pipe_w * (deadline - kept[i].time_s) - lb2) / lb2, deadline, kept[i].time_s);
  }
}

void FrontierBuilder::lp_refine(LpStage& st) {
  const Dag& dag = *f_.dag_;
  const double pipe_w = opt_.p_block_w * dag.num_ranks();
  const double t_end = st.t_end;
  // Refinement: exact solves where a point, or a deadline just below the next slower point,
  // is further than refine_gap_pct above the bound.
  for (int round = 0; round < 8 && st.budget > 0; ++round) {
    std::vector<std::pair<double, double>> worst;  // (gap, deadline)
    for_each_gap(pareto_filter(raw_points_, pipe_w), t_end, pipe_w, f_,
                 [&](double gap, double deadline, double point_time) {
                   if (gap <= opt_.refine_gap_pct) return;
                   worst.emplace_back(gap, deadline);
                   // Bisect a hole: a plan in between may exist that neither end's LP rounds to.
                   if (deadline > point_time) worst.emplace_back(gap * 0.999, 0.5 * (point_time + deadline));
                 });
    if (worst.empty()) break;
    std::sort(worst.begin(), worst.end(), std::greater<>());
    const std::size_t take = std::min<std::size_t>(worst.size(), std::max(8, st.budget / 4));
    const int before = st.budget;
    // The worst holes first (while the budget lasts), solved in deadline order: each solve is
    // warm-started from the nearest deadline solved so far (HullLowerBound::solve).
    std::vector<double> batch;
    for (std::size_t i = 0; i < take && batch.size() < static_cast<std::size_t>(st.budget); ++i)
      if (!st.was_solved(worst[i].second)) batch.push_back(worst[i].second);
    std::sort(batch.begin(), batch.end());
    for (double tau : batch) lp_solve_at(st, tau);
    lp_merge(st);
    if (st.budget == before) break;  // nothing new to solve
  }
}

double FrontierBuilder::largest_gap_pct(double t_end) const {
  const double pipe_w = opt_.p_block_w * f_.dag_->num_ranks();
  double largest = 0;
  for_each_gap(pareto_filter(raw_points_, pipe_w), t_end, pipe_w, f_,
               [&](double gap, double, double) { largest = std::max(largest, gap); });
  return largest;
}

std::vector<std::uint16_t> FrontierBuilder::choice_of(const FrontierPoint& p) const {
  if (p.stored_plan >= 0) return stored_[static_cast<std::size_t>(p.stored_plan)];
  // A graph-cut plan: replay the walk's changes up to its step (the all-max plan: step -1),
  // then reclaim and tighten as recorded (record_point()).
  std::vector<std::uint16_t> choice(f_.start_choice_.size(), 0);
  if (p.step >= 0) {
    choice = f_.start_choice_;
    for (std::size_t k = 0; k < f_.step_end_[static_cast<std::size_t>(p.step)]; ++k)
      choice[f_.changes_[k].first] = f_.changes_[k].second;
  }
  const FrequencyPlan plan = f_.make_plan(choice, f_.reclaim_, p.tightened_to_s);
  for (std::size_t i = 0; i < choice.size(); ++i) {
    const auto& pts = f_.op_candidates_[i]->points;
    const auto it = std::find_if(pts.begin(), pts.end(), [&](const OperatingPoint& q) {
      return q.freq_mhz == plan.freq_mhz[i] && q.time_s == plan.time_s[i];
    });
    if (it == pts.end())
      throw std::logic_error(fmt::format("op {}: plan clock {} MHz is not a candidate", i, plan.freq_mhz[i]));
    choice[i] = static_cast<std::uint16_t>(it - pts.begin());
  }
  return choice;
}

void FrontierBuilder::ruin_and_recreate_worst() {
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  if (n == 0 || f_.partial() || f_.tangents_.empty()) return;
  const double pipe_w = opt_.p_block_w * dag.num_ranks();
  double t_allmax = 0, t_lo = std::numeric_limits<double>::infinity();
  for (const auto& rp : raw_points_) {
    if (rp.second) t_allmax = rp.first.time_s;
    t_lo = std::min(t_lo, rp.first.time_s);
  }
  const detail::HullVertices hull(f_.op_candidates_, opt_.p_block_w);
  std::vector<double> scratch, latest;
  TimelineScratch timeline;
  std::vector<double> done;  // deadlines searched so far, s
  std::int64_t tries_left = kRuinRecreateWork / n;
  unsigned seed = 1;
  for (int round = 0; round < kRuinRecreateRounds && tries_left > 0; ++round) {
    const std::vector<FrontierPoint> kept = pareto_filter(raw_points_, pipe_w);  // fastest first
    // (gap %, deadline s, index into `kept` of the best plan within the deadline)
    std::vector<std::tuple<double, double, std::size_t>> worst;
    // Deadlines come in increasing order (then the all-max time, checked against all): the
    // nearest one taken so far is the last, so one comparison finds a repeat.
    auto consider = [&](std::size_t i, double deadline, double min_gap_pct, bool in_order = true) {
      auto same = [&](double d) { return std::abs(d - deadline) <= 1e-9 * d; };
      if (std::any_of(done.begin(), done.end(), same) ||
          (in_order ? !worst.empty() && same(std::get<1>(worst.back()))
                    : std::any_of(worst.begin(), worst.end(), [&](const auto& w) { return same(std::get<1>(w)); })))
        return;
      const double lb = f_.lower_bound_at(deadline);
      const double gap = 100 * (kept[i].energy_j + pipe_w * (deadline - kept[i].time_s) - lb) / lb;
      if (gap > min_gap_pct) worst.emplace_back(gap, deadline, i);
    };
    // Each point's own time and the deadline just below the next slower point, up to 2 x T_min.
    const double min_gap = std::max(opt_.refine_gap_pct, kRuinRecreateMinGapPct);
    for (std::size_t i = 0; i < kept.size() && kept[i].time_s <= 2 * t_lo * (1 + 1e-9); ++i) {
      consider(i, kept[i].time_s, min_gap);
      if (i + 1 < kept.size()) {
        const double deadline = std::min(2 * t_lo, kept[i + 1].time_s * (1 - 1e-9));
        if (deadline > kept[i].time_s) consider(i, deadline, min_gap);
      }
    }
    std::sort(worst.begin(), worst.end(), std::greater<>());
    if (worst.size() > kRuinRecreateDeadlines) worst.resize(kRuinRecreateDeadlines);
    // First of all the all-max time, whose saving users compare first, wherever its plan is
    // further than refine_gap_pct above the bound.
    if (round == 0) {
      const auto within = std::find_if(kept.rbegin(), kept.rend(),
                                       [&](const FrontierPoint& p) { return p.time_s <= t_allmax * (1 + 1e-12); });
      const std::size_t before = worst.size();
      if (within != kept.rend())
        consider(static_cast<std::size_t>(kept.rend() - within - 1), t_allmax, opt_.refine_gap_pct, /*in_order=*/false);
      if (worst.size() > before) std::rotate(worst.rbegin(), worst.rbegin() + 1, worst.rend());
    }
    bool improved = false;
    for (const auto& [gap, deadline, i] : worst) {
      throw_if_cancelled();
      if (tries_left <= 0) return;
      if (over_time_budget()) {  // cut short: the result depends on the budget, so it is partial
        f_.stop_reason = Frontier::StopReason::kTimeBudget;
        f_.partial_detail = fmt::format(
            "time budget of {} s reached in ruin and recreate after {} of the deadlines furthest from the bound: the "
            "lower bound is complete, the plans at the other such deadlines were not searched",
            opt_.time_budget_s, done.size());
        return;
      }
      done.push_back(deadline);
      std::vector<std::uint16_t> choice = choice_of(kept[i]);
      detail::fill_slack(dag, f_.op_candidates_, choice, scratch, latest, deadline);
      int tries = 0;
      const bool better = detail::ruin_and_recreate(dag, f_.op_candidates_, hull, opt_.p_block_w, deadline, choice,
                                                    static_cast<int>(std::min<std::int64_t>(tries_left, kRuinRecreateTries)),
                                                    kRuinRecreatePatience, kRuinRecreateMaxRuin, seed++, &tries);
      tries_left -= tries;
      if (!better) continue;
      FrontierPoint q;
      q.step = -1;
      q.time_s = timeline_and_energy(choice, q.energy_j, timeline);
      q.energy_before_reclaim_j = q.energy_j;
      q.stored_plan = static_cast<std::int32_t>(stored_.size());
      stored_.push_back(std::move(choice));
      raw_points_.push_back({q, false});
      improved = true;
    }
    if (!improved) return;
  }
}

void FrontierBuilder::certify(Beside beside) {
  const Dag& dag = *f_.dag_;
  f_.bound_method = resolve_bound_method(opt_.bound_method, dag.num_ops());
  double t_lo = std::numeric_limits<double>::infinity();
  for (const auto& rp : raw_points_) t_lo = std::min(t_lo, rp.first.time_s);
  const auto t0 = std::chrono::steady_clock::now();
  if (f_.bound_method == BoundMethod::kHullWalk) {
    // Beside the walk it recorded up to 2 x the all-max plan's time (>= 2 x T_min, the
    // straggler regime's end): the merge drops the rest, so the result is the same.
    std::unique_ptr<HullWalkStage> hw = std::move(beside.hull);
    double beside_s = 0;
    if (!hw || hw->t_end < 2 * t_lo) {
      hw = std::make_unique<HullWalkStage>();
      hw->t_end = 2 * t_lo;
      hull_walk(*hw);
    } else {
      beside_s = hw->seconds;
      throw_if_cancelled();
    }
    hull_walk_merge(*hw, 2 * t_lo);
    if (!f_.partial()) report(SolveStage::kHullWalk, 1, {}, nullptr, hw->reported);
    // A few exact LP solves where the walk's plans are furthest from the bound (above all the
    // hole just above T_min, where its rounded schedules lose most), while they are cheap.
    if (dag.num_ops() <= kHullWalkLpMaxOps && !f_.partial()) {
      auto st = std::make_unique<LpStage>(dag, op_raw_, opt_, t_lo);
      // T_min first: its exact solve gives the fastest plans the walk's rounding misses (A40
      // 8 x 96: 8.98 -> 9.54 % saved at T_min; A100 8 x 96's deadline gap 0.533 -> 0.488 %).
      lp_solve_at(*st, t_lo);
      lp_merge(*st);
      lp_refine(*st);
      if (!f_.partial()) report(SolveStage::kLpSolves, 1, {}, nullptr, st->reported);
      f_.num_lp_solves = st->lp.num_solves();
    }
    ruin_and_recreate_worst();
    f_.bound_time_s = beside_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return;
  }
  std::unique_ptr<LpStage> st = std::move(beside.lp);
  // The sampling may have run beside the graph-cut walk from the all-max plan's time; it is
  // used only if that is T_min exactly (otherwise it is redone), so the result never
  // depends on PlannerOptions::threads.
  double beside_s = 0;  // LP-stage time spent beside the walk
  if (!st || st->t_lo != t_lo) {
    st = std::make_unique<LpStage>(dag, op_raw_, opt_, t_lo);
    report(SolveStage::kLpSolves, 0, {}, nullptr, st->reported);
    lp_sample(*st);
  } else {
    beside_s = st->seconds;
    st->stop = std::stop_token{};  // on this thread from now on: PlannerOptions::cancelled applies
  }
  lp_merge(*st);
  lp_refine(*st);
  // kAuto on a small DAG: where the LP stage's rounded plans stay far from the bound, the hull
  // walk's plans (other roundings of other schedules) and more refinement around them close
  // part of it (session 26: GPT-3 A40 8 x 12's largest gap 0.67 -> 0.62 %).
  if (opt_.bound_method == BoundMethod::kAuto && !f_.partial() && largest_gap_pct(st->t_end) > kAutoHullWalkGapPct) {
    HullWalkStage hw;
    hw.t_end = 2 * t_lo;
    hull_walk(hw);
    hull_walk_merge(hw, 2 * t_lo);
    lp_refine(*st);
  }
  if (!f_.partial()) report(SolveStage::kLpSolves, 1, {}, nullptr, st->reported);
  f_.num_lp_solves = st->lp.num_solves();
  ruin_and_recreate_worst();
  f_.bound_time_s = beside_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace perseus
