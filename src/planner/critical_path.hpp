// Critical-path state of the graph-cut walk (private to the library): quantized durations,
// earliest starts, latest finishes and which ops and edges are critical (CPM).
#pragma once

#include <cstdint>
#include <vector>

#include "perseus/dag.hpp"

namespace perseus::detail {

/// CSR copy of a DAG's adjacency and topological order, for the planner's hot loops (the
/// Dag's span accessors are out of line).
struct DagCsr {
  explicit DagCsr(const Dag& dag);
  int num_ops = 0;
  std::vector<int> topo;                    ///< Topological order.
  std::vector<int> pred_first, pred;        ///< pred[pred_first[v]..pred_first[v+1]): predecessors of v.
  std::vector<int> succ_first, succ;        ///< succ[succ_first[v]..succ_first[v+1]): successors of v.
  /// The same adjacency by topological position k (the op topo[k]), neighbours as positions,
  /// successors in the order of `succ`. Passes over the whole DAG run over positions with
  /// position-indexed arrays: indexed by op id, the topological order (Kahn's, breadth-first)
  /// jumps across the DAG and, on large pipelines, every dependent load misses the cache.
  std::vector<int> pos_pred_first, pos_pred, pos_succ_first, pos_succ;
  bool has_successors(int v) const { return succ_first[v] != succ_first[v + 1]; }
};

/// Durations (units of u) of every op and the critical path method on them: earliest start
/// es, latest finish lf, iteration time T; an op is critical when es + d == lf, an edge
/// v -> w when both ends are critical and es(v) + d(v) == es(w). compute() also gives each op
/// a signature of its critical network (critical? which out-edges are critical?), with which
/// the warm cut solver skips ops whose arcs did not change.
class CriticalPath {
 public:
  /// Out-edges covered by the signature; an op with more has kSignatureUnknown set.
  static constexpr int kSignatureEdges = 30;
  static constexpr std::uint32_t kSignatureUnknown = 1u << 31;

  /// All durations 0 until set.
  explicit CriticalPath(const DagCsr& dag);
  /// Recomputes es, lf, T and the signatures from the current durations: O(ops + edges).
  void compute();

  const DagCsr& dag() const { return dag_; }
  std::int64_t duration(int v) const { return dur_[v]; }
  std::vector<std::int64_t>& durations() { return dur_; }  ///< Set durations, then compute().
  const std::vector<std::int64_t>& durations() const { return dur_; }
  std::int64_t earliest_start(int v) const { return es_[v]; }
  std::int64_t earliest_finish(int v) const { return es_[v] + dur_[v]; }
  std::int64_t latest_finish(int v) const { return lf_[v]; }
  /// Iteration time T (longest path), units.
  std::int64_t iteration_units() const { return T_; }
  /// Whether op v has zero float (as of the last compute()).
  bool is_critical(int v) const { return (sig_[v] & 1u) != 0; }
  /// Signature of op v: bit 0 critical; bit 1 + j: the edge to its j-th successor is
  /// critical (j < kSignatureEdges); kSignatureUnknown: more successors than bits. 0 when not critical.
  std::uint32_t signature(int v) const { return sig_[v]; }
  /// Whether the DAG edge v -> w is critical, given that v is: w is critical and starts as v ends.
  bool edge_is_critical(int v, int w) const { return es_[v] + dur_[v] == es_[w] && is_critical(w); }

 private:
  const DagCsr& dag_;
  std::vector<std::int64_t> dur_, es_, lf_;
  std::vector<std::uint32_t> sig_;
  // compute()'s scratch by topological position (DagCsr::pos_pred): duration, earliest
  // finish, latest start, critical?
  std::vector<std::int64_t> dur_at_, ef_at_, ls_at_;
  std::vector<std::uint8_t> critical_at_;
  std::int64_t T_ = 0;
};

}  // namespace perseus::detail
