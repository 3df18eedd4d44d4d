// Durable server state in one SQLite file (WAL journal).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace perseus::server {

/// One registered rank as stored (unique per job and `rank`).
struct StoredRank {
  /// Global rank in [0, world_size), and its coordinates: dp_rank (the pipeline, DP replica),
  /// pp_rank (pipeline stage) and tp_rank (tensor-parallel rank).
  int rank = 0, dp_rank = 0, pp_rank = 0, tp_rank = 0;
  std::vector<int> supported_freqs_mhz;  ///< May be empty.
  std::int64_t seq = 0;                  ///< Registration order (row id).
};

/// Which plan one pipeline (DP replica) runs, and the version at which it was assigned.
struct StoredAssignment {
  int pipeline = 0;
  int plan_index = 0;   ///< Frontier index; -1 all-max baseline; -2 profiling sweep step; -3 quick T_min plan.
  std::int64_t version = 0;
};

/// An active straggler report.
struct StoredStraggler {
  int pipeline = 0;
  double target_time_s = 0;  ///< T', s.
  double slowdown = 0;       ///< T' / T_min (informational).
  double created_s = 0;      ///< Unix time, s.
  /// "detected" (by the straggler loop, which clears it when the pipeline recovers) or
  /// "declared" (through the API, cleared only through it). Stored since schema version 4.
  std::string origin = "declared";
};

/// One accepted measurement, as Store::measurements() returns it for replaying a sweep.
struct StoredMeasurement {
  std::int64_t seq = 0;        ///< Acceptance order (row id, increasing).
  int rank = 0;                ///< Global rank that reported it.
  std::int64_t iteration = 0;  ///< Training iteration number (unique per job and rank).
  /// The validated report as stored (JSON object); outside a profiling sweep its per-computation
  /// "instructions" are replaced by "instructions_count".
  std::string body_json;
};

/// Who made a job, which decides who may reach it (docs/http-api.md, "Authority").
struct JobAuth {
  /// "v1" (POST /v1/jobs), "zeus" (POST /register_job with the admin token) or "zeus_anonymous"
  /// (POST /register_job without a token, under --zeus-no-auth; counted against its quota).
  std::string origin = "v1";
  /// SHA-256 (hex) of the job's own bearer token; empty when the job has none (Zeus jobs).
  std::string token_sha256;
};

/// Everything stored about a job.
struct StoredJob {
  std::string job_id;
  double created_s = 0, last_activity_s = 0;  ///< Unix times, s.
  JobAuth auth;
  std::string spec_json;  ///< The job's spec (JobSpec::to_json()) as JSON text.
  /// Status: "profiling", "planning", "ready" or "failed"; `error` says why when failed (else
  /// empty).
  std::string status, error;
  std::int64_t version_counter = 0;  ///< Newest plan version issued (assignments carry <= it).
  std::string built_profile_csv;  ///< Profile built by a profiling sweep (empty until done).
  std::string points_json;        ///< Frontier points [[time_s, energy_j], ...] once solved.
  /// {"reason": "time_budget", "detail": "..."} when the stored frontier is partial (the solve
  /// reached planning_budget_s); empty when it is complete or not solved yet.
  std::string frontier_partial_json;
  std::vector<StoredRank> ranks;
  std::vector<StoredAssignment> assignments;
  /// (plan_index, freq_mhz JSON array): the stored plans a reload needs, those with index < 0
  /// (all-max, quick, sweep) and those a pipeline is assigned; Store::plan() reads any other.
  std::vector<std::pair<int, std::string>> plans;
  std::vector<StoredStraggler> stragglers;
  /// The newest decision JSON texts (at most load_all()'s `max_decisions`), oldest first.
  std::vector<std::string> decisions;
  std::int64_t decision_rows = 0;  ///< Decision rows stored for the job (older ones may have been pruned).
  std::int64_t num_measurements = 0;
  std::int64_t num_energy_known = 0;  ///< measurements whose report carried energy_j (the mean's divisor)
  double sum_time_s = 0, sum_energy_j = 0;
  std::int64_t max_iteration = -1;  ///< Largest measured iteration number (-1: none).
  std::int64_t measurement_bytes = 0;  ///< Bytes of the stored measurement texts (quota of anonymous jobs).
};

/// The lock file that keeps a second `perseus serve` off the database at `db_path`: the path
/// with symbolic links resolved (as far as it exists), plus ".lock". A symlink to a database in
/// use therefore finds the same lock (two servers ran on one database through `ln -s` and lost
/// each other's writes). A path that cannot be resolved (a permission error) is used as given.
std::string database_lock_path(const std::string& db_path);

