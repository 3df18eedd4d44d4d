// `perseus optimize` as a library call: profile in, frontier folder out.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "perseus/frontier.hpp"
#include "perseus/schedule.hpp"

namespace perseus {

/// Inputs of one optimize job.
struct OptimizeConfig {
  std::string profile_path;    ///< Profile CSV (see load_profile_csv()).
  int stages = 0;              ///< GPUs (pipeline ranks) in the pipeline (0 = from a schedule file).
  int microbatches = 0;        ///< Microbatches per iteration (0 = from a schedule file).
  /// Schedule name (schedule_names()) or the path of a schedule CSV (load_schedule_csv()).
  std::string schedule = "1f1b";
  int chunks = 1;              ///< Stages per GPU for interleaved schedules.
  /// Share of a full backward's time/energy given to I when a split-backward schedule runs on
  /// a profile without backward_input/backward_weight rows (split_backward_profile()).
  double backward_input_fraction = 0.5;
  double p2p_power_w = 0;      ///< P2P blocking power P_block, W.
  double unit_time_s = 1e-3;   ///< Planner time quantum u, s.
  int sample = 0;              ///< Write every K-th plan (plus first and last); 0 = at most 100 plans.
  bool zeus_format = false;    ///< Also write Zeus freqs_pipeline_NNNNN.py files.
  bool reclaim_slack = true;   ///< Slack reclamation after each step.
  PlannerMode planner_mode = PlannerMode::kCertified;  ///< Planner algorithm (PlannerMode).
  std::string out_dir;         ///< Output folder (replaced atomically).
  /// Threads that evaluate and write plan files (1..1024; 0 = one per hardware thread).
  /// The output does not depend on it.
  int threads = 1;
};

/// Headline results of an optimize job (also written to summary.json).
struct OptimizeSummary {
  double t_min_s = 0;             ///< Fastest frontier plan's iteration time, s.
  double energy_at_t_min_j = 0;   ///< Its energy (one pipeline), J.
  double t_max_s = 0;             ///< Slowest frontier plan's iteration time, s.
  double energy_at_t_max_j = 0;   ///< Its energy, J.
  double allmax_time_s = 0;       ///< All-max-frequency plan: iteration time, s.
  double allmax_energy_j = 0;     ///< All-max-frequency plan: energy, J.
  double intrinsic_saving_pct = 0;///< 100 × (allmax_energy − energy_at_t_min) / allmax_energy.
  double reclaimed_energy_j = 0;  ///< Part of the T_min saving due to slack reclamation, J.
  /// 100 × (allmax_energy − E) / allmax_energy with E the lowest-energy plan whose iteration
  /// time is <= the all-max plan's (equals intrinsic_saving_pct unless T_min < all-max time).
  double saving_at_allmax_time_pct = 0;
  double lower_bound_at_t_min_j = 0;   ///< Certified LB at T_min, J (0: not computed).
  double max_optimality_gap_pct = 0;   ///< Largest 100 × (E − LB) / LB over the frontier, %.
  double max_deadline_gap_pct = 0;     ///< Frontier::max_deadline_gap_pct(), %.
  std::size_t num_plans = 0;      ///< Frontier points.
  std::size_t plans_written = 0;  ///< Plan files written (sampling).
  std::int64_t num_steps = 0;     ///< Graph-cut steps.
  double solve_time_s = 0;        ///< Frontier solve wall time, s.
  /// Profile approximations applied (chunk split, backward split), for the user to see.
  std::vector<std::string> approximations;
};

/// Indices of the frontier plans to write: every `sample`-th from the slowest (index 0),
/// plus the last (T_min). sample = 0 picks K so that at most 100 plans are written.
std::vector<std::size_t> sample_plan_indices(std::size_t num_plans, int sample);

/// Runs the whole job: builds the schedule (by name, or imported from a CSV file when
/// config.schedule is not a known name but an existing file; stages/microbatches, when set,
/// must then match the file), loads and validates the profile (it needs one stage per
/// schedule stage, i.e. stages × chunks; a per-GPU profile with one stage per rank is split
/// evenly over the chunks, and a profile without I/W rows gets its backward split for
/// split-backward schedules — both approximations, listed in summary.approximations), builds the DAG, solves the frontier, evaluates the all-max baseline and
/// writes `out_dir` (summary.json, frontier.csv, plans/plan_NNNNN.json, optionally
/// plans/freqs_pipeline_NNNNN.py). Files are written into a temporary sibling folder that
/// is renamed into place at the end, so an interrupted run never leaves a folder that looks
/// complete. `progress(fraction)` is called from time to time during the solve.
/// Throws InputError on bad inputs or when the folder cannot be written.
OptimizeSummary run_optimize(const OptimizeConfig& config, const std::function<void(double)>& progress = {});

}  // namespace perseus
