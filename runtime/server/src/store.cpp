// SQLite store: schema, transactions and loading.
#include "perseus/server/store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/error.hpp"

namespace perseus::server {

namespace {

/// Version 2 added jobs.origin and jobs.token_sha256 (per-job authority); version 1 databases
/// are upgraded in place (their jobs become /v1 jobs without a token: only the admin reaches them).
/// Version 3 added jobs.frontier_partial_json (partial frontiers under planning_budget_s);
/// older databases are upgraded in place (their frontiers are complete: the column is empty).
constexpr int kSchemaVersion = 4;

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs(
  job_id TEXT PRIMARY KEY, created_s REAL NOT NULL, last_activity_s REAL NOT NULL,
  spec_json TEXT NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
  version_counter INTEGER NOT NULL, built_profile_csv TEXT NOT NULL DEFAULT '',
  points_json TEXT NOT NULL DEFAULT '', origin TEXT NOT NULL DEFAULT 'v1',
  token_sha256 TEXT NOT NULL DEFAULT '', frontier_partial_json TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS ranks(
  job_id TEXT NOT NULL, rank INTEGER NOT NULL, dp_rank INTEGER NOT NULL, pp_rank INTEGER NOT NULL,
  tp_rank INTEGER NOT NULL, freqs_json TEXT NOT NULL, PRIMARY KEY(job_id, rank));
CREATE TABLE IF NOT EXISTS assignments(
  job_id TEXT NOT NULL, pipeline INTEGER NOT NULL, plan_index INTEGER NOT NULL, version INTEGER NOT NULL,
  PRIMARY KEY(job_id, pipeline));
CREATE TABLE IF NOT EXISTS plans(
  job_id TEXT NOT NULL, plan_index INTEGER NOT NULL, freqs_json TEXT NOT NULL, PRIMARY KEY(job_id, plan_index));
CREATE TABLE IF NOT EXISTS stragglers(
  job_id TEXT NOT NULL, pipeline INTEGER NOT NULL, target_time_s REAL NOT NULL, slowdown REAL NOT NULL,
  created_s REAL NOT NULL, origin TEXT NOT NULL DEFAULT 'declared', PRIMARY KEY(job_id, pipeline));
CREATE TABLE IF NOT EXISTS decisions(
  id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, decision_json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS decisions_job ON decisions(job_id);
CREATE TABLE IF NOT EXISTS measurements(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, rank INTEGER NOT NULL,
  iteration INTEGER NOT NULL, time_s REAL NOT NULL, energy_j REAL NOT NULL, created_s REAL NOT NULL,
  body_json TEXT NOT NULL, UNIQUE(job_id, rank, iteration));
)sql";

/// The message of this thread's latest SQLite failure (Store::WriteOutcome reads it: by the time
/// a write scope is left, its rollback has replaced sqlite3_errmsg()).
thread_local std::string t_last_failure;

/// Throws std::runtime_error(`message`), remembered as this thread's latest SQLite failure.
[[noreturn]] void sqlite_failed(std::string message) {
  t_last_failure = message;
  throw std::runtime_error(std::move(message));
}

/// RAII prepared statement with positional binding.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK)
      sqlite_failed(fmt::format("sqlite prepare: {}", sqlite3_errmsg(db)));
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) { check(sqlite3_bind_int64(st_, i, v)); return *this; }
  Stmt& bind(int i, int v) { check(sqlite3_bind_int64(st_, i, v)); return *this; }
  Stmt& bind(int i, double v) { check(sqlite3_bind_double(st_, i, v)); return *this; }
  /// Steps once: true when a row is available, false when done. Throws on error; a
  /// constraint violation returns false and sets constraint().
  bool step() {
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if ((rc & 0xff) == SQLITE_CONSTRAINT) { constraint_ = true; return false; }
    sqlite_failed(fmt::format("sqlite step: {}", sqlite3_errmsg(db_)));
  }
  bool constraint() const { return constraint_; }
  /// Steps a write that must happen: a constraint violation is an error here (thrown), not a
  /// quiet "not written" the caller would have to check.
  void run() {
    step();
    if (constraint_) sqlite_failed(fmt::format("sqlite step: {}", sqlite3_errmsg(db_)));
  }
  /// Makes the statement ready to bind and step again (bindings are replaced by the next bind()).
  void reset() { sqlite3_reset(st_); }
  std::int64_t i64(int c) const { return sqlite3_column_int64(st_, c); }
  double f64(int c) const { return sqlite3_column_double(st_, c); }
  std::string text(int c) const {
    const auto* p = sqlite3_column_text(st_, c);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(st_, c)) : std::string();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
  bool constraint_ = false;
  void check(int rc) {
    if (rc != SQLITE_OK) sqlite_failed(fmt::format("sqlite bind: {}", sqlite3_errmsg(db_)));
  }
};

void run_sql(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    sqlite_failed(fmt::format("sqlite {}: {}", sql, msg));
  }
}

