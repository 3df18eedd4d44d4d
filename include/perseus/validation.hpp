// Check against reality: predict the iteration time of plans that ran on real GPUs.
#pragma once

#include <string>
#include <vector>

#include "perseus/simulator.hpp"
#include "perseus/timeline_overheads.hpp"

namespace perseus {

/// A measured iteration time must lie in [kMinMeasuredOverDagTime, kMaxMeasuredOverDagTime] x
/// the plan's computation-only time from time_profile.csv (validate refuses it otherwise: overheads
/// only lengthen an iteration, and a profile is not 2x off; outside, it is a unit mistake or
/// another plan's time).
inline constexpr double kMinMeasuredOverDagTime = 0.5;
inline constexpr double kMaxMeasuredOverDagTime = 1000;

/// One measured plan and our prediction of its iteration time.
struct RealPlanCheck {
  int plan = 0;                  ///< Plan id in perseus_frontier.csv.
  bool all_max = false;          ///< An all-max-frequency plan (used for calibration, not scored).
  double measured_time_s = 0;    ///< Measured iteration time (mean over iterations >= 2), s.
  double dag_time_s = 0;         ///< Simulated computation-only iteration time, s.
  double predicted_time_s = 0;   ///< dag_time_s + the workload's calibrated overhead, s.
  double error_pct = 0;          ///< 100 × (predicted − measured) / measured.
  double dag_error_pct = 0;      ///< 100 × (dag_time − measured) / measured (no calibration).
  /// Simulated iteration time with the timeline overheads (TimelineOverheads: the given P2P
  /// latency and the calibrated per-computation overhead) in every computation, no constant, s.
  double model_time_s = 0;
  double model_error_pct = 0;    ///< 100 × (model_time − measured) / measured.
};

/// Validation of one real-GPU workload folder (tests/data/real_gpu/<workload>/).
struct RealGpuValidation {
  std::string workload;          ///< Folder name.
  int num_ranks = 0;             ///< GPUs of the pipeline (one stage each, 1F1B).
  int microbatches = 0;          ///< Microbatches per iteration.
  int dp = 1;                    ///< Data-parallel replicas (info.json "dp", default 1).
  int tp = 1;                    ///< Tensor-parallel GPUs per stage (info.json "tp", default 1).
  double overhead_s = 0;         ///< Mean (measured − dag time) over the all-max plans, s.
  std::vector<RealPlanCheck> plans;  ///< Every plan, in plan order.
  double median_abs_error_pct = 0;   ///< Median |error_pct| over the non-all-max plans.
  double max_abs_error_pct = 0;      ///< Max |error_pct| over the non-all-max plans.
  double median_dag_error_pct = 0;   ///< Median dag_error_pct (signed) over the non-all-max plans.
  /// The overhead model: p2p_latency_s as given, op_overhead_s calibrated on the all-max plans
  /// only (the mean simulated all-max time equals their mean measured time; 0 when the DAG
  /// alone is already longer).
  TimelineOverheads overheads;
  double median_model_error_pct = 0;      ///< Median model_error_pct (signed), non-all-max plans.
  double median_abs_model_error_pct = 0;  ///< Median |model_error_pct|, non-all-max plans.
  double max_abs_model_error_pct = 0;     ///< Max |model_error_pct|, non-all-max plans.
  /// Conditions the numbers above are honest about but a user should see (e.g. a P2P latency
  /// so large that no per-computation overhead fits); one sentence each, naming the workload.
  std::vector<std::string> warnings;
};

/// Predicts every measured plan's iteration time of a real-GPU workload folder.
/// Reads info.json (pp, num_microbatches), time_profile.csv (stage,instruction,frequency,time:
/// mean measured duration per frequency), perseus_plans.csv (plan,stage,order,instruction,
/// microbatch,frequency_mhz,...) and perseus_frontier.csv (plan,time_s,...,all_max_frequency).
/// Each plan's durations are looked up in time_profile.csv at its frequencies and simulated on
/// our 1F1B DAG (simulate()); the result covers computation only. Two ways to account for the
/// rest, both calibrated on the all-max warm-up plans only (never on the scored plans):
///  * constant: the mean gap between measured and simulated all-max time is added to every
///    plan (predicted_time_s; the data loading, P2P, optimizer step in one number);
///  * overhead model: every computation is lengthened by the timeline overheads
///    (timeline_overhead_s(): `p2p_latency_s` on sending computations as given, plus a
///    per-computation overhead solved for by bisection so that the all-max plans' mean
///    simulated time equals their mean measured time) and re-simulated (model_time_s) —
///    the model the planner optimizes with `--p2p-latency`/`--op-overhead`.
/// Data-parallel × pipeline × tensor-parallel (3D) runs: info.json may give "dp" and "tp"
/// (default 1); time_profile.csv and perseus_plans.csv may carry dp_rank and tp_rank columns.
/// A stage's TP GPUs share one clock (their plan rows must agree) and the stage takes the
/// slowest of them (time_profile max over tp_rank: TP collectives inside every layer make the
/// group wait for it). Each DP replica (dp_rank; without the column one plan and profile stand
/// for all) is simulated as its own pipeline and the iteration is the slowest replica's; the
/// gradient all-reduce after it is per-iteration work outside the DAG (in the constant).
/// Checks that each row's `order` matches our 1F1B order. Throws InputError naming file, line
/// and field on missing files/columns, bad values (a computation's time outside
/// [limits::kMinOpTimeS, kMaxOpTimeS], an iteration time outside (0, kMaxIterationTimeS]), no
/// plan flagged all-max or no other plan to score, a frequency absent from time_profile.csv,
/// an order mismatch, a duplicate profile row, TP GPUs of a stage at different clocks, a rank
/// outside info.json's dp/tp, and on a bad p2p_latency_s (field "p2p_latency_s").
RealGpuValidation validate_real_gpu(const std::string& dir, const SimulationOptions& options = {},
                                    double p2p_latency_s = 0);

/// Median of |error_pct| over the scored (non-all-max) plans of all workloads, %; 0 when no
/// plan is scored.
double overall_median_abs_error_pct(const std::vector<RealGpuValidation>& results);

/// Median of |model_error_pct| over the scored (non-all-max) plans of all workloads, %; 0 when
/// no plan is scored.
double overall_median_abs_model_error_pct(const std::vector<RealGpuValidation>& results);

/// A Markdown table, one row per workload plus an "all" row: the constant model's and the
/// overhead model's errors side by side.
std::string validation_markdown(const std::vector<RealGpuValidation>& results);

}  // namespace perseus
