// The Perseus planner: iterative min-cut time–cost tradeoff (Phillips–Dessouky) over the
// iteration DAG, producing the iteration time–energy Pareto frontier.
#include "perseus/frontier.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include <fmt/core.h>

#include "min_cut.hpp"
#include "perseus/error.hpp"

namespace perseus {

std::vector<OperatingPoint> pareto_points(const std::vector<OperatingPoint>& points) {
  std::vector<OperatingPoint> sorted = points;
  std::stable_sort(sorted.begin(), sorted.end(), [](const OperatingPoint& a, const OperatingPoint& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : a.energy_j < b.energy_j;
  });
  std::vector<OperatingPoint> front;
  double best_energy = std::numeric_limits<double>::infinity();
  for (const auto& p : sorted) {
    // Time ascending: keep p only if it uses strictly less energy than every faster point.
    if (p.energy_j < best_energy) {
      if (!front.empty() && front.back().time_s == p.time_s) continue;  // same time, more energy
      front.push_back(p);
      best_energy = p.energy_j;
    }
  }
  return front;
}

namespace {

/// Per (stage, kind) planning tables: candidates, quantized units, convex cost model.
struct CostModel {
  Candidates cand;
  std::int64_t q_min = 0, q_max = 0;
  std::vector<double> cost;            // convex PWL effective energy at d = q_min..q_max (J)
  std::vector<std::uint16_t> choice;   // candidate index used at duration d
};

CostModel build_cost_model(const std::vector<OperatingPoint>& raw, double unit_s, double p_block_w) {
  CostModel m;
  m.cand.points = pareto_points(raw);
  if (m.cand.points.size() > std::numeric_limits<std::uint16_t>::max()) {
    throw InputError("profile: too many Pareto-optimal frequencies for one computation (> 65535)");
  }
  for (const auto& p : m.cand.points) {
    m.cand.units.push_back(std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(p.time_s / unit_s - 1e-9))));
  }
  m.q_min = m.cand.units.front();
  m.q_max = m.cand.units.back();
  const std::int64_t range = m.q_max - m.q_min + 1;
  if (range > 50'000'000) {
    throw InputError(fmt::format("unit time {} s is too small for computations of up to {} s", unit_s,
                                 m.cand.points.back().time_s));
  }
  // Fastest point of each quantized duration (its real time is the smallest in the bucket).
  std::vector<std::size_t> rep;  // candidate indices, units strictly ascending
  for (std::size_t i = 0; i < m.cand.points.size(); ++i) {
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

/// Lowers the frequency of every op whose slack allows it without lengthening T (one
/// reverse-topological pass: each op takes the slowest Pareto point that fits between its
/// earliest start and the latest start of its successors). Only ever saves energy.
void reclaim_slack(const Dag& dag, const std::vector<const Candidates*>& cands, std::vector<std::uint16_t>& choice,
                   std::vector<double>& scratch_time, std::vector<double>& latest_start) {
  const int n = dag.num_ops();
  for (int i = 0; i < n; ++i) scratch_time[i] = cands[i]->points[choice[i]].time_s;
  const Timeline tl = compute_timeline(dag, scratch_time);
  const auto& topo = dag.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const int v = *it;
    double lf = tl.time_s;
    for (int w : dag.successors(v)) lf = std::min(lf, latest_start[w]);
    const double window = lf - tl.start_s[v];
    const auto& pts = cands[v]->points;
    std::size_t c = choice[v];
    while (c + 1 < pts.size() && pts[c + 1].time_s <= window * (1 + 1e-12)) ++c;
    choice[v] = static_cast<std::uint16_t>(c);
    latest_start[v] = lf - pts[c].time_s;
  }
}

/// Speeds up ops until the plan's iteration time is <= target_s: each round moves every op
/// on a critical path (zero float, real times) one candidate faster. Bounded by the number
/// of candidates per op; slack reclamation afterwards undoes speed-ups that were not needed.
void tighten(const Dag& dag, const std::vector<const Candidates*>& cands, std::vector<std::uint16_t>& choice,
             double target_s) {
  const int n = dag.num_ops();
  std::vector<double> time(n), lf(n);
  for (int round = 0; round < 1 << 16; ++round) {
    for (int i = 0; i < n; ++i) time[i] = cands[i]->points[choice[i]].time_s;
    const Timeline tl = compute_timeline(dag, time);
    if (tl.time_s <= target_s) return;
    const auto& topo = dag.topological_order();
    bool moved = false;
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      const int v = *it;
      double f = tl.time_s;
      for (int w : dag.successors(v)) f = std::min(f, lf[w] - time[w]);
      lf[v] = f;
      const bool critical = tl.end_s[v] >= f - 1e-12 * tl.time_s;
      if (critical && choice[v] > 0) {
        --choice[v];
        moved = true;
      }
    }
    if (!moved) return;  // every critical op is at its fastest
  }
}

}  // namespace

