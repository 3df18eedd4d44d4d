// Atomic durable writes: a logical change made of several writes (a job with its quick plan, a
// profiling sweep step, the end of a sweep) is one SQLite transaction, and memory changes only
// after it commits. Faults are injected deterministically by a trigger the test adds to the
// server's database (an error in one of the change's writes): the request fails with 500,
// and neither the database nor the served state keeps any part of it.
#include <sqlite3.h>

#include <cmath>
#include <optional>

#include <gtest/gtest.h>

#include "perseus/server/store.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

/// Runs SQL statements on the database file (a second connection; WAL lets it in).
void exec_sql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << sql << ": " << msg;
}

/// The first column of the first row of `query` as text ("" when there is no row).
std::string query_text(const std::string& db_path, const std::string& query) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return "open failed";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) != SQLITE_OK) out = "prepare failed";
  else if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

/// A trigger body that fails its statement with an error (SQLITE_ERROR "malformed JSON"); not
/// RAISE(ABORT), whose SQLITE_CONSTRAINT the store reads as "row exists".
const char* kFault = "json('injected fault')";

/// A profiling job of 2 stages (1 pipeline) sweeping one clock per step.
json profiling_job() {
  return {{"pp", 2}, {"dp", 1}, {"microbatches", 2}, {"schedule", "1f1b"}, {"p2p_power_w", 50.0},
          {"unit_time_s", 0.001}, {"mode", "profile"}, {"profile_samples", 1}, {"max_energy_rises", 2},
          {"min_freq_mhz", 1300}};
}

/// Creates profiling_job() and registers its two ranks; returns the job id.
std::string start_profiling(Api& api) {
  auto c = api.post("/v1/jobs", profiling_job());
  EXPECT_EQ(c.status, 201) << c.body;
  const std::string job = c.j.value("job_id", "");
  EXPECT_TRUE(register_sweep_ranks(api, job));
  return job;
}

/// Rank `r` fetches its plan and reports iteration `it` measured on it (a synthetic GPU: time
/// ~ 1/f, energy lowest at 1380 MHz). Returns the report's HTTP status.
int report(Api& api, const std::string& job, int r, int it) {
  const std::string base = "/v1/jobs/" + job + "/ranks/" + std::to_string(r);
  auto p = api.get(base + "/plan");
  if (p.status != 200) return -p.status;
  const json ins = synthetic_instructions(p.j);
  return api.post(base + "/measurements", {{"iteration", it}, {"time_s", 1.0}, {"energy_j", 100.0},
                                           {"instructions", ins}, {"plan_version", p.j["version"]}})
      .status;
}

TEST(AtomicWrites, JobIsStoredWithItsQuickPlanOrNotAtAll) {
  // Before the fix the job row and its assignment to plan -3 were committed before the plan:
  // a failure (or kill -9) in between left a job that reloaded as failed ("stored plan -3 is missing").
  TempDir dir;
  const std::string db = dir.file("a.db");
  LocalServer srv(db);
  Api api(srv.port());
  exec_sql(db, std::string("CREATE TRIGGER fault BEFORE INSERT ON plans BEGIN SELECT ") + kFault + "; END");
  EXPECT_EQ(api.post("/v1/jobs", profile_job()).status, 500);
  EXPECT_EQ(query_text(db, "SELECT COUNT(*) FROM jobs"), "0");
  EXPECT_EQ(query_text(db, "SELECT COUNT(*) FROM assignments"), "0");
  EXPECT_EQ(api.get("/v1/jobs").j["jobs"].size(), 0u);
  exec_sql(db, "DROP TRIGGER fault");
  auto c = api.post("/v1/jobs", profile_job());
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_EQ(query_text(db, "SELECT COUNT(*) FROM plans WHERE plan_index = -3"), "1");
}

