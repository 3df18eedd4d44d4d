// The cold cut solvers (MinCutEngine::kDinic, kLemon, kBoykovKolmogorov): each step's
// critical network is listed afresh (critical ops and edges only) and solved by MinCut.
#include <cmath>
#include <limits>

#include "cut_solver.hpp"
#include "min_cut.hpp"

namespace perseus::detail {

namespace {

class ColdCutSolver final : public CutSolver {
 public:
  ColdCutSolver(MinCutEngine engine, const CriticalPath& cpm, const CostModels& costs)
      : cpm_(cpm), costs_(costs), network_(cpm.dag()) {
    min_cut_.set_engine(engine);
    node_id_.assign(network_.num_nodes(), -1);
  }
  CutResult find_cut() override;
  void forget_cut() override { have_prev_cut_ = false; }

 private:
  const CriticalPath& cpm_;
  const CostModels& costs_;
  const CriticalNetwork network_;
  MinCut min_cut_;
  std::vector<int> critical_;                      // critical ops, op order
  std::vector<FlowArc> arcs_, prev_arcs_, compact_;
  std::vector<int> node_id_, nodes_;               // compact node ids of the nodes in use
  bool have_prev_cut_ = false;
  std::vector<int> faster_, slower_;
};

CutResult ColdCutSolver::find_cut() {
  const CriticalPath& cpm = cpm_;
  const DagCsr& dag = cpm.dag();
  const int n = dag.num_ops;
  const int s = network_.source(), t = network_.sink();
  // Infinite capacities are listed as +inf, then set to 2 × Σ finite capacities + 1 (more
  // than any finite cut) once that sum is known.
  const double kInf = std::numeric_limits<double>::infinity();
  auto add = [&](std::pair<int, int> ends, double capacity) { arcs_.push_back({ends.first, ends.second, capacity}); };
  arcs_.clear();
  critical_.clear();
  double finite_total = 0;
  // Per critical op: its speed-up arc, source and sink arcs, critical out-edges; then the
  // node-weight arcs of every critical op.
  for (int v = 0; v < n; ++v) {
    if (!cpm.is_critical(v)) continue;
    const CriticalOp op = CriticalOp::of(cpm, costs_.of_op(v), v);
    critical_.push_back(v);
    add(network_.ends(v, ArcRole::kSpeedUp), op.capacity(ArcRole::kSpeedUp, kInf));
    if (op.can_speed_up) finite_total += op.speed_up_cost;
    for (ArcRole role : {ArcRole::kFromSource, ArcRole::kToSink})
      if (op.capacity(role, kInf) > 0) add(network_.ends(v, role), kInf);
    for (int i = dag.succ_first[v]; i < dag.succ_first[v + 1]; ++i) {
      const int w = dag.succ[i];
      if (cpm.edge_is_critical(v, w)) add(CriticalNetwork::edge_ends(v, w), kInf);
    }
  }
  for (int v : critical_) {
    const CriticalOp op = CriticalOp::of(cpm, costs_.of_op(v), v);
    for (ArcRole role : kNodeWeightRoles) {
      const double c = op.capacity(role, kInf);
      if (c > 0) {
        add(network_.ends(v, role), c);
        finite_total += c;
      }
    }
  }
  const double inf = 2 * finite_total + 1;
  for (auto& a : arcs_)
    if (a.capacity == kInf) a.capacity = inf;
  // Same critical network (arcs and capacities) as the previous step: the same minimal
  // min cut is optimal again, so reuse it without another max-flow.
  if (have_prev_cut_ && arcs_ == prev_arcs_) {
    std::swap(prev_arcs_, arcs_);
    return {CutResult::Status::kReused, &faster_, &slower_};
  }
  // Compact node ids to the nodes that appear.
  nodes_.clear();
  auto id = [&](int x) {
    if (node_id_[x] < 0) {
      node_id_[x] = static_cast<int>(nodes_.size());
      nodes_.push_back(x);
    }
    return node_id_[x];
  };
  id(s);
  id(t);
  compact_.resize(arcs_.size());
  for (std::size_t i = 0; i < arcs_.size(); ++i) compact_[i] = {id(arcs_[i].from), id(arcs_[i].to), arcs_[i].capacity};
  double value = 0;
  const std::vector<char>& in_s = min_cut_.solve(static_cast<int>(nodes_.size()), compact_, node_id_[s], node_id_[t],
                                                 1e-9 * (1 + finite_total), &value);
  auto side = [&](int x) { return in_s[node_id_[x]] != 0; };
  faster_.clear();
  slower_.clear();
  const bool infinite = value >= inf * 0.5;
  if (!infinite) {
    for (int v : critical_) {
      const bool from_s = side(CriticalNetwork::start_node(v)), to_s = side(CriticalNetwork::end_node(v));
      if (from_s && !to_s) faster_.push_back(v);
      if (!from_s && to_s) slower_.push_back(v);
    }
  }
  for (int x : nodes_) node_id_[x] = -1;
  if (infinite) return {CutResult::Status::kInfinite, nullptr, nullptr};
  std::swap(prev_arcs_, arcs_);
  have_prev_cut_ = true;
  return {CutResult::Status::kSolved, &faster_, &slower_};
}

}  // namespace

std::unique_ptr<CutSolver> make_cold_cut_solver(MinCutEngine engine, const CriticalPath& cpm, const CostModels& costs) {
  return std::make_unique<ColdCutSolver>(engine, cpm, costs);
}

}  // namespace perseus::detail
