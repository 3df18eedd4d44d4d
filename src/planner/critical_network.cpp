// The critical network's nodes and arcs (see critical_network.hpp).
#include "critical_network.hpp"

namespace perseus::detail {

CriticalNetwork::CriticalNetwork(const DagCsr& dag) : num_ops_(dag.num_ops) {
  const int n = num_ops_;
  arcs_.reserve(kArcRolesPerOp * static_cast<std::size_t>(n) + dag.succ.size());
  for (int v = 0; v < n; ++v) {
    for (int r = 0; r < kArcRolesPerOp; ++r) arcs_.push_back(ends(v, static_cast<ArcRole>(r)));
  }
  edge_first_.resize(n + 1);
  for (int v = 0; v < n; ++v) {
    edge_first_[v] = static_cast<int>(arcs_.size());
    for (int i = dag.succ_first[v]; i < dag.succ_first[v + 1]; ++i) arcs_.push_back(edge_ends(v, dag.succ[i]));
  }
  edge_first_[n] = static_cast<int>(arcs_.size());
}

std::pair<int, int> CriticalNetwork::ends(int v, ArcRole role) const {
  const int start = start_node(v), end = end_node(v), s = source(), t = sink();
  switch (role) {
    case ArcRole::kSpeedUp: return {start, end};
    case ArcRole::kFromSource: return {s, start};
    case ArcRole::kToSink: return {end, t};
    case ArcRole::kSlowDownSavingStart: return {start, t};
    case ArcRole::kSlowDownSavingEnd: return {s, end};
    case ArcRole::kSlowDownCostStart: return {s, start};
    case ArcRole::kSlowDownCostEnd: return {end, t};
  }
  return {s, t};
}

}  // namespace perseus::detail
