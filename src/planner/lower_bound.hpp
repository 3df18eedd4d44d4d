// The planner's certified lower bound: the LP relaxation of the discrete frequency-planning
// problem (private to the library). Solved with COIN-OR CLP, warm-started across deadlines.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/profile.hpp"

namespace perseus::detail {

/// Lower convex hull of points (time_s, effective energy energy_j − p_block_w × time_s),
/// vertices time ascending. Every point lies on or above the piecewise-linear function
/// through the vertices on [vertices.front().time_s, vertices.back().time_s].
/// The returned OperatingPoint::energy_j holds the *effective* energy (J); freq_mhz is kept.
std::vector<OperatingPoint> lower_hull_effective(const std::vector<OperatingPoint>& points, double p_block_w);

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
/// LB(τ) − P_block R τ is convex and non-increasing in τ, LB convex; each solve also returns a
/// subgradient (the reduced cost of τ), so lines LB(τ_k) + g_k (τ − τ_k) bound LB everywhere.
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
    double bound_j = 0;        ///< LB(τ), J, already lowered by the solver-tolerance margin.
    double slope_j_per_s = 0;  ///< A subgradient of LB at τ (<= 0), J/s.
    std::vector<double> start_s, duration_s;  ///< LP optimum per op, s.
  };
  /// Solves at deadline τ (s), warm-started from the previous solve. `stop` (optional) is
  /// polled at every simplex iteration; when it returns true the solve ends at once with
  /// feasible = false and interrupted = true (the LP's warm start is then unusable: solve no more).
  Solution solve(double deadline_s, const std::function<bool()>& stop = {});
  /// Iteration time with every op at its hull minimum (t_flat_i), s: beyond it LB − P_block R τ
  /// is flat, so no slower plan lowers the energy at any deadline.
  double flat_time_s() const { return flat_time_s_; }
  /// Number of solves so far.
  int num_solves() const { return solves_; }

  /// Relative margin subtracted from the LP optimum to cover solver tolerances.
  static constexpr double kMargin = 2e-7;

 private:
  struct Lp;
  std::unique_ptr<Lp> lp_;
  int n_ = 0;
  int solves_ = 0;
  double flat_time_s_ = 0;
};

}  // namespace perseus::detail
