#include "min_cut.hpp"


#include "min_cut_dinic.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <lemon/preflow.h>
#include <lemon/smart_graph.h>

namespace perseus {
namespace detail {

namespace {

/// Minimal source side from a maximum flow given per arc: BFS from s over residual arcs
/// (forward: capacity - flow, backward: flow) greater than `tolerance`.
template <typename FlowOf>
void residual_source_side(int num_nodes, const std::vector<FlowArc>& arcs, FlowOf flow_of, int source,
                          double tolerance, std::vector<char>& in_s) {
  std::vector<std::vector<int>> residual(num_nodes);
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    const double f = flow_of(i);
    const FlowArc& a = arcs[i];
    if (a.capacity - f > tolerance) residual[a.from].push_back(a.to);
    if (f > tolerance) residual[a.to].push_back(a.from);
  }
  in_s.assign(num_nodes, 0);
  std::vector<int> queue{source};
  in_s[source] = 1;
  for (std::size_t h = 0; h < queue.size(); ++h) {
    for (int w : residual[queue[h]]) {
      if (!in_s[w]) {
        in_s[w] = 1;
        queue.push_back(w);
      }
    }
  }
}

double lemon_preflow(int num_nodes, const std::vector<FlowArc>& arcs, int source, int sink, double tolerance,
                     std::vector<char>& in_s) {
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
  residual_source_side(
      num_nodes, arcs, [&](std::size_t i) { return preflow.flow(g.arcFromId(static_cast<int>(i))); }, source,
      tolerance, in_s);
  return preflow.flowValue();
}

/// Boost.Graph's Boykov–Kolmogorov max-flow (search trees grown from s and t), cold.
double boost_boykov_kolmogorov(int num_nodes, const std::vector<FlowArc>& arcs, int source, int sink,
                               double tolerance, std::vector<char>& in_s) {
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS,
      boost::property<boost::vertex_index_t, long,
                      boost::property<boost::vertex_color_t, boost::default_color_type,
                                      boost::property<boost::vertex_distance_t, long,
                                                      boost::property<boost::vertex_predecessor_t,
                                                                      Traits::edge_descriptor>>>>,
      boost::property<boost::edge_capacity_t, double,
                      boost::property<boost::edge_residual_capacity_t, double,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  Graph g(num_nodes);
  auto cap = boost::get(boost::edge_capacity, g);
  auto res = boost::get(boost::edge_residual_capacity, g);
  auto rev = boost::get(boost::edge_reverse, g);
  std::vector<Traits::edge_descriptor> forward(arcs.size());
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    const auto e = boost::add_edge(arcs[i].from, arcs[i].to, g).first;
    const auto r = boost::add_edge(arcs[i].to, arcs[i].from, g).first;
    cap[e] = arcs[i].capacity;
    cap[r] = 0;
    rev[e] = r;
    rev[r] = e;
    forward[i] = e;
  }
  const double value = boost::boykov_kolmogorov_max_flow(g, boost::vertex(source, g), boost::vertex(sink, g));
  residual_source_side(
      num_nodes, arcs, [&](std::size_t i) { return arcs[i].capacity - res[forward[i]]; }, source, tolerance, in_s);
  return value;
}

}  // namespace

}  // namespace detail

const char* to_string(MinCutEngine engine) {
  switch (engine) {
    case MinCutEngine::kWarm: return "warm";
    case MinCutEngine::kDinic: return "dinic";
    case MinCutEngine::kLemon: return "lemon";
    case MinCutEngine::kBoykovKolmogorov: return "boost-bk";
    case MinCutEngine::kDynamic: return "dynamic";
  }
  return "unknown";
}

std::optional<MinCutEngine> parse_min_cut_engine(std::string_view name) {
  for (auto e : {MinCutEngine::kWarm, MinCutEngine::kDinic, MinCutEngine::kLemon, MinCutEngine::kBoykovKolmogorov,
                 MinCutEngine::kDynamic})
    if (name == to_string(e)) return e;
  return std::nullopt;
}

namespace detail {

const std::vector<char>& MinCut::solve(int num_nodes, const std::vector<FlowArc>& arcs, int source, int sink,
                                       double tolerance, double* cut_value) {
  double value = 0;
  switch (engine_) {
    case MinCutEngine::kWarm:
    case MinCutEngine::kDynamic:
    case MinCutEngine::kDinic:
      dinic_.reset(num_nodes);
      for (const FlowArc& a : arcs) dinic_.add_arc(a.from, a.to, a.capacity);
      value = dinic_.push_short_paths(source, sink, tolerance);
      value += dinic_.max_flow(source, sink, tolerance);
      dinic_.reachable_from(source, tolerance, in_s_);
      break;
    case MinCutEngine::kLemon:
      value = lemon_preflow(num_nodes, arcs, source, sink, tolerance, in_s_);
      break;
    case MinCutEngine::kBoykovKolmogorov:
      value = boost_boykov_kolmogorov(num_nodes, arcs, source, sink, tolerance, in_s_);
      break;
  }
  if (cut_value) *cut_value = value;
  return in_s_;
}

}  // namespace detail
}  // namespace perseus
