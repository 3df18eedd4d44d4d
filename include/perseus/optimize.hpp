// `perseus optimize` as a library call: profile in, frontier folder out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "perseus/frontier.hpp"
#include "perseus/plan.hpp"
#include "perseus/problem.hpp"

namespace perseus {

/// Inputs of one optimize job.
struct OptimizeConfig {
  std::string profile_path;    ///< Profile CSV (see load_profile_csv()).
  /// The problem: schedule (name or CSV file), num_ranks, microbatches, chunks,
  /// backward_input_fraction, p_block_w (see ProblemSpec, make_problem()).
  ProblemSpec problem;
  double unit_time_s = 1e-3;   ///< Planner time quantum u, s.
  int sample = 0;              ///< Write every K-th plan (plus first and last); 0 = at most 100 plans.
                               ///< >= 0 (negative: InputError, field "sample").
  bool zeus_format = false;    ///< Also write Zeus freqs_pipeline_NNNNN.py files.
  bool reclaim_slack = true;   ///< Slack reclamation after each step (Perseus §4.2).
  PlannerMode planner_mode = PlannerMode::kCertified;  ///< Planner algorithm (PlannerMode).
  /// Max-flow engine (PlannerOptions::min_cut_engine); the frontier does not depend on it.
  MinCutEngine min_cut_engine = MinCutEngine::kDynamic;
  /// Certified planner's bound method (PlannerOptions::bound_method).
  BoundMethod bound_method = BoundMethod::kAuto;
  std::string out_dir;         ///< Output folder (replaced atomically).
  /// Threads of the solve (PlannerOptions::threads) and of evaluating and writing plan files
  /// (1..1024; 0 = one per hardware thread). The output does not depend on it.
  int threads = 1;
  /// Bound on the solve's wall time, s (PlannerOptions::time_budget_s; < 0: none, 0..1e9).
  double time_budget_s = -1;
  /// Bound on the frontier's points (PlannerOptions::max_points; 0: none, 1..1e9).
  std::int64_t max_points = 0;
  /// Seconds of polish (CBC) on the certified frontier's plans (PlannerOptions::polish_time_s;
  /// 0..86400, 0: none). summary.json then has inputs.polish_s, num_polished_points,
  /// num_polish_windows and polish_time_s.
  double polish_s = 0;
  /// The polish's budget as a count of CBC solves (PlannerOptions::polish_solves; 0..1,000,000,
  /// 0: none): the same plans on any machine and under any load. Either this or polish_s > 0
  /// turns the polish on; both: it stops at whichever is reached first.
  int polish_solves = 0;
  /// Certified planner, LP bound: LP solves at most (PlannerOptions::max_lp_solves; 1..100000,
  /// the planner also caps them at max(40, 320000 / computations)). Fewer is faster with a looser
  /// frontier (docs/planner2.md). summary.json has inputs.max_lp_solves when it is not the default.
  int max_lp_solves = PlannerOptions{}.max_lp_solves;
  /// Implausible profile units (Problem::unit_warnings) are an InputError (field "profile")
  /// before anything is solved, instead of warnings.
  bool strict = false;
  /// PlannerOptions::cancelled: polled during the solve; when it returns true the solve stops
  /// and optimize() throws PlanningCancelled (the Python binding: Ctrl-C). Empty: never.
  std::function<bool()> cancelled;
};

/// Headline results of an optimize job (also written to summary.json).
struct OptimizeSummary {
  double t_min_s = 0;             ///< Fastest frontier plan's iteration time, s.
  double energy_at_t_min_j = 0;   ///< Its energy (one pipeline), J.
  double t_max_s = 0;             ///< Slowest frontier plan's iteration time, s.
  double energy_at_t_max_j = 0;   ///< Its energy, J.
  double allmax_time_s = 0;       ///< All-max-frequency plan: iteration time, s.
  double allmax_energy_j = 0;     ///< All-max-frequency plan: energy, J.
  /// 100 × (allmax_energy − energy_at_t_min) / allmax_energy, %; 0 when allmax_energy is 0.
  double intrinsic_saving_pct = 0;
  double reclaimed_energy_j = 0;  ///< Part of the T_min saving due to slack reclamation, J.
  /// 100 × (allmax_energy − E) / allmax_energy with E the lowest-energy plan whose iteration
  /// time is <= the all-max plan's (equals intrinsic_saving_pct unless T_min < all-max time).
  double saving_at_allmax_time_pct = 0;
  bool has_lower_bound = false;        ///< Frontier::has_lower_bound(): the three below are set.
  /// The certified planner's bound method that ran (Frontier::bound_method; kAuto: none ran).
  BoundMethod bound_method = BoundMethod::kAuto;
  int num_lp_solves = 0;  ///< LP solves of the certified planner (Frontier::num_lp_solves).
  double lower_bound_at_t_min_j = 0;   ///< Certified LB at T_min, J (0: not computed).
  double max_optimality_gap_pct = 0;   ///< Largest 100 × (E − LB) / LB over the frontier, %.
  double max_deadline_gap_pct = 0;     ///< Frontier::max_deadline_gap_pct(), %.
  std::size_t num_plans = 0;      ///< Frontier points.
  std::size_t plans_written = 0;  ///< Plan files written (sampling).
  /// The default sampling wrote fewer than 100 plans of more than that because of the byte
  /// cap (default_max_plan_files()).
  bool plan_files_capped = false;
  /// Estimated bytes of the plan files written (plans_written × computations ×
  /// kPlanFileBytesPerOp): above kDefaultPlanFilesBytes when even the two plans the default
  /// sampling always writes (the slowest and T_min's) exceed it, on the largest pipelines.
  std::size_t plan_files_bytes = 0;
  std::int64_t num_steps = 0;     ///< Graph-cut steps.
  double solve_time_s = 0;        ///< Frontier solve wall time, s.
  /// The solve was stopped by time_budget_s or max_points (Frontier::partial()): the
  /// frontier is the best found so far. partial_reason: "time_budget" or "max_points"
  /// ("" when complete); partial_detail: Frontier::partial_detail.
  bool partial = false;
  std::string partial_reason, partial_detail;
  /// Profile approximations applied (chunk split, backward split), for the user to see.
  std::vector<std::string> approximations;
  /// Problem::unit_warnings (implausible profile units), then unit_time_warnings() (the time
  /// unit is coarse for these computations).
  std::vector<std::string> warnings;
};

/// The default plan sampling (sample = 0) of a DAG of `num_ops` computations writes at most
/// this many bytes of plan files, estimating kPlanFileBytesPerOp bytes per computation and plan
/// (a perseus plan file: 170–180 B per computation): 100 plans up to ~7,400 computations, fewer
/// above (docs/performance.md "Bounded solves": a 4 × 5,000 pipeline wrote 629 MB before this cap, 125 MB since).
inline constexpr std::size_t kDefaultPlanFilesBytes = std::size_t{128} << 20;
inline constexpr std::size_t kPlanFileBytesPerOp = 180;

/// Most plans the default sampling (sample = 0) writes for a DAG of `num_ops` computations
/// (0: unknown, no byte cap): min(100, kDefaultPlanFilesBytes / (num_ops × kPlanFileBytesPerOp)),
/// at least 2 (the slowest plan and T_min's).
std::size_t default_max_plan_files(std::size_t num_ops);

/// Indices of the frontier plans to write: every `sample`-th from the slowest (index 0),
/// plus the last (T_min). sample = 0 picks K so that at most default_max_plan_files(num_ops)
/// plans are written.
std::vector<std::size_t> sample_plan_indices(std::size_t num_plans, int sample, std::size_t num_ops = 0);

/// A computation should span at least this many time units at its fastest clock: the planner
/// rounds durations up to whole units (Perseus §4.2), so fewer make the frontier coarse.
inline constexpr double kFineUnitsPerComputation = 10;

/// Warnings about the time unit (s) for `problem`: when the median computation at its fastest
/// clock spans fewer than kFineUnitsPerComputation units, one message saying so, with the
/// median (s) and a unit that plans it finely (a power of ten at most 1/20 of that median).
/// Empty otherwise (also for a unit <= 0 or a problem without computations); does not throw.
/// Without it, a profile of sub-millisecond computations planned at the default 1 ms got a
/// one-plan frontier and no word why (session 21).
std::vector<std::string> unit_time_warnings(const Problem& problem, double unit_time_s);

/// What optimize() computed: the problem, its frontier and the all-max baseline.
struct OptimizeResult {
  Problem problem;
  Frontier frontier;
  FrequencyPlan all_max;
  OptimizeSummary summary;  ///< plans_written is 0 until write_optimize_folder().
};

/// OptimizeConfig::threads as the job uses it: 0 becomes one thread per hardware thread (at
/// least 1); any other value is returned as given (optimize() checks the range 0..1024).
int resolved_threads(int threads);

/// Saving at the all-max iteration time, %: the lowest-energy frontier plan with T <= the
/// all-max plan's time (J) against the all-max plan's energy (J); 0 when that energy is 0.
/// summary.json's saving_at_allmax_time_pct (issue 17; Perseus §6.2's intrinsic saving when
/// T_min equals the all-max time).
double saving_at_allmax_time_pct(const Frontier& frontier, const FrequencyPlan& allmax);

/// Computes without writing anything: checks the options (InputError fields "sample",
/// "threads", "time_budget_s", "max_points", "max_lp_solves", "polish_s" and those of
/// load_problem(); the planner refuses a bad unit_time_s), assembles the problem
/// (load_problem(): schedule by name or CSV file, the profile fitted to it, with the
/// approximations listed in summary.approximations), solves the frontier and evaluates the
/// all-max baseline. `progress(stage, fraction)` is PlannerOptions::progress (on this thread).
/// Throws InputError on bad inputs, a profile without a row at its maximum clock for some
/// computation (require_max_frequency(), the rule `perseus emulate` applies too) or an
/// empty frontier; PlanningCancelled when config.cancelled asked to stop.
OptimizeResult optimize(const OptimizeConfig& config,
                        const std::function<void(SolveStage, double)>& progress = {});

/// The same on a problem the caller assembled (make_problem() from a Profile in memory, as the
/// Python binding does): config.profile_path and config.problem are not read (the problem's
/// own p_block_w is P_block). Same options check, strict rule, errors and summary as above;
/// throws PlanningCancelled when config.cancelled asked to stop.
OptimizeResult optimize(Problem problem, const OptimizeConfig& config,
                        const std::function<void(SolveStage, double)>& progress = {});

/// Writes `config.out_dir` atomically (OutputFolder; it may replace only an earlier
/// output, checked recursively with is_optimize_output()): frontier.csv, schedule.csv,
/// profile.csv (the profile as planned, fitted to the schedule: what `perseus report` reads),
/// plans/plan_NNNNN.json (plan_json_text()), with config.zeus_format plans/freqs_pipeline_NNNNN.py
/// (zeus_plan_text()), and summary.json last. Sets result.summary.plans_written.
/// `before_commit(tmp_dir)`, when given, runs after summary.json is written and before the
/// folder is renamed into place, with the temporary folder holding everything above: what it
/// adds there (the CLI's `--report` writes report.html) is part of the one atomic replacement,
/// and what it throws leaves the earlier output untouched.
/// Throws InputError when the folder cannot be written; whatever before_commit throws.
void write_optimize_folder(OptimizeResult& result, const OptimizeConfig& config,
                           const std::function<void(const std::filesystem::path&)>& before_commit = {});

/// optimize() then write_optimize_folder() (with `before_commit`). The folder is checked
/// before the (long) solve, so a folder that may not be replaced fails fast. Throws
/// InputError; PlanningCancelled when config.cancelled asked to stop.
OptimizeSummary run_optimize(const OptimizeConfig& config,
                             const std::function<void(SolveStage, double)>& progress = {},
                             const std::function<void(const std::filesystem::path&)>& before_commit = {});

}  // namespace perseus
