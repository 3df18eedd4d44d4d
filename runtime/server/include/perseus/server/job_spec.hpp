// What a client asks for when it creates a job (POST /v1/jobs), validated.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/server/straggler_options.hpp"

namespace perseus::server {

/// Where a job's plans come from.
enum class PlanSource {
  kProfile,    ///< "profile_csv": the server solves the frontier (in the background).
  kPlans,      ///< "plans": a precomputed frontier (e.g. `perseus optimize` plan files).
  kZeusPlans,  ///< "zeus_plans": texts of Zeus freqs_pipeline_*.py files, parsed as data.
  kProfiling,  ///< "mode": "profile": the server drives an online frequency sweep first.
};

/// Name used in the API ("profile", "plans", "zeus_plans", "profiling").
const char* to_string(PlanSource source);

/// A validated job request. Sizes are checked against hard limits so that no request can
/// make the server allocate without bound.
struct JobSpec {
  std::string name;             ///< Free text label (<= 256 bytes); never used in paths.
  int pp = 1;                   ///< GPUs per pipeline (pipeline-parallel degree).
  int dp = 1;                   ///< Data-parallel degree (number of pipelines).
  int tp = 1;                   ///< Tensor-parallel degree (GPUs per stage replica).
  int microbatches = 1;         ///< Microbatches per iteration.
  int chunks = 1;               ///< Stages per GPU (interleaved schedules), >= 1.
  std::string schedule = "1f1b";///< Schedule name understood by perseus::make_schedule().
  double p_block_w = 0;         ///< P2P blocking power P_block, W (>= 0); JSON "p2p_power_w".
  double unit_time_s = 1e-3;    ///< Planner time quantum, s (the planner's range, 1e-7..10).
  /// Wall time one frontier solve may take, s (0..7 days; PlannerOptions::time_budget_s): when
  /// it is reached the planner stops and the job serves the frontier found so far, marked
  /// partial (0: stop before the first graph-cut step: the slowest plan and the all-max plan).
  double planning_budget_s = 600;
  /// Per-computation overhead, s (0..3600; TimelineOverheads::op_overhead_s): added to every
  /// computation's duration of the job's profile, as `perseus optimize --op-overhead`.
  double op_overhead_s = 0;
  /// Blocking P2P send time, s (0..3600; TimelineOverheads::p2p_latency_s): added to every
  /// computation that sends to another GPU, as `perseus optimize --p2p-latency`.
  double p2p_latency_s = 0;
  PlanSource source = PlanSource::kProfile;
  std::string profile_csv;      ///< CSV text (source kProfile; optional for kZeusPlans).
  nlohmann::json plans;         ///< Array of plans (source kPlans).
  std::vector<std::string> zeus_plans;  ///< Plan file texts (source kZeusPlans).
  // Profiling mode (source kProfiling):
  std::vector<int> freqs_mhz;   ///< Sweep grid, MHz; empty: the first registered rank's list.
  int min_freq_mhz = 0;         ///< The sweep never goes below this, MHz.
  int profile_samples = 3;      ///< Samples (rank-iterations) needed per frequency step.
  int max_energy_rises = 5;     ///< Stop a (stage, instruction) after this many rises in a row.
  StragglerOptions straggler;   ///< "straggler_detection": detection and verification (docs/stragglers.md).

  int world_size() const { return pp * dp * tp; }
  int num_stages() const { return pp * chunks; }

  /// Validates a POST /v1/jobs body. Throws ApiError 422 naming the bad field. `stored`: a
  /// spec read back from the database, whose name is taken as it was stored (a name an older
  /// version accepted must not fail its job at a restart).
  static JobSpec from_json(const nlohmann::json& body, bool stored = false);
  /// The top-level fields a POST /v1/jobs body may have: every field to_json() stores (any
  /// plan source) plus "mode", "profile_csv", "plans" and "zeus_plans". The route refuses
  /// others (reject_unknown_fields(): 422 naming the field); from_json() itself does not, so
  /// that stored specs of other versions still load.
  static const std::vector<std::string>& request_fields();
  /// Full JSON (payloads included), as stored in the database; from_json() reads it back.
  nlohmann::json to_json() const;
  /// JSON without the (possibly large) payloads, for API responses.
  nlohmann::json summary_json() const;
};

}  // namespace perseus::server