// A database that refuses writes (a full disk) cannot keep what the server acknowledges: health
// says so ("degraded"; /v1/ready 503, for readiness probes and load balancers) and /metrics
// counts it, until a write succeeds again. Before, health said "ok" while every write failed.
TEST(AtomicWrites, HealthIsDegradedWhileTheDatabaseRefusesWrites) {
  TempDir dir;
  const std::string db = dir.file("a.db");
  LocalServer srv(db);
  Api api(srv.port());
  auto c = api.post("/v1/jobs", profile_job());
  ASSERT_EQ(c.status, 201) << c.body;
  const std::string base = "/v1/jobs/" + c.j["job_id"].get<std::string>();
  ASSERT_EQ(api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status, 201);
  auto health = api.get("/v1/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.j["status"], "ok");
  EXPECT_EQ(api.get("/v1/ready").status, 200);
  EXPECT_EQ(metric_value(api, "perseus_store_writable"), 1);
  exec_sql(db, std::string("CREATE TRIGGER fault BEFORE INSERT ON measurements BEGIN SELECT ") + kFault + "; END");
  ASSERT_EQ(api.post(base + "/ranks/0/measurements", {{"iteration", 0}, {"time_s", 1.0}}).status, 500);
  health = api.get("/v1/health");
  EXPECT_EQ(health.status, 200) << "alive (liveness): restarting it would not help";
  EXPECT_EQ(health.j["status"], "degraded");
  const auto ready = api.get("/v1/ready");
  EXPECT_EQ(ready.status, 503) << "not ready: out of service";
  EXPECT_EQ(ready.j["status"], "degraded");
  EXPECT_EQ(ready.j["error"]["code"], "storage_unwritable");
  EXPECT_NE(ready.j["error"]["message"].get<std::string>().find("malformed JSON"), std::string::npos) << ready.body;
  EXPECT_EQ(metric_value(api, "perseus_store_writable"), 0);
  EXPECT_EQ(metric_value(api, "perseus_store_write_failures_total"), 1);
  exec_sql(db, "DROP TRIGGER fault");
  ASSERT_EQ(api.post(base + "/ranks/0/measurements", {{"iteration", 0}, {"time_s", 1.0}}).status, 202);
  health = api.get("/v1/ready");
  EXPECT_EQ(health.status, 200) << "a write succeeded again";
  EXPECT_EQ(health.j["status"], "ok");
  EXPECT_EQ(metric_value(api, "perseus_store_writable"), 1);
  EXPECT_EQ(metric_value(api, "perseus_store_write_failures_total"), 1);
}

// The database's folder removed under a running server: SQLite went on writing to a file that
// no longer had a name, every write was acknowledged, health said ok, and all of it was gone at
// the restart (session 22's trial). Now writes fail and health says why.
TEST(AtomicWrites, ADatabaseRemovedUnderTheServerTakesNoMoreWrites) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("sub"));
  const std::string db = dir.file("sub/a.db");
  LocalServer srv(db);
  Api api(srv.port());
  ASSERT_EQ(api.post("/v1/jobs", profile_job()).status, 201);
  std::filesystem::remove_all(dir.file("sub"));
  EXPECT_EQ(api.post("/v1/jobs", profile_job()).status, 500) << "not acknowledged: it could not be kept";
  const auto health = api.get("/v1/ready");
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.j["error"]["message"].get<std::string>().find("a.db was removed or replaced while the server ran"),
            std::string::npos)
      << health.body;
}

TEST(AtomicWrites, SweepStepIsStoredWithItsReportOrNotAtAll) {
  // Before the fix the report was committed and the sweep stepped in memory before the new plan
  // version was: a failed commit left the sweep one step ahead of the plan served (whose
  // reports the sweep then ignored: stuck) and the report stored.
  TempDir dir;
  const std::string db = dir.file("a.db");
  LocalServer srv(db);
  Api api(srv.port());
  const std::string job = start_profiling(api);
  exec_sql(db, std::string("CREATE TRIGGER fault BEFORE UPDATE OF version_counter ON jobs BEGIN SELECT ") + kFault + "; END");
  ASSERT_EQ(report(api, job, 0, 0), 202);  // stage 0 sampled; the step needs stage 1 too
  ASSERT_EQ(report(api, job, 1, 0), 500);  // completes the step: its plan version cannot be stored
  json info = api.get("/v1/jobs/" + job).j;
  EXPECT_EQ(info["profiling"]["step"], 0) << info.dump();
  EXPECT_EQ(info["version"], 1);
  EXPECT_EQ(info["measurements"]["count"], 1);
  EXPECT_EQ(query_text(db, "SELECT COUNT(*) FROM measurements"), "1");
  exec_sql(db, "DROP TRIGGER fault");
  ASSERT_EQ(report(api, job, 1, 0), 202);  // the retry is a new report, not a duplicate
  info = api.get("/v1/jobs/" + job).j;
  EXPECT_EQ(info["profiling"]["step"], 1);
  EXPECT_EQ(info["version"], 2);
  EXPECT_EQ(api.get("/v1/jobs/" + job + "/ranks/0/plan").j["version"], 2);
}

