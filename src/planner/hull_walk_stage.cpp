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
/// Plus about this many more in the last kHullWalkNearTmin of the walk's range (toward T_min),
/// where rounding loses most and plans are densest in value (session 8: A100 8 x 96's largest
/// gap 0.718 -> 0.650 %).
constexpr std::int64_t kHullWalkNearSamples = 200;
constexpr double kHullWalkNearTmin = 0.02;
/// Vertex rounding (plan_improve.hpp) of the walk's schedules, on DAGs of up to
/// kHullWalkVertexRoundingMaxOps computations and deadlines up to kHullWalkVertexRoundingX x the
/// walk's fastest time (session 9: GPT-3 A40 8 x 96's largest gap 2.50 -> 1.30 %, then 1.10 %
/// with the T_min LP solve; its moves cost O(ops) each: +40 % time on synthetic 16 x 64, so
/// not on larger DAGs).
constexpr int kHullWalkVertexRoundingMaxOps = 2048;
constexpr double kHullWalkVertexRoundingX = 1.1;

void FrontierBuilder::hull_walk(HullWalkStage& hw) const {
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
  const detail::EffectiveHulls eff = detail::effective_points(op_raw_, opt_.p_block_w);
  const double pipe_w = opt_.p_block_w * dag.num_ranks();
  const std::int64_t range = walk.iteration_units() - walk.fastest_units();
  const std::int64_t stride = std::max<std::int64_t>(1, range / kHullWalkSamples);
  const auto near_range = static_cast<std::int64_t>(kHullWalkNearTmin * static_cast<double>(range));
  const std::int64_t near_stride = std::max<std::int64_t>(1, near_range / kHullWalkNearSamples);
  std::vector<double> start(n), duration(n), scratch, latest, flow;
  std::vector<std::pair<int, int>> arcs;
  std::vector<std::uint16_t> choice, vertex_choice;
  const detail::HullVertices hull_vertices(f_.op_candidates_, opt_.p_block_w);
  const bool vertex_rounding = n <= kHullWalkVertexRoundingMaxOps;
  std::vector<std::pair<std::int32_t, std::uint16_t>> changes;
  TimelineScratch timeline;
  std::int64_t steps = 0, recorded_at = -1;
  auto record = [&] {
    recorded_at = steps;
    const double tau = static_cast<double>(walk.iteration_units()) * u;
    if (tau > hw.t_end * (1 + 1e-9)) return;
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
    // The same schedule rounded to hull vertices, both ways (plan_improve.hpp): kept instead
    // when lower at the deadline (one plan per record bounds the stored plans' memory). Only
    // up to kHullWalkVertexRoundingX x the walk's fastest time, where rounding loses most:
    // the vertex rounding's moves cost O(ops) each.
    if (vertex_rounding && tau <= kHullWalkVertexRoundingX * static_cast<double>(walk.fastest_units()) * u) {
      for (const auto start_at : {detail::VertexStart::kUpperWhereItFits, detail::VertexStart::kLowerVertex}) {
        detail::round_to_hull_vertices(dag, f_.op_candidates_, hull_vertices, opt_.p_block_w, duration, tau, start_at,
                                       vertex_choice, scratch, latest);
        double vertex_energy = 0;
        const double vertex_time = timeline_and_energy(vertex_choice, vertex_energy, timeline);
        if (vertex_energy + pipe_w * (tau - vertex_time) < p.energy_j + pipe_w * (tau - p.time_s)) {
          choice.swap(vertex_choice);
          p.time_s = vertex_time;
          p.energy_j = p.energy_before_reclaim_j = vertex_energy;
        }
      }
    }
    p.stored_plan = static_cast<std::int32_t>(hw.stored.size());
    hw.stored.push_back(choice);
    hw.points.push_back({p, false});
    hw.point_deadline_s.push_back(tau);
    // Before the first step the flow is 0: the trivial bound Σ_i min ê_i + P_block R τ, still
    // valid (and exact when no op has a time-energy tradeoff, so the walk takes no step).
    if (walk.flow_along_dag(arcs, flow)) {
      for (double& y : flow) y /= u;  // J per unit -> W
      const detail::LagrangianBound lb = detail::lagrangian_bound(eff, arcs, flow, pipe_w, tau);
      hw.tangents.push_back({tau, lb.bound_j, lb.slope_j_per_s});
    }
  };
  // PlannerOptions::cancelled is called on the walk's own thread only: beside the graph-cut
  // walk, that walk calls it and a cancellation reaches this one as a stop request.
  const bool may_cancel = !hw.stop.stop_possible() && opt_.cancelled;
  const std::int64_t t_start = walk.iteration_units(), t_fastest = walk.fastest_units();
  for (;;) {
    report(SolveStage::kHullWalk,
           t_start > t_fastest ? static_cast<double>(t_start - walk.iteration_units()) /
                                     static_cast<double>(t_start - t_fastest)
                               : 1.0,
           hw.stop, hw.fraction, hw.reported);
    if (may_cancel && opt_.cancelled()) throw PlanningCancelled("planning cancelled");
    if (hw.stop.stop_requested()) break;  // the graph-cut walk failed: its exception is on its way
    if (over_time_budget()) {
      hw.over_time_budget = true;
      break;
    }
    if (steps % stride == 0 || (walk.iteration_units() - t_fastest <= near_range && steps % near_stride == 0)) record();
    if (!walk.step()) break;
    ++steps;
    changes.clear();
    walk.update_choice(changes);
  }
  if (!hw.stop.stop_requested() && recorded_at != steps) record();  // the hull's fastest state: near T_min matters most
  hw.steps = steps;
  hw.work = walk.max_flow_work();
  hw.max_flows = walk.num_max_flows();
  hw.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void FrontierBuilder::hull_walk_merge(HullWalkStage& hw, double t_end_s) {
  // In the order the walk recorded them, so the result does not depend on where it ran.
  for (std::size_t k = 0; k < hw.points.size(); ++k) {
    if (hw.point_deadline_s[k] > t_end_s * (1 + 1e-9)) continue;
    auto pt = hw.points[k];
    pt.first.stored_plan = static_cast<std::int32_t>(stored_.size());
    stored_.push_back(std::move(hw.stored[hw.points[k].first.stored_plan]));
    raw_points_.push_back(pt);
  }
  for (const auto& t : hw.tangents)
    if (t.deadline_s <= t_end_s * (1 + 1e-9)) f_.tangents_.push_back({t.deadline_s, t.bound_j, t.slope_j_per_s});
  std::sort(f_.tangents_.begin(), f_.tangents_.end(),
            [](const auto& a, const auto& b) { return a.deadline_s < b.deadline_s; });
  f_.num_hull_walk_steps = hw.steps;
  f_.num_hull_walk_max_flows = hw.max_flows;
  f_.hull_walk_max_flow_work = hw.work;
  f_.hull_walk_time_s = hw.seconds;
  if (hw.over_time_budget && !f_.partial()) {
    f_.stop_reason = Frontier::StopReason::kTimeBudget;
    f_.partial_detail = fmt::format(
        "time budget of {} s reached in the hull walk after {} steps: the lower bound and the hull-walk plans are "
        "from those steps only (the graph-cut frontier is complete)",
        opt_.time_budget_s, hw.steps);
  }
  hw.points.clear();
  hw.stored.clear();
  hw.tangents.clear();
  hw.point_deadline_s.clear();
}

}  // namespace perseus