/// Builds a Frontier: owns the solver state of solve_frontier().
class FrontierBuilder {
 public:
  FrontierBuilder(const Dag& dag, const Profile& profile, const PlannerOptions& opt);
  Frontier run();

 private:
  void compute_cpm();
  bool find_and_apply_cut();
  void record_point(std::int64_t step, const std::vector<std::uint16_t>& choice, double tighten_to_s = 0);

  const PlannerOptions& opt_;
  Frontier f_;
  std::vector<CostModel> models_;
  std::vector<const CostModel*> op_model_;
  std::vector<std::int64_t> dur_;  // current quantized duration per op
  std::vector<std::int64_t> es_, lf_;
  std::int64_t T_ = 0;
  std::vector<std::uint16_t> choice_;
  std::vector<double> scratch_time_, scratch_ls_;
  std::vector<std::pair<FrontierPoint, bool>> raw_points_;  // (point, is all-max)
  detail::MinCut min_cut_;
  std::vector<detail::FlowArc> arcs_, prev_arcs_;
  std::vector<int> node_id_;
  std::vector<int> faster_, slower_;
  bool have_prev_cut_ = false;
};

FrontierBuilder::FrontierBuilder(const Dag& dag, const Profile& profile, const PlannerOptions& opt) : opt_(opt) {
  if (!(opt.unit_time_s > 0) || !std::isfinite(opt.unit_time_s)) {
    throw InputError(fmt::format("unit time must be > 0 s, got {}", opt.unit_time_s));
  }
  if (!(opt.p2p_power_w >= 0) || !std::isfinite(opt.p2p_power_w)) {
    throw InputError(fmt::format("P2P blocking power must be >= 0 W, got {}", opt.p2p_power_w));
  }
  f_.dag_ = std::make_shared<const Dag>(dag);
  f_.p_block_w = opt.p2p_power_w;
  f_.unit_time_s = opt.unit_time_s;
  f_.reclaim_ = opt.reclaim_slack;
  // One cost model per (stage, kind) used by the DAG.
  std::map<std::pair<int, int>, std::size_t> index;
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
    models_.push_back(build_cost_model(pts, opt.unit_time_s, opt.p2p_power_w));
  }
  f_.candidates_ = std::make_shared<std::vector<Candidates>>();
  for (const auto& m : models_) f_.candidates_->push_back(m.cand);
  const int n = dag.num_ops();
  op_model_.resize(n);
  f_.op_candidates_.resize(n);
  dur_.resize(n);
  choice_.resize(n);
  for (int i = 0; i < n; ++i) {
    const Computation& c = dag.op(i);
    const std::size_t k = index[{c.stage, static_cast<int>(c.kind)}];
    op_model_[i] = &models_[k];
    f_.op_candidates_[i] = &(*f_.candidates_)[k];
    dur_[i] = models_[k].q_max;
    choice_[i] = models_[k].choice.back();
  }
  es_.resize(n);
  lf_.resize(n);
  scratch_time_.resize(n);
  scratch_ls_.resize(n);
  node_id_.assign(2 * static_cast<std::size_t>(n) + 2, -1);
}

