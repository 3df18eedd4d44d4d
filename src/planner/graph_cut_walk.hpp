// The graph-cut walk (private to the library): Phillips–Dessouky steps from the slowest plan
// to T_min, one time unit faster per step, each step the cheapest cut of the critical network.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "cost_model.hpp"
#include "critical_path.hpp"
#include "cut_solver.hpp"
#include "perseus/frontier.hpp"

namespace perseus::detail {

/// State of the walk: every op's quantized duration and candidate clock. Starts with every
/// op at its slowest graph-cut duration (CostModel::q_max). Each step() asks the cut solver
/// (PlannerOptions::min_cut_engine) for the min cut of the critical network, shortens the
/// ops it crosses forward and lengthens those it crosses backward by one unit. Per step
/// nothing is allocated once warmed up. Source: Phillips & Dessouky (1977), Perseus §4.2.
class GraphCutWalk {
 public:
  /// `dag` and `costs` must outlive the walk.
  GraphCutWalk(const DagCsr& dag, const CostModels& costs, MinCutEngine engine);
  GraphCutWalk(const GraphCutWalk&) = delete;
  GraphCutWalk& operator=(const GraphCutWalk&) = delete;

  /// Current candidate index per op.
  const std::vector<std::uint16_t>& choice() const { return choice_; }
  /// Current iteration time (longest path of the quantized durations), units.
  std::int64_t iteration_units() const { return cpm_.iteration_units(); }
  const CriticalPath& critical_path() const { return cpm_; }
  /// Iteration time with every op at its fastest graph-cut duration (T_min), units.
  std::int64_t fastest_units() const { return fastest_units_; }
  /// Builds the min-cut network now (step() does at its first call otherwise), calling
  /// `checkpoint` between the steps of the build (make_cut_solver(); it may throw to abandon it).
  void prepare(const std::function<void()>& checkpoint) const {
    if (!solver_) solver_ = make_cut_solver(engine_, cpm_, costs_, checkpoint);
  }
  /// One step: true when the iteration got (at least) one unit faster, false when no finite
  /// cut exists (T_min). Throws std::logic_error if a step failed to shorten the iteration.
  bool step();
  /// After step(): moves the ops whose duration changed to the candidate of their new
  /// duration; appends (op, new candidate) for each that changed, in op order, to `changes`.
  /// Returns true when any changed.
  bool update_choice(std::vector<std::pair<std::int32_t, std::uint16_t>>& changes);
  /// The current max-flow as a flow along the DAG (CutSolver::flow_along_dag()), J per unit.
  bool flow_along_dag(std::vector<std::pair<int, int>>& arcs, std::vector<double>& flow) const {
    return solver().flow_along_dag(arcs, flow);
  }
  /// Max-flow solves so far (a step reuses the previous cut when the network is unchanged).
  std::int64_t num_max_flows() const { return num_max_flows_; }
  /// Work of the warm max-flow engine (all 0 with the cold engines).
  Frontier::MaxFlowWork max_flow_work() const { return solver_ ? solver_->work() : Frontier::MaxFlowWork{}; }

 private:
  /// Shortens `faster` and lengthens `slower` by one unit; false if `faster` is empty.
  bool apply_cut(const std::vector<int>& faster, const std::vector<int>& slower);
  /// The min-cut solver, built at its first use: a walk stopped before its first step
  /// (planning_budget_s 0) never pays for the network of a large DAG.
  CutSolver& solver() const;
  const CostModels& costs_;
  CriticalPath cpm_;
  MinCutEngine engine_;
  mutable std::unique_ptr<CutSolver> solver_;
  std::vector<std::uint16_t> choice_;
  std::int64_t fastest_units_ = 0;
  std::int64_t num_max_flows_ = 0;
  const std::vector<int>* faster_ = nullptr;  // the last cut's (owned by solver_)
  std::vector<int> lengthened_, touched_;
};

}  // namespace perseus::detail
