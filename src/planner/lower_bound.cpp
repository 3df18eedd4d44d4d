// LP relaxation lower bound of the frequency-planning problem (COIN-OR CLP).
#include "lower_bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include <ClpEventHandler.hpp>
#include <ClpDualRowDantzig.hpp>
#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>
#include <fmt/core.h>

namespace perseus::detail {

std::vector<OperatingPoint> lower_hull_effective(const std::vector<OperatingPoint>& points, double p_block_w) {
  std::vector<OperatingPoint> pts = points;
  for (auto& p : pts) p.energy_j -= p_block_w * p.time_s;
  std::sort(pts.begin(), pts.end(), [](const OperatingPoint& a, const OperatingPoint& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : a.energy_j < b.energy_j;
  });
  std::vector<OperatingPoint> hull;
  for (const auto& p : pts) {
    if (!hull.empty() && hull.back().time_s == p.time_s) continue;  // same time, higher energy
    while (hull.size() >= 2) {
      const OperatingPoint& a = hull[hull.size() - 2];
      const OperatingPoint& b = hull.back();
      // Remove b when it lies on or above the segment a–p.
      if ((b.energy_j - a.energy_j) * (p.time_s - a.time_s) >= (p.energy_j - a.energy_j) * (b.time_s - a.time_s)) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(p);
  }
  return hull;
}

namespace {
constexpr double kMs = 1e3;  // the LP measures time in ms (better scaled than s)

/// Ends a simplex solve when `stop` returns true (polled every iteration; CLP status 5).
class StopHandler : public ClpEventHandler {
 public:
  explicit StopHandler(const std::function<bool()>* stop) : stop_(stop) {}
  int event(Event which) override {
    return which == endOfIteration && stop_ != nullptr && *stop_ && (*stop_)() ? 0 : -1;
  }
  ClpEventHandler* clone() const override { return new StopHandler(*this); }

 private:
  const std::function<bool()>* stop_;
};
}  // namespace

struct HullLowerBound::Lp {
  ClpSimplex model;
  HullLpLayout lay;  // columns, rows and constants (load_hull_lp())
  bool solved_once = false;
  /// Deadline (ms) whose optimal basis the model holds now (+inf: none usable).
  double basis_deadline_ms = std::numeric_limits<double>::infinity();
  /// Optimal bases of the solves so far (deadline ms, CLP status array): a solve restarts from
  /// the nearest one, so a deadline between two solved ones needs few dual simplex iterations.
  std::vector<std::pair<double, std::vector<unsigned char>>> bases;
  EffectiveHulls points;  // op i's effective-energy hull
  double pipe_w = 0;                                 // P_block × R, W
};

EffectiveHulls effective_points(const std::vector<const std::vector<OperatingPoint>*>& op_points, double p_block_w) {
  EffectiveHulls eff;
  std::unordered_map<const std::vector<OperatingPoint>*, std::int32_t> seen;  // list -> its hull
  for (const auto* pts : op_points) {
    auto [it, fresh] = seen.try_emplace(pts, static_cast<std::int32_t>(eff.hulls.size()));
    if (fresh) eff.hulls.push_back(lower_hull_effective(*pts, p_block_w));
    eff.of_op.push_back(it->second);
  }
  return eff;
}

namespace {
/// min_k (ê_k + h t_k) over a lower convex hull (time ascending): the sequence is convex in k,
/// so a binary search finds where it stops falling; the neighbours are checked too, so a
/// rounding-level wobble between nearly collinear vertices cannot hide the minimum.
long double hull_min(const std::vector<OperatingPoint>& hull, long double h) {
  auto at = [&](std::size_t k) { return static_cast<long double>(hull[k].energy_j) + h * hull[k].time_s; };
  if (hull.empty()) return std::numeric_limits<long double>::infinity();
  std::size_t lo = 0, hi = hull.size() - 1;  // the minimum is in [lo, hi]
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (at(mid + 1) < at(mid)) lo = mid + 1; else hi = mid;
  }
  long double best = at(lo);
  if (lo > 0) best = std::min(best, at(lo - 1));
  if (lo + 1 < hull.size()) best = std::min(best, at(lo + 1));
  return best;
}
}  // namespace

LagrangianBound lagrangian_bound(const EffectiveHulls& eff,
                                 const std::vector<std::pair<int, int>>& arcs, const std::vector<double>& flow_w,
                                 double pipe_w, double deadline_s) {
  const std::size_t n = eff.num_ops();
  if (arcs.size() != flow_w.size()) throw std::invalid_argument("lagrangian_bound: one flow per arc expected");
  std::vector<long double> in(n, 0.0L), out(n, 0.0L);
  for (std::size_t r = 0; r < arcs.size(); ++r) {
    const auto [i, j] = arcs[r];
    const long double y = std::max(0.0, flow_w[r]);  // a negative dual is tolerance noise: 0 keeps f >= 0
    out.at(static_cast<std::size_t>(i)) += y;
    if (j >= 0) in.at(static_cast<std::size_t>(j)) += y;
  }
  // Complete to a flow S -> ops -> E: op i carries h_i = max(in, out); the source feeds h_i − in_i,
  // the sink takes h_i − out_i. Σ (h − in) = Σ (h − out) = F, the flow's value.
  long double value = 0, constant = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const long double h = std::max(in[i], out[i]);
    value += h - in[i];
    constant += hull_min(eff[i], h);
  }
  LagrangianBound lb;
  lb.slope_j_per_s = static_cast<double>(static_cast<long double>(pipe_w) - value);
  const long double at = constant + (static_cast<long double>(pipe_w) - value) * deadline_s;
  // Rounding of the sums above (long double, relative ~1e-19 per term): a 1e-12 margin covers it.
  lb.bound_j = static_cast<double>(at - 1e-12L * std::abs(constant) - 1e-12L * std::abs(value * deadline_s));
  return lb;
}

