// Lean plan evaluation for the planner (see plan_evaluator.hpp).
#include "plan_evaluator.hpp"

#include <algorithm>

namespace perseus::detail {

PlanEvaluator::PlanEvaluator(const DagCsr& dag, int num_ranks, const std::vector<const Candidates*>& op_candidates,
                             double p_block_w, bool reclaim)
    : dag_(dag), num_ranks_(num_ranks), p_block_w_(p_block_w), reclaim_(reclaim) {
  const int n = dag.num_ops;
  points_.resize(n);
  points_at_.resize(n);
  num_points_at_.resize(n);
  for (int v = 0; v < n; ++v) points_[v] = op_candidates[v]->points.data();
  for (int k = 0; k < n; ++k) {
    points_at_[k] = op_candidates[dag.topo[k]]->points.data();
    num_points_at_[k] = static_cast<std::uint16_t>(op_candidates[dag.topo[k]]->points.size());
  }
  ev_choice_.resize(n);
  ev_.start.resize(n);
  ev_.end.resize(n);
  ev_ls_.resize(n);
}

double PlanEvaluator::timeline_and_energy(const std::vector<std::uint16_t>& choice, double& energy_j,
                                          TimelineScratch& tl) const {
  const int n = dag_.num_ops;
  tl.start.resize(n);
  tl.end.resize(n);
  // Energies and busy time summed in op order, as Frontier::make_plan() does.
  double compute = 0, busy = 0;
  for (int v = 0; v < n; ++v) {
    const OperatingPoint& p = points_[v][choice[v]];
    compute += p.energy_j;
    busy += p.time_s;
  }
  double T = 0;
  double *const start_at = tl.start.data(), *const end_at = tl.end.data();
  const int *const pred_first = dag_.pos_pred_first.data(), *const pred = dag_.pos_pred.data(),
            *const op_at = dag_.topo.data();
  const OperatingPoint* const* const points_at = points_at_.data();
  for (int k = 0; k < n; ++k) {
    double start = 0.0;
    for (int i = pred_first[k]; i < pred_first[k + 1]; ++i) start = std::max(start, end_at[pred[i]]);
    start_at[k] = start;
    end_at[k] = start + points_at[k][choice[op_at[k]]].time_s;
    T = std::max(T, end_at[k]);
  }
  energy_j = compute + p_block_w_ * (num_ranks_ * T - busy);
  return T;
}

void PlanEvaluator::evaluate(const std::vector<std::uint16_t>& choice, double& energy_before_reclaim_j, double& time_s,
                             double& energy_j) {
  const double T0 = timeline_and_energy(choice, energy_before_reclaim_j);
  time_s = T0;
  energy_j = energy_before_reclaim_j;
  if (!reclaim_) return;
  // reclaim_slack() on the timeline above (ev_.start), into ev_choice_.
  const int *const succ_first = dag_.pos_succ_first.data(), *const succ = dag_.pos_succ.data();
  for (int k = dag_.num_ops - 1; k >= 0; --k) {
    double lf = T0;
    for (int i = succ_first[k]; i < succ_first[k + 1]; ++i) lf = std::min(lf, ev_ls_[succ[i]]);
    const double window = lf - ev_.start[k];
    const OperatingPoint* const pts = points_at_[k];
    const int v = dag_.topo[k];
    std::size_t c = choice[v];
    while (c + 1 < num_points_at_[k] && pts[c + 1].time_s <= window * (1 + 1e-12)) ++c;
    ev_choice_[v] = static_cast<std::uint16_t>(c);
    ev_ls_[k] = lf - pts[c].time_s;
  }
  time_s = timeline_and_energy(ev_choice_, energy_j);
}

}  // namespace perseus::detail
