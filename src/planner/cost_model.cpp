// The planner's cost model: candidate clocks, quantized durations, convex cost per duration.
#include "cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus::detail {

double finest_unit_time_s(double span_s) {
  // Two units of room: ceil() rounding of both ends.
  return span_s > 0 ? std::pow(10.0, std::ceil(std::log10(span_s / (kMaxUnitsPerComputation - 2)))) : 0;
}

CostModel build_cost_model(const std::vector<OperatingPoint>& raw, double unit_s, double p_block_w, bool extended,
                           bool all_clocks) {
  CostModel m;
  // The graph-cut stage's clocks are Pareto-optimal in (time, energy), as in the paper.
  // Filtering the graph-cut's own model in (time, effective energy) instead measured worse
  // mid-frontier on A40/96 microbatches (87.6 % vs 87.0 % of all-max at T/T_min = 1.02) with
  // unit steps (docs/baselines.md "Finding"). In PlannerMode::kCertified the candidate table
  // is the larger (time, effective energy) Pareto set: slack filling and the LP stage may use
  // clocks below the energy-minimal one, which beat waiting at P_block.
  const std::vector<OperatingPoint> paper = pareto_points(raw);
  m.cand.points = extended ? pareto_points(raw, p_block_w) : paper;
  if (m.cand.points.size() > std::numeric_limits<std::uint16_t>::max()) {
    throw InputError("profile: too many Pareto-optimal frequencies for one computation (> 65535)");
  }
  for (const auto& p : m.cand.points) {
    m.cand.units.push_back(std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(p.time_s / unit_s - 1e-9))));
  }
  // Indices (into cand.points) of the graph-cut clocks, time ascending.
  std::vector<std::size_t> gc;
  for (std::size_t i = 0, j = 0; i < m.cand.points.size() && j < paper.size(); ++i) {
    if (m.cand.points[i].freq_mhz == paper[j].freq_mhz && m.cand.points[i].time_s == paper[j].time_s) {
      gc.push_back(i);
      ++j;
    }
  }
  if (all_clocks) {
    gc.clear();
    for (std::size_t i = 0; i < m.cand.points.size(); ++i) gc.push_back(i);
  }
  if (gc.empty()) gc.push_back(0);
  m.q_min = m.cand.units[gc.front()];
  m.q_max = m.cand.units[gc.back()];
  const std::int64_t range = m.q_max - m.q_min + 1;
  if (range > kMaxUnitsPerComputation) {
    const double fits = finest_unit_time_s(m.cand.points[gc.back()].time_s - m.cand.points[gc.front()].time_s);
    // The span of the candidate clocks' times, not the profile's longest time (a slower clock that
    // is no candidate does not count; the message named it as the longest, session 31's trial).
    throw InputError(fmt::format("unit time {} s is too small for a computation whose candidate clocks take {} to {} s "
                                 "(more than {} units between its fastest and slowest); use {:g} s or more",
                                 unit_s, m.cand.points[gc.front()].time_s, m.cand.points[gc.back()].time_s,
                                 kMaxUnitsPerComputation, fits));
  }
  // Fastest point of each quantized duration (its real time is the smallest in the bucket).
  std::vector<std::size_t> rep;  // candidate indices, units strictly ascending
  for (std::size_t i : gc) {
    if (rep.empty() || m.cand.units[rep.back()] != m.cand.units[i]) rep.push_back(i);
  }
  // Lower convex hull of (units, effective energy) over the representatives.
  auto eff = [&](std::size_t i) { return m.cand.points[i].energy_j - p_block_w * m.cand.points[i].time_s; };
  std::vector<std::size_t> hull;
  for (std::size_t i : rep) {
    while (hull.size() >= 2) {
      const std::size_t a = hull[hull.size() - 2], b = hull.back();
      const double xa = static_cast<double>(m.cand.units[a]), xb = static_cast<double>(m.cand.units[b]),
                   xi = static_cast<double>(m.cand.units[i]);
      // Remove b if it lies on or above the segment a–i.
      if ((eff(b) - eff(a)) * (xi - xa) >= (eff(i) - eff(a)) * (xb - xa)) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(i);
  }
  m.cost.resize(range);
  for (std::size_t h = 0; h + 1 < hull.size(); ++h) {
    const std::int64_t x0 = m.cand.units[hull[h]], x1 = m.cand.units[hull[h + 1]];
    for (std::int64_t d = x0; d <= x1; ++d) {
      const double f = static_cast<double>(d - x0) / static_cast<double>(x1 - x0);
      m.cost[d - m.q_min] = eff(hull[h]) + f * (eff(hull[h + 1]) - eff(hull[h]));
    }
  }
  if (hull.size() == 1) m.cost[0] = eff(hull[0]);
  m.choice.resize(range);
  std::size_t r = 0;
  for (std::int64_t d = m.q_min; d <= m.q_max; ++d) {
    while (r + 1 < rep.size() && m.cand.units[rep[r + 1]] <= d) ++r;
    m.choice[d - m.q_min] = static_cast<std::uint16_t>(rep[r]);
  }
  return m;
}

CostModels::CostModels(const Dag& dag, const Profile& profile, double unit_s, double p_block_w, bool extended,
                       bool all_clocks) {
  // One cost model per (stage, kind) used by the DAG, in order of first use.
  std::map<std::pair<int, int>, std::size_t> index;
  std::vector<const std::vector<OperatingPoint>*> model_raw;
  for (int i = 0; i < dag.num_ops(); ++i) {
    const Computation& c = dag.op(i);
    const auto key = std::make_pair(c.stage, static_cast<int>(c.kind));
    if (index.count(key)) continue;
    const auto& pts = profile.points(c.stage, c.kind);
    if (pts.empty()) {
      throw InputError(fmt::format("profile {}: no rows for stage {} {}, which the schedule needs", profile.source,
                                   c.stage, to_string(c.kind)));
    }
    index[key] = models_.size();
    models_.push_back(build_cost_model(pts, unit_s, p_block_w, extended, all_clocks));
    model_raw.push_back(&pts);
  }
  candidates_ = std::make_shared<std::vector<Candidates>>();
  for (const auto& m : models_) candidates_->push_back(m.cand);
  const int n = dag.num_ops();
  op_model_.resize(n);
  op_raw_.resize(n);
  op_candidates_.resize(n);
  for (int i = 0; i < n; ++i) {
    const Computation& c = dag.op(i);
    const std::size_t k = index[{c.stage, static_cast<int>(c.kind)}];
    op_model_[i] = &models_[k];
    op_raw_[i] = model_raw[k];
    op_candidates_[i] = &(*candidates_)[k];
  }
}

}  // namespace perseus::detail
