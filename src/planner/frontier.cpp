// The Perseus planner: iterative min-cut time–cost tradeoff (Phillips–Dessouky) over the
// iteration DAG, producing the iteration time–energy Pareto frontier.
#include "perseus/frontier.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <thread>

#include <fmt/core.h>

#include "lower_bound.hpp"
#include "max_flow_warm.hpp"
#include "min_cut.hpp"
#include "perseus/error.hpp"
#include "plan_improve.hpp"

namespace perseus {

std::vector<OperatingPoint> pareto_points(const std::vector<OperatingPoint>& points, double p_block_w) {
  std::vector<OperatingPoint> sorted = points;
  auto cost = [p_block_w](const OperatingPoint& p) { return p.energy_j - p_block_w * p.time_s; };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const OperatingPoint& a, const OperatingPoint& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : cost(a) < cost(b);
  });
  std::vector<OperatingPoint> front;
  double best_energy = std::numeric_limits<double>::infinity();
  for (const auto& p : sorted) {
    // Time ascending: keep p only if it uses strictly less energy than every faster point.
    if (cost(p) < best_energy) {
      if (!front.empty() && front.back().time_s == p.time_s) continue;  // same time, more energy
      front.push_back(p);
      best_energy = cost(p);
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

CostModel build_cost_model(const std::vector<OperatingPoint>& raw, double unit_s, double p_block_w, bool extended) {
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
  if (gc.empty()) gc.push_back(0);
  m.q_min = m.cand.units[gc.front()];
  m.q_max = m.cand.units[gc.back()];
  const std::int64_t range = m.q_max - m.q_min + 1;
  if (range > 1'000'000) {
    throw InputError(fmt::format("unit time {} s is too small for computations of up to {} s", unit_s,
                                 m.cand.points[gc.back()].time_s));
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

/// Size of the Pareto filter (pareto_filter() below) of the points added so far, kept
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

/// Augmenting-path threshold of the warm engine relative to the cut tolerance: the warm
/// flow carries rounding-level leftovers from earlier steps, so it must augment below the
/// cut tolerance to reach the same minimal cut as a cold solve (measured: 1 diverges on a
/// 16 x 64 synthetic case in tie steps; 1e-6 matches the cold engines everywhere tested).
constexpr double kWarmAugmentFactor = 1e-6;

/// Builds a Frontier: owns the solver state of solve_frontier(). All per-step work uses
/// storage allocated once (sized by the DAG), so a step allocates nothing once warmed up.
class FrontierBuilder {
 public:
  FrontierBuilder(const Dag& dag, const Profile& profile, const PlannerOptions& opt);
  Frontier run();

 private:
  void compute_cpm();
  bool find_and_apply_cut();
  /// The warm-started min cut of the current critical network into faster_/slower_.
  /// Returns false when no finite cut exists. Same tolerance and cut as the cold path.
  bool warm_cut();
  void init_warm_network();
  /// Shortens faster_ and lengthens slower_ by one unit; false if faster_ is empty.
  bool apply_cut();
  void record_point(std::int64_t step, const std::vector<std::uint16_t>& choice, double tighten_to_s = 0);
  /// Lean, allocation-free evaluation of `choice` (no tightening): the same numbers as
  /// Frontier::make_plan(choice, false/reclaim_, 0) (same operations in the same order).
  void evaluate(const std::vector<std::uint16_t>& choice, double& energy_before_reclaim_j, double& time_s,
                double& energy_j);
  /// Per-op timeline scratch of timeline_and_energy() (one per thread).
  struct TimelineScratch {
    std::vector<double> time, start, end;
  };
  /// T (longest path) and E of the plan `choice` (energies summed in op order), using `tl`
  /// (resized as needed; tl.start holds the start times afterwards).
  double timeline_and_energy(const std::vector<std::uint16_t>& choice, double& energy_j, TimelineScratch& tl) const;
  double timeline_and_energy(const std::vector<std::uint16_t>& choice, double& energy_j) {
    return timeline_and_energy(choice, energy_j, ev_);
  }

  const PlannerOptions& opt_;
  Frontier f_;
  std::vector<CostModel> models_;
  std::vector<const CostModel*> op_model_;
  std::vector<const std::vector<OperatingPoint>*> model_raw_, op_raw_;  // profile points
  /// PlannerMode::kCertified, the LP stage: one warm-started LP and what its solves produced
  /// since they were last merged into the builder (lp_merge()). Owned by one thread at a time.
  struct LpStage {
    LpStage(const Dag& dag, const std::vector<const std::vector<OperatingPoint>*>& op_raw, const PlannerOptions& opt,
            double t_lo_s);
    detail::HullLowerBound lp;
    double t_lo = 0, t_end = 0;  // sampled deadlines: T_min .. end of the straggler regime, s
    int budget = 0;              // LP solves left
    std::vector<double> solved;  // deadlines solved, s
    struct Tangent {
      double deadline_s, bound_j, slope_j_per_s;
    };
    std::vector<std::pair<FrontierPoint, bool>> points;  // LP-rounded plans (stored_plan: into `stored`)
    std::vector<std::vector<std::uint16_t>> stored;
    std::vector<Tangent> tangents;
    bool over_time_budget = false;
    std::stop_token stop;  // set when the sampling runs beside the graph-cut walk
    double seconds = 0;    // wall time of the stage's construction and lp_sample() beside the walk
    std::vector<std::uint16_t> choice;
    std::vector<double> scratch, latest;
    TimelineScratch timeline;
  };
  /// One LP solve at deadline tau (s): a tangent of LB and a rounded, slack-filled plan, into `st`.
  /// Touches no builder state but reads (const): safe beside the graph-cut walk.
  void lp_solve_at(LpStage& st, double tau) const;
  /// The LP stage's first part: the solve at st.t_end, then samples from st.t_lo up.
  void lp_sample(LpStage& st) const;
  /// Moves st's solves into raw_points_, stored_ and f_.tangents_ (sorted).
  void lp_merge(LpStage& st);
  /// The LP stage (bound, rounded plans) on raw_points_: sampling (unless `sampled` already
  /// did it from the right T_min), then refinement where the gap is large.
  void certify(std::unique_ptr<LpStage> sampled);
  /// PlannerOptions::time_budget_s reached (wall clock since the solve started).
  bool over_time_budget() const {
    return opt_.time_budget_s >= 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() >= opt_.time_budget_s;
  }
  /// PlannerOptions::max_points: keeps that many of `kept` (fastest first), spread evenly by
  /// index with both ends kept, and marks the frontier partial if any was dropped.
  void keep_at_most_max_points(std::vector<FrontierPoint>& kept);
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  void set_bounds(std::vector<FrontierPoint>& kept) const;
  std::vector<std::int64_t> dur_;  // current quantized duration per op
  std::vector<std::int64_t> es_, lf_;
  std::int64_t T_ = 0;
  std::vector<std::uint16_t> choice_;
  std::vector<std::pair<FrontierPoint, bool>> raw_points_;  // (point, is all-max)
  std::vector<std::vector<std::uint16_t>> stored_;         // LP-stage plans (raw_points_ refer)
  detail::MinCut min_cut_;
  // Warm engine (default): one fixed network over all ops, 7 arcs per op then one per DAG
  // edge, capacities 0 where the op/edge is not critical (see init_warm_network()).
  bool warm_ = true;
  detail::WarmMaxFlow warm_flow_;
  std::vector<int> edge_first_;  // first edge arc id of op v (edges in successor order)
  std::vector<double> op_ub_, op_lb_;  // per critical op (ub < 0: cannot speed up)
  std::vector<char> was_critical_;  // per op: critical in the previous warm network
  // Per op: signature from compute_cpm() (bit 0: critical; bit 1 + j: edge to the j-th
  // successor is critical), and the signature and duration its capacities were set for.
  static constexpr int kSigEdges = 30;
  static constexpr std::uint32_t kSigUnknown = 1u << 31;  // more successors than bits
  std::vector<std::uint32_t> sig_, cap_sig_;
  std::vector<std::int64_t> cap_dur_;
  double prev_eps_ = 0;
  // CSR copy of the DAG (hot loops; avoids out-of-line span accessors).
  std::vector<int> topo_, pred_first_, pred_, succ_first_, succ_;
  std::vector<detail::FlowArc> arcs_, prev_arcs_, compact_;
  struct OpArc {
    int v;
    std::size_t arc;
  };
  std::vector<OpArc> op_arcs_;
  std::vector<int> node_id_, nodes_;
  std::vector<int> faster_, slower_, lengthened_, touched_;
  bool have_prev_cut_ = false;
  // Evaluation scratch (per op).
  std::vector<std::uint16_t> ev_choice_;
  TimelineScratch ev_;
  std::vector<double> ev_ls_;
};

FrontierBuilder::FrontierBuilder(const Dag& dag, const Profile& profile, const PlannerOptions& opt) : opt_(opt) {
  // Bounds keep every sum finite and the tables small (documented in PlannerOptions).
  if (!(opt.unit_time_s >= 1e-7 && opt.unit_time_s <= 10)) {
    throw InputError(fmt::format("unit time must be in [1e-7, 10] s, got {}", opt.unit_time_s));
  }
  if (!(opt.p_block_w >= 0 && opt.p_block_w <= 1e5)) {
    throw InputError(fmt::format("P2P blocking power must be in [0, 100000] W, got {}", opt.p_block_w));
  }
  if (opt.mode != PlannerMode::kGraphCut && opt.mode != PlannerMode::kCertified) {
    throw InputError(fmt::format("planner mode {} is not a known mode", static_cast<int>(opt.mode)));
  }
  if (!parse_min_cut_engine(to_string(opt.min_cut_engine))) {
    throw InputError(fmt::format("min-cut engine {} is not a known engine", static_cast<int>(opt.min_cut_engine)));
  }
  if (opt.max_lp_solves < 1 || opt.max_lp_solves > 100000) {
    throw InputError(fmt::format("max LP solves must be in [1, 100000], got {}", opt.max_lp_solves));
  }
  if (opt.local_search_moves < 0 || opt.local_search_moves > 1'000'000) {
    throw InputError(fmt::format("local search moves must be in [0, 1000000], got {}", opt.local_search_moves));
  }
  if (!(opt.refine_gap_pct >= 0)) {
    throw InputError(fmt::format("refine gap must be >= 0 %, got {}", opt.refine_gap_pct));
  }
  if (std::isnan(opt.time_budget_s) || opt.time_budget_s > 1e9) {
    throw InputError(fmt::format("time budget must be in [0, 1e9] s (< 0: none), got {}", opt.time_budget_s));
  }
  if (opt.max_points < 0 || opt.max_points > 1'000'000'000) {
    throw InputError(fmt::format("max points must be in [1, 1e9] (0: none), got {}", opt.max_points));
  }
  if (opt.threads < 1 || opt.threads > 1024) {
    throw InputError(fmt::format("planner threads must be in [1, 1024], got {}", opt.threads));
  }
  f_.dag_ = std::make_shared<const Dag>(dag);
  f_.p_block_w = opt.p_block_w;
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
    models_.push_back(build_cost_model(pts, opt.unit_time_s, opt.p_block_w, opt.mode == PlannerMode::kCertified));
    model_raw_.push_back(&pts);
  }
  f_.candidates_ = std::make_shared<std::vector<Candidates>>();
  for (const auto& m : models_) f_.candidates_->push_back(m.cand);
  const int n = dag.num_ops();
  op_model_.resize(n);
  op_raw_.resize(n);
  f_.op_candidates_.resize(n);
  dur_.resize(n);
  choice_.resize(n);
  for (int i = 0; i < n; ++i) {
    const Computation& c = dag.op(i);
    const std::size_t k = index[{c.stage, static_cast<int>(c.kind)}];
    op_model_[i] = &models_[k];
    op_raw_[i] = model_raw_[k];
    f_.op_candidates_[i] = &(*f_.candidates_)[k];
    dur_[i] = models_[k].q_max;
    choice_[i] = models_[k].choice.back();
  }
  es_.resize(n);
  lf_.resize(n);
  sig_.assign(n, 0);
  cap_sig_.assign(n, 0);
  cap_dur_.assign(n, 0);
  node_id_.assign(2 * static_cast<std::size_t>(n) + 2, -1);
  ev_choice_.resize(n);
  ev_.time.resize(n);
  warm_ = opt_.min_cut_engine == MinCutEngine::kWarm;
  min_cut_.set_engine(opt_.min_cut_engine);
  if (warm_) init_warm_network();
  op_ub_.resize(n);
  op_lb_.resize(n);
  topo_ = dag.topological_order();
  pred_first_.assign(1, 0);
  succ_first_.assign(1, 0);
  for (int v = 0; v < n; ++v) {
    for (int u : dag.predecessors(v)) pred_.push_back(u);
    for (int w : dag.successors(v)) succ_.push_back(w);
    pred_first_.push_back(static_cast<int>(pred_.size()));
    succ_first_.push_back(static_cast<int>(succ_.size()));
  }
  ev_.start.resize(n);
  ev_.end.resize(n);
  ev_ls_.resize(n);
}

void FrontierBuilder::compute_cpm() {
  // Raw pointers: stores into es_/lf_/sig_ would otherwise reload every vector's data
  // pointer inside the loops.
  std::int64_t* const es = es_.data();
  std::int64_t* const lf_out = lf_.data();
  std::uint32_t* const sig = sig_.data();
  const std::int64_t* const dur = dur_.data();
  const int *const pred_first = pred_first_.data(), *const pred = pred_.data();
  const int *const succ_first = succ_first_.data(), *const succ = succ_.data();
  std::int64_t T = 0;
  for (int v : topo_) {
    std::int64_t s = 0;
    for (int i = pred_first[v]; i < pred_first[v + 1]; ++i) s = std::max(s, es[pred[i]] + dur[pred[i]]);
    es[v] = s;
    T = std::max(T, s + dur[v]);
  }
  T_ = T;
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    const int v = *it;
    // Latest finish, and the critical-network signature: successors are done (reverse
    // topological order), so bit 1 + j says whether the edge to the j-th one is tight and
    // leads to a critical op; it counts only if v itself turns out critical.
    const std::int64_t ef = es[v] + dur[v];
    std::int64_t lf = T;
    std::uint32_t edges = 0;
    const int first = succ_first[v], deg = succ_first[v + 1] - first;
    for (int j = 0; j < deg; ++j) {
      const int w = succ[first + j];
      lf = std::min(lf, lf_out[w] - dur[w]);
      if (j < kSigEdges && (sig[w] & 1u) != 0 && ef == es[w]) edges |= 2u << j;
    }
    lf_out[v] = lf;
    sig[v] = ef != lf ? 0u : 1u | edges | (deg > kSigEdges ? kSigUnknown : 0u);
  }
}

void FrontierBuilder::init_warm_network() {
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  const int s = 2 * n, t = 2 * n + 1;
  std::vector<std::pair<int, int>> arcs;
  arcs.reserve(7 * static_cast<std::size_t>(n) + dag.num_edges());
  for (int v = 0; v < n; ++v) {
    const int in = 2 * v, out = 2 * v + 1;
    // 0: op arc, 1: source arc, 2: sink arc, 3/4: +lb on in / -lb on out, 5/6: if lb < 0.
    arcs.insert(arcs.end(), {{in, out}, {s, in}, {out, t}, {in, t}, {s, out}, {s, in}, {out, t}});
  }
  edge_first_.resize(n + 1);
  for (int v = 0; v < n; ++v) {
    edge_first_[v] = static_cast<int>(arcs.size());
    for (int w : dag.successors(v)) arcs.emplace_back(2 * v + 1, 2 * w);
  }
  edge_first_[n] = static_cast<int>(arcs.size());
  warm_flow_.init(2 * n + 2, arcs, s, t);
  was_critical_.assign(n, 0);
}

bool FrontierBuilder::warm_cut() {
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  const double inf = std::numeric_limits<double>::infinity();
  auto critical_op = [&](int v) { return (sig_[v] & 1u) != 0; };
  // Pass 1: critical ops, their speed-up cost ub and slow-down saving lb, and the tolerance
  // as in the cold path (Σ ub in op order, then each lb twice in node order).
  double finite_total = 0;
  op_arcs_.clear();
  for (int v = 0; v < n; ++v) {
    if (!critical_op(v)) continue;
    const CostModel& m = *op_model_[v];
    const std::int64_t d = dur_[v];
    const bool can_fast = d > m.q_min;
    const double ub = can_fast ? m.cost[d - 1 - m.q_min] - m.cost[d - m.q_min] : 0.0;
    op_lb_[v] = d < m.q_max ? m.cost[d - m.q_min] - m.cost[d + 1 - m.q_min] : 0.0;
    op_ub_[v] = can_fast ? ub : -1.0;
    if (can_fast) finite_total += ub;
    op_arcs_.push_back({v, 0});
  }
  for (const OpArc& oa : op_arcs_) {
    const double lb = op_lb_[oa.v];
    if (lb != 0) finite_total += std::abs(lb), finite_total += std::abs(lb);
  }
  const double eps = 1e-9 * (1 + finite_total);
  // Pass 2: capacities of the fixed network. A capacity <= eps is 0, as in the cold
  // engines (which never push flow through such an arc), so the warm flow can augment down
  // to rounding level without giving tiny arcs a meaning the cold engines do not.
  bool changed = false;
  auto set = [&](int k, double c) {
    if (c <= eps) c = 0.0;
    if (warm_flow_.capacity(k) != c) {
      warm_flow_.set_capacity(k, c);
      changed = true;
    }
  };
  // An op that stays critical with the same duration and signature keeps its capacities,
  // unless the new tolerance zeroes (or un-zeroes) one of them.
  const double band_lo = std::min(eps, prev_eps_), band_hi = std::max(eps, prev_eps_);
  auto flips = [&](double c) { return c > band_lo && c <= band_hi; };
  for (int v = 0; v < n; ++v) {
    const int k = 7 * v;
    const bool crit = critical_op(v);
    const bool was = was_critical_[v] != 0;
    was_critical_[v] = crit;
    if (!crit) {
      if (!was) continue;  // all its arcs are already 0
      for (int j = 0; j < 7; ++j) set(k + j, 0.0);
      for (int e = edge_first_[v]; e < edge_first_[v + 1]; ++e) set(e, 0.0);
      continue;
    }
    const double ub = op_ub_[v], lb = op_lb_[v];
    if (was && sig_[v] == cap_sig_[v] && dur_[v] == cap_dur_[v] && (sig_[v] & kSigUnknown) == 0 &&
        !(eps != prev_eps_ && (flips(ub - lb) || flips(std::abs(lb))))) {
      continue;
    }
    cap_sig_[v] = sig_[v];
    cap_dur_[v] = dur_[v];
    set(k, ub >= 0 ? std::max(0.0, ub - lb) : inf);
    set(k + 1, es_[v] == 0 ? inf : 0.0);
    set(k + 2, es_[v] + dur_[v] == T_ && succ_first_[v] == succ_first_[v + 1] ? inf : 0.0);
    set(k + 3, lb > 0 ? lb : 0.0);
    set(k + 4, lb > 0 ? lb : 0.0);
    set(k + 5, lb < 0 ? -lb : 0.0);
    set(k + 6, lb < 0 ? -lb : 0.0);
    int e = edge_first_[v];
    for (int i = succ_first_[v]; i < succ_first_[v + 1]; ++i) {
      const int w = succ_[i];
      set(e++, es_[v] + dur_[v] == es_[w] && critical_op(w) ? inf : 0.0);
    }
  }
  prev_eps_ = eps;
  if (!changed && have_prev_cut_) return true;  // same network: same minimal cut
  ++f_.num_max_flows;
  if (!warm_flow_.maximize(eps, eps * kWarmAugmentFactor)) return false;
  faster_.clear();
  slower_.clear();
  for (const OpArc& oa : op_arcs_) {
    const bool from_s = warm_flow_.in_source_side(2 * oa.v), to_s = warm_flow_.in_source_side(2 * oa.v + 1);
    if (from_s && !to_s) faster_.push_back(oa.v);
    if (!from_s && to_s) slower_.push_back(oa.v);
  }
  return true;
}

// One Phillips–Dessouky step: min cut of the critical DAG with speed-up costs as upper
// and slow-down savings as lower bounds; shorten S->T ops, lengthen T->S ops by one unit.
// Returns false when no finite cut exists (T_min reached).
bool FrontierBuilder::find_and_apply_cut() {
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  // Node-split network: op v is arc in(v)=2v -> out(v)=2v+1; s = 2n, t = 2n+1. The
  // slow-down saving lb of a critical op is the node weight +lb on in(v) and -lb on out(v),
  // i.e. the arcs in(v)->t and s->out(v) of capacity lb (after all op arcs, in node order).
  if (warm_) {
    if (!warm_cut()) return false;
    have_prev_cut_ = true;
    return apply_cut();
  }
  const int s = 2 * n, t = 2 * n + 1;
  auto critical_op = [&](int v) { return es_[v] + dur_[v] == lf_[v]; };
  arcs_.clear();
  op_arcs_.clear();
  double finite_total = 0;
  const double kInf = -1;  // placeholder, fixed below
  for (int v = 0; v < n; ++v) {
    if (!critical_op(v)) continue;
    const CostModel& m = *op_model_[v];
    const std::int64_t d = dur_[v];
    const bool can_fast = d > m.q_min;
    const double ub = can_fast ? m.cost[d - 1 - m.q_min] - m.cost[d - m.q_min] : kInf;
    op_arcs_.push_back({v, arcs_.size()});
    const double lb = d < m.q_max ? m.cost[d - m.q_min] - m.cost[d + 1 - m.q_min] : 0.0;
    arcs_.push_back({2 * v, 2 * v + 1, ub == kInf ? kInf : std::max(0.0, ub - lb)});
    if (ub != kInf) finite_total += ub;
    if (es_[v] == 0) arcs_.push_back({s, 2 * v, kInf});
    if (es_[v] + dur_[v] == T_ && dag.successors(v).empty()) arcs_.push_back({2 * v + 1, t, kInf});
    for (int w : dag.successors(v)) {
      if (critical_op(w) && es_[v] + dur_[v] == es_[w] && es_[w] == lf_[w] - dur_[w]) {
        arcs_.push_back({2 * v + 1, 2 * w, kInf});
      }
    }
  }
  for (const OpArc& oa : op_arcs_) {
    const CostModel& m = *op_model_[oa.v];
    const std::int64_t d = dur_[oa.v];
    const double lb = d < m.q_max ? m.cost[d - m.q_min] - m.cost[d + 1 - m.q_min] : 0.0;
    const int in = 2 * oa.v, out = 2 * oa.v + 1;
    for (const auto& [x, w] : {std::pair{in, lb}, std::pair{out, -lb}}) {
      if (w > 0) {
        arcs_.push_back({x, t, w});
        finite_total += w;
      } else if (w < 0) {
        arcs_.push_back({s, x, -w});
        finite_total -= w;
      }
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
    nodes_.clear();
    auto id = [&](int x) {
      if (node_id_[x] < 0) {
        node_id_[x] = static_cast<int>(nodes_.size());
        nodes_.push_back(x);
      }
      return node_id_[x];
    };
    id(s);
    id(t);
    compact_.resize(arcs_.size());
    for (std::size_t i = 0; i < arcs_.size(); ++i) compact_[i] = {id(arcs_[i].from), id(arcs_[i].to), arcs_[i].capacity};
    double value = 0;
    const std::vector<char>& in_s = min_cut_.solve(static_cast<int>(nodes_.size()), compact_, node_id_[s],
                                                   node_id_[t], 1e-9 * (1 + finite_total), &value);
    auto side = [&](int x) { return in_s[node_id_[x]] != 0; };
    faster.clear();
    slower.clear();
    const bool infinite = value >= inf * 0.5;
    if (!infinite) {
      for (const OpArc& oa : op_arcs_) {
        const bool from_s = side(2 * oa.v), to_s = side(2 * oa.v + 1);
        if (from_s && !to_s) faster.push_back(oa.v);
        if (!from_s && to_s) slower.push_back(oa.v);
      }
    }
    for (int x : nodes_) node_id_[x] = -1;
    if (infinite) return false;
  }
  std::swap(prev_arcs_, arcs_);
  have_prev_cut_ = true;
  return apply_cut();
}

bool FrontierBuilder::apply_cut() {
  const std::vector<int>& faster = faster_;
  const std::vector<int>& slower = slower_;
  lengthened_.clear();
  for (int v : slower)
    if (dur_[v] < op_model_[v]->q_max) lengthened_.push_back(v);
  if (faster.empty()) return false;
  const std::int64_t old_T = T_;
  for (int v : faster) --dur_[v];
  for (int v : lengthened_) ++dur_[v];
  compute_cpm();
  if (T_ >= old_T && !lengthened_.empty()) {
    // Lengthening made a non-critical path critical: keep only the speed-ups.
    for (int v : lengthened_) --dur_[v];
    lengthened_.clear();
    compute_cpm();
    have_prev_cut_ = false;
  }
  if (T_ >= old_T) throw std::logic_error("planner: a min-cut step did not shorten the iteration");
  return true;
}

double FrontierBuilder::timeline_and_energy(const std::vector<std::uint16_t>& choice, double& energy_j,
                                            TimelineScratch& tl) const {
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  tl.time.resize(n);
  tl.start.resize(n);
  tl.end.resize(n);
  double compute = 0, busy = 0;
  for (int i = 0; i < n; ++i) {
    const OperatingPoint& p = f_.op_candidates_[i]->points[choice[i]];
    tl.time[i] = p.time_s;
    compute += p.energy_j;
    busy += p.time_s;
  }
  double T = 0;
  double *const ev_start = tl.start.data(), *const ev_end = tl.end.data();
  const double* const ev_time = tl.time.data();
  const int *const pred_first = pred_first_.data(), *const pred = pred_.data();
  for (int v : topo_) {
    double start = 0.0;
    for (int i = pred_first[v]; i < pred_first[v + 1]; ++i) start = std::max(start, ev_end[pred[i]]);
    ev_start[v] = start;
    ev_end[v] = start + ev_time[v];
    T = std::max(T, ev_end[v]);
  }
  energy_j = compute + f_.p_block_w * (dag.num_ranks() * T - busy);
  return T;
}

void FrontierBuilder::evaluate(const std::vector<std::uint16_t>& choice, double& energy_before_reclaim_j,
                               double& time_s, double& energy_j) {
  const double T0 = timeline_and_energy(choice, energy_before_reclaim_j);
  time_s = T0;
  energy_j = energy_before_reclaim_j;
  if (!f_.reclaim_) return;
  // reclaim_slack() on the timeline above (ev_.start), into ev_choice_.
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    const int v = *it;
    double lf = T0;
    for (int i = succ_first_[v]; i < succ_first_[v + 1]; ++i) lf = std::min(lf, ev_ls_[succ_[i]]);
    const double window = lf - ev_.start[v];
    const auto& pts = f_.op_candidates_[v]->points;
    std::size_t c = choice[v];
    while (c + 1 < pts.size() && pts[c + 1].time_s <= window * (1 + 1e-12)) ++c;
    ev_choice_[v] = static_cast<std::uint16_t>(c);
    ev_ls_[v] = lf - pts[c].time_s;
  }
  time_s = timeline_and_energy(ev_choice_, energy_j);
}

void FrontierBuilder::record_point(std::int64_t step, const std::vector<std::uint16_t>& choice, double tighten_to_s) {
  FrontierPoint p;
  p.step = step;
  p.tightened_to_s = tighten_to_s;
  if (tighten_to_s > 0) {
    p.energy_before_reclaim_j = f_.make_plan(choice, false, tighten_to_s).total_energy_j();
    const FrequencyPlan plan = f_.make_plan(choice, f_.reclaim_, tighten_to_s);
    p.time_s = plan.timeline.time_s;
    p.energy_j = plan.total_energy_j();
  } else {
    evaluate(choice, p.energy_before_reclaim_j, p.time_s, p.energy_j);
  }
  raw_points_.push_back({p, step < 0});
}

/// Pareto filter of candidate points: time ascending, decreasing energy; the result is
/// fastest first. A slower point is kept only when it saves more than rel_tol × its energy
/// (the final frontier uses kFrontierDominanceRelTol: float noise does not make a distinct
/// plan; the LP refinement rounds use 0, so which deadlines they refine does not change).
/// pipe_block_w = 0 (W): Pareto in (T, E). pipe_block_w = P_block × R: Pareto in (T, E −
/// pipe_block_w × T), the points that are the best choice for some deadline when the GPUs
/// block at P_block until it (energy at deadline τ = E + pipe_block_w × (τ − T)).
static std::vector<FrontierPoint> pareto_filter(std::vector<std::pair<FrontierPoint, bool>> pts,
                                                double pipe_block_w = 0, double rel_tol = 0) {
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

/// LP solve budget of the LP stage: at most kLpSolveOps / ops solves, at least kMinLpSolves
/// (and at most PlannerOptions::max_lp_solves).
constexpr int kLpSolveOps = 80000;
constexpr int kMinLpSolves = 40;
/// Largest DAG (ops) on which the LP stage tries pair moves after rounding.
constexpr int kPairMovesMaxOps = 16;

FrontierBuilder::LpStage::LpStage(const Dag& dag, const std::vector<const std::vector<OperatingPoint>*>& op_raw,
                                  const PlannerOptions& opt, double t_lo_s)
    : lp(dag, op_raw, opt.p_block_w), t_lo(t_lo_s) {
  // Solves cost grows faster than linearly with the DAG: fewer on large DAGs (deterministic,
  // so the output does not depend on the machine's load).
  budget = std::min(opt.max_lp_solves, std::max(kMinLpSolves, kLpSolveOps / std::max(1, dag.num_ops())));
  // The straggler regime ends where no slower plan lowers the energy at any deadline (every
  // op at its hull minimum), or at 2 x T_min.
  t_end = std::max(t_lo, std::min(2 * t_lo, lp.flat_time_s()));
}

void FrontierBuilder::lp_solve_at(LpStage& st, double tau) const {
  for (double d : st.solved)
    if (std::abs(d - tau) <= 1e-9 * tau) return;
  if (st.budget <= 0) return;
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
}

void FrontierBuilder::lp_sample(LpStage& st) const {
  lp_solve_at(st, st.t_end);
  const int samples = std::min(32, std::max(1, st.budget / 2));
  for (int k = 0; k < samples; ++k) {
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

void FrontierBuilder::certify(std::unique_ptr<LpStage> st) {
  const Dag& dag = *f_.dag_;
  double t_lo = std::numeric_limits<double>::infinity();
  for (const auto& rp : raw_points_) t_lo = std::min(t_lo, rp.first.time_s);
  // The sampling may have run beside the graph-cut walk from the all-max plan's time; it is
  // used only if that is T_min exactly (otherwise it is redone), so the result never
  // depends on PlannerOptions::threads.
  const auto t0 = std::chrono::steady_clock::now();
  double beside_s = 0;  // LP-stage time spent beside the walk
  if (!st || st->t_lo != t_lo) {
    st = std::make_unique<LpStage>(dag, op_raw_, opt_, t_lo);
    lp_sample(*st);
  } else {
    beside_s = st->seconds;
    st->stop = std::stop_token{};  // on this thread from now on: PlannerOptions::cancelled applies
  }
  lp_merge(*st);
  const double pipe_w = opt_.p_block_w * dag.num_ranks();
  const double t_end = st->t_end;
  // Refinement: exact solves where a point, or a deadline just below the next slower point,
  // is further than refine_gap_pct above the bound.
  for (int round = 0; round < 8 && st->budget > 0; ++round) {
    const std::vector<FrontierPoint> kept = pareto_filter(raw_points_, pipe_w);  // fastest first
    std::vector<std::pair<double, double>> worst;                       // (gap, deadline)
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (kept[i].time_s > t_end * (1 + 1e-9)) break;
      const double lb = f_.lower_bound_at(kept[i].time_s);
      const double gap = 100 * (kept[i].energy_j - lb) / lb;
      if (gap > opt_.refine_gap_pct) worst.emplace_back(gap, kept[i].time_s);
      if (i + 1 < kept.size()) {
        const double deadline = std::min(t_end, kept[i + 1].time_s * (1 - 1e-9));
        const double lb2 = f_.lower_bound_at(deadline);
        const double at_deadline = kept[i].energy_j + pipe_w * (deadline - kept[i].time_s);
        const double gap2 = 100 * (at_deadline - lb2) / lb2;
        if (gap2 > opt_.refine_gap_pct && deadline > kept[i].time_s) {
          worst.emplace_back(gap2, deadline);
          // Bisect the hole: a plan in between may exist that neither end's LP rounds to.
          worst.emplace_back(gap2 * 0.999, 0.5 * (kept[i].time_s + deadline));
        }
      }
    }
    if (worst.empty()) break;
    std::sort(worst.begin(), worst.end(), std::greater<>());
    const std::size_t take = std::min<std::size_t>(worst.size(), std::max(8, st->budget / 4));
    const int before = st->budget;
    for (std::size_t i = 0; i < take && st->budget > 0; ++i) lp_solve_at(*st, worst[i].second);
    lp_merge(*st);
    if (st->budget == before) break;  // nothing new to solve
  }
  f_.num_lp_solves = st->lp.num_solves();
  f_.bound_time_s = beside_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void FrontierBuilder::keep_at_most_max_points(std::vector<FrontierPoint>& kept) {
  const auto k = static_cast<std::size_t>(opt_.max_points);
  if (k == 0 || kept.size() <= k) return;
  const std::size_t n = kept.size();
  std::vector<FrontierPoint> spread;
  for (std::size_t j = 0; j < k; ++j) spread.push_back(kept[k == 1 ? 0 : (j * (n - 1) + (k - 1) / 2) / (k - 1)]);
  if (!f_.partial()) {
    f_.stop_reason = Frontier::StopReason::kMaxPoints;
    f_.partial_detail = fmt::format("the solve found {} frontier points; {} of them are kept (max points), spread evenly "
                                    "from the slowest to the fastest", n, k);
  }
  kept = std::move(spread);
}

const char* to_string(Frontier::StopReason reason) {
  switch (reason) {
    case Frontier::StopReason::kTimeBudget: return "time_budget";
    case Frontier::StopReason::kMaxPoints: return "max_points";
    case Frontier::StopReason::kComplete: break;
  }
  return "complete";
}

Frontier FrontierBuilder::run() {
  start_ = std::chrono::steady_clock::now();
  const auto t0 = start_;
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
  // User bounds (PlannerOptions::time_budget_s, max_points): the walk stops early and the
  // frontier found so far is returned, marked partial.
  const double pipe_w = opt_.mode == PlannerMode::kCertified ? opt_.p_block_w * dag.num_ranks() : 0.0;
  RunningFront front;
  FrontierPoint all_max;  // for the count: the all-max plan joins the frontier at the end
  if (opt_.max_points > 0) {
    evaluate(std::vector<std::uint16_t>(n, 0), all_max.energy_before_reclaim_j, all_max.time_s, all_max.energy_j);
    front.add(raw_points_.back().first.time_s, raw_points_.back().first.energy_j - pipe_w * raw_points_.back().first.time_s);
  }
  // threads >= 2 (kCertified): the LP stage's sampling runs beside the walk, from the
  // all-max plan's time (T_min unless a graph-cut plan is faster; certify() checks).
  std::unique_ptr<LpStage> beside;
  std::exception_ptr beside_error;
  std::jthread beside_thread;  // declared last: joined (after a stop request) before the rest goes
  if (opt_.mode == PlannerMode::kCertified && opt_.threads >= 2 && opt_.max_points == 0 && !over_time_budget()) {
    FrontierPoint fastest;
    evaluate(std::vector<std::uint16_t>(n, 0), fastest.energy_before_reclaim_j, fastest.time_s, fastest.energy_j);
    beside_thread = std::jthread([this, &beside, &beside_error, t_lo = fastest.time_s](std::stop_token stop) {
      try {
        const auto s0 = std::chrono::steady_clock::now();
        beside = std::make_unique<LpStage>(*f_.dag_, op_raw_, opt_, t_lo);
        beside->stop = std::move(stop);
        lp_sample(*beside);
        beside->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      } catch (...) {
        beside_error = std::current_exception();
      }
    });
  }
  auto stop_walk = [&] {
    if (over_time_budget()) {
      f_.stop_reason = Frontier::StopReason::kTimeBudget;
    } else if (opt_.max_points > 0 &&
               front.size_with(all_max.time_s, all_max.energy_j - pipe_w * all_max.time_s) >=
                   static_cast<std::size_t>(opt_.max_points)) {
      f_.stop_reason = Frontier::StopReason::kMaxPoints;
    } else {
      return false;
    }
    const double done = t_max_units > t_min_units
                            ? static_cast<double>(t_max_units - T_) / static_cast<double>(t_max_units - t_min_units)
                            : 1.0;
    f_.partial_detail = fmt::format(
        "{} reached after {} graph-cut steps, {:.1f} % of the T_max -> T_min range; the frontier jumps from T = {:.6g} s "
        "to the all-max plan{}",
        f_.stop_reason == Frontier::StopReason::kTimeBudget
            ? fmt::format("time budget of {} s", opt_.time_budget_s)
            : fmt::format("{} frontier points (max points)", opt_.max_points),
        step, 100 * done, raw_points_.back().first.time_s,
        opt_.mode == PlannerMode::kCertified ? "; the LP stage (lower bound, LP-rounded plans) was skipped" : "");
    return true;
  };
  while (!stop_walk() && find_and_apply_cut()) {
    ++step;
    if (opt_.cancelled && opt_.cancelled()) throw PlanningCancelled("planning cancelled");
    // Only ops whose duration moved can change candidate; record them in op order.
    touched_.clear();
    if (std::is_sorted(faster_.begin(), faster_.end()) && std::is_sorted(lengthened_.begin(), lengthened_.end())) {
      // Both lists come in op order (the warm engine lists cut ops by op id): merge them.
      std::merge(faster_.begin(), faster_.end(), lengthened_.begin(), lengthened_.end(), std::back_inserter(touched_));
    } else {
      for (int v : faster_) touched_.push_back(v);
      for (int v : lengthened_) touched_.push_back(v);
      std::sort(touched_.begin(), touched_.end());
    }
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    const std::size_t before = f_.changes_.size();
    for (int v : touched_) {
      const std::uint16_t c = op_model_[v]->choice[dur_[v] - op_model_[v]->q_min];
      if (c != choice_[v]) {
        choice_[v] = c;
        f_.changes_.emplace_back(v, c);
      }
    }
    f_.step_end_.push_back(f_.changes_.size());
    if (f_.changes_.size() == before) {
      // Same plan as the previous step: the same point, which the Pareto filter below
      // would drop as a duplicate of the earlier one anyway.
    } else {
      record_point(step, choice_);
      if (opt_.max_points > 0) {
        const FrontierPoint& p = raw_points_.back().first;
        front.add(p.time_s, p.energy_j - pipe_w * p.time_s);
      }
    }
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
  if (beside_thread.joinable()) {
    beside_thread.join();
    if (beside_error) std::rethrow_exception(beside_error);
  }
  std::vector<FrontierPoint> kept;
  if (opt_.mode == PlannerMode::kCertified && !f_.partial()) {
    certify(std::move(beside));
    kept = pareto_filter(raw_points_, pipe_w, kFrontierDominanceRelTol);
    keep_at_most_max_points(kept);
    // Keep only the stored plans that survived, renumbered.
    std::vector<std::vector<std::uint16_t>> stored;
    for (auto& p : kept) {
      if (p.stored_plan < 0) continue;
      stored.push_back(std::move(stored_[p.stored_plan]));
      p.stored_plan = static_cast<std::int32_t>(stored.size() - 1);
    }
    f_.stored_plans_ = std::move(stored);
    stored_.clear();
    for (auto& p : kept) p.lower_bound_j = f_.lower_bound_at(p.time_s);
  } else {
    kept = pareto_filter(raw_points_, pipe_w, kFrontierDominanceRelTol);
    keep_at_most_max_points(kept);
  }
  std::reverse(kept.begin(), kept.end());  // slowest first
  f_.points_ = std::move(kept);
  if (!f_.points_.empty()) {
    const auto& fastest = f_.points_.back();
    f_.reclaimed_energy_j = fastest.energy_before_reclaim_j - fastest.energy_j;
  }
  const auto& c = warm_flow_.counters();
  f_.max_flow_work = {c.dinic_phases, c.bfs_nodes, c.augmenting_paths, c.augmenting_arcs, c.cancelled_paths};
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
    detail::fill_slack(dag, op_candidates_, choice, scratch, ls);
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
                             const std::function<void(std::size_t, const FrequencyPlan&)>& fn, int threads) const {
  std::vector<std::size_t> order = indices;
  for (std::size_t i : order)
    if (i >= points_.size()) throw std::out_of_range(fmt::format("frontier has {} points, asked for {}", points_.size(), i));
  // Replay steps in increasing order; the all-max point (step -1) needs no replay.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return points_[a].step < points_[b].step; });
  const std::size_t workers = static_cast<std::size_t>(std::max(1, threads));
  // Batches of 2 x workers choice snapshots bound the memory; each batch is evaluated by
  // `workers` threads (the plan of index i depends only on its snapshot).
  const std::size_t batch = workers == 1 ? 1 : 2 * workers;
  std::vector<std::vector<std::uint16_t>> snapshots(batch);
  std::vector<std::size_t> batch_index(batch);
  auto evaluate = [&](std::size_t slot) {
    const std::size_t i = batch_index[slot];
    // Stored plans were slack-filled when found; evaluated as they are.
    fn(i, make_plan(snapshots[slot], reclaim_ && points_[i].stored_plan < 0, points_[i].tightened_to_s));
  };
  std::vector<std::uint16_t> choice = start_choice_;
  std::int64_t at = 0;
  for (std::size_t first = 0; first < order.size(); first += batch) {
    const std::size_t count = std::min(batch, order.size() - first);
    for (std::size_t slot = 0; slot < count; ++slot) {
      const std::size_t i = order[first + slot];
      const std::int64_t step = points_[i].step;
      batch_index[slot] = i;
      if (points_[i].stored_plan >= 0) {
        snapshots[slot] = stored_plans_[points_[i].stored_plan];
        continue;
      }
      if (step < 0) {
        snapshots[slot].assign(choice.size(), 0);
        continue;
      }
      for (; at < step; ++at) {
        for (std::size_t k = step_end_[at]; k < step_end_[at + 1]; ++k) choice[changes_[k].first] = changes_[k].second;
      }
      snapshots[slot] = choice;
    }
    if (workers == 1) {
      for (std::size_t slot = 0; slot < count; ++slot) evaluate(slot);
      continue;
    }
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
      for (std::size_t slot; (slot = next.fetch_add(1)) < count;) {
        try {
          evaluate(slot);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
          next = count;  // stop handing out work
        }
      }
    };
    {
      std::vector<std::jthread> pool;
      for (std::size_t w = 1; w < std::min(workers, count); ++w) pool.emplace_back(work);
      work();
    }  // joins
    if (error) std::rethrow_exception(error);
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

double Frontier::lower_bound_at(double deadline_s) const {
  if (tangents_.empty()) return 0;
  double best = -std::numeric_limits<double>::infinity();
  const double pipe_w = p_block_w * dag_->num_ranks();
  for (const Tangent& t : tangents_) {
    double v = t.bound_j + t.slope_j_per_s * (deadline_s - t.deadline_s);
    // LB − pipe_w × τ is non-increasing.
    if (t.deadline_s >= deadline_s) v = std::max(v, t.bound_j - pipe_w * (t.deadline_s - deadline_s));
    best = std::max(best, v);
  }
  return best;
}

double Frontier::max_optimality_gap_pct() const {
  double gap = 0;
  for (const auto& p : points_)
    if (p.lower_bound_j > 0) gap = std::max(gap, 100 * (p.energy_j - p.lower_bound_j) / p.lower_bound_j);
  return gap;
}

double Frontier::max_deadline_gap_pct() const {
  double gap = 0;
  if (tangents_.empty()) return 0;
  // points_ are slowest first: a deadline just below points_[i-1]'s time chooses points_[i].
  const double pipe_w = p_block_w * dag_->num_ranks();
  for (std::size_t i = 1; i < points_.size(); ++i) {
    const double deadline = points_[i - 1].time_s * (1 - 1e-12);
    const double lb = lower_bound_at(deadline);
    const double at_deadline = points_[i].energy_j + pipe_w * (deadline - points_[i].time_s);
    if (lb > 0) gap = std::max(gap, 100 * (at_deadline - lb) / lb);
  }
  return gap;
}

Frontier solve_frontier(const Dag& dag, const Profile& profile, const PlannerOptions& options) {
  FrontierBuilder builder(dag, profile, options);
  return builder.run();
}

}  // namespace perseus