void FrontierBuilder::compute_cpm() {
  const Dag& dag = *f_.dag_;
  const auto& topo = dag.topological_order();
  T_ = 0;
  for (int v : topo) {
    std::int64_t s = 0;
    for (int u : dag.predecessors(v)) s = std::max(s, es_[u] + dur_[u]);
    es_[v] = s;
    T_ = std::max(T_, s + dur_[v]);
  }
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const int v = *it;
    std::int64_t lf = T_;
    for (int w : dag.successors(v)) lf = std::min(lf, lf_[w] - dur_[w]);
    lf_[v] = lf;
  }
}

// One Phillips–Dessouky step: min cut of the critical DAG with speed-up costs as upper
// and slow-down savings as lower bounds; shorten S->T ops, lengthen T->S ops by one unit.
// Returns false when no finite cut exists (T_min reached).
bool FrontierBuilder::find_and_apply_cut() {
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  // Node-split network: op v is arc in(v)=2v -> out(v)=2v+1; s = 2n, t = 2n+1.
  const int s = 2 * n, t = 2 * n + 1;
  auto critical_op = [&](int v) { return es_[v] + dur_[v] == lf_[v]; };
  arcs_.clear();
  std::vector<double> weight(2 * static_cast<std::size_t>(n) + 2, 0.0);
  double finite_total = 0;
  const double kInf = -1;  // placeholder, fixed below
  struct OpArc {
    int v;
    std::size_t arc;
  };
  std::vector<OpArc> op_arcs;
  for (int v = 0; v < n; ++v) {
    if (!critical_op(v)) continue;
    const CostModel& m = *op_model_[v];
    const std::int64_t d = dur_[v];
    const bool can_fast = d > m.q_min, can_slow = d < m.q_max;
    const double ub = can_fast ? m.cost[d - 1 - m.q_min] - m.cost[d - m.q_min] : kInf;
    const double lb = can_slow ? m.cost[d - m.q_min] - m.cost[d + 1 - m.q_min] : 0.0;
    op_arcs.push_back({v, arcs_.size()});
    arcs_.push_back({2 * v, 2 * v + 1, ub == kInf ? kInf : std::max(0.0, ub - lb)});
    if (ub != kInf) finite_total += ub;
    weight[2 * v] += lb;
    weight[2 * v + 1] -= lb;
    if (es_[v] == 0) arcs_.push_back({s, 2 * v, kInf});
    if (es_[v] + dur_[v] == T_ && dag.successors(v).empty()) arcs_.push_back({2 * v + 1, t, kInf});
    for (int w : dag.successors(v)) {
      if (critical_op(w) && es_[v] + dur_[v] == es_[w] && es_[w] == lf_[w] - dur_[w]) {
        arcs_.push_back({2 * v + 1, 2 * w, kInf});
      }
    }
  }
  for (int x = 0; x < 2 * n; ++x) {
    if (weight[x] > 0) {
      arcs_.push_back({x, t, weight[x]});
      finite_total += weight[x];
    } else if (weight[x] < 0) {
      arcs_.push_back({s, x, -weight[x]});
      finite_total -= weight[x];
    }
  }
  const double inf = 2 * finite_total + 1;
  for (auto& a : arcs_)
    if (a.capacity == kInf) a.capacity = inf;
  // Same critical network (arcs and capacities) as the previous step: the same minimal
  // min cut is optimal again, so reuse it without another max-flow.
  std::vector<int>& faster = faster_;
  std::vector<int>& slower = slower_;
  if (!(have_prev_cut_ && arcs_ == prev_arcs_)) {
    ++f_.num_max_flows;
    // Compact node ids to the nodes that appear.
    std::vector<int> nodes;
    auto id = [&](int x) {
      if (node_id_[x] < 0) {
        node_id_[x] = static_cast<int>(nodes.size());
        nodes.push_back(x);
      }
      return node_id_[x];
    };
    id(s);
    id(t);
    std::vector<detail::FlowArc> compact(arcs_.size());
    for (std::size_t i = 0; i < arcs_.size(); ++i) compact[i] = {id(arcs_[i].from), id(arcs_[i].to), arcs_[i].capacity};
    double value = 0;
    const std::vector<char> in_s = min_cut_.solve(static_cast<int>(nodes.size()), compact, node_id_[s], node_id_[t],
                                                  1e-9 * (1 + finite_total), &value);
    auto side = [&](int x) { return in_s[node_id_[x]] != 0; };
    faster.clear();
    slower.clear();
    const bool infinite = value >= inf * 0.5;
    if (!infinite) {
      for (const OpArc& oa : op_arcs) {
        const bool from_s = side(2 * oa.v), to_s = side(2 * oa.v + 1);
        if (from_s && !to_s) faster.push_back(oa.v);
        if (!from_s && to_s) slower.push_back(oa.v);
      }
    }
    for (int x : nodes) node_id_[x] = -1;
    if (infinite) return false;
  }
  std::swap(prev_arcs_, arcs_);
  have_prev_cut_ = true;
  std::vector<int> lengthened;
  for (int v : slower)
    if (dur_[v] < op_model_[v]->q_max) lengthened.push_back(v);
  if (faster.empty()) return false;
  const std::int64_t old_T = T_;
  for (int v : faster) --dur_[v];
  for (int v : lengthened) ++dur_[v];
  compute_cpm();
  if (T_ >= old_T && !lengthened.empty()) {
    // Lengthening made a non-critical path critical: keep only the speed-ups.
    for (int v : lengthened) --dur_[v];
    compute_cpm();
    have_prev_cut_ = false;
  }
  if (T_ >= old_T) throw std::logic_error("planner: a min-cut step did not shorten the iteration");
  return true;
}

