// Jobs, ranks, plans, measurements and stragglers: the server's logic, independent of HTTP.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/server/store.hpp"

namespace perseus::server {

struct Job;
struct LoopAction;
class Sweep;

/// An HTTP-independent reply: status code and JSON body (empty for 304).
struct Reply {
  int status = 200;
  std::string body;
};

/// Settings of the job manager.
struct ManagerOptions {
  double job_idle_ttl_s = 7 * 24 * 3600.0;  ///< Jobs idle longer are deleted, s (<= 0: never).
  int planner_threads = 1;                  ///< Background frontier solvers.
  std::size_t max_jobs = 1000;              ///< More live jobs: 503 on create.
  std::size_t max_decisions_kept = 100;     ///< Newest straggler decisions kept per job, in memory and stored.
  /// ... and at most this many bytes of their JSON per job (the newest always): a decision of a
  /// job of 65,536 pipelines lists each one's plan (~200 KB), so 100 of them were ~20 MB per job.
  std::size_t max_decision_bytes = std::size_t{4} << 20;
  // Zeus PFO compatibility: what a job registered with POST /register_job runs.
  std::vector<std::string> zeus_plan_texts; ///< freqs_pipeline_*.py texts, slowest first.
  std::string zeus_profile_csv;             ///< Optional profile to give those plans times.
  std::string zeus_schedule = "1f1b";       ///< Schedule the Zeus plans follow.
  double zeus_p2p_power_w = 0;              ///< P_block for Zeus jobs, W.
  // Quota of jobs created without a token (POST /register_job under --zeus-no-auth), so that an
  // unauthenticated caller cannot fill the server (docs/http-api.md, "Authority").
  std::size_t anonymous_max_jobs = 16;             ///< Live anonymous jobs.
  std::int64_t anonymous_max_ranks = 4096;         ///< Sum of their world sizes (ranks).
  std::int64_t anonymous_max_bytes = 64ll << 20;   ///< Measurement text they may store in total, bytes.
  /// Called on the planner thread with the job's id once its frontier is solved, just before it
  /// is stored (tests make the database refuse the write here).
  std::function<void(const std::string& job_id)> before_frontier_stored;
};

/// A byte budget shared by concurrent requests (the measurement text that jobs made without a
/// token may store): a request reserves what it may add before storing it, atomically with the
/// check, so that concurrent requests cannot pass the limit together. Thread-safe (lock-free).
class ByteQuota {
 public:
  explicit ByteQuota(std::int64_t limit_bytes) : limit_(limit_bytes) {}
  /// Counts `bytes` (>= 0) as used if the total stays <= the limit; false, counting nothing,
  /// when it would pass it.
  bool try_reserve(std::int64_t bytes);
  /// Counts `bytes` without a check (what stored jobs hold at load; text actually stored).
  void add(std::int64_t bytes) { used_ += bytes; }
  /// Gives back `bytes` counted earlier (an unused reservation, a deleted job's text).
  void release(std::int64_t bytes) { used_ -= bytes; }
  /// Bytes counted now, and the limit.
  std::int64_t used() const { return used_.load(); }
  std::int64_t limit() const { return limit_; }

 private:
  std::int64_t limit_;
  std::atomic<std::int64_t> used_{0};
};

/// Owns every job. Thread-safe. Methods return a Reply, or throw ApiError for request errors
/// (4xx) and std::exception for server faults (the HTTP layer answers 500 without details).
/// Hot path (get_plan) takes only shared locks and touches no database.
class JobManager {
 public:
  /// `store` must outlive the manager. Starts the planner threads.
  JobManager(Store& store, ManagerOptions options);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  /// Loads every stored job (re-derives DAGs, replays profiling sweeps, re-queues planning).
  /// Jobs whose stored state no longer loads are marked failed, not dropped. Returns the count.
  std::size_t load();

  // --- Authority (docs/http-api.md, "Authority") ---
  /// The id of the job whose own bearer token is `token` (compared by SHA-256), or nullopt.
  std::optional<std::string> job_of_token(std::string_view token) const;

