// The optimize job: solve, evaluate the baseline, write the output folder atomically.
#include "perseus/optimize.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/error.hpp"
#include "perseus/profile_transform.hpp"
#include "perseus/schedule_io.hpp"

namespace perseus {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw InputError(fmt::format("{}: write failed", path.string()));
}

json plan_json(const Dag& dag, const FrequencyPlan& plan, std::size_t index) {
  json ranks = json::array();
  for (int r = 0; r < dag.num_ranks(); ++r) {
    json instrs = json::array();
    for (int id : dag.rank_ops(r)) {
      const Computation& c = dag.op(id);
      instrs.push_back({{"instruction", to_string(c.kind)},
                        {"stage", c.stage},
                        {"microbatch", c.microbatch},
                        {"frequency_mhz", plan.freq_mhz[id]},
                        {"start_s", plan.timeline.start_s[id]},
                        {"end_s", plan.timeline.end_s[id]}});
    }
    ranks.push_back({{"rank", r}, {"instructions", std::move(instrs)}});
  }
  return {{"plan", index},
          {"time_s", plan.timeline.time_s},
          {"energy_j", plan.total_energy_j()},
          {"compute_energy_j", plan.compute_energy_j},
          {"blocking_energy_j", plan.blocking_energy_j},
          {"ranks", std::move(ranks)}};
}

std::string zeus_plan(const Dag& dag, const FrequencyPlan& plan, std::size_t index) {
  std::string out = "[\n";
  for (int r = 0; r < dag.num_ranks(); ++r) {
    out += "    [";
    bool first = true;
    for (int id : dag.rank_ops(r)) {
      out += fmt::format("{}(\"{}\", {})", first ? "" : ", ", to_string(dag.op(id).kind), plan.freq_mhz[id]);
      first = false;
    }
    out += "],\n";
  }
  out += fmt::format("]\n# Plan {}: iteration time {:.6f} s, energy {:.3f} J (perseus optimize)\n", index,
                     plan.timeline.time_s, plan.total_energy_j());
  return out;
}

// The schedule of a job: a generator by name, or a CSV file (see run_optimize()).
Schedule resolve_schedule(const OptimizeConfig& cfg, bool from_file) {
  if (!from_file) {
    const auto names = schedule_names();
    if (std::find(names.begin(), names.end(), cfg.schedule) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw InputError(fmt::format("--schedule {}: not a schedule name ({}) nor an existing schedule CSV file",
                                   cfg.schedule, list));
    }
    return make_schedule(cfg.schedule, cfg.stages, cfg.microbatches, cfg.chunks);
  }
  Schedule s = load_schedule_csv(cfg.schedule);
  if (cfg.stages > 0 && cfg.stages != s.num_ranks()) {
    throw InputError(fmt::format("--stages {} does not match schedule file {}, which has {} ranks (rows)", cfg.stages,
                                 cfg.schedule, s.num_ranks()));
  }
  if (cfg.microbatches > 0 && cfg.microbatches != s.num_microbatches) {
    throw InputError(fmt::format("--microbatches {} does not match schedule file {}, which has {} microbatches",
                                 cfg.microbatches, cfg.schedule, s.num_microbatches));
  }
  if (cfg.chunks > 1 && cfg.chunks * s.num_ranks() != s.num_stages) {
    throw InputError(fmt::format("--chunks {} does not match schedule file {}: {} stages on {} ranks", cfg.chunks,
                                 cfg.schedule, s.num_stages, s.num_ranks()));
  }
  return s;
}

/// Removes `.NAME.partial-PID` / `.NAME.old-PID` folders left by runs that were killed
/// (Ctrl-C, kill -9) before they could clean up: only those whose process is gone.
void remove_stale_temporaries(const fs::path& parent, const std::string& name) {
  std::error_code ec;
  std::vector<fs::path> stale;  // removed after the listing, not while iterating
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string file = entry.path().filename().string();
    for (const std::string& prefix : {"." + name + ".partial-", "." + name + ".old-"}) {
      if (file.rfind(prefix, 0) != 0) continue;
      const std::string pid_text = file.substr(prefix.size());
      int pid = 0;
      const auto [ptr, err] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
      if (err != std::errc() || ptr != pid_text.data() + pid_text.size() || pid <= 0) continue;
      if (::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(entry.path());
    }
  }
  for (const auto& path : stale) fs::remove_all(path, ec);
}

}  // namespace

std::vector<std::size_t> sample_plan_indices(std::size_t num_plans, int sample) {
  std::vector<std::size_t> out;
  if (num_plans == 0) return out;
  std::size_t k = sample > 0 ? static_cast<std::size_t>(sample) : std::max<std::size_t>(1, (num_plans + 98) / 99);
  for (std::size_t i = 0; i < num_plans; i += k) out.push_back(i);
  if (out.back() != num_plans - 1) out.push_back(num_plans - 1);
  return out;
}

