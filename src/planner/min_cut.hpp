// Facade over the max-flow engine: "max flow -> minimal source-side min cut" in one call.
// Private to the library. The engine (Dinic's algorithm by default, LEMON's Preflow or
// Boost.Graph's Boykov–Kolmogorov: PlannerOptions::min_cut_engine) can change behind it.
#pragma once

#include <vector>

#include "min_cut_dinic.hpp"
#include "perseus/frontier.hpp"

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
/// as zero. The returned reference stays valid until the next solve(); the object keeps
/// its storage between calls (no allocation once warmed up).
/// Source: Ford–Fulkerson max-flow/min-cut theorem; Dinic (1970) after a greedy pass over
/// the s-t paths of <= 3 arcs; LEMON Preflow (Goldberg–Tarjan) or Boost.Graph
/// Boykov–Kolmogorov (2004) on request.
class MinCut {
 public:
  /// Engine of the next solve() calls: kDinic (default; also for kWarm and kDynamic, whose
  /// networks live in warm_cut_solver.cpp), kLemon or kBoykovKolmogorov.
  void set_engine(MinCutEngine engine) { engine_ = engine; }
  const std::vector<char>& solve(int num_nodes, const std::vector<FlowArc>& arcs, int source, int sink,
                                 double tolerance, double* cut_value = nullptr);

 private:
  MinCutEngine engine_ = MinCutEngine::kDinic;
  Dinic dinic_;
  std::vector<char> in_s_;
};

}  // namespace perseus::detail
