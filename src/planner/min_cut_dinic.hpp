// Dinic's max-flow with double capacities; private engine behind MinCut.
#pragma once

#include <vector>

namespace perseus::detail {

/// Residual graph + Dinic's blocking-flow algorithm. Capacities are doubles; residuals
/// <= eps count as saturated. Arcs 2k and 2k+1 are a forward arc and its reverse.
/// Storage is kept between reset() calls, so a solver reused for many networks does not
/// allocate once it has seen the largest one.
class Dinic {
 public:
  /// Empties the network and sets its node count (ids 0..num_nodes-1).
  void reset(int num_nodes);
  /// Adds arc from -> to with capacity >= 0 (and its reverse residual arc of capacity 0).
  void add_arc(int from, int to, double capacity);
  /// Greedy warm start: saturates the s-t paths of at most three arcs (s->t, s->x->t,
  /// s->x->y->t), the short paths the planner's node-weight arcs create. Returns the flow
  /// pushed; max_flow() continues from it. Any feasible flow gives the same minimal cut.
  double push_short_paths(int s, int t, double eps);
  /// Maximum s-t flow value added on top of the current flow; residuals are kept.
  double max_flow(int s, int t, double eps);
  /// Nodes reachable from s through residual arcs with capacity > eps (minimal source
  /// side), written into `seen` (resized to num_nodes).
  void reachable_from(int s, double eps, std::vector<char>& seen);

 private:
  bool bfs(int s, int t, double eps);
  double augment(int s, int t, double eps);
  void build_csr();
  int n_ = 0;
  bool csr_ready_ = false;
  // Arc list (insertion order) and the CSR of arcs by tail, rebuilt lazily.
  std::vector<int> from_, to_;
  std::vector<double> cap_;
  std::vector<int> first_, adj_;  // adj_[first_[v]..first_[v+1]) = arc ids leaving v
  std::vector<int> level_, iter_, queue_, stack_;
};

}  // namespace perseus::detail
