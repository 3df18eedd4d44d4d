// Check against reality: predict the iteration time of plans that ran on real GPUs.
#pragma once

#include <string>
#include <vector>

#include "perseus/simulator.hpp"

namespace perseus {

/// One measured plan and our prediction of its iteration time.
struct RealPlanCheck {
  int plan = 0;                  ///< Plan id in perseus_frontier.csv.
  bool all_max = false;          ///< An all-max-frequency plan (used for calibration, not scored).
  double measured_time_s = 0;    ///< Measured iteration time (mean over iterations >= 2), s.
  double dag_time_s = 0;         ///< Simulated computation-only iteration time, s.
  double predicted_time_s = 0;   ///< dag_time_s + the workload's calibrated overhead, s.
  double error_pct = 0;          ///< 100 × (predicted − measured) / measured.
  double dag_error_pct = 0;      ///< 100 × (dag_time − measured) / measured (no calibration).
};

/// Validation of one real-GPU workload folder (tests/data/real_gpu/<workload>/).
struct RealGpuValidation {
  std::string workload;          ///< Folder name.
  int num_ranks = 0;             ///< GPUs of the pipeline (one stage each, 1F1B).
  int microbatches = 0;          ///< Microbatches per iteration.
  double overhead_s = 0;         ///< Mean (measured − dag time) over the all-max plans, s.
  std::vector<RealPlanCheck> plans;  ///< Every plan, in plan order.
  double median_abs_error_pct = 0;   ///< Median |error_pct| over the non-all-max plans.
  double max_abs_error_pct = 0;      ///< Max |error_pct| over the non-all-max plans.
  double median_dag_error_pct = 0;   ///< Median dag_error_pct (signed) over the non-all-max plans.
};

/// Predicts every measured plan's iteration time of a real-GPU workload folder.
/// Reads info.json (pp, num_microbatches), time_profile.csv (stage,instruction,frequency,time:
/// mean measured duration per frequency), perseus_plans.csv (plan,stage,order,instruction,
/// microbatch,frequency_mhz,...) and perseus_frontier.csv (plan,time_s,...,all_max_frequency).
/// Each plan's durations are looked up in time_profile.csv at its frequencies and simulated on
/// our 1F1B DAG (simulate()); the result covers computation only, so one constant per workload,
/// the mean gap between measured and simulated time of the all-max warm-up plans, is added for
/// the non-computation work (data loading, P2P, optimizer step). Checks that each row's
/// `order` matches our 1F1B order. Throws InputError naming file, line and field on missing
/// files/columns, bad values, a frequency absent from time_profile.csv or an order mismatch.
RealGpuValidation validate_real_gpu(const std::string& dir, const SimulationOptions& options = {});

/// Median of |error_pct| over the scored (non-all-max) plans of all workloads.
double overall_median_abs_error_pct(const std::vector<RealGpuValidation>& results);

/// A Markdown table, one row per workload plus an "all" row.
std::string validation_markdown(const std::vector<RealGpuValidation>& results);

}  // namespace perseus