OptimizeSummary run_optimize(const OptimizeConfig& cfg, const std::function<void(double)>& progress) {
  const auto names = schedule_names();
  const bool from_file = std::find(names.begin(), names.end(), cfg.schedule) == names.end() &&
                         fs::is_regular_file(cfg.schedule);
  if (!from_file && cfg.stages < 1) {
    throw InputError(cfg.stages == 0 ? std::string("--stages is required (GPUs per pipeline) unless --schedule is a "
                                                   "schedule CSV file")
                                     : fmt::format("--stages must be >= 1, got {}", cfg.stages));
  }
  if (!from_file && cfg.microbatches < 1) {
    throw InputError(cfg.microbatches == 0
                         ? std::string("--microbatches is required unless --schedule is a schedule CSV file")
                         : fmt::format("--microbatches must be >= 1, got {}", cfg.microbatches));
  }
  if (cfg.chunks < 1) throw InputError(fmt::format("--chunks must be >= 1, got {}", cfg.chunks));
  if (cfg.sample < 0) throw InputError(fmt::format("--sample must be >= 0, got {}", cfg.sample));
  if (cfg.threads < 0 || cfg.threads > 1024) {
    throw InputError(fmt::format("--threads must be in [0, 1024] (0 = one per hardware thread), got {}", cfg.threads));
  }
  const int threads = cfg.threads > 0 ? cfg.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (cfg.out_dir.empty()) throw InputError("--out: an output folder is required");
  {
    // Never replace a folder that is not an earlier output (it could hold the user's files).
    const fs::path out = cfg.out_dir;
    std::error_code ec;
    if (fs::exists(out, ec)) {
      if (!fs::is_directory(out, ec)) throw InputError(fmt::format("--out {}: exists and is not a folder", cfg.out_dir));
      // Only files that `perseus optimize` / `perseus report` write may be in it.
      for (const auto& entry : fs::directory_iterator(out, ec)) {
        const std::string name = entry.path().filename().string();
        const bool ours = name == "summary.json" || name == "frontier.csv" || name == "schedule.csv" ||
                          name == "plans" || name == "report.html" || name == "emulation.csv" ||
                          (name.size() > 4 && name.compare(name.size() - 4, 4, ".svg") == 0);
        if (!ours) {
          throw InputError(fmt::format(
              "--out {}: folder holds '{}', which perseus did not write; refusing to replace it (choose another "
              "--out or remove the folder)",
              cfg.out_dir, name));
        }
      }
    }
  }
  const Schedule schedule = resolve_schedule(cfg, from_file);
  std::vector<std::string> approximations;
  const Profile profile =
      fit_profile_to_schedule(load_profile_csv(cfg.profile_path), schedule, cfg.backward_input_fraction, &approximations);
  const Dag dag = Dag::build(schedule);

  PlannerOptions opt;
  opt.p2p_power_w = cfg.p2p_power_w;
  opt.unit_time_s = cfg.unit_time_s;
  opt.reclaim_slack = cfg.reclaim_slack;
  opt.mode = cfg.planner_mode;
  if (progress) {
    opt.progress = [&](std::int64_t t, std::int64_t t_max, std::int64_t t_min) {
      progress(t_max > t_min ? static_cast<double>(t_max - t) / static_cast<double>(t_max - t_min) : 1.0);
    };
  }
  const Frontier frontier = solve_frontier(dag, profile, opt);
  const FrequencyPlan allmax = all_max_plan(dag, profile, cfg.p2p_power_w);

  OptimizeSummary sum;
  const auto& pts = frontier.points();
  if (pts.empty()) throw InputError("planner: the frontier is empty (check the profile's times and energies)");
  sum.t_min_s = pts.back().time_s;
  sum.energy_at_t_min_j = pts.back().energy_j;
  sum.t_max_s = pts.front().time_s;
  sum.energy_at_t_max_j = pts.front().energy_j;
  sum.allmax_time_s = allmax.timeline.time_s;
  sum.allmax_energy_j = allmax.total_energy_j();
  sum.intrinsic_saving_pct = 100.0 * (sum.allmax_energy_j - sum.energy_at_t_min_j) / sum.allmax_energy_j;
  sum.reclaimed_energy_j = frontier.reclaimed_energy_j;
  sum.saving_at_allmax_time_pct =
      100.0 * (sum.allmax_energy_j - pts[frontier.lowest_energy_within(sum.allmax_time_s * (1 + 1e-12))].energy_j) /
      sum.allmax_energy_j;
  sum.lower_bound_at_t_min_j = pts.back().lower_bound_j;
  sum.max_optimality_gap_pct = frontier.max_optimality_gap_pct();
  sum.max_deadline_gap_pct = frontier.max_deadline_gap_pct();
  sum.num_plans = pts.size();
  sum.num_steps = frontier.num_steps;
  sum.solve_time_s = frontier.solve_time_s;
  sum.approximations = approximations;

  // Write into a temporary sibling, then rename into place.
  const fs::path out = fs::absolute(cfg.out_dir).lexically_normal();
  const fs::path parent = out.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  const fs::path tmp = parent / fmt::format(".{}.partial-{}", out.filename().string(), ::getpid());
  remove_stale_temporaries(parent, out.filename().string());
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp / "plans", ec) || ec) {
    throw InputError(fmt::format("{}: cannot create output folder: {}", out.string(), ec.message()));
  }
  try {
    std::string csv = "plan,time_s,energy_j,lower_bound_j\n";
    for (std::size_t i = 0; i < pts.size(); ++i) {
      csv += fmt::format("{},{:.9f},{:.6f},{:.6f}\n", i, pts[i].time_s, pts[i].energy_j, pts[i].lower_bound_j);
    }
    write_file(tmp / "frontier.csv", csv);
    write_file(tmp / "schedule.csv", format_schedule_csv(schedule));  // the order planned, to diff
    const auto indices = sample_plan_indices(pts.size(), cfg.sample);
    frontier.for_each_plan(indices, [&](std::size_t i, const FrequencyPlan& plan) {
      write_file(tmp / "plans" / fmt::format("plan_{:05d}.json", i), plan_json(dag, plan, i).dump(1) + "\n");
      if (cfg.zeus_format) write_file(tmp / "plans" / fmt::format("freqs_pipeline_{:05d}.py", i), zeus_plan(dag, plan, i));
    }, threads);
    sum.plans_written = indices.size();
    json summary = {
        {"t_min_s", sum.t_min_s},
        {"energy_at_t_min_j", sum.energy_at_t_min_j},
        {"t_max_s", sum.t_max_s},
        {"energy_at_t_max_j", sum.energy_at_t_max_j},
        {"allmax_time_s", sum.allmax_time_s},
        {"allmax_energy_j", sum.allmax_energy_j},
        {"intrinsic_saving_pct", sum.intrinsic_saving_pct},
        {"reclaimed_energy_j", sum.reclaimed_energy_j},
        {"saving_at_allmax_time_pct", sum.saving_at_allmax_time_pct},
        {"lower_bound_at_t_min_j", sum.lower_bound_at_t_min_j},
        {"max_optimality_gap_pct", sum.max_optimality_gap_pct},
        {"max_deadline_gap_pct", sum.max_deadline_gap_pct},
        {"num_lp_solves", frontier.num_lp_solves},
        {"bound_time_s", frontier.bound_time_s},
        {"num_plans", sum.num_plans},
        {"plans_written", sum.plans_written},
        {"num_steps", sum.num_steps},
        {"num_max_flows", frontier.num_max_flows},
        {"solve_time_s", sum.solve_time_s},
        {"approximations", sum.approximations},
        {"schedule",
         {{"name", schedule.name},
          {"ranks", schedule.num_ranks()},
          {"stages", schedule.num_stages},
          {"microbatches", schedule.num_microbatches},
          {"split_backward", schedule.split_backward}}},
        {"inputs",
         {{"profile", cfg.profile_path},
          {"stages", cfg.stages},
          {"microbatches", cfg.microbatches},
          {"schedule", cfg.schedule},
          {"chunks", cfg.chunks},
          {"backward_input_fraction", cfg.backward_input_fraction},
          {"p2p_power_w", cfg.p2p_power_w},
          {"unit_time_s", cfg.unit_time_s},
          {"sample", cfg.sample},
          {"format_zeus", cfg.zeus_format},
          {"reclaim_slack", cfg.reclaim_slack},
          {"planner", cfg.planner_mode == PlannerMode::kGraphCut ? "graph-cut" : "certified"}}},
    };
    write_file(tmp / "summary.json", summary.dump(2) + "\n");  // last: marks the folder complete
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // Swap into place: an old folder is moved aside first, then removed.
  const fs::path old = parent / fmt::format(".{}.old-{}", out.filename().string(), ::getpid());
  if (fs::exists(out)) {
    fs::rename(out, old, ec);
    if (ec) {
      fs::remove_all(tmp, ec);
      throw InputError(fmt::format("{}: cannot replace existing folder", out.string()));
    }
  }
  fs::rename(tmp, out, ec);
  if (ec) throw InputError(fmt::format("{}: cannot move output into place: {}", out.string(), ec.message()));
  fs::remove_all(old, ec);
  return sum;
}

}  // namespace perseus
