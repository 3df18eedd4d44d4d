// Lean plan evaluation for the planner (see plan_evaluator.hpp).
#include "plan_evaluator.hpp"

#include <algorithm>

namespace perseus::detail {

PlanEvaluator::PlanEvaluator(const DagCsr& dag, int num_ranks, const std::vector<const Candidates*>& op_candidates,
                             double p_block_w, bool reclaim)
    : dag_(dag), num_ranks_(num_ranks), op_candidates_(op_candidates), p_block_w_(p_block_w), reclaim_(reclaim) {
  const int n = dag.num_ops;
  ev_choice_.resize(n);
  ev_.time.resize(n);
  ev_.start.resize(n);
  ev_.end.resize(n);
  ev_ls_.resize(n);
}

double PlanEvaluator::timeline_and_energy(const std::vector<std::uint16_t>& choice, double& energy_j,
                                          TimelineScratch& tl) const {
  const int n = dag_.num_ops;
  tl.time.resize(n);
  tl.start.resize(n);
  tl.end.resize(n);
  double compute = 0, busy = 0;
  for (int i = 0; i < n; ++i) {
    const OperatingPoint& p = op_candidates_[i]->points[choice[i]];
    tl.time[i] = p.time_s;
    compute += p.energy_j;
    busy += p.time_s;
  }
  double T = 0;
  double *const ev_start = tl.start.data(), *const ev_end = tl.end.data();
  const double* const ev_time = tl.time.data();
  const int *const pred_first = dag_.pred_first.data(), *const pred = dag_.pred.data();
  for (int v : dag_.topo) {
    double start = 0.0;
    for (int i = pred_first[v]; i < pred_first[v + 1]; ++i) start = std::max(start, ev_end[pred[i]]);
    ev_start[v] = start;
    ev_end[v] = start + ev_time[v];
    T = std::max(T, ev_end[v]);
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
  for (auto it = dag_.topo.rbegin(); it != dag_.topo.rend(); ++it) {
    const int v = *it;
    double lf = T0;
    for (int i = dag_.succ_first[v]; i < dag_.succ_first[v + 1]; ++i) lf = std::min(lf, ev_ls_[dag_.succ[i]]);
    const double window = lf - ev_.start[v];
    const auto& pts = op_candidates_[v]->points;
    std::size_t c = choice[v];
    while (c + 1 < pts.size() && pts[c + 1].time_s <= window * (1 + 1e-12)) ++c;
    ev_choice_[v] = static_cast<std::uint16_t>(c);
    ev_ls_[v] = lf - pts[c].time_s;
  }
  time_s = timeline_and_energy(ev_choice_, energy_j);
}

}  // namespace perseus::detail
