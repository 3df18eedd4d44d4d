// The cut solvers that keep one network over all ops whose capacities change between steps:
// MinCutEngine::kWarm (the max-flow warm-started from the previous step's flow,
// max_flow_warm.hpp) and kDynamic (default; Boykov–Kolmogorov with its search trees kept
// between steps, max_flow_dynamic.hpp). Both share the capacity sweep below.
#include <cmath>
#include <limits>
#include <type_traits>

#include "cut_solver.hpp"
#include "max_flow_dynamic.hpp"
#include "max_flow_warm.hpp"

namespace perseus::detail {

namespace {

/// Augmenting-path threshold of the warm engine relative to the cut tolerance: the warm
/// flow carries rounding-level leftovers from earlier steps, so it must augment below the
/// cut tolerance to reach the same minimal cut as a cold solve (measured: 1 diverges on a
/// 16 x 64 synthetic case in tie steps; 1e-6 matches the cold engines everywhere tested).
constexpr double kWarmAugmentFactor = 1e-6;

/// The full critical network (critical_network.hpp) as one Flow (WarmMaxFlow or
/// DynamicMaxFlow): every op's arcs and every DAG edge, capacity 0 off the critical ops and
/// edges. A step writes only the capacities that changed; an op that stays critical with the
/// same duration and signature keeps its capacities.
template <class Flow>
class WarmCutSolver final : public CutSolver {
 public:
  WarmCutSolver(const CriticalPath& cpm, const CostModels& costs, const std::function<void()>& checkpoint)
      : cpm_(cpm), costs_(costs), network_(cpm.dag()) {
    const int n = cpm.dag().num_ops;
    if (checkpoint) checkpoint();
    flow_.init(network_.num_nodes(), network_.arcs(), network_.source(), network_.sink(), checkpoint);
    was_critical_.assign(n, 0);
    cap_sig_.assign(n, 0);
    cap_dur_.assign(n, 0);
    ops_.resize(n);
  }
  CutResult find_cut() override;
  bool flow_along_dag(std::vector<std::pair<int, int>>& arcs, std::vector<double>& flow) const override;
  void forget_cut() override { have_prev_cut_ = false; }
  Frontier::MaxFlowWork work() const override {
    const auto& c = flow_.counters();
    Frontier::MaxFlowWork w;
    w.augmenting_paths = c.augmenting_paths;
    w.augmenting_arcs = c.augmenting_arcs;
    if constexpr (std::is_same_v<Flow, WarmMaxFlow>) {
      w.dinic_phases = c.dinic_phases;
      w.bfs_nodes = c.bfs_nodes;
      w.cancelled_paths = c.cancelled_paths;
    } else {
      w.grown_nodes = c.grown_nodes;
      w.orphans = c.orphans;
      w.cut_searches = c.cut_searches;
    }
    return w;
  }

