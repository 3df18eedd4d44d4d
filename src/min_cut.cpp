#include "min_cut.hpp"

#include <cstdlib>
#include <cstring>

#include "min_cut_dinic.hpp"

#include <lemon/preflow.h>
#include <lemon/smart_graph.h>

namespace perseus::detail {

namespace {

bool use_lemon() {
  static const bool lemon = [] {
    const char* e = std::getenv("PERSEUS_MIN_CUT_ENGINE");
    return e != nullptr && std::strcmp(e, "lemon") == 0;
  }();
  return lemon;
}

}  // namespace

const std::vector<char>& MinCut::solve(int num_nodes, const std::vector<FlowArc>& arcs, int source, int sink,
                                       double tolerance, double* cut_value) {
  if (!use_lemon()) {
    dinic_.reset(num_nodes);
    for (const FlowArc& a : arcs) dinic_.add_arc(a.from, a.to, a.capacity);
    double value = dinic_.push_short_paths(source, sink, tolerance);
    value += dinic_.max_flow(source, sink, tolerance);
    if (cut_value) *cut_value = value;
    dinic_.reachable_from(source, tolerance, in_s_);
    return in_s_;
  }
  using Graph = lemon::SmartDigraph;
  Graph g;
  g.reserveNode(num_nodes);
  g.reserveArc(static_cast<int>(arcs.size()));
  for (int i = 0; i < num_nodes; ++i) g.addNode();
  for (const FlowArc& a : arcs) g.addArc(g.nodeFromId(a.from), g.nodeFromId(a.to));
  Graph::ArcMap<double> cap(g);
  for (int i = 0; i < static_cast<int>(arcs.size()); ++i) cap[g.arcFromId(i)] = arcs[i].capacity;
  lemon::Preflow<Graph, Graph::ArcMap<double>> preflow(g, cap, g.nodeFromId(source), g.nodeFromId(sink));
  preflow.tolerance(lemon::Tolerance<double>(tolerance * 1e-3));
  preflow.run();
  if (cut_value) *cut_value = preflow.flowValue();

  // Minimal source side: BFS from s over residual arcs (forward cap - flow, backward flow).
  std::vector<std::vector<std::pair<int, double>>> residual(num_nodes);
  for (int i = 0; i < static_cast<int>(arcs.size()); ++i) {
    const double f = preflow.flow(g.arcFromId(i));
    const FlowArc& a = arcs[i];
    if (a.capacity - f > tolerance) residual[a.from].emplace_back(a.to, a.capacity - f);
    if (f > tolerance) residual[a.to].emplace_back(a.from, f);
  }
  std::vector<char>& in_s = in_s_;
  in_s.assign(num_nodes, 0);
  std::vector<int> queue{source};
  in_s[source] = 1;
  for (std::size_t h = 0; h < queue.size(); ++h) {
    for (auto [w, c] : residual[queue[h]]) {
      if (!in_s[w]) {
        in_s[w] = 1;
        queue.push_back(w);
      }
    }
  }
  return in_s;
}

}  // namespace perseus::detail