/// Opens a write scope: BEGIN IMMEDIATE, or a savepoint inside an open transaction (the
/// connection is not in autocommit mode: an outer scope of this thread, which holds the store's
/// lock). Returns whether it is nested.
bool begin_scope(sqlite3* db) {
  const bool nested = sqlite3_get_autocommit(db) == 0;
  run_sql(db, nested ? "SAVEPOINT perseus_nested" : "BEGIN IMMEDIATE");
  return nested;
}

/// Commits a scope (a nested one into its outer transaction). Throws if the database refuses.
void commit_scope(sqlite3* db, bool nested) { run_sql(db, nested ? "RELEASE perseus_nested" : "COMMIT"); }

/// Undoes a scope's writes (errors ignored: a failed statement may have ended the transaction).
void rollback_scope(sqlite3* db, bool nested) {
  if (nested) {
    sqlite3_exec(db, "ROLLBACK TO perseus_nested", nullptr, nullptr, nullptr);
    sqlite3_exec(db, "RELEASE perseus_nested", nullptr, nullptr, nullptr);
  } else {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

/// A write scope of one store method, rolled back if not committed. Inside a
/// Store::Transaction it is a savepoint of it: the outer transaction decides what is stored.
class Txn {
 public:
  explicit Txn(sqlite3* db) : db_(db), nested_(begin_scope(db)) {}
  ~Txn() { if (!done_) rollback_scope(db_, nested_); }
  void commit() {
    commit_scope(db_, nested_);
    done_ = true;
  }

 private:
  sqlite3* db_;
  bool nested_;
  bool done_ = false;
};

}  // namespace

std::string database_lock_path(const std::string& db_path) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(db_path, ec);
  return (ec ? db_path : resolved.string()) + ".lock";
}

namespace {

/// Takes an exclusive flock() on `fd` (opened on `locked`, for the database `path`) or closes it
/// and throws: `held` says who holds it when another process does. Returns the fd.
int flock_or_throw(int fd, const std::string& path, const std::string& locked, const std::string& held) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  const int e = errno;
  ::close(fd);
  if (e == EWOULDBLOCK)
    throw InputError(fmt::format("{}: the database is in use by another `perseus serve` ({}); stop it or use another "
                                 "--db",
                                 path, held));
  throw InputError(fmt::format("{}: cannot lock {}: {}", path, locked, std::strerror(e)));
}

/// Takes an exclusive flock() on database_lock_path(path) (created 0600) for the life of the
/// store: a second server on the same database fails at start instead of interleaving writes.
/// Returns the fd.
int lock_database(const std::string& path) {
  const std::string lock_path = database_lock_path(path);
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw InputError(fmt::format("{}: cannot create the lock file: {}", lock_path, std::strerror(errno)));
  return flock_or_throw(fd, path, lock_path, fmt::format("lock {} is held", lock_path));
}

/// Creates the database file private (0600) if it does not exist; SQLite gives its -wal and
/// -shm files the same mode.
void create_private(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
}

/// Takes an exclusive flock() on the database file itself for the life of the store: the lock
/// file of lock_database() is named by path, so a second server reaching the same file by
/// another path (a hard link, a bind mount such as Docker's `-v host/p.db:/data/p.db`) took its
/// own lock and both ran, each with its own -wal file, losing acknowledged writes (session 21's
/// trial). flock() is separate from SQLite's fcntl() locks; the fd is closed only after
/// sqlite3_close(), so SQLite's locks are never dropped by it. Returns the fd.
int lock_database_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open database: {}", path, std::strerror(errno)));
  return flock_or_throw(fd, path, "the database file",
                        "the file itself is locked: another path reaches it, e.g. a hard link or a bind mount");
}

}  // namespace

