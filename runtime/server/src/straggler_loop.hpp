// Per-job closed-loop straggler state: measurements -> detector -> decision -> verifier.
// Private to the server. The state lives in memory (after a restart detection starts afresh;
// stored stragglers reload as "declared").
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "straggler_detector.hpp"
#include "switch_verifier.hpp"

namespace perseus::server {

struct JobSpec;

/// A straggler's origin as kept in memory and in the store: "detected" (by the loop, which
/// clears it when the pipeline recovers), else "declared" (through the API; a decision's
/// "verification" origin, or an older database's missing one, count as declared).
inline const char* straggler_origin(std::string_view decision_origin) {
  return decision_origin == "detected" ? "detected" : "declared";
}

/// Something the loop wants the job manager to do (outside the job lock).
struct LoopAction {
  /// kIgnoredReport: a pipeline's first report not aggregated (IterationAggregator::Ignored),
  /// to be logged once.
  enum class Kind { kDetected, kCleared, kVerified, kIgnoredReport } kind = Kind::kDetected;
  StragglerEvent event;      ///< kDetected / kCleared; kIgnoredReport: its pipeline only.
  IterationAggregator::Ignored ignored;  ///< kIgnoredReport.
  VerificationRound round;   ///< kVerified (a round of verdicts, some may re-target or revert).
};

/// The closed loop of one job. Guarded by `mu`; lock order: Job::mu before StragglerLoop::mu.
struct StragglerLoop {
  std::mutex mu;
  /// Measurements fully processed (accepted, fed, and any decision they caused applied);
  /// tests wait on it to order events. Not guarded by mu.
  std::atomic<std::int64_t> measurements_processed{0};
  bool initialized = false;
  StragglerOptions opt;
  double p_block_w = 0;
  int gpus_per_pipeline = 1;
  std::unique_ptr<IterationAggregator> aggregator;
  std::unique_ptr<StragglerDetector> detector;
  std::unique_ptr<SwitchVerifier> verifier;

  std::map<int, std::string> origin;            ///< straggler pipeline -> "declared" | "detected"
  std::map<int, double> target_override_s;      ///< pipeline -> re-targeted T'' (verification), s
  std::set<int> reverted;                       ///< pipelines put back on the fastest plan by verification
  std::map<int, double> predicted_saving_j;     ///< pipeline -> predicted saving per iteration, J
  std::map<int, double> measured_saving_j;      ///< pipeline -> measured saving per iteration, J (absent: unknown)
  std::map<int, std::string> verification;      ///< pipeline -> "pending" | "verified" | "retargeted" | "reverted"
  std::map<int, double> last_time_s;            ///< pipeline -> last complete iteration time, s
  std::map<int, nlohmann::json> ignored_detection;  ///< pipeline -> the last detection ignored as impossible, and why
  std::map<std::string, std::uint64_t> actions; ///< decision action -> count (metrics)
  std::int64_t current_decision = 0;            ///< id of the decision being verified

  /// Sets up the pieces from the job's options once (caller holds mu).
  void init(const JobSpec& spec);
  /// Feeds one accepted rank measurement measured on the pipeline's current plan, whose
  /// predicted iteration time is expected_time_s. Caller holds mu. Returns actions to take.
  /// energy_j: the rank's iteration energy, J, or nullopt when its report had none (unknown).
  std::vector<LoopAction> feed(int pipeline, int rank, std::int64_t iteration, double time_s,
                               std::optional<double> energy_j, double expected_time_s);
  /// Per-pipeline JSON for GET /v1/jobs/{id} "pipelines" entries (caller holds mu).
  nlohmann::json pipeline_json(int pipeline) const;
  /// Appends this job's Prometheus samples to `families` (metric family name -> sample lines),
  /// so that the caller can print each family once with its HELP/TYPE (caller holds mu).
  void append_metrics(const std::string& job_id, int num_pipelines, const std::set<int>& stragglers,
                      std::map<std::string, std::string>& families) const;
  /// HELP and TYPE lines of the families append_metrics() writes, by name.
  static const std::map<std::string, std::pair<const char*, const char*>>& metric_families();
};

}  // namespace perseus::server
