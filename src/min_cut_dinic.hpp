// Dinic's max-flow with double capacities; private engine behind MinCut.
#pragma once

#include <vector>

namespace perseus::detail {

/// Residual graph + Dinic's blocking-flow algorithm. Capacities are doubles; residuals
/// <= eps count as saturated. Arcs 2k and 2k+1 are a forward arc and its reverse.
class Dinic {
 public:
  void reset(int num_nodes);
  void add_arc(int from, int to, double capacity);
  /// Maximum s-t flow value; afterwards the residual capacities are kept.
  double max_flow(int s, int t, double eps);
  /// Nodes reachable from s through residual arcs with capacity > eps (minimal source side).
  std::vector<char> reachable_from(int s, double eps) const;

 private:
  bool bfs(int s, int t, double eps);
  double dfs(int v, int t, double pushed, double eps);
  int n_ = 0;
  std::vector<int> head_, next_, to_, level_, iter_, queue_;
  std::vector<double> cap_;
};

}  // namespace perseus::detail