 private:
  const CriticalPath& cpm_;
  const CostModels& costs_;
  const CriticalNetwork network_;
  Flow flow_;
  std::vector<CriticalOp> ops_;     // per op: its costs, when critical
  std::vector<int> critical_;       // critical ops, op order
  std::vector<char> was_critical_;  // per op: critical in the previous network
  // Per op: the signature (CriticalPath::signature()) and duration its capacities were set for.
  std::vector<std::uint32_t> cap_sig_;
  std::vector<std::int64_t> cap_dur_;
  double prev_eps_ = 0;
  bool have_prev_cut_ = false;
  std::vector<int> faster_, slower_;
};

template <class Flow>
CutResult WarmCutSolver<Flow>::find_cut() {
  const CriticalPath& cpm = cpm_;
  const DagCsr& dag = cpm.dag();
  const int n = dag.num_ops;
  const double inf = std::numeric_limits<double>::infinity();
  // Pass 1: critical ops, their speed-up cost ub and slow-down saving lb, and the tolerance
  // as in the cold solver (Σ ub in op order, then each lb twice in node order).
  double finite_total = 0;
  critical_.clear();
  for (int v = 0; v < n; ++v) {
    if (!cpm.is_critical(v)) continue;
    CriticalOp& op = ops_[v];
    op.set_costs(costs_.of_op(v), cpm.duration(v));  // set_position() below, where capacities change
    if (op.can_speed_up) finite_total += op.speed_up_cost;
    critical_.push_back(v);
  }
  for (int v : critical_) {
    const double lb = ops_[v].slow_down_saving;
    if (lb != 0) finite_total += std::abs(lb), finite_total += std::abs(lb);
  }
  const double eps = 1e-9 * (1 + finite_total);
  // Pass 2: capacities of the full network. A capacity <= eps is 0, as in the cold
  // solver (whose engines never push flow through such an arc), so the warm flow can augment
  // down to rounding level without giving tiny arcs a meaning the cold engines do not.
  bool changed = false;
  auto set = [&](int k, double c) {
    if (c <= eps) c = 0.0;
    if (flow_.capacity(k) != c) {
      flow_.set_capacity(k, c);
      changed = true;
    }
  };
  // An op that stays critical with the same duration and signature keeps its capacities,
  // unless the new tolerance zeroes (or un-zeroes) one of them.
  const double band_lo = std::min(eps, prev_eps_), band_hi = std::max(eps, prev_eps_);
  auto flips = [&](double c) { return c > band_lo && c <= band_hi; };
  for (int v = 0; v < n; ++v) {
    const bool crit = cpm.is_critical(v);
    const bool was = was_critical_[v] != 0;
    was_critical_[v] = crit;
    const int first_edge = network_.edge_arcs_begin(v), end_edge = network_.edge_arcs_end(v);
    if (!crit) {
      if (!was) continue;  // all its arcs are already 0
      for (int r = 0; r < kArcRolesPerOp; ++r) set(CriticalNetwork::arc_index(v, static_cast<ArcRole>(r)), 0.0);
      for (int e = first_edge; e < end_edge; ++e) set(e, 0.0);
      continue;
    }
    CriticalOp& op = ops_[v];
    const double ub = op.speed_up_cost, lb = op.slow_down_saving;
    const std::uint32_t sig = cpm.signature(v);
    if (was && sig == cap_sig_[v] && cpm.duration(v) == cap_dur_[v] && (sig & CriticalPath::kSignatureUnknown) == 0 &&
        !(eps != prev_eps_ && ((op.can_speed_up && flips(ub - lb)) || flips(std::abs(lb))))) {
      continue;
    }
    cap_sig_[v] = sig;
    cap_dur_[v] = cpm.duration(v);
    op.set_position(cpm, v);
    for (int r = 0; r < kArcRolesPerOp; ++r) {
      const auto role = static_cast<ArcRole>(r);
      set(CriticalNetwork::arc_index(v, role), op.capacity(role, inf));
    }
    int e = first_edge;
    for (int i = dag.succ_first[v]; i < dag.succ_first[v + 1]; ++i) {
      set(e++, cpm.edge_is_critical(v, dag.succ[i]) ? inf : 0.0);
    }
  }
  prev_eps_ = eps;
  if (!changed && have_prev_cut_) return {CutResult::Status::kReused, &faster_, &slower_};
  if (!flow_.maximize(eps, eps * kWarmAugmentFactor)) return {CutResult::Status::kInfinite, nullptr, nullptr};
  faster_.clear();
  slower_.clear();
  for (int v : critical_) {
    const bool from_s = flow_.in_source_side(CriticalNetwork::start_node(v)),
               to_s = flow_.in_source_side(CriticalNetwork::end_node(v));
    if (from_s && !to_s) faster_.push_back(v);
    if (!from_s && to_s) slower_.push_back(v);
  }
  have_prev_cut_ = true;
  return {CutResult::Status::kSolved, &faster_, &slower_};
}

template <class Flow>
bool WarmCutSolver<Flow>::flow_along_dag(std::vector<std::pair<int, int>>& arcs, std::vector<double>& flow) const {
  arcs.clear();
  flow.clear();
  if constexpr (!std::is_same_v<Flow, WarmMaxFlow>) {
    return false;  // a reparametrized pseudo-flow is not a flow along the DAG
  } else {
  const DagCsr& dag = cpm_.dag();
  for (int v = 0; v < dag.num_ops; ++v) {
    int e = network_.edge_arcs_begin(v);
    for (int i = dag.succ_first[v]; i < dag.succ_first[v + 1]; ++i, ++e) {
      if (const double y = flow_.flow(e); y > 0) arcs.emplace_back(v, dag.succ[i]), flow.push_back(y);
    }
    if (const double y = flow_.flow(CriticalNetwork::arc_index(v, ArcRole::kToSink)); y > 0) {
      arcs.emplace_back(v, -1), flow.push_back(y);
    }
  }
  return true;
  }
}

}  // namespace

std::unique_ptr<CutSolver> make_warm_cut_solver(const CriticalPath& cpm, const CostModels& costs,
                                                const std::function<void()>& checkpoint) {
  return std::make_unique<WarmCutSolver<WarmMaxFlow>>(cpm, costs, checkpoint);
}

std::unique_ptr<CutSolver> make_dynamic_cut_solver(const CriticalPath& cpm, const CostModels& costs,
                                                   const std::function<void()>& checkpoint) {
  return std::make_unique<WarmCutSolver<DynamicMaxFlow>>(cpm, costs, checkpoint);
}

}  // namespace perseus::detail
