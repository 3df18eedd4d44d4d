// Warm-started max-flow on a network of fixed structure whose capacities change a little
// between solves (the planner's per-step critical networks). Private to the library.
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace perseus::detail {

/// Maximum s-t flow on a fixed set of arcs whose capacities are set before each solve.
/// The flow of the previous solve is kept: an arc whose new capacity is below its flow has
/// the excess cancelled along flow-carrying paths s->...->tail and head->...->t (valid on
/// acyclic networks, where every flow decomposes into s-t paths), then augmenting paths
/// (a greedy pass over s-t paths of <= 3 arcs, then Dinic's phases) restore maximality.
/// Capacities may be +infinity. The minimal min cut (nodes reachable from s in the residual
/// graph) is unique, so it is the same as a max-flow from scratch would give.
/// Source: Dinic (1970); warm starts after capacity changes as in Kohli & Torr (2007),
/// "Dynamic graph cuts", with flow cancellation instead of reparametrization.
class WarmMaxFlow {
 public:
  /// Fixes the structure: num_nodes nodes, `arcs` (from, to) pairs, source and sink. All
  /// capacities start at 0. The network (ignoring capacity-0 arcs) must be acyclic.
  /// `checkpoint` as in DynamicMaxFlow::init().
  void init(int num_nodes, const std::vector<std::pair<int, int>>& arcs, int source, int sink,
            const std::function<void()>& checkpoint = {});
  /// Current capacity of arc k.
  double capacity(int k) const { return cap_[k]; }
  /// Current flow on arc k (after maximize(): a maximum flow; finite even on +inf arcs).
  double flow(int k) const { return res_[2 * k + 1]; }
  /// Sets arc k's capacity (>= 0, may be +inf), cancelling flow above it.
  void set_capacity(int k, double capacity);
  /// Augments the current flow to a maximum flow. Returns false if the maximum flow is
  /// infinite (an s-t path of infinite arcs); the flow is then unusable. eps: residuals
  /// <= eps count as saturated.
  /// Augmenting paths need a bottleneck > eps_augment (much smaller than eps, so the
  /// rounding-level leftovers of earlier solves cannot hide a path); the cut uses eps.
  bool maximize(double eps, double eps_augment);
  /// After maximize() returned true: whether node v is reachable from s through residual
  /// arcs > eps (the minimal source side).
  bool in_source_side(int v) const { return seen_[v] != 0; }

  /// Work done so far (all solves): for benchmarks and docs/performance.md.
  struct Counters {
    long long searches = 0;          ///< maximize() calls (each starts with one s-search)
    long long dinic_phases = 0;      ///< Dinic level BFSs
    long long bfs_nodes = 0;         ///< nodes those BFSs visited
    long long augmenting_paths = 0;  ///< augmentations in Dinic phases
    long long augmenting_arcs = 0;   ///< total length of those paths, arcs
    long long cancelled_paths = 0;   ///< flow paths cancelled after lowered capacities
  };
  const Counters& counters() const { return counters_; }

 private:
  /// Residual arcs leaving node v with possibly positive residual, in adjacency order: the
  /// source's list holds only its arcs of capacity > 0 (the source has one arc per op, most
  /// of them 0 at any step, and every phase starts by scanning it).
  const int* arcs_begin(int v) const { return v == s_ ? src_arcs_.data() : adj_.data() + first_[v]; }
  const int* arcs_end(int v) const { return v == s_ ? src_arcs_.data() + src_arcs_.size() : adj_.data() + first_[v + 1]; }
  void compact_source_arcs();
  /// Dinic level BFS through residuals > eps; notes in band_seen_ whether a crossed arc's
  /// residual was <= eps_band.
  bool bfs(double eps, double eps_band);
  /// Whether t is reachable through residuals > eps_augment. If not, seen_ marks the nodes
  /// reachable through residuals > eps (the minimal source side), so no Dinic phase is needed.
  bool reaches_sink(double eps, double eps_augment);
  /// One Dinic phase: augments along level-graph paths (residuals > eps) until none is
  /// left. Returns false if a path of infinite residual exists.
  bool blocking_flow(double eps);
  bool push_short_paths(double eps);
  void cancel(int k, double amount);
  int n_ = 0, s_ = 0, t_ = 0;
  std::vector<int> head_;         // residual arc r -> head node (r = 2k forward, 2k+1 reverse)
  std::vector<double> res_;       // residual capacity of r
  std::vector<double> cap_;       // capacity of arc k
  std::vector<int> first_, adj_;  // residual arcs leaving each node (CSR)
  std::vector<int> level_, iter_, queue_, stack_;
  std::vector<char> seen_;
  std::vector<int> src_arcs_;   // arcs leaving s with capacity > 0 (sorted after compaction)
  std::vector<char> src_in_;    // per arc k: listed in src_arcs_
  bool src_dirty_ = false;
  std::size_t src_sorted_ = 0;  // src_arcs_[0, src_sorted_) is sorted (the rest was appended since)
  Counters counters_;
  bool band_seen_ = false;
  std::vector<int> band_;        // residual arcs in (eps_augment, eps] met by reaches_sink()
};

}  // namespace perseus::detail