Store::Store(const std::string& path, bool sync_full) {
  const bool on_disk = path != ":memory:" && !path.empty();
  if (on_disk) {
    path_ = path;
    lock_fd_ = lock_database(path);
    create_private(path);
    try {
      file_lock_fd_ = lock_database_file(path);
    } catch (...) {
      release_lock();
      throw;
    }
  }
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    release_lock();
    throw InputError(fmt::format("{}: cannot open database: {}", path, msg));
  }
  sqlite3_busy_timeout(db_, 5000);
  try {
    // Another application's database (a typo in --db) gained Perseus's tables and WAL mode
    // (session 22's trial): a database with tables must have Perseus's meta table.
    {
      std::string others;
      bool has_meta = false;
      Stmt tables(db_, "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
      while (tables.step()) {
        const std::string name = tables.text(0);
        if (name == "meta") has_meta = true;
        else if (others.size() < 200) others += (others.empty() ? "" : ", ") + name;
      }
      if (!has_meta && !others.empty()) {
        throw InputError(fmt::format("{}: not a Perseus database (it has the tables {} and no Perseus schema); "
                                     "refusing to change it: choose another --db",
                                     path, others));
      }
    }
    exec("PRAGMA journal_mode=WAL");
    exec(sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    exec("PRAGMA foreign_keys=OFF");
    exec(kSchema);
    std::optional<std::string> version;
    {
      Stmt get(db_, "SELECT value FROM meta WHERE key='schema_version'");
      if (get.step()) version = get.text(0);
    }
    if (!version) {
      Stmt put(db_, "INSERT INTO meta(key, value) VALUES('schema_version', ?)");
      put.bind(1, std::to_string(kSchemaVersion)).run();
    } else if (*version == "1" || *version == "2" || *version == "3") {  // upgrade in place, in one transaction
      Txn txn(db_);
      if (*version == "1") {
        exec("ALTER TABLE jobs ADD COLUMN origin TEXT NOT NULL DEFAULT 'v1'");
        exec("ALTER TABLE jobs ADD COLUMN token_sha256 TEXT NOT NULL DEFAULT ''");
      }
      if (*version != "3") exec("ALTER TABLE jobs ADD COLUMN frontier_partial_json TEXT NOT NULL DEFAULT ''");
      // Version 4: a straggler's origin (detected or declared) survives a restart. (A version 1
      // database had no stragglers table: the schema above made it with the column.)
      bool has_origin = false;
      {
        Stmt cols(db_, "SELECT 1 FROM pragma_table_info('stragglers') WHERE name='origin'");
        has_origin = cols.step();
      }
      if (!has_origin) exec("ALTER TABLE stragglers ADD COLUMN origin TEXT NOT NULL DEFAULT 'declared'");
      Stmt put(db_, "UPDATE meta SET value=? WHERE key='schema_version'");
      put.bind(1, std::to_string(kSchemaVersion)).run();
      txn.commit();
    } else if (*version != std::to_string(kSchemaVersion)) {
      throw InputError(fmt::format("{}: database schema version {} is not supported (expected {})", path, *version,
                                   kSchemaVersion));
    }
  } catch (const std::runtime_error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    release_lock();
    if (dynamic_cast<const InputError*>(&e)) throw;
    throw InputError(fmt::format("{}: not a usable Perseus database: {}", path, e.what()));
  }
}

Store::Transaction::Transaction(Store& store)
    : store_(store), lock_(store.mu_), db_(store.db_), nested_(begin_scope(db_)) {}

Store::Transaction::~Transaction() {
  if (!done_) rollback_scope(db_, nested_);
}

void Store::Transaction::commit() {
  WriteOutcome outcome(store_);
  store_.check_linked();
  commit_scope(db_, nested_);
  done_ = true;
}

Store::WriteOutcome::WriteOutcome(Store& store) : store_(store), exceptions_(std::uncaught_exceptions()) {
  t_last_failure.clear();
}

Store::WriteOutcome::~WriteOutcome() {
  const bool failed = std::uncaught_exceptions() > exceptions_;
  std::lock_guard lock(store_.health_mu_);
  store_.health_.ok = !failed;
  if (failed) {
    store_.health_.last_error = t_last_failure.empty() ? "write failed" : t_last_failure;
    ++store_.health_.write_failures;
  } else {
    store_.health_.last_error.clear();
  }
}

void Store::check_linked() const {
  if (file_lock_fd_ < 0) return;  // :memory:
  struct stat open_st {}, path_st {};
  if (::fstat(file_lock_fd_, &open_st) != 0) return;
  if (::stat(path_.c_str(), &path_st) != 0 || path_st.st_dev != open_st.st_dev || path_st.st_ino != open_st.st_ino) {
    // Its folder removed (or the file replaced) under a running server: SQLite went on writing
    // to a file without a name, every acknowledged write was lost at the restart, and a second
    // server could start on the path (session 22's trial).
    sqlite_failed(fmt::format("the database file {} was removed or replaced while the server ran; what is written now "
                              "would be lost: restart the server (docs/http-api.md, \"Backup\")",
                              path_));
  }
}

Store::WriteHealth Store::write_health() const {
  std::lock_guard lock(health_mu_);
  return health_;
}

Store::~Store() {
  sqlite3_close(db_);
  release_lock();
}

void Store::release_lock() {
  if (file_lock_fd_ >= 0) ::close(file_lock_fd_);  // after sqlite3_close(): closing drops the flock
  file_lock_fd_ = -1;
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    sqlite_failed(fmt::format("sqlite: {}", msg));
  }
}

