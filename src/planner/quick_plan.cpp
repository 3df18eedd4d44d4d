// quick_fastest_plan(): all-max plan with its slack filled (see include/perseus/quick_plan.hpp).
#include "perseus/quick_plan.hpp"

#include <map>
#include <utility>

#include <fmt/core.h>

#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "plan_improve.hpp"

namespace perseus {

FrequencyPlan quick_fastest_plan(const Dag& dag, const Profile& profile, double p_block_w) {
  const int n = dag.num_ops();
  // One candidate table per (stage, kind): Pareto clocks, time ascending, effective energy descending.
  std::map<std::pair<int, int>, Candidates> tables;
  std::vector<const Candidates*> cands(n);
  for (int i = 0; i < n; ++i) {
    const Computation& c = dag.op(i);
    const auto key = std::make_pair(c.stage, static_cast<int>(c.kind));
    auto it = tables.find(key);
    if (it == tables.end()) {
      const auto& pts = profile.points(c.stage, c.kind);
      if (pts.empty())
        throw InputError(fmt::format("profile {}: no rows for stage {} {}, which the schedule needs", profile.source,
                                     c.stage, to_string(c.kind)));
      Candidates cand;
      cand.points = pareto_points(pts, p_block_w);
      it = tables.emplace(key, std::move(cand)).first;
    }
    cands[i] = &it->second;
  }
  std::vector<std::uint16_t> choice(n, 0);  // fastest candidate everywhere
  std::vector<double> scratch, latest;
  detail::fill_slack(dag, cands, choice, scratch, latest);
  std::vector<int> freq(n);
  std::vector<double> time(n), energy(n);
  for (int i = 0; i < n; ++i) {
    const OperatingPoint& p = cands[i]->points[choice[i]];
    freq[i] = p.freq_mhz;
    time[i] = p.time_s;
    energy[i] = p.energy_j;
  }
  return evaluate_durations(dag, std::move(freq), std::move(time), std::move(energy), p_block_w);
}

}  // namespace perseus
