// Critical path method on quantized durations (the graph-cut walk's per-step CPM pass).
#include "critical_path.hpp"

#include <algorithm>

namespace perseus::detail {

DagCsr::DagCsr(const Dag& dag) : num_ops(dag.num_ops()), topo(dag.topological_order()) {
  pred_first.assign(1, 0);
  succ_first.assign(1, 0);
  for (int v = 0; v < num_ops; ++v) {
    for (int u : dag.predecessors(v)) pred.push_back(u);
    for (int w : dag.successors(v)) succ.push_back(w);
    pred_first.push_back(static_cast<int>(pred.size()));
    succ_first.push_back(static_cast<int>(succ.size()));
  }
}

CriticalPath::CriticalPath(const DagCsr& dag)
    : dag_(dag), dur_(dag.num_ops, 0), es_(dag.num_ops), lf_(dag.num_ops), sig_(dag.num_ops, 0) {}

void CriticalPath::compute() {
  // Raw pointers: stores into es_/lf_/sig_ would otherwise reload every vector's data
  // pointer inside the loops.
  std::int64_t* const es = es_.data();
  std::int64_t* const lf_out = lf_.data();
  std::uint32_t* const sig = sig_.data();
  const std::int64_t* const dur = dur_.data();
  const int *const pred_first = dag_.pred_first.data(), *const pred = dag_.pred.data();
  const int *const succ_first = dag_.succ_first.data(), *const succ = dag_.succ.data();
  const std::vector<int>& topo = dag_.topo;
  std::int64_t T = 0;
  for (int v : topo) {
    std::int64_t s = 0;
    for (int i = pred_first[v]; i < pred_first[v + 1]; ++i) s = std::max(s, es[pred[i]] + dur[pred[i]]);
    es[v] = s;
    T = std::max(T, s + dur[v]);
  }
  T_ = T;
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const int v = *it;
    // Latest finish, and the critical-network signature: successors are done (reverse
    // topological order), so bit 1 + j says whether the edge to the j-th one is tight and
    // leads to a critical op; it counts only if v itself turns out critical.
    const std::int64_t ef = es[v] + dur[v];
    std::int64_t lf = T;
    std::uint32_t edges = 0;
    const int first = succ_first[v], deg = succ_first[v + 1] - first;
    for (int j = 0; j < deg; ++j) {
      const int w = succ[first + j];
      lf = std::min(lf, lf_out[w] - dur[w]);
      if (j < kSignatureEdges && (sig[w] & 1u) != 0 && ef == es[w]) edges |= 2u << j;
    }
    lf_out[v] = lf;
    sig[v] = ef != lf ? 0u : 1u | edges | (deg > kSignatureEdges ? kSignatureUnknown : 0u);
  }
}

}  // namespace perseus::detail
