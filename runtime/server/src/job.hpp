// In-memory state of one job (private to the server library).
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/server/job_model.hpp"
#include "perseus/server/job_spec.hpp"
#include "perseus/server/store.hpp"
#include "perseus/server/sweep.hpp"
#include "clocks.hpp"
#include "straggler_loop.hpp"

namespace perseus::server {

/// Which plan one pipeline runs now.
struct Assignment {
  int plan_index = 0;
  std::int64_t version = 0;
  std::shared_ptr<const ServedPlan> plan;  ///< Null only before a profiling sweep has its grid.
};

/// Job states reported as "job_status" / "status".
inline constexpr const char* kStatusPlanning = "planning";    ///< Solving; ranks run the quick T_min plan.
inline constexpr const char* kStatusProfiling = "profiling";  ///< Online sweep in progress.
inline constexpr const char* kStatusReady = "ready";          ///< Frontier plans are served.
inline constexpr const char* kStatusFailed = "failed";        ///< Planning failed; see "error".
/// A failed job's error says this when its frontier was solved but could not be stored (a full
/// disk): such a job is planned again at the next start (JobManager::load()).
inline constexpr const char* kFrontierNotStored = "the solved frontier could not be stored";

struct Job {
  std::string id;
  JobAuth auth;  ///< Origin and token hash; fixed at creation.
  JobSpec spec;
  double created_s = 0;
  std::atomic<double> last_activity_s{0};       ///< Unix time (stored, shown), s.
  std::atomic<double> last_activity_mono_s{0};  ///< monotonic_s() of the same request: idleness.
  std::atomic<bool> activity_dirty{false};

  std::atomic<bool> deleted_flag{false};  // set (without mu) on DELETE: cancels a running solve
  mutable std::shared_mutex mu;  // guards everything below
  bool deleted = false;
  std::string status, error;
  JobModel model;
  std::shared_ptr<const Frontier> frontier;           // profile jobs once (re)solved
  std::map<int, std::shared_ptr<const ServedPlan>> plans;  // materialized plans by index
  std::vector<Assignment> pipelines;                  // per dp rank
  std::int64_t version_counter = 0;
  std::map<int, StoredRank> ranks;
  std::map<std::tuple<int, int, int>, int> slots;    // (dp, pp, tp) -> rank
  std::map<int, StoredStraggler> stragglers;
  std::deque<nlohmann::json> decisions;   // the newest (JobManager::record_decision), oldest first
  std::deque<std::size_t> decision_bytes;  // each one's JSON text, bytes (same order)
  std::int64_t decisions_total = 0;
  std::unique_ptr<Sweep> sweep;
  std::int64_t zeus_next_iteration = 0;
  std::deque<std::uint64_t> zeus_result_digests;  // recent Zeus /result bodies (retries answered, not re-counted)

  std::mutex solve_mu;  // serializes frontier (re)derivation
  // After a restart, a complete frontier is re-derived on the planner pool when a plan of it is
  // first needed (guarded by mu): queued or running, and why it failed (empty: it did not).
  bool rederiving = false;
  std::string rederive_error;

  StragglerLoop loop;  // detection and verification (own mutex; lock after mu)

  std::mutex stats_mu;  // guards the measurement summary
  std::int64_t num_measurements = 0;
  double sum_time_s = 0, sum_energy_j = 0;
  std::int64_t num_energy_known = 0;  // measurements with a known energy_j (the mean's divisor)
  std::int64_t measurement_bytes = 0;  // stored measurement text, bytes (quota of anonymous Zeus jobs)

  void touch(double now_s) {
    last_activity_s.store(now_s, std::memory_order_relaxed);
    last_activity_mono_s.store(monotonic_s(), std::memory_order_relaxed);
    activity_dirty.store(true, std::memory_order_relaxed);
  }
};


/// Returns the heap memory freed by a deleted job or a finished solve to the OS (glibc's
/// malloc_trim; a no-op elsewhere): glibc otherwise keeps it, and a server that had planned one
/// job of a million computations kept hundreds of MiB after deleting it (bench/server_big_job.sh).
void release_freed_memory();
/// A fresh unguessable job id ("job-" + 24 hex digits).
std::string new_job_id();
/// A fresh job bearer token: "pjt-" + 64 hex digits (256 random bits from /dev/urandom).
std::string new_job_token();
/// SHA-256 of `token` as 64 lowercase hex digits (FIPS 180-4, via OpenSSL); what the server
/// stores and compares instead of a job's token.
std::string token_sha256(std::string_view token);
/// Constant-time equality of two strings of any length (token checks).
bool equal_constant_time(std::string_view a, std::string_view b);
/// Job origins (JobAuth::origin).
inline constexpr const char* kOriginV1 = "v1";
inline constexpr const char* kOriginZeus = "zeus";
inline constexpr const char* kOriginZeusAnonymous = "zeus_anonymous";
/// Per-op frequencies as a JSON array text (stored plans).
std::string freqs_json(const std::vector<int>& freq_mhz);
/// StoredAssignment list of a job (caller holds the lock).
std::vector<StoredAssignment> stored_assignments(const Job& job);
/// Builds the sweep of a profiling job from its grid; null if the grid is not known yet.
std::unique_ptr<Sweep> make_sweep(const Job& job);
/// Renders the current step of `sweep` (the job's, or the next state of it) as a plan of the
/// job (index kSweepPlanIndex).
std::shared_ptr<const ServedPlan> render_sweep_plan(const Job& job, const Sweep& sweep);
/// Most measurements one POST .../measurements batch may hold (docs/http-api.md, "Limits").
inline constexpr std::size_t kMaxMeasurementBatch = 10000;
/// Validates one measurement (iteration, time_s s, energy_j J, plan_version, instructions)
/// against `spec` and returns only its validated fields (what is stored and replayed: never
/// the raw body, whose unknown fields could be arbitrarily large); throws ApiError 422 naming
/// the field. energy_j may be absent or null (unknown, then left out); when present it must be
/// plausible for its time_s (runtime/telemetry.hpp's power bound).
nlohmann::json validated_measurement(const nlohmann::json& m, const JobSpec& spec);
/// Feeds one measurement JSON (already validated) of a rank of `job` into `sweep` (the job's
/// sweep, or a copy that replaces it once the measurement is stored); true if the sweep
/// stepped. Caller holds the job's lock. Deterministic (used for replay too).
bool feed_sweep(Sweep& sweep, const Job& job, const StoredRank& rank, const nlohmann::json& measurement);

}  // namespace perseus::server