  // --- /v1 API (see docs/http-api.md) ---
  /// POST /v1/jobs (admin). The 201 body carries the new job's own bearer token ("job_token"),
  /// shown only here. Throws ApiError 422 "missing_field"/"invalid_field" (a bad or unknown
  /// field), 422 "invalid_job" (the spec does not make a plannable job: profile, schedule,
  /// plans), 503 "too_many_jobs" (ManagerOptions::max_jobs reached).
  Reply create_job(const nlohmann::json& body);
  /// GET /v1/jobs (admin). 200 `{"jobs": [summary, ...]}`, one summary per live job (job_id,
  /// name, status, created_s and last_activity_s in Unix seconds, world_size,
  /// ranks_registered), in no particular order. Never throws ApiError.
  Reply list_jobs();
  /// GET /v1/jobs/{job_id}. 200 with the job's summary (as list_jobs) plus error, spec, version,
  /// frontier (num_points, fastest_index, partial*, rederiving; "points" [time_s, energy_j] per
  /// plan index when there are at most 20,000), pipelines (plan_index, version,
  /// iteration_time_s, straggler), stragglers (target_time_s in s, slowdown, created_s in Unix
  /// seconds), decisions, warnings, straggler_loop, profiling (while sweeping) and measurement
  /// statistics. The per-pipeline arrays ("pipelines", "straggler_loop.pipelines") list the
  /// page [pipelines_from, pipelines_from + pipelines_count) of the job's dp pipelines (at most
  /// kMaxPipelinesPerPage: a job of 65,536 pipelines answered 22–31 MB that took seconds of an
  /// event-loop thread, session 32's trial); the body says "pipelines_from" and
  /// "pipelines_total" (= dp). Throws ApiError 404 "unknown_job", 400 "invalid_query" when
  /// pipelines_from > dp or pipelines_count is outside [1, kMaxPipelinesPerPage].
  Reply get_job(const std::string& job_id, std::int64_t pipelines_from = 0,
                std::int64_t pipelines_count = kMaxPipelinesPerPage);
  /// Most pipelines one GET /v1/jobs/{id} lists (its default page size).
  static constexpr std::int64_t kMaxPipelinesPerPage = 1024;
  /// DELETE /v1/jobs/{job_id} (admin). Deletes the job from the store first (a failed delete
  /// throws and leaves the job as it was), then from memory; a running solve of it stops at its
  /// next cancellation check. 200 `{"job_id", "deleted": true}`. Throws ApiError 404
  /// "unknown_job" (also to all but one of concurrent deletes of one job).
  Reply delete_job(const std::string& job_id);
  /// POST /v1/jobs/{job_id}/ranks. Body `{"rank", "dp_rank", "pp_rank", "tp_rank"}` (required)
  /// and optionally "supported_freqs_mhz" (the GPU's clocks, MHz; when given, non-empty). 201 for
  /// a new rank, 200 when the same rank re-registers with the same coordinates (a restarted
  /// trainer; idempotent); the body gives the rank's place and the job's shape (job_id, rank,
  /// pipeline = dp_rank, pp_rank, tp_rank, ranks_registered, world_size, pp, microbatches,
  /// chunks, job_status). A profiling job starts its sweep at the first registration that gives
  /// it a clock grid (its spec's, else the rank's clocks). Throws ApiError 404 "unknown_job", 422
  /// "missing_field"/"invalid_field" (an index out of the job's range, an unknown field),
  /// 422 "unsupported_clock" (the job's plans for this pp_rank use a clock the GPU lacks), 409
  /// "duplicate_rank" (rank or coordinates already registered otherwise).
  Reply register_rank(const std::string& job_id, const nlohmann::json& body);
  /// GET /v1/jobs/{job_id}/ranks/{rank}/plan. 200 `{"version", "job_status", "plan_index",
  /// "pipeline", "pp_rank", "iteration_time_s" (s), "energy_j" (J, the pipeline's iteration),
  /// "instructions": [{"instruction", "stage", "microbatch", "freq_mhz"}, ...] in the rank's
  /// execution order}`. `since_version`: 304 (empty body) unless the rank's plan version is
  /// newer (a since_version this job never issued gets 200). Throws ApiError 404
  /// "unknown_job"/"unknown_rank", 409 "no_plan" (none yet, e.g. profiling without clocks).
  Reply get_plan(const std::string& job_id, std::int64_t rank, std::optional<std::int64_t> since_version);
  /// POST /v1/jobs/{job_id}/ranks/{rank}/measurements. Body: one report `{"iteration",
  /// "time_s" (s), "energy_j" (J, optional: unknown), "plan_version", "instructions" (optional
  /// per-computation entries)}`, or a batch `{"measurements": [report, ...]}` of 1 to 10,000.
  /// One report: 202 `{"accepted": true, "duplicate": false, "job_status"}`, or 200 `{"accepted":
  /// false, "duplicate": true, ...}` for an iteration the rank already reported. A batch: 202
  /// `{"accepted": n, "duplicates": n, "results", "rejected", "job_status"}`; invalid items are
  /// listed in "rejected" (with their index and error), the others are stored. Throws ApiError
  /// 404 "unknown_job"/"unknown_rank"; 422 "invalid_field", "implausible_energy" or
  /// "implausible_time" for a single invalid report (or a malformed batch).
  Reply post_measurements(const std::string& job_id, std::int64_t rank, const nlohmann::json& body);
  /// POST /v1/jobs/{job_id}/stragglers. Body `{"pipeline", and exactly one of "slowdown" (T'/T_min,
  /// in [1, kMaxStragglerSlowdown]) or "iteration_time_s" (T', s, in [T_min, kMaxStragglerSlowdown x
  /// T_min])}`. Stores the straggler with target_time_s = T' (s) and slowdown = T'/T_min (T_min:
  /// the job's fastest plan's iteration time), then moves the other pipelines to the lowest-energy
  /// plan with T <= the largest target (Perseus §3.2). 200 `{"decision": {...}}`. Throws ApiError
  /// 404 "unknown_job", 422 "invalid_field", 409 "job_not_ready" (status is not ready) or
  /// "no_plan_times" (plans without iteration times), 503 "frontier_not_ready" (Retry-After) or
  /// "busy" (the job kept changing; retry).
  Reply post_straggler(const std::string& job_id, const nlohmann::json& body);
  /// DELETE /v1/jobs/{job_id}/stragglers/{pipeline}. Clears the pipeline's straggler report and
  /// re-plans the others as post_straggler does; 200 `{"decision": {...}}`. Throws ApiError 404
  /// "unknown_job", 404 "unknown_straggler" (no such pipeline, or no report for it), and the
  /// 409/503 errors of post_straggler.
  Reply clear_straggler(const std::string& job_id, std::int64_t pipeline);

