// Lean evaluation of candidate plans for the planner (private to the library): iteration
// time and energy of a choice of candidates, with and without slack reclamation.
#pragma once

#include <cstdint>
#include <vector>

#include "critical_path.hpp"
#include "perseus/frontier.hpp"

namespace perseus::detail {

/// Timeline scratch of PlanEvaluator::timeline_and_energy() (one per thread), indexed by
/// topological position (not op id).
struct TimelineScratch {
  std::vector<double> start, end;
};

/// Evaluates plans given as one candidate index per op, allocation-free once warmed up: the
/// same numbers as Frontier::make_plan() (the same operations in the same order), without
/// building a FrequencyPlan. Energy accounting of Perseus §3.1: Σ computation energy +
/// P_block × (ranks × T − Σ computation time).
class PlanEvaluator {
 public:
  /// `dag`, `op_candidates` must outlive the evaluator. p_block_w: P_block, W; reclaim:
  /// evaluate() also reclaims slack (PlannerOptions::reclaim_slack).
  PlanEvaluator(const DagCsr& dag, int num_ranks, const std::vector<const Candidates*>& op_candidates,
                double p_block_w, bool reclaim);
  /// T (longest path, s) and E (J, energies summed in op order) of the plan `choice`, using
  /// `tl` (resized as needed; tl.start holds the start times by topological position
  /// afterwards). Thread-safe for distinct `tl`.
  double timeline_and_energy(const std::vector<std::uint16_t>& choice, double& energy_j, TimelineScratch& tl) const;
  /// As above, with the evaluator's own scratch.
  double timeline_and_energy(const std::vector<std::uint16_t>& choice, double& energy_j) {
    return timeline_and_energy(choice, energy_j, ev_);
  }
  /// Energy (J) of `choice` before reclamation, and time (s) and energy (J) after it (the same
  /// as before when reclamation is off): Frontier::make_plan(choice, false / reclaim, 0).
  void evaluate(const std::vector<std::uint16_t>& choice, double& energy_before_reclaim_j, double& time_s,
                double& energy_j);

 private:
  // The passes run over topological positions (DagCsr::pos_pred).
  const DagCsr& dag_;
  std::vector<const OperatingPoint*> points_;    ///< candidate points of each op (op order)
  std::vector<const OperatingPoint*> points_at_; ///< the same, by topological position
  std::vector<std::uint16_t> num_points_at_;     ///< their number, by topological position
  int num_ranks_ = 0;
  double p_block_w_ = 0;
  bool reclaim_ = true;
  std::vector<std::uint16_t> ev_choice_;
  TimelineScratch ev_;
  std::vector<double> ev_ls_;
};

}  // namespace perseus::detail