bool Store::insert_job(const std::string& job_id, double now_s, const JobAuth& auth, const std::string& spec_json,
                       const std::string& status, std::int64_t version_counter,
                       const std::vector<StoredAssignment>& assignments) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Txn txn(db_);
  Stmt ins(db_, "INSERT INTO jobs(job_id, created_s, last_activity_s, spec_json, status, version_counter, origin, "
                "token_sha256) VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
  ins.bind(1, job_id).bind(2, now_s).bind(3, now_s).bind(4, spec_json).bind(5, status).bind(6, version_counter)
      .bind(7, auth.origin).bind(8, auth.token_sha256);
  ins.step();
  if (ins.constraint()) return false;
  for (const auto& x : assignments) {
    Stmt s(db_, "INSERT INTO assignments(job_id, pipeline, plan_index, version) VALUES(?, ?, ?, ?)");
    s.bind(1, job_id).bind(2, x.pipeline).bind(3, x.plan_index).bind(4, x.version).run();
  }
  txn.commit();
  return true;
}

void Store::set_status(const std::string& job_id, const std::string& status, const std::string& error) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Stmt s(db_, "UPDATE jobs SET status=?, error=? WHERE job_id=?");
  s.bind(1, status).bind(2, error).bind(3, job_id).run();
}

void Store::set_built_profile(const std::string& job_id, const std::string& csv) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Stmt s(db_, "UPDATE jobs SET built_profile_csv=? WHERE job_id=?");
  s.bind(1, csv).bind(2, job_id).run();
}

void Store::set_frontier(const std::string& job_id, const std::string& points_json, const std::string& partial_json,
                         const std::vector<std::pair<int, std::string>>& plans) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Txn txn(db_);
  {
    Stmt s(db_, "UPDATE jobs SET points_json=?, frontier_partial_json=? WHERE job_id=?");
    s.bind(1, points_json).bind(2, partial_json).bind(3, job_id).run();
  }
  {
    Stmt s(db_, "DELETE FROM plans WHERE job_id=? AND plan_index>=0");
    s.bind(1, job_id).run();
  }
  Stmt ins(db_, "INSERT OR REPLACE INTO plans(job_id, plan_index, freqs_json) VALUES(?, ?, ?)");
  for (const auto& [index, freqs_json] : plans) {
    ins.bind(1, job_id).bind(2, index).bind(3, freqs_json);
    ins.run();
    ins.reset();
  }
  txn.commit();
}

void Store::set_last_activity(const std::string& job_id, double now_s) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Stmt s(db_, "UPDATE jobs SET last_activity_s=? WHERE job_id=?");
  s.bind(1, now_s).bind(2, job_id).run();
}

void Store::put_plan(const std::string& job_id, int plan_index, const std::string& freqs_json) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Stmt s(db_, "INSERT OR IGNORE INTO plans(job_id, plan_index, freqs_json) VALUES(?, ?, ?)");
  s.bind(1, job_id).bind(2, plan_index).bind(3, freqs_json).run();
}

std::optional<std::string> Store::plan(const std::string& job_id, int plan_index) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "SELECT freqs_json FROM plans WHERE job_id=? AND plan_index=?");
  s.bind(1, job_id).bind(2, plan_index);
  if (!s.step()) return std::nullopt;
  return s.text(0);
}

