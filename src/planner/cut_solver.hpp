// The min-cut step of the graph-cut walk behind one facade (private to the library): "the
// minimal minimum cut of this step's critical network" with a status, whichever max-flow
// engine (PlannerOptions::min_cut_engine) computes it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cost_model.hpp"
#include "critical_network.hpp"
#include "critical_path.hpp"
#include "perseus/frontier.hpp"

namespace perseus::detail {

/// Outcome of CutSolver::find_cut().
struct CutResult {
  enum class Status : std::uint8_t {
    kSolved,      ///< A max-flow was solved: `faster` / `slower` hold its minimal min cut.
    kReused,      ///< The critical network is the one of the previous cut: same cut, no max-flow.
    kInfinite,    ///< Every cut crosses an infinite arc: no op set can make the iteration faster (T_min).
  };
  Status status = Status::kInfinite;
  /// Critical ops whose arc start -> end crosses the cut forward (to shorten by one unit)
  /// and backward (to lengthen); empty when kInfinite. Valid until the next find_cut().
  const std::vector<int>* faster = nullptr;
  const std::vector<int>* slower = nullptr;
};

/// Finds the minimal (source side as small as possible) minimum s-t cut of the current
/// critical network (critical_network.hpp), built from `cpm` (after CriticalPath::compute())
/// and `costs`. Every implementation gives the same cut: the minimal min cut is unique, and
/// capacities <= the tolerance 1e-9 × (1 + Σ finite capacities) count as 0.
/// Source: Phillips & Dessouky (1977); Ford–Fulkerson max-flow/min-cut theorem.
class CutSolver {
 public:
  virtual ~CutSolver() = default;
  /// The cut of the current critical network.
  virtual CutResult find_cut() = 0;
  /// The walk changed durations after the last cut in a way the network check cannot see
  /// (it undid a lengthening): the next find_cut() solves a max-flow whatever it finds.
  virtual void forget_cut() = 0;
  /// Work of the warm engine so far (all 0 for the cold ones).
  virtual Frontier::MaxFlowWork work() const { return {}; }
  /// The current maximum flow, restricted to the DAG: its flow on each DAG edge (op i,
  /// successor j) and on each op's arc to the sink (op i, -1), in J per time unit, arcs
  /// without flow left out: a flow along the DAG, so lagrangian_bound() certifies it.
  /// Returns false (outputs empty) when the engine does not keep a genuine flow (the cold
  /// engines; the dynamic engine, whose flow is reparametrized).
  virtual bool flow_along_dag(std::vector<std::pair<int, int>>& arcs, std::vector<double>& flow) const {
    arcs.clear();
    flow.clear();
    return false;
  }
};

/// The solver of `engine`: kWarm keeps one network over all ops and warm-starts each
/// max-flow from the previous one (max_flow_warm.hpp); kDynamic keeps the same network and
/// Boykov–Kolmogorov's search trees between steps (max_flow_dynamic.hpp); kDinic, kLemon and kBoykovKolmogorov
/// build each step's critical network afresh and solve it with MinCut (min_cut.hpp).
/// `cpm` and `costs` must outlive the solver. `checkpoint` (optional; the kWarm and kDynamic
/// engines, whose one network over all ops takes seconds to build on a million computations)
/// is called between the steps of the build and may throw to abandon it.
std::unique_ptr<CutSolver> make_cut_solver(MinCutEngine engine, const CriticalPath& cpm, const CostModels& costs,
                                           const std::function<void()>& checkpoint);

/// The kWarm solver (warm_cut_solver.cpp).
std::unique_ptr<CutSolver> make_warm_cut_solver(const CriticalPath& cpm, const CostModels& costs,
                                                const std::function<void()>& checkpoint = {});
/// The kDynamic solver (warm_cut_solver.cpp): no flow_along_dag() (its flow is reparametrized).
std::unique_ptr<CutSolver> make_dynamic_cut_solver(const CriticalPath& cpm, const CostModels& costs,
                                                   const std::function<void()>& checkpoint = {});
/// A cold solver (cold_cut_solver.cpp): engine kDinic, kLemon or kBoykovKolmogorov.
std::unique_ptr<CutSolver> make_cold_cut_solver(MinCutEngine engine, const CriticalPath& cpm, const CostModels& costs);

inline std::unique_ptr<CutSolver> make_cut_solver(MinCutEngine engine, const CriticalPath& cpm,
                                                  const CostModels& costs, const std::function<void()>& checkpoint = {}) {
  if (engine == MinCutEngine::kWarm) return make_warm_cut_solver(cpm, costs, checkpoint);
  if (engine == MinCutEngine::kDynamic) return make_dynamic_cut_solver(cpm, costs, checkpoint);
  return make_cold_cut_solver(engine, cpm, costs);
}

}  // namespace perseus::detail