HullLpLayout load_hull_lp(ClpSimplex& model, const Dag& dag,
                          const std::vector<const std::vector<OperatingPoint>*>& op_points, double p_block_w) {
  const int n = dag.num_ops();
  if (static_cast<int>(op_points.size()) != n) {
    throw std::invalid_argument(fmt::format("HullLowerBound: {} point lists for {} ops", op_points.size(), n));
  }
  // Segment form: t_i = t_min_i + Σ_k δ_ik with 0 <= δ_ik <= (length of hull segment k); the
  // slopes increase with k (convex), so the LP fills the segments in order and Σ_k slope_k δ_ik
  // is hull_i(t_i) − hull_i(t_min_i). Only the falling part of the hull (up to its minimum) is
  // kept: a slower point costs at least that minimum and lengthens every path, so clipping
  // keeps the bound valid. Columns: s_i = i, then T, then the δ's of op 0, op 1, ...
  HullLpLayout lay;
  lay.col_T = n;
  std::vector<double> col_lo(n + 1, 0.0), col_hi(n + 1, COIN_DBL_MAX), obj(n + 1, 0.0);
  obj[n] = p_block_w * dag.num_ranks() / kMs;
  lay.seg_first.assign(n + 1, 0);
  lay.t_min_ms.resize(n);
  std::vector<double> fast(n), flat(n);
  for (int i = 0; i < n; ++i) {
    if (op_points[i] == nullptr || op_points[i]->empty()) {
      throw std::invalid_argument(fmt::format("HullLowerBound: op {} has no operating points", i));
    }
    const auto hull = lower_hull_effective(*op_points[i], p_block_w);
    fast[i] = hull.front().time_s;
    lay.t_min_ms[i] = fast[i] * kMs;
    lay.hull_const_j += hull.front().energy_j;
    double t_flat = hull.front().time_s;  // time of the hull's minimum
    lay.seg_first[i] = static_cast<int>(col_lo.size());
    for (std::size_t k = 0; k + 1 < hull.size(); ++k) {
      const double len = (hull[k + 1].time_s - hull[k].time_s) * kMs;
      const double slope = (hull[k + 1].energy_j - hull[k].energy_j) / len;
      if (slope >= 0) break;  // past the hull's minimum
      t_flat = hull[k + 1].time_s;
      col_lo.push_back(0.0);
      col_hi.push_back(len);
      obj.push_back(slope);
    }
    flat[i] = t_flat;
  }
  lay.seg_first[n] = static_cast<int>(col_lo.size());
  lay.fastest_time_s = compute_timeline(dag, fast).time_s;
  lay.flat_time_s = compute_timeline(dag, flat).time_s;
  std::vector<int> rows, cols;
  std::vector<double> vals, row_lo;
  int row = 0;
  // Row "x - s_i - Σ_k δ_ik >= t_min_i" for x = s_j (edge i -> j) or x = T (op without successors).
  auto add_row = [&](int i, int x) {
    rows.push_back(row), cols.push_back(x), vals.push_back(1.0);
    rows.push_back(row), cols.push_back(i), vals.push_back(-1.0);
    for (int c = lay.seg_first[i]; c < lay.seg_first[i + 1]; ++c) rows.push_back(row), cols.push_back(c), vals.push_back(-1.0);
    row_lo.push_back(lay.t_min_ms[i]);
    lay.row_arc.emplace_back(i, x == n ? -1 : x);
    ++row;
  };
  for (int i = 0; i < n; ++i) {
    if (dag.successors(i).empty()) add_row(i, n);
    for (int j : dag.successors(i)) add_row(i, j);
  }
  std::vector<double> row_hi(row, COIN_DBL_MAX);
  const CoinPackedMatrix matrix(false, rows.data(), cols.data(), vals.data(), static_cast<CoinBigIndex>(vals.size()));
  model.setLogLevel(0);
  model.loadProblem(matrix, col_lo.data(), col_hi.data(), obj.data(), row_lo.data(), row_hi.data());
  model.setOptimizationDirection(1.0);
  return lay;
}

