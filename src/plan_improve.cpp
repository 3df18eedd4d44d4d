// LP rounding and slack filling for the planner's second stage.
#include "plan_improve.hpp"

#include <algorithm>

namespace perseus::detail {

void round_lp_schedule(const Dag& dag, const std::vector<const Candidates*>& cands, const std::vector<double>& start_s,
                       const std::vector<double>& duration_s, std::vector<std::uint16_t>& choice) {
  const int n = dag.num_ops();
  choice.assign(n, 0);
  std::vector<double> end(n, 0.0);
  for (int v : dag.topological_order()) {
    double start = 0;
    for (int u : dag.predecessors(v)) start = std::max(start, end[u]);
    const double lp_end = start_s[v] + duration_s[v];
    const double room = (lp_end - start) + 1e-9 * std::max(1e-3, lp_end);  // LP tolerance
    const auto& pts = cands[v]->points;
    std::size_t c = 0;
    while (c + 1 < pts.size() && pts[c + 1].time_s <= room) ++c;
    choice[v] = static_cast<std::uint16_t>(c);
    end[v] = start + pts[c].time_s;
  }
}

void fill_slack(const Dag& dag, const std::vector<const Candidates*>& cands, std::vector<std::uint16_t>& choice,
                std::vector<double>& scratch_time, std::vector<double>& latest_start) {
  const int n = dag.num_ops();
  scratch_time.resize(n);
  latest_start.resize(n);
  for (int i = 0; i < n; ++i) scratch_time[i] = cands[i]->points[choice[i]].time_s;
  const Timeline tl = compute_timeline(dag, scratch_time);
  const auto& topo = dag.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const int v = *it;
    double lf = tl.time_s;
    for (int w : dag.successors(v)) lf = std::min(lf, latest_start[w]);
    const double window = lf - tl.start_s[v];
    const auto& pts = cands[v]->points;
    std::size_t c = choice[v];
    while (c + 1 < pts.size() && pts[c + 1].time_s <= window * (1 + 1e-12)) ++c;
    choice[v] = static_cast<std::uint16_t>(c);
    latest_start[v] = lf - pts[c].time_s;
  }
}

}  // namespace perseus::detail