TEST(AtomicWrites, SweepEndIsStoredWholeOrNotAtAll) {
  // Before the fix the sweep's end was four transactions (profile, quick plan, assignments,
  // status): a failure before the status left a job reloading as "profiling" forever (its
  // sweep was not replayed since the profile was stored), and memory said "failed".
  TempDir dir;
  const std::string db = dir.file("a.db");
  std::string job;
  std::optional<std::pair<int, int>> failed;  // (rank, iteration) of the report refused
  {
    LocalServer srv(db);
    Api api(srv.port());
    job = start_profiling(api);
    exec_sql(db, std::string("CREATE TRIGGER fault BEFORE UPDATE OF status ON jobs BEGIN SELECT ") + kFault + "; END");
    for (int it = 0; it < 100 && !failed; ++it)
      for (int r = 0; r < 2 && !failed; ++r) {
        const int status = report(api, job, r, it);
        if (status == 500) failed = {r, it};
        else ASSERT_EQ(status, 202) << "rank " << r << " iteration " << it;
      }
    ASSERT_TRUE(failed) << "the sweep never ended";
    const json info = api.get("/v1/jobs/" + job).j;
    EXPECT_EQ(info["status"], "profiling") << info.dump();
    EXPECT_EQ(info["error"], "");
    EXPECT_EQ(query_text(db, "SELECT status || '/' || length(built_profile_csv) FROM jobs"), "profiling/0");
    EXPECT_EQ(query_text(db, "SELECT COUNT(*) FROM plans WHERE plan_index = -3"), "0");
    exec_sql(db, "DROP TRIGGER fault");
  }
  LocalServer srv(db);  // the reload finds the job as it was before the refused report
  Api api(srv.port());
  EXPECT_EQ(api.get("/v1/jobs/" + job).j["status"], "profiling");
  ASSERT_EQ(report(api, job, failed->first, failed->second), 202);
  const json done = wait_status(api, job, "ready");
  EXPECT_EQ(done["error"], "");
  EXPECT_GE(api.get("/v1/jobs/" + job + "/ranks/0/plan").j["plan_index"].get<int>(), 0);
}

// A write that must happen and fails on a constraint (here a trigger's RAISE(ABORT)) is an error,
// not a silent "not written": Stmt::step() read every SQLITE_CONSTRAINT as "the row exists", and
// writes such as set_status() and put_plan() never checked it (found by the atomic-writes work).
TEST(AtomicWrites, AConstraintFailureOfAWriteIsAnError) {
  TempDir dir;
  const std::string db = (dir.path / "store.db").string();
  {
    Store store(db);
    ASSERT_TRUE(store.insert_job("job-1", 1.0, JobAuth{}, "{}", "ready", 1, {}));
  }
  exec_sql(db, "CREATE TRIGGER no_status BEFORE UPDATE OF status ON jobs BEGIN SELECT RAISE(ABORT, 'no'); END;"
               "CREATE TRIGGER no_plans BEFORE INSERT ON plans BEGIN SELECT RAISE(ABORT, 'no'); END;");
  Store store(db);
  EXPECT_THROW(store.set_status("job-1", "failed", "x"), std::runtime_error);
  EXPECT_THROW(store.put_plan("job-1", 0, "[1410]"), std::runtime_error);
  EXPECT_FALSE(store.insert_job("job-1", 2.0, JobAuth{}, "{}", "ready", 1, {}));  // a duplicate id stays "false"
}

}  // namespace
}  // namespace perseus::server::testing
