// Critical path method on quantized durations (the graph-cut walk's per-step CPM pass).
#include "critical_path.hpp"

#include <algorithm>

namespace perseus::detail {

DagCsr::DagCsr(const Dag& dag) : num_ops(dag.num_ops()), topo(dag.topological_order()) {
  // Sized first: growing by push_back copied and page-faulted each array ~twice (1.3 s of a
  // solve's start on 2 M computations).
  std::size_t edges = 0;
  for (int v = 0; v < num_ops; ++v) edges += dag.successors(v).size();
  pred.reserve(edges);
  succ.reserve(edges);
  pos_pred.reserve(edges);
  pos_succ.reserve(edges);
  for (auto* first : {&pred_first, &succ_first, &pos_pred_first, &pos_succ_first})
    first->reserve(static_cast<std::size_t>(num_ops) + 1);
  pred_first.assign(1, 0);
  succ_first.assign(1, 0);
  for (int v = 0; v < num_ops; ++v) {
    for (int u : dag.predecessors(v)) pred.push_back(u);
    for (int w : dag.successors(v)) succ.push_back(w);
    pred_first.push_back(static_cast<int>(pred.size()));
    succ_first.push_back(static_cast<int>(succ.size()));
  }
  std::vector<int> position(num_ops);
  for (int k = 0; k < num_ops; ++k) position[topo[k]] = k;
  pos_pred_first.assign(1, 0);
  pos_succ_first.assign(1, 0);
  for (int k = 0; k < num_ops; ++k) {
    const int v = topo[k];
    for (int i = pred_first[v]; i < pred_first[v + 1]; ++i) pos_pred.push_back(position[pred[i]]);
    for (int i = succ_first[v]; i < succ_first[v + 1]; ++i) pos_succ.push_back(position[succ[i]]);
    pos_pred_first.push_back(static_cast<int>(pos_pred.size()));
    pos_succ_first.push_back(static_cast<int>(pos_succ.size()));
  }
}

CriticalPath::CriticalPath(const DagCsr& dag)
    : dag_(dag),
      dur_(dag.num_ops, 0),
      es_(dag.num_ops),
      lf_(dag.num_ops),
      sig_(dag.num_ops, 0),
      dur_at_(dag.num_ops),
      ef_at_(dag.num_ops),
      ls_at_(dag.num_ops),
      critical_at_(dag.num_ops) {}

void CriticalPath::compute() {
  // Raw pointers: stores into es_/lf_/sig_ would otherwise reload every vector's data
  // pointer inside the loops. The dependent loads go to the position-indexed scratch; the
  // op-indexed results are scattered to, off the dependency chain.
  const int n = dag_.num_ops;
  std::int64_t* const es = es_.data();
  std::int64_t* const lf_out = lf_.data();
  std::uint32_t* const sig = sig_.data();
  const std::int64_t* const dur = dur_.data();
  std::int64_t *const dur_at = dur_at_.data(), *const ef_at = ef_at_.data(), *const ls_at = ls_at_.data();
  std::uint8_t* const critical_at = critical_at_.data();
  const int *const pred_first = dag_.pos_pred_first.data(), *const pred = dag_.pos_pred.data();
  const int *const succ_first = dag_.pos_succ_first.data(), *const succ = dag_.pos_succ.data();
  const int* const op_at = dag_.topo.data();
  std::int64_t T = 0;
  for (int k = 0; k < n; ++k) {
    const int v = op_at[k];
    std::int64_t s = 0;
    for (int i = pred_first[k]; i < pred_first[k + 1]; ++i) s = std::max(s, ef_at[pred[i]]);
    const std::int64_t d = dur[v];
    dur_at[k] = d;
    ef_at[k] = s + d;
    es[v] = s;
    T = std::max(T, s + d);
  }
  T_ = T;
  for (int k = n - 1; k >= 0; --k) {
    // Latest finish, and the critical-network signature: successors are done (reverse
    // topological order), so bit 1 + j says whether the edge to the j-th one is tight and
    // leads to a critical op; it counts only if v itself turns out critical.
    const std::int64_t ef = ef_at[k];
    std::int64_t lf = T;
    std::uint32_t edges = 0;
    const int first = succ_first[k], deg = succ_first[k + 1] - first;
    for (int j = 0; j < deg; ++j) {
      const int w = succ[first + j];
      lf = std::min(lf, ls_at[w]);
      if (j < kSignatureEdges && critical_at[w] != 0 && ef == ef_at[w] - dur_at[w]) edges |= 2u << j;
    }
    const bool critical = ef == lf;
    ls_at[k] = lf - dur_at[k];
    critical_at[k] = critical;
    const int v = op_at[k];
    lf_out[v] = lf;
    sig[v] = critical ? 1u | edges | (deg > kSignatureEdges ? kSignatureUnknown : 0u) : 0u;
  }
}

}  // namespace perseus::detail