void FrontierBuilder::record_point(std::int64_t step, const std::vector<std::uint16_t>& choice, double tighten_to_s) {
  FrontierPoint p;
  p.step = step;
  p.tightened_to_s = tighten_to_s;
  p.energy_before_reclaim_j = f_.make_plan(choice, false, tighten_to_s).total_energy_j();
  const FrequencyPlan plan = f_.make_plan(choice, f_.reclaim_, tighten_to_s);
  p.time_s = plan.timeline.time_s;
  p.energy_j = plan.total_energy_j();
  raw_points_.push_back({p, step < 0});
}

Frontier FrontierBuilder::run() {
  const auto t0 = std::chrono::steady_clock::now();
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  f_.start_choice_ = choice_;
  f_.step_end_.push_back(0);
  // T_min in units: every op at its fastest candidate (for progress reporting).
  std::int64_t t_min_units = 0;
  {
    const std::vector<std::int64_t> saved = dur_;
    for (int v = 0; v < n; ++v) dur_[v] = op_model_[v]->q_min;
    compute_cpm();
    t_min_units = T_;
    dur_ = saved;
  }
  compute_cpm();
  const std::int64_t t_max_units = T_;
  record_point(0, choice_);
  std::int64_t step = 0;
  std::int64_t last_report = T_;
  while (find_and_apply_cut()) {
    ++step;
    for (int v = 0; v < n; ++v) {
      const std::uint16_t c = op_model_[v]->choice[dur_[v] - op_model_[v]->q_min];
      if (c != choice_[v]) {
        choice_[v] = c;
        f_.changes_.emplace_back(v, c);
      }
    }
    f_.step_end_.push_back(f_.changes_.size());
    record_point(step, choice_);
    if (opt_.progress && last_report - T_ >= std::max<std::int64_t>(1, (t_max_units - t_min_units) / 100)) {
      opt_.progress(T_, t_max_units, t_min_units);
      last_report = T_;
    }
  }
  f_.num_steps = step;
  // The all-max plan is a candidate too, so T_min is never slower than it; and the last
  // graph-cut plan tightened to the all-max time (quantization can leave it a little slower).
  {
    std::vector<std::uint16_t> fastest(n, 0);
    record_point(-1, fastest);
    record_point(step, choice_, raw_points_.back().first.time_s);
  }
  // Pareto filter: time ascending, keep strictly decreasing energy.
  auto pts = raw_points_;
  std::stable_sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
    return a.first.time_s != b.first.time_s ? a.first.time_s < b.first.time_s : a.first.energy_j < b.first.energy_j;
  });
  double best = std::numeric_limits<double>::infinity();
  std::vector<FrontierPoint> kept;
  for (const auto& [p, is_max] : pts) {
    if (p.energy_j < best && (kept.empty() || kept.back().time_s < p.time_s)) {
      kept.push_back(p);
      best = p.energy_j;
    }
  }
  std::reverse(kept.begin(), kept.end());  // slowest first
  f_.points_ = std::move(kept);
  if (!f_.points_.empty()) {
    const auto& fastest = f_.points_.back();
    f_.reclaimed_energy_j = fastest.energy_before_reclaim_j - fastest.energy_j;
  }
  f_.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(f_);
}

