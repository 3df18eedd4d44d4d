// The optimize job: solve and evaluate the baseline (optimize()), then write the output folder (write_optimize_folder()).
#include "perseus/optimize.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/baselines.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/plan_files.hpp"
#include "perseus/zeus_plan_file.hpp"
#include "perseus/schedule_io.hpp"
#include "cost_model.hpp"

namespace perseus {

namespace fs = std::filesystem;
using nlohmann::json;

int resolved_threads(int threads) {
  return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

double saving_at_allmax_time_pct(const Frontier& frontier, const FrequencyPlan& allmax) {
  const double e = allmax.total_energy_j();
  const auto& pts = frontier.points();
  if (e == 0 || pts.empty()) return 0;
  // The lowest own-time energy among the plans that meet the all-max time (a suffix: time
  // falls along the frontier). Not lowest_energy_within(): it counts blocking until the
  // deadline, and with a T_min below the all-max time its own energy_j need not be the lowest
  // (a gpipe case reported 2.41 % where the T_min plan saves 2.50 %, session 23).
  const double deadline_s = allmax.timeline.time_s * (1 + kTimeNoiseRelTol);
  double best = pts.back().energy_j;
  for (std::size_t i = frontier.lowest_energy_within(deadline_s); i < pts.size(); ++i)
    if (pts[i].time_s <= deadline_s) best = std::min(best, pts[i].energy_j);
  return 100.0 * (e - best) / e;
}

namespace {

void check_options(const OptimizeConfig& cfg) {
  if (cfg.sample < 0) throw InputError("sample", fmt::format("must be >= 0, got {}", cfg.sample));
  if (cfg.threads < 0 || cfg.threads > 1024) {
    throw InputError("threads", fmt::format("must be in [0, 1024] (0 = one per hardware thread), got {}", cfg.threads));
  }
  if (std::isnan(cfg.time_budget_s) || cfg.time_budget_s > 1e9) {
    throw InputError("time_budget_s", fmt::format("must be in [0, 1e9] s (< 0: none), got {}", cfg.time_budget_s));
  }
  if (cfg.max_points < 0 || cfg.max_points > 1'000'000'000) {
    throw InputError("max_points", fmt::format("must be in [1, 1e9] (0: none), got {}", cfg.max_points));
  }
  if (cfg.max_lp_solves < 1 || cfg.max_lp_solves > 100000) {
    throw InputError("max_lp_solves", fmt::format("must be in [1, 100000], got {}", cfg.max_lp_solves));
  }
  if (!(cfg.polish_s >= 0 && cfg.polish_s <= 86400)) {
    throw InputError("polish_s", fmt::format("must be in [0, 86400] s (0: none), got {}", cfg.polish_s));
  }
  check_polish_solves(cfg.polish_solves);
}


std::string frontier_csv_text(const std::vector<FrontierPoint>& pts) {
  std::string csv = "plan,time_s,energy_j,lower_bound_j\n";
  for (std::size_t i = 0; i < pts.size(); ++i) {
    csv += fmt::format("{},{:.9f},{:.6f},{:.6f}\n", i, pts[i].time_s, pts[i].energy_j, pts[i].lower_bound_j);
  }
  return csv;
}

}  // namespace

std::vector<std::string> unit_time_warnings(const Problem& problem, double unit_time_s) {
  const Dag& dag = problem.dag;
  std::vector<double> fastest;
  fastest.reserve(static_cast<std::size_t>(dag.num_ops()));
  double widest = 0;  // s between one computation's fastest and slowest clock
  for (int i = 0; i < dag.num_ops(); ++i) {
    const Computation& c = dag.op(i);
    const auto& pts = problem.profile.points(c.stage, c.kind);
    if (pts.empty()) continue;
    double t = pts.front().time_s, slowest = t;
    for (const auto& p : pts) t = std::min(t, p.time_s), slowest = std::max(slowest, p.time_s);
    fastest.push_back(t);
    widest = std::max(widest, slowest - t);
  }
  if (fastest.empty() || !(unit_time_s > 0)) return {};
  const auto mid = fastest.begin() + static_cast<std::ptrdiff_t>(fastest.size() / 2);
  std::nth_element(fastest.begin(), mid, fastest.end());
  const double median = *mid;
  if (median >= kFineUnitsPerComputation * unit_time_s) return {};
  // Never below the range --unit-time takes (a 1e-6 s computation suggested 1e-8 s; session 27).
  const double wanted =
      std::max(kMinUnitTimeS, median > 0 ? std::pow(10.0, std::floor(std::log10(median / 20))) : unit_time_s);
  // Nor below what the widest computation allows (a unit the planner would refuse; session 30).
  const double allowed = detail::finest_unit_time_s(widest);
  const double fine = std::max(wanted, allowed);
  if (!(fine < unit_time_s)) return {};  // already at the finest unit it can take
  const std::string head = fmt::format(
      "the median computation takes {:.3g} s at its fastest clock, {:.3g} time units of {:g} s; durations are "
      "rounded up to whole units, so the frontier is coarse (few plans, little saving found): ",
      median, median / unit_time_s, unit_time_s);
  if (allowed > wanted)
    return {head + fmt::format("the finest time unit these computations allow is {:g} s (one of them spans {:.3g} s "
                               "between its fastest and slowest clock)",
                               allowed, widest)};
  return {head + fmt::format("a time unit of {:g} s plans these computations finely", fine)};
}

namespace {

/// summary.json's inputs.chunks: as given, else for a schedule CSV the stages each rank holds
/// (null when they differ between ranks).
json input_chunks(const ProblemSpec& spec, const Schedule& schedule) {
  const std::vector<std::string> names = schedule_names();
  if (spec.chunks_given || spec.chunks > 1 || std::find(names.begin(), names.end(), spec.schedule) != names.end())
    return spec.chunks;
  const std::vector<int> per_rank = stages_per_rank(schedule);
  if (per_rank.empty() || std::any_of(per_rank.begin(), per_rank.end(), [&](int n) { return n != per_rank.front(); }))
    return nullptr;
  return per_rank.front();
}

json summary_json_base(const OptimizeResult& r, const OptimizeConfig& cfg) {
  const OptimizeSummary& sum = r.summary;
  const Schedule& schedule = r.problem.schedule;
  return {
      {"t_min_s", sum.t_min_s},
      {"energy_at_t_min_j", sum.energy_at_t_min_j},
      {"t_max_s", sum.t_max_s},
      {"energy_at_t_max_j", sum.energy_at_t_max_j},
      {"allmax_time_s", sum.allmax_time_s},
      {"allmax_energy_j", sum.allmax_energy_j},
      {"intrinsic_saving_pct", sum.intrinsic_saving_pct},
      {"reclaimed_energy_j", sum.reclaimed_energy_j},
      {"saving_at_allmax_time_pct", sum.saving_at_allmax_time_pct},
      // null without a bound (graph-cut planner, or a solve stopped before the bound stage):
      // a 0 % gap would read as "proven optimal".
      {"lower_bound_at_t_min_j", sum.has_lower_bound ? json(sum.lower_bound_at_t_min_j) : json(nullptr)},
      {"max_optimality_gap_pct", sum.has_lower_bound ? json(sum.max_optimality_gap_pct) : json(nullptr)},
      {"max_deadline_gap_pct", sum.has_lower_bound ? json(sum.max_deadline_gap_pct) : json(nullptr)},
      {"num_lp_solves", r.frontier.num_lp_solves},
      {"num_hull_walk_steps", r.frontier.num_hull_walk_steps},
      // The bound method used (inputs.bound "auto" resolved); null for the graph-cut planner.
      {"bound_method", r.frontier.bound_method == BoundMethod::kAuto ? json(nullptr)
                                                                      : json(to_string(r.frontier.bound_method))},
      {"bound_time_s", r.frontier.bound_time_s},
      {"num_plans", sum.num_plans},
      {"plans_written", sum.plans_written},
      {"num_steps", sum.num_steps},
      {"num_max_flows", r.frontier.num_max_flows},
      {"solve_time_s", sum.solve_time_s},
      {"partial", sum.partial},
      {"partial_reason", sum.partial_reason},
      {"partial_detail", sum.partial_detail},
      {"approximations", sum.approximations},
      {"warnings", sum.warnings},
      {"schedule",
       {{"name", schedule.name},
        {"ranks", schedule.num_ranks()},
        {"stages", schedule.num_stages},
        {"microbatches", schedule.num_microbatches},
        {"split_backward", schedule.split_backward}}},
      // Key names are the file format (docs): "stages" counts GPUs, "p2p_power_w" is P_block.
      // With a schedule CSV, stages, microbatches and (unless given) chunks are the file's (null:
      // an uneven placement has no one chunk count).
      {"inputs",
       {{"profile", cfg.profile_path},
        {"stages", cfg.problem.num_ranks > 0 ? cfg.problem.num_ranks : schedule.num_ranks()},
        {"microbatches", cfg.problem.microbatches > 0 ? cfg.problem.microbatches : schedule.num_microbatches},
        {"schedule", cfg.problem.schedule},
        {"chunks", input_chunks(cfg.problem, schedule)},
        {"backward_input_fraction", cfg.problem.backward_input_fraction},
        {"p2p_power_w", cfg.problem.p_block_w},
        {"unit_time_s", cfg.unit_time_s},
        {"sample", cfg.sample},
        {"format_zeus", cfg.zeus_format},
        {"reclaim_slack", cfg.reclaim_slack},
        {"planner", to_string(cfg.planner_mode)},
        {"bound", to_string(cfg.bound_method)},
        {"time_budget_s", cfg.time_budget_s >= 0 ? json(cfg.time_budget_s + 0.0) : json(nullptr)},  // + 0.0: -0 echoes as 0
        {"max_points", cfg.max_points > 0 ? json(cfg.max_points) : json(nullptr)}}},
  };
}

json summary_json(const OptimizeResult& r, const OptimizeConfig& cfg) {
  json j = summary_json_base(r, cfg);
  // Only when set, so computation-only runs write the same summary as before these terms existed.
  if (cfg.problem.overheads.any()) {
    j["inputs"]["p2p_latency_s"] = cfg.problem.overheads.p2p_latency_s;
    j["inputs"]["op_overhead_s"] = cfg.problem.overheads.op_overhead_s;
  }
  if (cfg.max_lp_solves != PlannerOptions{}.max_lp_solves) j["inputs"]["max_lp_solves"] = cfg.max_lp_solves;
  if (cfg.polish_s > 0 || cfg.polish_solves > 0) {  // PlannerOptions::polish_time_s, polish_solves
    j["inputs"]["polish_s"] = cfg.polish_s;
    j["inputs"]["polish_solves"] = cfg.polish_solves;
    j["num_polished_points"] = r.frontier.num_polished_points;
    j["num_polish_windows"] = r.frontier.num_polish_windows;
    j["polish_time_s"] = r.frontier.polish_time_s;
  }
  return j;
}

}  // namespace

std::size_t default_max_plan_files(std::size_t num_ops) {
  if (num_ops == 0) return 100;
  return std::clamp<std::size_t>(kDefaultPlanFilesBytes / (num_ops * kPlanFileBytesPerOp), 2, 100);
}

std::vector<std::size_t> sample_plan_indices(std::size_t num_plans, int sample, std::size_t num_ops) {
  std::vector<std::size_t> out;
  if (num_plans == 0) return out;
  // sample = 0: every K-th plan plus the last, at most m plans in all.
  const std::size_t m = default_max_plan_files(num_ops);
  // K = ceil((n − 1) / (m − 1)): indices 0, K, ..., at most (m − 1) K >= n − 1, so with the
  // last one at most m.
  std::size_t k = sample > 0 ? static_cast<std::size_t>(sample) : std::max<std::size_t>(1, (num_plans + m - 3) / (m - 1));
  for (std::size_t i = 0; i < num_plans; i += k) out.push_back(i);
  if (out.back() != num_plans - 1) out.push_back(num_plans - 1);
  return out;
}

OptimizeResult optimize(const OptimizeConfig& cfg, const std::function<void(SolveStage, double)>& progress) {
  check_options(cfg);  // before the profile is read
  return optimize(load_problem(cfg.problem, cfg.profile_path), cfg, progress);
}

OptimizeResult optimize(Problem problem, const OptimizeConfig& cfg,
                        const std::function<void(SolveStage, double)>& progress) {
  check_options(cfg);
  if (cfg.strict && !problem.unit_warnings.empty()) {
    std::string text;
    for (const auto& w : problem.unit_warnings) text += w + "\n";
    throw InputError("profile", text + "(strict: implausible units are errors)");
  }
  // "all-max" means one clock for every computation, as in `perseus emulate` (docs/baselines.md).
  require_max_frequency(problem.dag, problem.profile);

  PlannerOptions opt;
  opt.p_block_w = problem.p_block_w;
  opt.unit_time_s = cfg.unit_time_s;
  opt.reclaim_slack = cfg.reclaim_slack;
  opt.mode = cfg.planner_mode;
  opt.min_cut_engine = cfg.min_cut_engine;
  opt.bound_method = cfg.bound_method;
  opt.time_budget_s = cfg.time_budget_s + 0.0;  // -0 reads as 0 in messages
  opt.max_points = cfg.max_points;
  opt.polish_time_s = cfg.polish_s;
  opt.polish_solves = cfg.polish_solves;
  opt.max_lp_solves = cfg.max_lp_solves;
  opt.threads = resolved_threads(cfg.threads);
  opt.progress = progress;
  opt.cancelled = cfg.cancelled;
  Frontier frontier = solve_frontier(problem.dag, problem.profile, opt);
  FrequencyPlan allmax = all_max_plan(problem.dag, problem.profile, problem.p_block_w);

  const auto& pts = frontier.points();
  if (pts.empty()) throw InputError("planner: the frontier is empty (check the profile's times and energies)");
  OptimizeSummary sum;
  sum.t_min_s = pts.back().time_s;
  sum.energy_at_t_min_j = pts.back().energy_j;
  sum.t_max_s = pts.front().time_s;
  sum.energy_at_t_max_j = pts.front().energy_j;
  sum.allmax_time_s = allmax.timeline.time_s;
  sum.allmax_energy_j = allmax.total_energy_j();
  // 0 for a profile of 0 J computations (it printed "-nan%" and wrote null).
  sum.intrinsic_saving_pct =
      sum.allmax_energy_j > 0 ? 100.0 * (sum.allmax_energy_j - sum.energy_at_t_min_j) / sum.allmax_energy_j : 0.0;
  sum.reclaimed_energy_j = frontier.reclaimed_energy_j;
  sum.saving_at_allmax_time_pct = saving_at_allmax_time_pct(frontier, allmax);
  sum.has_lower_bound = frontier.has_lower_bound();
  sum.bound_method = frontier.bound_method;
  sum.num_lp_solves = frontier.num_lp_solves;
  sum.lower_bound_at_t_min_j = pts.back().lower_bound_j;
  sum.max_optimality_gap_pct = frontier.max_optimality_gap_pct();
  sum.max_deadline_gap_pct = frontier.max_deadline_gap_pct();
  sum.num_plans = pts.size();
  sum.num_steps = frontier.num_steps;
  sum.solve_time_s = frontier.solve_time_s;
  sum.partial = frontier.partial();
  sum.partial_reason = frontier.partial() ? to_string(frontier.stop_reason) : "";
  sum.partial_detail = frontier.partial_detail;
  sum.approximations = problem.approximations;
  sum.warnings = problem.unit_warnings;
  for (auto& w : unit_time_warnings(problem, cfg.unit_time_s)) sum.warnings.push_back(std::move(w));
  return OptimizeResult{std::move(problem), std::move(frontier), std::move(allmax), std::move(sum)};
}

void write_optimize_folder(OptimizeResult& r, const OptimizeConfig& cfg,
                           const std::function<void(const std::filesystem::path&)>& before_commit) {
  check_options(cfg);
  const int threads = resolved_threads(cfg.threads);
  OutputFolder folder(cfg.out_dir, is_optimize_output);
  const fs::path& tmp = folder.dir();
  std::error_code ec;
  // Not create_directories: if an interruption removed the temporary folder, do not recreate it.
  if (!fs::create_directory(tmp / "plans", ec) || ec) {
    throw InputError(fmt::format("{}: cannot create output folder: {}", (tmp / "plans").string(), ec.message()));
  }
  const auto& pts = r.frontier.points();
  const Dag& dag = r.problem.dag;
  write_file(tmp / "frontier.csv", frontier_csv_text(pts));
  write_file(tmp / "schedule.csv", format_schedule_csv(r.problem.schedule));  // the order planned, to diff
  // The profile as planned (fitted to the schedule, timeline overheads included): `perseus report` needs it for power
  // colours and re-evaluation, from any working folder and after the input file moved.
  write_file(tmp / "profile.csv", format_profile_csv(r.problem.profile));
  const auto indices = sample_plan_indices(pts.size(), cfg.sample, static_cast<std::size_t>(dag.num_ops()));
  r.frontier.for_each_plan(indices, [&](std::size_t i, const FrequencyPlan& plan) {
    write_file(tmp / "plans" / plan_json_file_name(i), plan_json_text(dag, plan, i));
    if (cfg.zeus_format) write_file(tmp / "plans" / zeus_plan_file_name(i), zeus_plan_text(dag, plan, i));
  }, threads);
  r.summary.plans_written = indices.size();
  r.summary.plan_files_bytes = indices.size() * static_cast<std::size_t>(dag.num_ops()) * (cfg.zeus_format ? 2 : 1) *
                               kPlanFileBytesPerOp;
  r.summary.plan_files_capped = cfg.sample == 0 && default_max_plan_files(static_cast<std::size_t>(dag.num_ops())) < 100 &&
                                pts.size() > indices.size();
  // Last: marks the folder complete. A path that is not UTF-8 (Linux allows any bytes) is written
  // with U+FFFD for its bad bytes: dump() threw on it (exit 3, "internal error").
  write_file(tmp / "summary.json", summary_json(r, cfg).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  if (before_commit) before_commit(tmp);
  folder.commit();
}

OptimizeSummary run_optimize(const OptimizeConfig& cfg, const std::function<void(SolveStage, double)>& progress,
                             const std::function<void(const std::filesystem::path&)>& before_commit) {
  check_options(cfg);
  { OutputFolder check(cfg.out_dir, is_optimize_output); }  // fail before the solve, not after
  OptimizeResult result = optimize(cfg, progress);
  write_optimize_folder(result, cfg, before_commit);
  return result.summary;
}

}  // namespace perseus