  // --- Zeus PFO compatibility (these routes reach only jobs made by zeus_register_job) ---
  /// POST /register_job. Body: Zeus JobInfo `{"pp_degree" (1..1024, must equal the configured
  /// plans' stages), "dp_degree" (1..65536), "tp_degree" (1..1024), "world_size" (= pp x dp x
  /// tp), "job_id" (empty or null), "job_metadata" (optional, <= 256 bytes: the job's name)}`;
  /// 200 with the new job id as a JSON string. `anonymous`: the caller presented no admin token
  /// (--zeus-no-auth); the job counts against the anonymous quota (ManagerOptions::anonymous_max_*;
  /// over it: 403 "quota_exceeded" naming the limit). Throws ApiError 422 "missing_field"/
  /// "invalid_field", 503 "zeus_not_configured" (no --zeus-plan), 500 "zeus_plan_invalid", and
  /// create_job()'s 422 "invalid_job" and 503 "too_many_jobs".
  Reply zeus_register_job(const nlohmann::json& body, bool anonymous = false);
  /// POST /register_rank/{job_id}. Body: Zeus RankInfo `{"rank", "dp_rank", "pp_rank",
  /// "tp_rank", "available_frequencies" (MHz, optional)}`, registered as register_rank() does
  /// (its errors, except that other fields are ignored). 200 `null`. Throws ApiError 404
  /// "unknown_job" also for a job not made by zeus_register_job.
  Reply zeus_register_rank(const std::string& job_id, const nlohmann::json& body);
  /// GET /schedule/{job_id}?rank=R. 200 `{"rank": R, "frequencies": [...]}`: the rank's
  /// pp_rank's part of its pipeline's plan in Zeus form. Throws ApiError 404 "unknown_job" (also
  /// for a non-Zeus job) or "unknown_rank", 409 "no_plan".
  Reply zeus_schedule(const std::string& job_id, std::int64_t rank);
  /// POST /result/{job_id}. Body: Zeus ProfilingResult `{"rank", "iter_time" (s), "iter_energy"
  /// (J)}`, two arrays of equal length (at most 100,000), stored as measurements of the next
  /// iteration numbers. A retry with the same rank, times and energies (among the job's last
  /// 4,096 results, in memory only) is not counted again. 200 `null`. Throws ApiError 404
  /// "unknown_job" (also for a non-Zeus job) or "unknown_rank", 422 "invalid_field" or a
  /// measurement check's code naming the pair, 403 "quota_exceeded" (an anonymous job's byte
  /// quota).
  Reply zeus_result(const std::string& job_id, const nlohmann::json& body);