HullLowerBound::HullLowerBound(const Dag& dag, const std::vector<const std::vector<OperatingPoint>*>& op_points,
                               double p_block_w)
    : lp_(std::make_unique<Lp>()), n_(dag.num_ops()) {
  lp_->lay = load_hull_lp(lp_->model, dag, op_points, p_block_w);
  flat_time_s_ = lp_->lay.flat_time_s;
  lp_->pipe_w = p_block_w * dag.num_ranks();
  lp_->points = effective_points(op_points, p_block_w);
  // Dantzig's rule (largest infeasibility) instead of CLP's default steepest edge: on these
  // small, well-scaled LPs the cheaper iterations win (certified GPT-3 A100 8 x 12..48 solves
  // 12-23 % faster, measured alternately with the default rule; docs/planner2.md "Session 13").
  ClpDualRowDantzig dantzig;
  lp_->model.setDualRowPivotAlgorithm(dantzig);
}

HullLowerBound::~HullLowerBound() = default;

HullLowerBound::Solution HullLowerBound::solve(double deadline_s, const std::function<bool()>& stop) {
  Solution out;
  ClpSimplex& m = lp_->model;
  const double tau_ms = deadline_s * kMs;
  // Warm start from the optimal basis of the nearest deadline solved so far (any optimal
  // basis stays dual feasible when only T's bounds move), if nearer than the model's own.
  const std::pair<double, std::vector<unsigned char>>* nearest = nullptr;
  for (const auto& b : lp_->bases)
    if (nearest == nullptr || std::abs(b.first - tau_ms) < std::abs(nearest->first - tau_ms)) nearest = &b;
  const bool restore = nearest != nullptr && !(std::abs(lp_->basis_deadline_ms - tau_ms) <= std::abs(nearest->first - tau_ms));
  if (restore) m.copyinStatus(nearest->second.data());
  m.setColumnLower(lp_->lay.col_T, tau_ms);
  m.setColumnUpper(lp_->lay.col_T, tau_ms);
  ++solves_;
  if (stop) {
    const StopHandler handler(&stop);
    m.passInEventHandler(&handler);  // CLP keeps a clone, pointing at `stop`
  }
  // startFinishOptions (ClpSimplex::dual): 1 keeps the work areas and the factorization for the
  // next solve; 2 reuses the factorization and 4 the work areas, valid only when the basis is
  // the optimal one the last solve ended with (not restored, not after a failed solve).
  const bool reuse = lp_->solved_once && !restore && std::isfinite(lp_->basis_deadline_ms);
  m.dual(0, !lp_->solved_once ? 0 : reuse ? 1 | 2 | 4 : 1);
  if (stop) {
    const ClpEventHandler none;
    m.passInEventHandler(&none);  // the clone must not outlive `stop`
  }
  lp_->solved_once = true;
  lp_->basis_deadline_ms = std::numeric_limits<double>::infinity();  // until known optimal
  if (m.status() == 5) {
    out.interrupted = true;
    return out;
  }
  if (m.status() != 0) {
    if (m.status() != 1) {
      // Numerical trouble: one cold retry before giving up.
      m.allSlackBasis();
      m.dual();
    }
    if (m.status() != 0) return out;
  }
  lp_->basis_deadline_ms = tau_ms;
  const unsigned char* status = m.statusArray();
  lp_->bases.emplace_back(tau_ms, std::vector<unsigned char>(status, status + m.numberColumns() + m.numberRows()));
  const double* x = m.primalColumnSolution();
  // The row duals (J/ms) are a flow along the DAG: certify with its Lagrangian bound, which
  // holds for any flow >= 0, so no solver tolerance enters the bound.
  const double* y = m.dualRowSolution();
  std::vector<double> flow_w(lp_->lay.row_arc.size());
  for (std::size_t r = 0; r < flow_w.size(); ++r) flow_w[r] = y[r] * kMs;
  const LagrangianBound lb = lagrangian_bound(lp_->points, lp_->lay.row_arc, flow_w, lp_->pipe_w, deadline_s);
  out.feasible = true;
  out.bound_j = lb.bound_j;
  out.slope_j_per_s = lb.slope_j_per_s;
  out.start_s.resize(n_);
  out.duration_s.resize(n_);
  for (int i = 0; i < n_; ++i) {
    double t = lp_->lay.t_min_ms[i];
    for (int c = lp_->lay.seg_first[i]; c < lp_->lay.seg_first[i + 1]; ++c) t += x[c];
    out.start_s[i] = x[i] / kMs;
    out.duration_s[i] = t / kMs;
  }
  return out;
}

}  // namespace perseus::detail
