// The certified planner's bound stage with BoundMethod::kHullWalk: a second Phillips–Dessouky
// walk over every op's whole (time, effective energy) hull. Each of its max-flows is a flow
// along the DAG, so lagrangian_bound() turns it into a certified bound line (the convex
// time–cost LP's dual, Fulkerson 1961), and each of its schedules is rounded to a plan like an
// LP schedule. No LP solver: the cost grows like the graph cut's, not like the simplex's.
#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>

#include <fmt/core.h>

#include "frontier_builder.hpp"
#include "perseus/error.hpp"
#include "plan_improve.hpp"

namespace perseus {

/// The hull walk's time unit is the planner's divided by this (finer than the graph cut: its
/// steps are the bound's breakpoints; measured on GPT-3 8 x 12/96 and synthetic 16 x 64/128,
/// docs/planner2.md).
constexpr double kHullWalkUnitDivisor = 2;
/// About this many evenly spaced steps of the hull walk give a bound line and a plan.
constexpr std::int64_t kHullWalkSamples = 800;

void FrontierBuilder::hull_walk_stage() {
  const auto t0 = std::chrono::steady_clock::now();
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  // Clocks past an op's hull minimum never lower its effective energy: every extended
  // candidate is a hull clock (all_clocks), the slowest being the hull minimum.
  double u = opt_.unit_time_s / kHullWalkUnitDivisor;
  std::unique_ptr<detail::CostModels> hull;
  try {
    hull = std::make_unique<detail::CostModels>(dag, profile_, u, opt_.p_block_w, true, true);
  } catch (const InputError&) {  // over 1e6 units for some op at the finer unit: the planner's own
    u = opt_.unit_time_s;
    hull = std::make_unique<detail::CostModels>(dag, profile_, u, opt_.p_block_w, true, true);
  }
  detail::GraphCutWalk walk(csr_, *hull, MinCutEngine::kWarm);  // the warm engine keeps its flow
  const std::vector<std::vector<OperatingPoint>> eff = detail::effective_points(op_raw_, opt_.p_block_w);
  double t_lo = std::numeric_limits<double>::infinity();
  for (const auto& rp : raw_points_) t_lo = std::min(t_lo, rp.first.time_s);
  const double t_end = 2 * t_lo;  // the straggler regime, as the LP stage's
  const double pipe_w = opt_.p_block_w * dag.num_ranks();
  const std::int64_t stride =
      std::max<std::int64_t>(1, (walk.iteration_units() - walk.fastest_units()) / kHullWalkSamples);
  std::vector<double> start(n), duration(n), scratch, latest, flow;
  std::vector<std::pair<int, int>> arcs;
  std::vector<std::uint16_t> choice;
  std::vector<std::pair<std::int32_t, std::uint16_t>> changes;
  TimelineScratch timeline;
  std::int64_t steps = 0, recorded_at = -1;
  auto record = [&] {
    recorded_at = steps;
    const double tau = static_cast<double>(walk.iteration_units()) * u;
    if (tau > t_end * (1 + 1e-9)) return;
    const detail::CriticalPath& cpm = walk.critical_path();
    for (int i = 0; i < n; ++i) {
      start[i] = static_cast<double>(cpm.earliest_start(i)) * u;
      duration[i] = static_cast<double>(cpm.duration(i)) * u;
    }
    detail::round_lp_schedule(dag, f_.op_candidates_, start, duration, choice);
    FrontierPoint p;
    p.step = -1;
    timeline_and_energy(choice, p.energy_before_reclaim_j, timeline);  // as rounded, as the LP stage's
    detail::fill_slack(dag, f_.op_candidates_, choice, scratch, latest, tau);
    p.time_s = timeline_and_energy(choice, p.energy_j, timeline);
    p.stored_plan = static_cast<std::int32_t>(stored_.size());
    stored_.push_back(choice);
    raw_points_.push_back({p, false});
    // Before the first step the flow is 0: the trivial bound Σ_i min ê_i + P_block R τ, still
    // valid (and exact when no op has a time-energy tradeoff, so the walk takes no step).
    if (walk.flow_along_dag(arcs, flow)) {
      for (double& y : flow) y /= u;  // J per unit -> W
      const detail::LagrangianBound lb = detail::lagrangian_bound(eff, arcs, flow, pipe_w, tau);
      f_.tangents_.push_back({tau, lb.bound_j, lb.slope_j_per_s});
    }
  };
  for (;;) {
    if (opt_.cancelled && opt_.cancelled()) throw PlanningCancelled("planning cancelled");
    if (over_time_budget()) {
      f_.stop_reason = Frontier::StopReason::kTimeBudget;
      f_.partial_detail = fmt::format(
          "time budget of {} s reached in the hull walk after {} steps: the lower bound and the hull-walk plans are "
          "from those steps only (the graph-cut frontier is complete)",
          opt_.time_budget_s, steps);
      break;
    }
    if (steps % stride == 0) record();
    if (!walk.step()) break;
    ++steps;
    changes.clear();
    walk.update_choice(changes);
  }
  if (recorded_at != steps) record();  // the hull's fastest state: near T_min matters most
  std::sort(f_.tangents_.begin(), f_.tangents_.end(),
            [](const auto& a, const auto& b) { return a.deadline_s < b.deadline_s; });
  f_.num_hull_walk_steps = steps;
  f_.bound_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace perseus