void Store::update_assignments(const std::string& job_id, std::int64_t version_counter,
                               const std::vector<StoredAssignment>& assignments,
                               const std::optional<StoredStraggler>& upsert_straggler,
                               std::optional<int> delete_straggler, const std::string& decision_json,
                               std::size_t keep_decisions) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Txn txn(db_);
  {
    Stmt s(db_, "UPDATE jobs SET version_counter=? WHERE job_id=?");
    s.bind(1, version_counter).bind(2, job_id).run();
  }
  for (const auto& x : assignments) {
    Stmt s(db_, "INSERT OR REPLACE INTO assignments(job_id, pipeline, plan_index, version) VALUES(?, ?, ?, ?)");
    s.bind(1, job_id).bind(2, x.pipeline).bind(3, x.plan_index).bind(4, x.version).run();
  }
  if (upsert_straggler) {
    Stmt s(db_, "INSERT OR REPLACE INTO stragglers(job_id, pipeline, target_time_s, slowdown, created_s, origin) "
                "VALUES(?, ?, ?, ?, ?, ?)");
    s.bind(1, job_id).bind(2, upsert_straggler->pipeline).bind(3, upsert_straggler->target_time_s)
        .bind(4, upsert_straggler->slowdown).bind(5, upsert_straggler->created_s).bind(6, upsert_straggler->origin)
        .run();
  }
  if (delete_straggler) {
    Stmt s(db_, "DELETE FROM stragglers WHERE job_id=? AND pipeline=?");
    s.bind(1, job_id).bind(2, *delete_straggler).run();
  }
  if (!decision_json.empty()) {
    Stmt s(db_, "INSERT INTO decisions(job_id, decision_json) VALUES(?, ?)");
    s.bind(1, job_id).bind(2, decision_json).run();
    if (keep_decisions > 0) {
      Stmt prune(db_, "DELETE FROM decisions WHERE job_id=?1 AND id < (SELECT MIN(id) FROM (SELECT id FROM decisions "
                      "WHERE job_id=?1 ORDER BY id DESC LIMIT ?2))");
      prune.bind(1, job_id).bind(2, static_cast<std::int64_t>(std::min<std::size_t>(keep_decisions, INT64_MAX))).run();
    }
  }
  txn.commit();
}

bool Store::insert_rank(const std::string& job_id, const StoredRank& r) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Stmt s(db_, "INSERT INTO ranks(job_id, rank, dp_rank, pp_rank, tp_rank, freqs_json) VALUES(?, ?, ?, ?, ?, ?)");
  s.bind(1, job_id).bind(2, r.rank).bind(3, r.dp_rank).bind(4, r.pp_rank).bind(5, r.tp_rank)
      .bind(6, nlohmann::json(r.supported_freqs_mhz).dump());
  s.step();
  return !s.constraint();
}

bool Store::insert_measurement(const std::string& job_id, int rank, std::int64_t iteration, double time_s,
                               double energy_j, const std::string& body_json, double now_s) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Stmt s(db_, "INSERT INTO measurements(job_id, rank, iteration, time_s, energy_j, created_s, body_json) "
              "VALUES(?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, job_id).bind(2, rank).bind(3, iteration).bind(4, time_s).bind(5, energy_j).bind(6, now_s)
      .bind(7, body_json);
  s.step();
  return !s.constraint();
}

std::vector<StoredMeasurement> Store::measurements(const std::string& job_id) {
  std::lock_guard lock(mu_);
  std::vector<StoredMeasurement> out;
  Stmt s(db_, "SELECT seq, rank, iteration, body_json FROM measurements WHERE job_id=? ORDER BY seq");
  s.bind(1, job_id);
  while (s.step()) out.push_back({s.i64(0), static_cast<int>(s.i64(1)), s.i64(2), s.text(3)});
  return out;
}

void Store::delete_job(const std::string& job_id) {
  std::lock_guard lock(mu_);
  WriteOutcome outcome(*this);
  check_linked();
  Txn txn(db_);
  for (const char* table : {"jobs", "ranks", "assignments", "plans", "stragglers", "decisions", "measurements"}) {
    Stmt s(db_, fmt::format("DELETE FROM {} WHERE job_id=?", table).c_str());
    s.bind(1, job_id).run();
  }
  txn.commit();
}