/// SQLite-backed store. All methods are thread-safe (one connection behind a mutex) and throw
/// std::runtime_error on database faults (disk full, corrupt file); the HTTP layer answers 500.
/// Durability: every method commits before returning, unless a Store::Transaction of the
/// calling thread is open: then it joins that transaction. With the WAL journal and
/// synchronous=NORMAL a committed write survives a SIGKILL of the server; `sync_full`
/// also makes it survive power loss (slower).
class Store {
 public:
  /// Opens or creates `path` (":memory:" for tests). A new file is created private (0600). The
  /// store holds an exclusive lock on `<path>.lock` while it lives, so one database has one
  /// server. Throws perseus::InputError when the file cannot be opened, is not a Perseus
  /// database, or another store (process) holds the lock.
  explicit Store(const std::string& path, bool sync_full = false);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Inserts a new job, `now_s` (Unix seconds) as its created_s and last_activity_s; false if
  /// the id exists.
  bool insert_job(const std::string& job_id, double now_s, const JobAuth& auth, const std::string& spec_json,
                  const std::string& status, std::int64_t version_counter,
                  const std::vector<StoredAssignment>& assignments);
  // Single-column updates of one job (no-ops for an unknown id); each is one transaction.
  /// Sets the job's status ("profiling", "planning", "ready", "failed") and error message
  /// (empty unless failed).
  void set_status(const std::string& job_id, const std::string& status, const std::string& error);
  /// Stores the profile CSV text a profiling sweep built (StoredJob::built_profile_csv).
  void set_built_profile(const std::string& job_id, const std::string& csv);
  /// Stores a solved frontier in one transaction: its points (`points_json`), whether it is
  /// partial (`partial_json`, see StoredJob::frontier_partial_json; empty = complete) and its
  /// plans `(plan_index >= 0, freq_mhz JSON array)`, which replace every stored frontier plan
  /// (index >= 0) of the job (a re-solve after a crash may differ from a partial one before it).
  void set_frontier(const std::string& job_id, const std::string& points_json, const std::string& partial_json,
                    const std::vector<std::pair<int, std::string>>& plans);
  /// Sets the job's last activity time, `now_s` in Unix seconds (stored only; idleness is
  /// measured on the monotonic clock).
  void set_last_activity(const std::string& job_id, double now_s);
  /// Stores a materialized plan (idempotent).
  void put_plan(const std::string& job_id, int plan_index, const std::string& freqs_json);
  /// One stored plan's freq_mhz JSON array, or nullopt when the job has no plan `plan_index`.
  /// load_all() returns only the plans a reload needs; the others are read here when fetched.
  std::optional<std::string> plan(const std::string& job_id, int plan_index);
  /// Replaces assignments and the version counter in one transaction; optionally also
  /// upserts/deletes a straggler and appends a decision, atomically. With `keep_decisions` > 0
  /// the job's stored decisions are then pruned to the newest `keep_decisions` (the database
  /// stays bounded however often stragglers are declared; each decision's JSON carries its "id",
  /// from which a reload recovers `decisions_total`).
  void update_assignments(const std::string& job_id, std::int64_t version_counter,
                          const std::vector<StoredAssignment>& assignments,
                          const std::optional<StoredStraggler>& upsert_straggler = std::nullopt,
                          std::optional<int> delete_straggler = std::nullopt,
                          const std::string& decision_json = {}, std::size_t keep_decisions = 0);
  /// Inserts a rank; false if (job, rank) exists.
  bool insert_rank(const std::string& job_id, const StoredRank& rank);
  /// Inserts a measurement (time_s in s, energy_j in J, `now_s` its acceptance time in Unix
  /// seconds); false (and nothing written) if (job, rank, iteration) exists.
  bool insert_measurement(const std::string& job_id, int rank, std::int64_t iteration, double time_s,
                          double energy_j, const std::string& body_json, double now_s);
  /// Measurements of a job in acceptance order (for replaying a profiling sweep).
  std::vector<StoredMeasurement> measurements(const std::string& job_id);
  /// Deletes a job and everything about it.
  void delete_job(const std::string& job_id);
  /// Loads every job, each with at most its newest `max_decisions` straggler decisions.
  std::vector<StoredJob> load_all(std::size_t max_decisions = SIZE_MAX);

  /// Whether the database takes writes: the outcome of the latest write (a store method that
  /// writes, or a Transaction's commit). A failed one (disk full, I/O error, the file locked
  /// by another program) makes `ok` false, with SQLite's message, until a write succeeds again.
  /// `write_failures` counts every failed write since the store opened. Thread-safe.
  struct WriteHealth {
    bool ok = true;
    std::string last_error;          ///< SQLite's message for the failed write (empty when ok).
    std::uint64_t write_failures = 0;
  };
  WriteHealth write_health() const;

  /// One write transaction spanning several calls of the store, so that a logical change made
  /// of several writes is committed whole or not at all (a kill -9 or a failed write in
  /// between leaves the database as it was). While it lives, the calling thread holds the
  /// store's lock (other threads' calls wait) and every store method it calls joins it.
  /// Destroyed without commit(): rolled back. commit() throws std::runtime_error when the
  /// database refuses the commit (then nothing of it is stored). One opened inside another of
  /// the same thread is a savepoint of it: its commit() is final only with the outer one's.
  class Transaction {
   public:
    explicit Transaction(Store& store);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    /// Commits the transaction (a savepoint's release when nested). Throws std::runtime_error
    /// when the database refuses it, or when the database file was removed or replaced while
    /// the store was open; then nothing of it is stored.
    void commit();

   private:
    Store& store_;
    std::unique_lock<std::recursive_mutex> lock_;
    sqlite3* db_;
    bool nested_;
    bool done_ = false;
  };

 private:
  /// Records the outcome of one write scope in write_health(): a failure when it is left by
  /// an exception, else a success.
  class WriteOutcome {
   public:
    explicit WriteOutcome(Store& store);
    ~WriteOutcome();
    WriteOutcome(const WriteOutcome&) = delete;
    WriteOutcome& operator=(const WriteOutcome&) = delete;

   private:
    Store& store_;
    int exceptions_;
  };
  mutable std::mutex health_mu_;
  WriteHealth health_;  // guarded by health_mu_
  sqlite3* db_ = nullptr;
  std::string path_;       // the database file ("" in memory)
  int lock_fd_ = -1;       // flock on database_lock_path()
  int file_lock_fd_ = -1;  // flock on the database file itself (any path to it)
  std::recursive_mutex mu_;  // recursive: a Transaction holds it while the methods it spans lock it
  void release_lock();
  /// Throws (a failed write) when path_ no longer names the open database file: its folder was
  /// removed, or the file replaced, while the store was open.
  void check_linked() const;
  void exec(const char* sql);
};

}  // namespace perseus::server
