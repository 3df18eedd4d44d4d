// Comparison of our frontier with the published Perseus artifact's (tests/data/emulation).
// Used by the golden test (assertions) and bench/paper_comparison (README table).
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <functional>
#include <string>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"
#include "perseus/plan.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"

namespace perseus::reference {

inline constexpr double kRelativeTimes[] = {1.00, 1.01, 1.02, 1.05, 1.10, 1.20};

/// One emulation case of the paper's Table 6 (GPT-3 175B, 8 stages, 1F1B).
struct PaperCase {
  std::string device;  // a100_sxm or a40
  int microbatches = 0;
  double p_block_w = 0;
  double paper_saving_pct = 0;       // table6 perseus_intrinsic_saving_pct
  double paper_baseline_j = 0;       // table6 baseline_energy_j / 80 (raw units)
  std::vector<std::pair<double, double>> paper_frontier;  // (time s, energy J), raw units
};

inline std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) out.push_back(f);
  return out;
}

/// Loads the 8 cases from `data_dir` (= tests/data). Empty if the data is missing.
inline std::vector<PaperCase> load_paper_cases(const std::string& data_dir) {
  std::vector<PaperCase> cases;
  std::ifstream t6(data_dir + "/emulation/table6_intrinsic_saving.csv");
  std::string line;
  std::getline(t6, line);
  while (std::getline(t6, line)) {
    const auto f = split_csv_line(line);
    if (f.size() < 10) continue;
    PaperCase c;
    c.device = f[1];
    c.microbatches = std::stoi(f[2]);
    c.p_block_w = c.device == "a40" ? 70.38 : 83.64;
    c.paper_baseline_j = std::stod(f[5]) / 80.0;  // notebook scaling: energy x10 (time) x8 (TP)
    c.paper_saving_pct = std::stod(f[9]);
    std::ifstream fr(data_dir + "/emulation/frontier_gpt3-175b_" + c.device + "_mb" + f[2] + ".csv");
    std::string row;
    std::getline(fr, row);
    while (std::getline(fr, row)) {
      const auto g = split_csv_line(row);
      if (g.size() == 2) c.paper_frontier.emplace_back(std::stod(g[0]), std::stod(g[1]));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

/// Lowest energy among frontier points with time <= t (inf if none).
inline double energy_within(const std::vector<std::pair<double, double>>& front, double t) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [time, energy] : front)
    if (time <= t * (1 + 1e-12)) best = std::min(best, energy);
  return best;
}

/// Our result for one case.
struct OurResult {
  double saving_pct = 0, t_min_s = 0, allmax_time_s = 0, allmax_energy_j = 0, solve_time_s = 0;
  std::size_t num_plans = 0, num_ops = 0;
  std::int64_t steps = 0, max_flows = 0;
  std::vector<double> ours_pct, paper_pct;  // energy / own all-max baseline at kRelativeTimes, %
};

/// Solves one paper case; `inspect` (optional) sees the whole frontier (benchmarks dump it).
/// `mode`: the planner (default: Planner 2.0, PlannerMode::kCertified); `engine`: its max-flow.
inline OurResult run_case(const PaperCase& c, const std::string& data_dir, double unit_time_s,
                          const std::function<void(const Frontier&)>& inspect = {},
                          PlannerMode mode = PlannerMode::kCertified, MinCutEngine engine = PlannerOptions{}.min_cut_engine) {
  const Profile profile = load_profile_csv(data_dir + "/emulation/stage_profile_gpt3-175b_" + c.device + ".csv", 8);
  const Dag dag = Dag::build(make_1f1b(8, c.microbatches));
  PlannerOptions opt;
  opt.p_block_w = c.p_block_w;
  opt.unit_time_s = unit_time_s;
  opt.mode = mode;
  opt.min_cut_engine = engine;
  const Frontier frontier = solve_frontier(dag, profile, opt);
  if (inspect) inspect(frontier);
  const FrequencyPlan allmax = all_max_plan(dag, profile, c.p_block_w);
  OurResult r;
  r.num_ops = static_cast<std::size_t>(dag.num_ops());
  r.steps = frontier.num_steps;
  r.max_flows = frontier.num_max_flows;
  r.solve_time_s = frontier.solve_time_s;
  r.num_plans = frontier.size();
  r.t_min_s = frontier.points().back().time_s;
  r.allmax_time_s = allmax.timeline.time_s;
  r.allmax_energy_j = allmax.total_energy_j();
  r.saving_pct = 100.0 * (1.0 - frontier.points().back().energy_j / r.allmax_energy_j);
  std::vector<std::pair<double, double>> ours;
  for (const auto& p : frontier.points()) ours.emplace_back(p.time_s, p.energy_j);
  double paper_tmin = std::numeric_limits<double>::infinity();
  for (const auto& [t, e] : c.paper_frontier) paper_tmin = std::min(paper_tmin, t);
  for (double rel : kRelativeTimes) {
    r.ours_pct.push_back(100.0 * energy_within(ours, rel * r.t_min_s) / r.allmax_energy_j);
    r.paper_pct.push_back(100.0 * energy_within(c.paper_frontier, rel * paper_tmin) / c.paper_baseline_j);
  }
  return r;
}

}  // namespace perseus::reference
