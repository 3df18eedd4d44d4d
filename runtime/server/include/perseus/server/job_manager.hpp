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
  /// shown only here.
  Reply create_job(const nlohmann::json& body);
  Reply list_jobs();
  Reply get_job(const std::string& job_id);
  Reply delete_job(const std::string& job_id);
  Reply register_rank(const std::string& job_id, const nlohmann::json& body);
  /// GET plan; `since_version`: 304 (empty body) unless the rank's plan version is newer.
  Reply get_plan(const std::string& job_id, std::int64_t rank, std::optional<std::int64_t> since_version);
  Reply post_measurements(const std::string& job_id, std::int64_t rank, const nlohmann::json& body);
  Reply post_straggler(const std::string& job_id, const nlohmann::json& body);
  Reply clear_straggler(const std::string& job_id, std::int64_t pipeline);

  // --- Zeus PFO compatibility (these routes reach only jobs made by zeus_register_job) ---
  /// POST /register_job. `anonymous`: the caller presented no admin token (--zeus-no-auth); the
  /// job counts against the anonymous quota (ManagerOptions::anonymous_max_*; over it: 403
  /// "quota_exceeded" naming the limit).
  Reply zeus_register_job(const nlohmann::json& body, bool anonymous = false);
  Reply zeus_register_rank(const std::string& job_id, const nlohmann::json& body);
  Reply zeus_schedule(const std::string& job_id, std::int64_t rank);
  Reply zeus_result(const std::string& job_id, const nlohmann::json& body);

  /// Prometheus text exposition of counters and per-job gauges.
  std::string metrics_text() const;
  /// Deletes jobs idle for longer than the TTL and persists last-activity times. Returns
  /// the ids of the jobs deleted (the server logs them). Called periodically by the server. `now_monotonic_s`: the
  /// server's monotonic clock (steady_clock, s): idleness never follows a wall-clock step. A
  /// restart starts every loaded job's idle time afresh.
  std::vector<std::string> expire_idle(double now_monotonic_s);
  /// Blocks until no planning task is queued or running (tests), at most timeout_s.
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
/// plan or option. No plans: nothing to check.
void check_zeus_configuration(const ManagerOptions& options, const std::vector<std::string>& plan_names = {});

}  // namespace perseus::server
