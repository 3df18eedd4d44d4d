// Dynamic max-flow (Boykov–Kolmogorov search trees kept between solves, t-link
// reparametrization instead of flow cancellation) for the planner's per-step critical
// networks, whose capacities change a little between solves. Private to the library.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace perseus::detail {

/// Maximum s-t flow on a fixed set of arcs whose capacities are set before each solve; a
/// solve starts from what changed (no search from s), though an augmentation can still orphan
/// and regrow a large subtree (docs/performance.md, "Session 7").
///
/// Arcs from the source (s -> x) and to the sink (x -> t) are *t-links*: per node x only
/// their sums cs(x), ct(x) matter. The other arcs (*n-links*) carry a flow 0 <= f <= c. The
/// state is a pseudo-flow: the n-link flows, and per node the net t-link residual
/// tr(x) = cs(x) − ct(x) − (flow out of x − flow into x) on n-links (> 0: residual from s,
/// < 0: residual to t). Lowering an n-link capacity below its flow just lowers the flow:
/// the excess this leaves at the arc's tail and the deficit at its head land in tr(), which
/// amounts to adding the same amount to both t-links of each node — every s-t cut changes
/// by the same constant, so the min cuts stay the same (Kohli & Torr's reparametrization).
/// Each solve then continues Boykov–Kolmogorov from the previous search trees: only nodes
/// whose arcs changed are re-examined (made terminal children, orphaned or activated), as in
/// Kolmogorov's maxflow-v3 "reuse_trees".
///
/// After maximize() the source tree is the set of nodes reachable from s through residuals
/// > eps_augment; the minimal min cut with the cut tolerance eps is the same set unless a
/// tree arc's residual lies in (eps_augment, eps], in which case it is searched afresh.
/// Capacities may be +infinity (+inf on both t-links of one node is an infinite flow). The
/// flow itself is a pseudo-flow, not an s-t flow of the network: this engine has no
/// flow_along_dag().
/// Sources: Boykov & Kolmogorov (2004), "An experimental comparison of min-cut/max-flow
/// algorithms for energy minimization in vision"; Kohli & Torr (2007), "Dynamic graph cuts
/// for efficient inference in Markov random fields".
class DynamicMaxFlow {
 public:
  /// Fixes the structure: num_nodes nodes, `arcs` (from, to) pairs, source and sink. No arc
  /// may go from s to t, into s or out of t (std::invalid_argument). All capacities start at 0.
  /// `checkpoint` (optional) is called between the steps of the build, which take seconds on a
  /// DAG of a million computations; it may throw to abandon the build.
  void init(int num_nodes, const std::vector<std::pair<int, int>>& arcs, int source, int sink,
            const std::function<void()>& checkpoint = {});
  /// Current capacity of arc k.
  double capacity(int k) const { return cap_[k]; }
  /// Sets arc k's capacity (>= 0, may be +inf). O(degree of its ends); no search.
  void set_capacity(int k, double capacity);
  /// Augments to a maximum flow. Returns false if it is infinite (an s-t path of infinite
  /// arcs); the search trees are then dropped and the next solve starts afresh. Tree arcs
  /// need a residual > eps_augment (<= eps); the cut (in_source_side) uses eps.
  bool maximize(double eps, double eps_augment);
  /// After maximize() returned true: whether node v is reachable from s through residual
  /// arcs > eps (the minimal source side).
  bool in_source_side(int v) const {
    return cut_searched_ ? seen_[v] != 0 : v == s_ || (parent_[v] != kNone && !is_sink_[v]);
  }

  /// Work done so far (all solves): for benchmarks and docs/performance.md.
  struct Counters {
    long long searches = 0;          ///< maximize() calls
    long long grown_nodes = 0;       ///< active nodes whose arcs were scanned to grow a tree
    long long augmenting_paths = 0;  ///< augmentations
    long long augmenting_arcs = 0;   ///< their total length, n-links
    long long orphans = 0;           ///< orphans processed (adoption)
    long long cut_searches = 0;      ///< solves whose cut needed a fresh search (tolerance band)
  };
  const Counters& counters() const { return counters_; }

 private:
  static constexpr int kNone = -1;      // parent_: free node
  static constexpr int kTerminal = -2;  // parent_: child of s (source tree) or t (sink tree)
  static constexpr int kOrphan = -3;    // parent_: lost its parent, waiting for adoption

  void mark(int x);
  void update_terminal_caps(int x);
  void set_active(int x) {
    if (!in_queue_[x]) {
      in_queue_[x] = 1;
      queue_.push_back(x);
    }
  }
  int next_active();
  void set_orphan(int x) {
    parent_[x] = kOrphan;
    orphans_.push_back(x);
  }
  void reuse_trees();
  int grow(int i);
  bool augment(int meet);
  void adopt_orphans();
  void process_orphan(int i);
  void search_cut(double eps);
  void drop_trees();

  int n_ = 0, s_ = 0, t_ = 0;
  double thr_ = 0;  // eps_augment of the current solve
  // Arcs: cap_ per arc; n-link k has residual arcs 2k (forward, residual cap − f) and 2k+1
  // (reverse, residual f); head_ of each residual arc. CSR of residual arcs by tail.
  std::vector<double> cap_, res_;
  std::vector<int> head_, first_, adj_;
  std::vector<int> term_node_;  // per arc: the non-terminal node of a t-link, -1 for n-links
  std::vector<char> from_source_;  // per arc: t-link from s (else to t)
  // T-links by node (CSR): arc ids, summed in this fixed order.
  std::vector<int> tfirst_, tadj_;
  std::vector<double> tr_;  // per node: net t-link residual (see the class comment)
  // Search trees.
  std::vector<int> parent_, ts_, dist_;
  std::vector<char> is_sink_, in_queue_, marked_;
  std::vector<int> queue_, changed_, orphans_;
  std::size_t queue_head_ = 0;
  int time_ = 0;
  bool first_solve_ = true;
  bool infinite_tlinks_ = false;  // some node has +inf t-links from s and to t
  // Fresh cut search (tolerance band).
  bool cut_searched_ = false;
  std::vector<char> seen_;
  std::vector<int> bfs_;
  Counters counters_;
};

}  // namespace perseus::detail