FrequencyPlan Frontier::make_plan(const std::vector<std::uint16_t>& choice_in, bool reclaim, double tighten_to_s) const {
  const Dag& dag = *dag_;
  const int n = dag.num_ops();
  std::vector<std::uint16_t> choice = choice_in;
  if (tighten_to_s > 0) tighten(dag, op_candidates_, choice, tighten_to_s);
  if (reclaim) {
    std::vector<double> scratch(n), ls(n);
    reclaim_slack(dag, op_candidates_, choice, scratch, ls);
  }
  std::vector<int> freq(n);
  std::vector<double> time(n), energy(n);
  for (int i = 0; i < n; ++i) {
    const OperatingPoint& p = op_candidates_[i]->points[choice[i]];
    freq[i] = p.freq_mhz;
    time[i] = p.time_s;
    energy[i] = p.energy_j;
  }
  return evaluate_durations(dag, std::move(freq), std::move(time), std::move(energy), p_block_w);
}

void Frontier::for_each_plan(const std::vector<std::size_t>& indices,
                             const std::function<void(std::size_t, const FrequencyPlan&)>& fn) const {
  std::vector<std::size_t> order = indices;
  for (std::size_t i : order)
    if (i >= points_.size()) throw std::out_of_range(fmt::format("frontier has {} points, asked for {}", points_.size(), i));
  // Replay steps in increasing order; the all-max point (step -1) needs no replay.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return points_[a].step < points_[b].step; });
  std::vector<std::uint16_t> choice = start_choice_;
  std::int64_t at = 0;
  for (std::size_t i : order) {
    const std::int64_t step = points_[i].step;
    if (step < 0) {
      fn(i, make_plan(std::vector<std::uint16_t>(choice.size(), 0), reclaim_, 0));
      continue;
    }
    for (; at < step; ++at) {
      for (std::size_t k = step_end_[at]; k < step_end_[at + 1]; ++k) choice[changes_[k].first] = changes_[k].second;
    }
    fn(i, make_plan(choice, reclaim_, points_[i].tightened_to_s));
  }
}

FrequencyPlan Frontier::plan(std::size_t i) const {
  FrequencyPlan out;
  for_each_plan({i}, [&](std::size_t, const FrequencyPlan& p) { out = p; });
  return out;
}

std::size_t Frontier::lowest_energy_within(double deadline_s) const {
  // Points are slowest first with energy increasing, so the first that meets the deadline
  // has the lowest energy.
  for (std::size_t i = 0; i < points_.size(); ++i)
    if (points_[i].time_s <= deadline_s) return i;
  return points_.empty() ? 0 : points_.size() - 1;
}

Frontier solve_frontier(const Dag& dag, const Profile& profile, const PlannerOptions& options) {
  FrontierBuilder builder(dag, profile, options);
  return builder.run();
}

}  // namespace perseus