  /// Prometheus text exposition of counters and per-job gauges.
  std::string metrics_text() const;
  /// Deletes jobs idle for longer than the TTL and persists last-activity times. Returns
  /// the ids of the jobs deleted (the server logs them). Called periodically by the server. `now_monotonic_s`: the
  /// server's monotonic clock (steady_clock, s): idleness never follows a wall-clock step. A
  /// restart starts every loaded job's idle time afresh.
  std::vector<std::string> expire_idle(double now_monotonic_s);
  /// Blocks until no planning task is queued or running (tests), at most timeout_s (s). Returns
  /// true when idle, false when the timeout ran out first.
  bool wait_idle(double timeout_s);
  /// Server shutdown (SIGTERM), step one: drops queued planning tasks and makes running solves
  /// stop at their next cancellation check (a graph-cut step or an LP solve), so that the HTTP
  /// layer and the destructor do not wait for a long solve. Committed state is untouched: a job
  /// still `planning` is solved again at the next start. Idempotent, thread-safe.
  void begin_shutdown();

  /// What the planner pool is doing, for /metrics and tests: tasks queued, solves running, and
  /// solves started since the server started (an event a test can wait on).
  struct PlannerState {
    std::size_t queued = 0;
    int running = 0;
    std::uint64_t solves_started = 0;
  };
  PlannerState planner_state() const;

  /// Counters the HTTP layer increments.
  struct Counters {
    std::atomic<std::uint64_t> requests{0}, errors_4xx{0}, errors_5xx{0}, rate_limited{0};
    std::atomic<std::uint64_t> plan_fetches{0}, plan_not_modified{0}, measurements{0}, measurement_duplicates{0},
        measurements_rejected{0};
    std::atomic<std::uint64_t> straggler_decisions{0}, jobs_created{0}, jobs_expired{0}, plans_solved{0},
        frontiers_partial{0};
  };
  Counters& counters() { return counters_; }

 private:
  Store& store_;
  ManagerOptions opt_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Job>> jobs_;
  std::unordered_map<std::string, std::string> token_jobs_;  // token SHA-256 -> job id (guarded by mu_)
  std::size_t reserved_jobs_ = 0;  // job creations past the --max-jobs check, not yet inserted (guarded by mu_)
  std::mutex anonymous_mu_;                     // serializes anonymous job creation (quota check + insert)
  // Measurement text stored by anonymous jobs (plus reservations of /result requests in flight), bytes.
  ByteQuota anonymous_bytes_{opt_.anonymous_max_bytes};
  Counters counters_;

  // Planner pool.
  mutable std::mutex q_mu_;
  std::uint64_t solves_started_ = 0;  // guarded by q_mu_
  std::condition_variable q_cv_, idle_cv_;
  std::deque<std::function<void()>> queue_;
  int running_ = 0;
  bool stopping_ = false;
  std::atomic<bool> shutting_down_{false};  // read by running solves (cancellation)
  std::vector<std::thread> workers_;
  void enqueue(std::function<void()> task);
  void worker_loop();