std::vector<StoredJob> Store::load_all(std::size_t max_decisions) {
  std::lock_guard lock(mu_);
  std::vector<StoredJob> jobs;
  {
    Stmt s(db_, "SELECT job_id, created_s, last_activity_s, spec_json, status, error, version_counter, "
                "built_profile_csv, points_json, origin, token_sha256, frontier_partial_json FROM jobs ORDER BY created_s");
    while (s.step()) {
      StoredJob j;
      j.job_id = s.text(0);
      j.created_s = s.f64(1);
      j.last_activity_s = s.f64(2);
      j.spec_json = s.text(3);
      j.status = s.text(4);
      j.error = s.text(5);
      j.version_counter = s.i64(6);
      j.built_profile_csv = s.text(7);
      j.points_json = s.text(8);
      j.auth.origin = s.text(9);
      j.auth.token_sha256 = s.text(10);
      j.frontier_partial_json = s.text(11);
      jobs.push_back(std::move(j));
    }
  }
  for (auto& j : jobs) {
    {
      Stmt s(db_, "SELECT rank, dp_rank, pp_rank, tp_rank, freqs_json, rowid FROM ranks WHERE job_id=? ORDER BY rowid");
      s.bind(1, j.job_id);
      while (s.step()) {
        StoredRank r{static_cast<int>(s.i64(0)), static_cast<int>(s.i64(1)), static_cast<int>(s.i64(2)),
                     static_cast<int>(s.i64(3)), {}, s.i64(5)};
        r.supported_freqs_mhz = nlohmann::json::parse(s.text(4)).get<std::vector<int>>();
        j.ranks.push_back(std::move(r));
      }
    }
    {
      Stmt s(db_, "SELECT pipeline, plan_index, version FROM assignments WHERE job_id=? ORDER BY pipeline");
      s.bind(1, j.job_id);
      while (s.step()) j.assignments.push_back({static_cast<int>(s.i64(0)), static_cast<int>(s.i64(1)), s.i64(2)});
    }
    {
      // Only the plans a reload needs: the special ones (index < 0) and those a pipeline is
      // assigned. The rest (a partial frontier stores every plan) are read on demand, plan().
      Stmt s(db_, "SELECT plan_index, freqs_json FROM plans WHERE job_id=?1 AND (plan_index<0 OR plan_index IN "
                  "(SELECT plan_index FROM assignments WHERE job_id=?1))");
      s.bind(1, j.job_id);
      while (s.step()) j.plans.emplace_back(static_cast<int>(s.i64(0)), s.text(1));
    }
    {
      Stmt s(db_, "SELECT pipeline, target_time_s, slowdown, created_s, origin FROM stragglers WHERE job_id=?");
      s.bind(1, j.job_id);
      while (s.step())
        j.stragglers.push_back({static_cast<int>(s.i64(0)), s.f64(1), s.f64(2), s.f64(3), s.text(4)});
    }
    {
      Stmt s(db_, "SELECT decision_json FROM (SELECT id, decision_json FROM decisions WHERE job_id=?1 ORDER BY id "
                  "DESC LIMIT ?2) ORDER BY id");
      s.bind(1, j.job_id).bind(2, static_cast<std::int64_t>(std::min<std::size_t>(max_decisions, INT64_MAX)));
      while (s.step()) j.decisions.push_back(s.text(0));
      Stmt n(db_, "SELECT COUNT(*) FROM decisions WHERE job_id=?");
      n.bind(1, j.job_id);
      if (n.step()) j.decision_rows = n.i64(0);
    }
    {
      // energy_j is stored as 0 when the report had none: the report itself (body_json) says
      // whether it was known, so the mean's divisor survives a restart.
      Stmt s(db_, "SELECT COUNT(*), COALESCE(SUM(time_s), 0), COALESCE(SUM(energy_j), 0), COALESCE(MAX(iteration), -1), "
                  "COALESCE(SUM(LENGTH(body_json)), 0), "
                  "COALESCE(SUM(json_type(body_json, '$.energy_j') IN ('integer', 'real')), 0) FROM measurements "
                  "WHERE job_id=?");
      s.bind(1, j.job_id);
      if (s.step()) {
        j.num_measurements = s.i64(0);
        j.sum_time_s = s.f64(1);
        j.sum_energy_j = s.f64(2);
        j.max_iteration = s.i64(3);
        j.measurement_bytes = s.i64(4);
        j.num_energy_known = s.i64(5);
      }
    }
  }
  return jobs;
}

}  // namespace perseus::server
