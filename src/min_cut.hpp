// Facade over the max-flow engine: "max flow -> minimal source-side min cut" in one call.
// Private to the library. The engine (LEMON's Preflow, push-relabel) can change behind it.
#pragma once

#include <vector>

namespace perseus::detail {

/// An arc of a flow network with a non-negative capacity.
struct FlowArc {
  int from = 0;
  int to = 0;
  double capacity = 0;
  friend bool operator==(const FlowArc&, const FlowArc&) = default;
};

/// Minimum s-t cut of a network with non-negative capacities. Returns, per node, 1 if it
/// is in the *minimal* source side S (the nodes reachable from s in the residual graph of
/// a maximum flow; unique, so the result does not depend on the max-flow algorithm), and
/// the cut value in `*cut_value` when given. `tolerance` is the residual capacity treated
/// as zero. Source: Ford–Fulkerson max-flow/min-cut theorem; LEMON Preflow (Goldberg–Tarjan).
class MinCut {
 public:
  std::vector<char> solve(int num_nodes, const std::vector<FlowArc>& arcs, int source, int sink, double tolerance,
                          double* cut_value = nullptr);
};

}  // namespace perseus::detail
