// The planner's certified lower bound: the LP relaxation of the discrete frequency-planning
// problem (private to the library). Solved with COIN-OR CLP, warm-started across deadlines.
#pragma once

#include <functional>
#include <memory>
#include <cstdint>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/profile.hpp"

class ClpSimplex;

namespace perseus::detail {

/// Lower convex hull of points (time_s, effective energy energy_j − p_block_w × time_s),
/// vertices time ascending. Every point lies on or above the piecewise-linear function
/// through the vertices on [vertices.front().time_s, vertices.back().time_s].
/// The returned OperatingPoint::energy_j holds the *effective* energy (J); freq_mhz is kept.
std::vector<OperatingPoint> lower_hull_effective(const std::vector<OperatingPoint>& points, double p_block_w);

/// Per op, the lower convex hull of its profile points with effective energy (time s,
/// E − p_block_w × time J; lower_hull_effective()): the only points that can minimise
/// ê + h × t for some h, i.e. the input lagrangian_bound() takes. Ops that share a point list
/// (same stage and kind) share one hull, so a bound over thousands of ops stays in cache.
struct EffectiveHulls {
  std::vector<std::vector<OperatingPoint>> hulls;  ///< distinct hulls, vertices time ascending
  std::vector<std::int32_t> of_op;                 ///< op i's hull: hulls[of_op[i]]
  std::size_t num_ops() const { return of_op.size(); }
  const std::vector<OperatingPoint>& operator[](std::size_t i) const { return hulls[static_cast<std::size_t>(of_op[i])]; }
};

/// EffectiveHulls of op_points (one list per op; none may be null).
EffectiveHulls effective_points(const std::vector<const std::vector<OperatingPoint>*>& op_points, double p_block_w);

/// A certified lower bound from any flow along the DAG (Lagrangian relaxation of the
/// longest-path constraints; the dual of the time–cost LP, Fulkerson 1961).
struct LagrangianBound {
  double bound_j = 0;         ///< bound on the energy at the deadline it was evaluated at, J
  double slope_j_per_s = 0;   ///< bound_j + slope (τ' − τ) bounds the energy at every deadline τ', J/s
};

/// For nonnegative flows y_r (W) on arcs[r] = (op i, successor j) or (op i, -1: to the sink),
/// completed with source/sink arcs so each op i carries h_i = max(inflow, outflow) and the flow
/// has value F: every plan meeting deadline τ (s) has energy at τ (one pipeline, GPUs blocking
/// at P_block until τ) of at least
///   Σ_i min_k (ê_ik + h_i t_ik) − F τ + pipe_w τ
/// over op i's points k (eff[i]: time s, effective energy ê = E − P_block t, J; a lower
/// convex hull, time ascending: the minimum is found by binary search, O(log k) per op) — summing
/// y × (s_j − s_i − t_i) >= 0 over the arcs. Holds for any y >= 0 (negative entries count as 0),
/// so it certifies an LP solver's approximate duals without trusting its tolerances; tight when
/// y is an optimal dual. pipe_w = P_block × R (W). Throws std::invalid_argument on a size mismatch.
LagrangianBound lagrangian_bound(const EffectiveHulls& eff,
                                 const std::vector<std::pair<int, int>>& arcs, const std::vector<double>& flow_w,
                                 double pipe_w, double deadline_s);

/// Where load_hull_lp() put things, and the constants of its objective. Times in ms (the LP's
/// unit: better scaled than s), energies in J.
struct HullLpLayout {
  int col_T = 0;                             ///< column of T (columns s_i = i come first)
  std::vector<int> seg_first;                ///< first δ column of op i (n + 1 entries)
  std::vector<double> t_min_ms;              ///< op i's fastest time (its hull's first vertex), ms
  std::vector<std::pair<int, int>> row_arc;  ///< row r: (op i, successor j, or -1 for T)
  double hull_const_j = 0;                   ///< Σ_i hull_i(t_min_i): the objective's constant, J
  double fastest_time_s = 0;                 ///< iteration time with every op at t_min_i, s
  double flat_time_s = 0;                    ///< iteration time with every op at its hull minimum, s
};

/// Loads HullLowerBound's LP (see below) into `model`: columns s_i (start of op i, ms), T (ms,
/// cost P_block R / 1000 J per ms, unbounded: the caller sets its bounds), then op i's hull
/// segments δ_ik (0 <= δ_ik <= segment length, cost = the segment's slope, J/ms); one row
/// "x − s_i − Σ_k δ_ik >= t_min_i" per DAG edge i -> x and per op without successors (x = T).
/// Shared by HullLowerBound and bench/lp_bound_exactness.cpp (its parametric walk). Throws
/// std::invalid_argument on a size mismatch or an op without points.
HullLpLayout load_hull_lp(ClpSimplex& model, const Dag& dag,
                          const std::vector<const std::vector<OperatingPoint>*>& op_points, double p_block_w);

/// LB(τ): a lower bound on the energy at deadline τ (one pipeline, J) of any plan whose
/// iteration time T is at most τ, the GPUs blocking at P_block from T to τ, i.e. on
/// E(plan) + P_block × R × (τ − T) = Σ_i eff_i + P_block × R × τ; relaxed to a linear program:
///   minimise   Σ_i hull_i(t_i) + P_block × R × τ
///   subject to s_j >= s_i + t_i  (every DAG edge i -> j),  τ >= s_i + t_i  (every op),
///              t_min_i <= t_i <= t_flat_i,  s_i >= 0,
/// hull_i the lower convex hull of op i's (time, effective energy) points up to its minimum at
/// t_flat_i. Every discrete plan (one profiled clock per op, energy = Σ E_i + P_block × Σ_ranks
/// idle) is a feasible point with no smaller objective (Σ E_i − P_block Σ t_i = Σ eff_i >=
/// Σ hull_i), so for a plan with T = τ the bound is on its own energy. Source: Perseus §3.1
/// (energy accounting); the convex time–cost relaxation of Fulkerson (1961) / Kelley (1961).
/// LB(τ) − P_block R τ is convex and non-increasing in τ, LB convex. Each solve's bound is the
/// lagrangian_bound() of the LP's row duals (the LP optimum up to solver tolerance, but certified
/// whatever the tolerance), and its line bound_j + slope (τ' − τ) bounds LB at every τ'.
class HullLowerBound {
 public:
  /// op_points[i]: the profile points of op i (any order; > 0 points). Throws
  /// std::invalid_argument on a size mismatch or an empty list.
  HullLowerBound(const Dag& dag, const std::vector<const std::vector<OperatingPoint>*>& op_points, double p_block_w);
  ~HullLowerBound();
  HullLowerBound(const HullLowerBound&) = delete;
  HullLowerBound& operator=(const HullLowerBound&) = delete;