  std::shared_ptr<Job> find(const std::string& job_id) const;
  std::shared_ptr<Job> find_or_404(const std::string& job_id) const;
  /// A Zeus-made job (origin zeus or zeus_anonymous), else 404 as if it did not exist.
  std::shared_ptr<Job> find_zeus_or_404(const std::string& job_id) const;
  std::string insert_new_job(const std::shared_ptr<Job>& job);
  /// Creates a job of the given origin; for "v1" it gets its own token (returned in the body).
  Reply create_job_as(const nlohmann::json& body, const std::string& origin);
  /// Throws 403 quota_exceeded when an anonymous job of `world_size` ranks would pass a quota.
  void check_anonymous_quota(std::int64_t world_size) const;
  void start_solve(const std::shared_ptr<Job>& job, bool assign_when_done);
  /// Ends a profiling sweep whose last step `sweep` (the job's, or its next state) reached:
  /// builds the profile and the quick plan, writes them (profile, plan, assignments, status
  /// "planning"; or status "failed" naming why the profile is unusable) into the caller's open
  /// Store::Transaction, and returns what applies them to the job (and queues the solve), to be
  /// run only once that transaction has committed. Caller holds job->mu exclusively (or owns
  /// the job alone, in load()). Throws std::runtime_error on a store fault (nothing applied).
  std::function<void()> finish_profiling(const std::shared_ptr<Job>& job, const Sweep& sweep);
  /// Makes plan `plan_index` of the frontier servable. After a restart the frontier is not in
  /// memory: a plan stored before the restart is read from the store; otherwise (a complete
  /// frontier) its re-derivation is queued on the planner pool (never solved on the request's
  /// thread) and ApiError 503 "frontier_not_ready" with Retry-After is thrown until it is done.
  /// Throws std::runtime_error when the plan cannot be had (re-derivation failed or differs).
  void ensure_materialized(const std::shared_ptr<Job>& job, int plan_index);
  /// The stored plan `idx` of a job, or empty when it is not stored or unreadable (not
  /// `num_ops` clocks).
  std::vector<int> stored_plan_freqs(const std::string& job_id, int idx, int num_ops);
  /// Queues the re-derivation of a ready job's complete frontier (once). Caller holds job->mu.
  void queue_rederive(const std::shared_ptr<Job>& job);
  /// Applies a straggler set/clear (or, with neither, re-plans after verification) and records
  /// the decision; origin: "declared" (API), "detected" or "verification".
  Reply apply_stragglers(const std::shared_ptr<Job>& job, std::optional<StoredStraggler> set, std::optional<int> clear,
                         const std::string& origin = "declared");
  /// Records `decision` as the job's newest: stores it (with the store's copy pruned to what
  /// memory keeps: max_decisions_kept, max_decision_bytes) and then keeps it in memory. Returns
  /// its JSON text (the stored one; a reply can reuse it). Caller holds job->mu (exclusive).
  /// Throws what the store throws (then nothing changed).
  std::string record_decision(Job& job, nlohmann::json decision, std::int64_t version_counter,
                              const std::vector<StoredAssignment>& assignments = {},
                              const std::optional<StoredStraggler>& upsert_straggler = std::nullopt,
                              std::optional<int> delete_straggler = std::nullopt);
  /// Acts on what the closed loop decided from measurements (no job lock held).
  void run_straggler_actions(const std::shared_ptr<Job>& job, const std::vector<LoopAction>& actions);
};

/// Checks the Zeus settings of `options` (plans, schedule, profile, P_block) as POST
/// /register_job will use them, for a job of the plans' own pp, so that a configuration error
/// stops the start instead of failing every registration. `plan_names[i]` names plan i in
/// messages (e.g. its file; default "--zeus-plan (plan i of n)"). Throws InputError naming the
/// plan or option. No plans: only the schedule name is checked.
void check_zeus_configuration(const ManagerOptions& options, const std::vector<std::string>& plan_names = {});

}  // namespace perseus::server
