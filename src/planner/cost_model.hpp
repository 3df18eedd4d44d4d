// The planner's cost model (private to the library): per (stage, kind) candidate clocks,
// quantized durations and the convex piecewise-linear cost of each duration; per op, which
// table applies. Used by the graph-cut walk (critical_path, cut solvers) and the LP stage.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"
#include "perseus/profile.hpp"

namespace perseus::detail {

/// Planning table of one (stage, kind): the candidate clocks, the graph-cut range of
/// quantized durations [q_min, q_max] (units of u) and the convex cost of each duration.
struct CostModel {
  Candidates cand;                     ///< Candidate clocks, time ascending, with their units.
  std::int64_t q_min = 0, q_max = 0;   ///< Fastest and slowest graph-cut duration, units.
  std::vector<double> cost;            ///< Convex PWL effective energy at d = q_min..q_max, J.
  std::vector<std::uint16_t> choice;   ///< Candidate index (into cand) used at duration d.

  /// Effective energy (J) at duration d (q_min <= d <= q_max).
  double cost_at(std::int64_t d) const { return cost[d - q_min]; }
  /// Cost of shortening an op of duration d by one unit (J; >= 0 on the convex decreasing
  /// hull); only meaningful when d > q_min.
  double speed_up_cost(std::int64_t d) const { return cost[d - 1 - q_min] - cost[d - q_min]; }
  /// Saving of lengthening an op of duration d by one unit (J); 0 at q_max.
  double slow_down_saving(std::int64_t d) const {
    return d < q_max ? cost[d - q_min] - cost[d + 1 - q_min] : 0.0;
  }
  /// Candidate index used at duration d.
  std::uint16_t choice_at(std::int64_t d) const { return choice[d - q_min]; }
};

/// Builds the table of one (stage, kind) from its profile points `raw`. Candidates: the
/// (time, energy) Pareto clocks (pareto_points(raw)); with `extended` (PlannerMode::kCertified)
/// the larger (time, effective energy) Pareto set pareto_points(raw, p_block_w), of which the
/// graph cut still uses only the (time, energy) Pareto clocks. Durations: ceil(time / unit_s)
/// units (>= 1). Cost: the lower convex hull of (units, energy − p_block_w × time) over the
/// fastest clock of each duration, interpolated per unit. Source: Perseus §4.2 (convex
/// piecewise-linear cost per computation). With `all_clocks` (and `extended`: the hull walk of
/// BoundMethod::kHullWalk) the walk uses every candidate, i.e. the op's whole (time, effective
/// energy) hull down to its minimum, not only the paper's clocks. Throws InputError when there
/// are more than 65535 candidates or more than 1e6 units between the fastest and slowest
/// graph-cut clock.
CostModel build_cost_model(const std::vector<OperatingPoint>& raw, double unit_s, double p_block_w, bool extended,
                           bool all_clocks = false);

/// Most time units between one computation's fastest and slowest clock (build_cost_model()).
inline constexpr std::int64_t kMaxUnitsPerComputation = 1'000'000;

/// The finest time unit, s, a power of ten as --unit-time takes it, that keeps a computation
/// whose clocks span `span_s` seconds within kMaxUnitsPerComputation units; 0 for span_s <= 0.
double finest_unit_time_s(double span_s);

/// The cost models of a DAG: one per (stage, kind) the DAG uses, and per op the one it uses.
class CostModels {
 public:
  /// Builds one model per (stage, kind) of `dag` from `profile` (build_cost_model()). Throws
  /// InputError naming the profile when it lacks a (stage, kind) the DAG uses, or as
  /// build_cost_model() does.
  CostModels(const Dag& dag, const Profile& profile, double unit_s, double p_block_w, bool extended,
             bool all_clocks = false);
  CostModels(const CostModels&) = delete;  // op_model_ points into models_
  CostModels& operator=(const CostModels&) = delete;
  /// Model of op v.
  const CostModel& of_op(int v) const { return *op_model_[v]; }
  /// Profile points of op v's (stage, kind), as given.
  const std::vector<const std::vector<OperatingPoint>*>& op_points() const { return op_raw_; }
  /// The candidate tables, one per model (shared with the Frontier, which replays plans).
  const std::shared_ptr<std::vector<Candidates>>& candidates() const { return candidates_; }
  /// Per op, its candidate table (into candidates()).
  const std::vector<const Candidates*>& op_candidates() const { return op_candidates_; }

 private:
  std::vector<CostModel> models_;
  std::vector<const CostModel*> op_model_;
  std::vector<const std::vector<OperatingPoint>*> op_raw_;
  std::shared_ptr<std::vector<Candidates>> candidates_;
  std::vector<const Candidates*> op_candidates_;
};

}  // namespace perseus::detail