  /// Result of one solve at deadline τ.
  struct Solution {
    bool feasible = false;     ///< false: τ is below the fastest possible iteration time (or interrupted).
    bool interrupted = false;  ///< true: `stop` ended the solve.
    double bound_j = 0;        ///< LB(τ), J: certified (lagrangian_bound() of the LP's duals).
    double slope_j_per_s = 0;  ///< Slope of the certified line through bound_j at τ, J/s.
    std::vector<double> start_s, duration_s;  ///< LP optimum per op, s.
  };
  /// Solves at deadline τ (s), warm-started from the optimal basis of the nearest deadline solved
  /// so far (the dual simplex: only T's bounds differ). `stop` (optional) is
  /// polled at every simplex iteration; when it returns true the solve ends at once with
  /// feasible = false and interrupted = true (the LP's warm start is then unusable: solve no more).
  Solution solve(double deadline_s, const std::function<bool()>& stop = {});
  /// Iteration time with every op at its hull minimum (t_flat_i), s: beyond it LB − P_block R τ
  /// is flat, so no slower plan lowers the energy at any deadline.
  double flat_time_s() const { return flat_time_s_; }
  /// Number of solves so far.
  int num_solves() const { return solves_; }

 private:
  struct Lp;
  std::unique_ptr<Lp> lp_;
  int n_ = 0;
  int solves_ = 0;
  double flat_time_s_ = 0;
};

}  // namespace perseus::detail
