// Durability: kill -9 the real `perseus serve` mid-job and restart it; profiling mode with a
// restart in the middle of the sweep.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include <atomic>
#include <future>
#include <set>
#include <sstream>
#include <cmath>
#include <thread>
#include <fstream>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/problem.hpp"
#include "perseus/server/store.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

/// Runs `perseus serve` as a child process.
class ServeProcess {
 public:
  ServeProcess(const TempDir& dir, const std::string& db) {
    const std::string port_file = dir.file("port");
    std::filesystem::remove(port_file);
    std::ofstream(dir.file("token")) << kToken << "\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = dir.file("serve.log");
      FILE* f = std::freopen(log.c_str(), "a", stderr);
      (void)f;
      ::execl(PERSEUS_BINARY, PERSEUS_BINARY, "serve", "--db", db.c_str(), "--port", "0", "--port-file",
              port_file.c_str(), "--token-file", dir.file("token").c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    for (int i = 0; i < 500 && port_ == 0; ++i) {
      std::ifstream in(port_file);
      if (!(in >> port_)) port_ = 0;
      if (!port_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GT(port_, 0) << "perseus serve did not start: " << read_file(dir.file("serve.log"));
  }
  ~ServeProcess() {
    if (pid_ > 0) kill_hard();
  }
  void kill_hard() {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  int terminate() {
    ::kill(pid_, SIGTERM);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST(Durability, KillNineAndRestartKeepsEverything) {
  TempDir dir;
  const std::string db = dir.file("perseus.db");
  std::string job;
  json plan3, plan11, info_before;
  {
    ServeProcess p(dir, db);
    ASSERT_GT(p.port(), 0);
    Api api(p.port());
    auto c = api.post("/v1/jobs", profile_job());
    ASSERT_EQ(c.status, 201) << c.body;
    job = c.j["job_id"];
    wait_status(api, job, "ready");
    const std::string base = "/v1/jobs/" + job;
    for (int r = 0; r < 16; ++r)
      ASSERT_EQ(api.post(base + "/ranks", {{"rank", r}, {"dp_rank", r / 8}, {"pp_rank", r % 8}, {"tp_rank", 0}}).status, 201);
    for (int it = 0; it < 3; ++it)
      ASSERT_EQ(api.post(base + "/ranks/2/measurements", {{"iteration", it}, {"time_s", 1.0}, {"energy_j", 5.0}}).status, 202);
    // A report without energy: unknown, outside the mean, before and after the restart.
    ASSERT_EQ(api.post(base + "/ranks/2/measurements", {{"iteration", 3}, {"time_s", 1.0}}).status, 202);
    ASSERT_EQ(api.post(base + "/stragglers", {{"pipeline", 1}, {"slowdown", 1.3}}).status, 200);
    plan3 = api.get(base + "/ranks/3/plan").j;
    plan11 = api.get(base + "/ranks/11/plan").j;
    info_before = api.get(base).j;
    info_before["last_activity_s"] = api.get("/v1/jobs").j["jobs"][0]["last_activity_s"];  // the list has it
    p.kill_hard();  // no shutdown path runs
  }
  ServeProcess p(dir, db);
  ASSERT_GT(p.port(), 0);
  Api api(p.port());
  const std::string base = "/v1/jobs/" + job;
  const json info = api.get(base).j;
  EXPECT_EQ(info["status"], "ready");
  EXPECT_EQ(info["ranks_registered"], 16);
  EXPECT_EQ(info["measurements"]["count"], 4);
  EXPECT_EQ(info["measurements"], info_before["measurements"]);  // energy_unknown 1, mean 5 J
  EXPECT_EQ(info["measurements"]["energy_unknown"], 1);
  // The last activity before the kill may not have reached the store: the restart counts as
  // activity, so the job's idle time never starts before its last request.
  EXPECT_GE(api.get("/v1/jobs").j["jobs"][0]["last_activity_s"].get<double>(),
            info_before["last_activity_s"].get<double>());
  EXPECT_EQ(info["stragglers"], info_before["stragglers"]);
  EXPECT_EQ(info["decisions"], info_before["decisions"]);
  EXPECT_EQ(info["pipelines"], info_before["pipelines"]);
  EXPECT_EQ(info["frontier"], info_before["frontier"]);
  EXPECT_EQ(api.get(base + "/ranks/3/plan").j, plan3);
  EXPECT_EQ(api.get(base + "/ranks/11/plan").j, plan11);
  EXPECT_EQ(api.get(base + "/ranks/3/plan?since_version=" + std::to_string(plan3["version"].get<int>())).status, 304);
  // Accepted measurements and ranks are remembered.
  EXPECT_EQ(api.post(base + "/ranks/2/measurements", {{"iteration", 1}, {"time_s", 1.0}}).j["duplicate"], true);
  // A restarted trainer registers again with its coordinates: 200; other coordinates: 409.
  EXPECT_EQ(api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status, 200);
  EXPECT_EQ(api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 1}, {"pp_rank", 0}, {"tp_rank", 0}}).status, 409);
  // A new straggler target needs a plan never served before: the frontier is re-derived.
  const json& pts = info["frontier"]["points"];
  const int fastest = info["frontier"]["fastest_index"];
  const double t_min = pts[fastest][0];
  // The plan with the lowest energy at the deadline: its own, then 8 GPUs blocking at
  // P_block until the deadline (a slower plan can save less than that blocking costs).
  auto expected_index = [&](double slowdown) {
    const double deadline = slowdown * t_min, pipe_w = 83.64 * 8;
    auto at_deadline = [&](int i) { return pts[i][1].get<double>() + pipe_w * (deadline - pts[i][0].get<double>()); };
    int best = -1;
    for (int i = 0; i < static_cast<int>(pts.size()); ++i)
      if (pts[i][0].get<double>() <= deadline && (best < 0 || at_deadline(i) < at_deadline(best))) best = i;
    return best;
  };
  double slowdown = 0;
  for (double s : {1.01, 1.02, 1.05, 1.1, 1.2, 1.5, 2.0})
    if (expected_index(s) != plan3["plan_index"].get<int>() && expected_index(s) != fastest) {
      slowdown = s;
      break;
    }
  ASSERT_GT(slowdown, 0) << "the frontier is too short for this test";
  auto s = post_when_frontier_ready(api, job, base + "/stragglers", {{"pipeline", 1}, {"slowdown", slowdown}});
  EXPECT_EQ(s.j["decision"]["plan_index"], expected_index(slowdown));
  ASSERT_EQ(s.status, 200) << s.body;
  auto moved = api.get(base + "/ranks/3/plan");
  EXPECT_GT(moved.j["version"].get<int>(), plan3["version"].get<int>());
  EXPECT_EQ(moved.j["plan_index"], s.j["decision"]["plan_index"]);
  EXPECT_EQ(api.del(base + "/stragglers/1").status, 200);
  EXPECT_EQ(api.get(base + "/ranks/3/plan").j["plan_index"], info["frontier"]["fastest_index"]);
  EXPECT_EQ(p.terminate(), 0) << "SIGTERM stops the server cleanly";
}

/// The frontier the library plans for profile_job(2, 8) with the given overheads and planning
/// budget (< 0: none): what a job with those fields must serve.
Frontier library_frontier(double op_overhead_s, double p2p_latency_s, double time_budget_s, Dag& dag) {
  ProblemSpec spec;
  spec.num_ranks = 8;
  spec.microbatches = 4;
  spec.p_block_w = 83.64;
  spec.overheads = {p2p_latency_s, op_overhead_s};
  Problem problem = make_problem(spec, parse_profile_csv(example_profile(), "profile_csv"));
  dag = problem.dag;
  PlannerOptions opt;
  opt.p_block_w = spec.p_block_w;
  opt.unit_time_s = 0.01;
  opt.time_budget_s = time_budget_s;
  return solve_frontier(dag, problem.profile, opt);
}

/// The per-computation clocks of a served plan (GET .../plan) against plan `index` of `fr`.
void expect_served_plan(const json& served, const Frontier& fr, const Dag& dag, int index, int pp_rank) {
  const auto freq = fr.plan(index).freq_mhz;
  const auto& ops = dag.rank_ops(pp_rank);
  ASSERT_EQ(served["instructions"].size(), ops.size()) << served.dump();
  for (std::size_t k = 0; k < ops.size(); ++k)
    EXPECT_EQ(served["instructions"][k]["freq_mhz"].get<int>(), freq[ops[k]]) << "computation " << k;
}

TEST(Durability, ReadyJobsStoreReportsWithoutTheirComputations) {
  // A report's per-computation entries serve the straggler loop (in memory) and nothing after
  // it: a ready job stores the report without them (their count instead), so a long training
  // run does not fill the disk; counts and energy survive a restart.
  TempDir dir;
  const std::string db = dir.file("perseus.db");
  std::string job;
  json info_before;
  {
    ServeProcess p(dir, db);
    ASSERT_GT(p.port(), 0);
    Api api(p.port());
    auto c = api.post("/v1/jobs", profile_job(1, 8));
    ASSERT_EQ(c.status, 201) << c.body;
    job = c.j["job_id"];
    wait_status(api, job, "ready");
    const std::string base = "/v1/jobs/" + job;
    ASSERT_EQ(api.post(base + "/ranks", {{"rank", 2}, {"dp_rank", 0}, {"pp_rank", 2}, {"tp_rank", 0}}).status, 201);
    json entries = json::array();
    for (int mb = 0; mb < 4; ++mb)
      for (const char* kind : {"forward", "backward"})
        entries.push_back({{"instruction", kind}, {"microbatch", mb}, {"freq_mhz", 1410}, {"time_s", 0.01}, {"energy_j", 2.0}});
    ASSERT_EQ(api.post(base + "/ranks/2/measurements",
                       {{"iteration", 0}, {"time_s", 1.0}, {"energy_j", 16.0}, {"instructions", entries}}).status, 202);
    ASSERT_EQ(api.post(base + "/ranks/2/measurements", {{"iteration", 1}, {"time_s", 1.0}}).status, 202);
    info_before = api.get(base).j;
    EXPECT_EQ(p.terminate(), 0);
  }
  {
    Store store(db);
    const auto stored = store.measurements(job);
    ASSERT_EQ(stored.size(), 2u);
    const json first = json::parse(stored[0].body_json);
    EXPECT_FALSE(first.contains("instructions")) << first;
    EXPECT_EQ(first["instructions_count"], 8);
    EXPECT_EQ(first["energy_j"], 16.0);
    const json second = json::parse(stored[1].body_json);
    EXPECT_EQ(second["iteration"], 1);
    EXPECT_FALSE(second.contains("instructions_count")) << "a report without entries is stored as it came: " << second;
  }
  ServeProcess p(dir, db);
  ASSERT_GT(p.port(), 0);
  Api api(p.port());
  EXPECT_EQ(api.get("/v1/jobs/" + job).j["measurements"], info_before["measurements"]);
  EXPECT_EQ(api.post("/v1/jobs/" + job + "/ranks/2/measurements", {{"iteration", 0}, {"time_s", 1.0}}).j["duplicate"], true);
}

/// Rows of `job` in `table` of the store (read while the server runs: WAL allows it); -1 when
/// the database cannot be read.
int rows_of_job_in(const std::string& db_path, const std::string& table, const std::string& job) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return -1;
  int rows = -1;
  sqlite3_stmt* st = nullptr;
  const std::string sql = "SELECT COUNT(*) FROM " + table + " WHERE job_id = ?";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, job.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) rows = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

/// Rows of `job` in all the store's tables.
int rows_of_job(const std::string& db_path, const std::string& job) {
  int total = 0;
  for (const char* table : {"jobs", "ranks", "assignments", "plans", "stragglers", "decisions", "measurements"}) {
    const int rows = rows_of_job_in(db_path, table, job);
    total += rows < 0 ? -1000000 : rows;
  }
  return total;
}

// Every straggler declaration is a decision, identical ones too: the store keeps the newest
// max_decisions_kept (100) of a job, so a trainer that re-declares each iteration cannot grow
// the database without bound, and decisions_total (the newest decision's id) survives a restart.
// A decision lists every pipeline's plan: at 65,536 pipelines ~200 KB, so 100 of them were
// ~26 MB of JSON per job, in memory, in the database and in every GET of the job. The history
// is also bounded in bytes (ManagerOptions::max_decision_bytes, 4 MiB), alike in memory and store.
TEST(Durability, LargeStragglerDecisionsAreKeptWithinAByteBudget) {
  TempDir dir;
  const std::string db = dir.file("d.db");
  constexpr int kDeclarations = 12;
  constexpr std::size_t kBudget = 32 << 10;  // a 2,048-pipeline decision is ~6 KB: about 5 fit
  ServerOptions opt;
  opt.max_decision_bytes = kBudget;
  std::string job;
  json before;
  {
    LocalServer srv(db, opt);
    Api api(srv.port());
    auto c = api.post("/v1/jobs", profile_job(2048, 8));
    ASSERT_EQ(c.status, 201) << c.body;
    job = c.j["job_id"];
    const std::string base = "/v1/jobs/" + job;
    wait_status(api, job, "ready", 120);
    for (int i = 0; i < kDeclarations; ++i)
      ASSERT_EQ(api.post(base + "/stragglers", {{"pipeline", 1}, {"slowdown", 1.2}}).status, 200) << i;
    before = api.get(base).j;
    EXPECT_EQ(before["decisions_total"], kDeclarations);
    const std::size_t kept = before["decisions"].size();
    EXPECT_GE(kept, 1u);
    EXPECT_LT(kept, static_cast<std::size_t>(kDeclarations)) << "fewer than 12 fit in the budget";
    EXPECT_LE(before["decisions"].dump().size(), kBudget);
    EXPECT_EQ(before["decisions"].back()["id"], kDeclarations);
    EXPECT_EQ(rows_of_job_in(db, "decisions", job), static_cast<int>(kept)) << "the store keeps what memory keeps";
  }
  LocalServer srv(db, opt);
  Api api(srv.port());
  const json after = api.get("/v1/jobs/" + job).j;
  EXPECT_EQ(after["decisions_total"], kDeclarations);
  EXPECT_EQ(after["decisions"], before["decisions"]);
}

TEST(Durability, StoredStragglerDecisionsStayBoundedAndTheirCountSurvivesARestart) {
  TempDir dir;
  const std::string db = dir.file("d.db");
  std::string job;
  json before;
  constexpr int kDeclarations = 130;
  {
    LocalServer srv(db);
    Api api(srv.port());
    auto c = api.post("/v1/jobs", profile_job());
    ASSERT_EQ(c.status, 201) << c.body;
    job = c.j["job_id"];
    const std::string base = "/v1/jobs/" + job;
    wait_status(api, job, "ready");
    for (int i = 0; i < kDeclarations; ++i)
      ASSERT_EQ(api.post(base + "/stragglers", {{"pipeline", 1}, {"slowdown", 1.1 + 0.01 * (i % 3)}}).status, 200) << i;
    before = api.get(base).j;
    EXPECT_EQ(before["decisions_total"], kDeclarations);
    ASSERT_EQ(before["decisions"].size(), 100u);
    EXPECT_EQ(before["decisions"].back()["id"], kDeclarations);
    EXPECT_EQ(rows_of_job_in(db, "decisions", job), 100) << "the store keeps the newest 100, like memory";
  }
  LocalServer srv(db);
  Api api(srv.port());
  const std::string base = "/v1/jobs/" + job;
  const json after = api.get(base).j;
  EXPECT_EQ(after["decisions_total"], kDeclarations);
  EXPECT_EQ(after["decisions"], before["decisions"]);
  // (503 until the restarted server has derived the frontier again.)
  ASSERT_EQ(post_when_frontier_ready(api, job, base + "/stragglers", {{"pipeline", 1}, {"slowdown", 1.5}}).status, 200);
  const json next = api.get(base).j;
  EXPECT_EQ(next["decisions_total"], kDeclarations + 1);
  EXPECT_EQ(next["decisions"].back()["id"], kDeclarations + 1) << "ids continue after the restart";
  EXPECT_EQ(rows_of_job_in(db, "decisions", job), 100);
}

TEST(Durability, WritesRacingADeleteLeaveNoRows) {
  // Measurements and stragglers posted while the job is deleted: once DELETE has answered,
  // nothing of the job is in the store (before the fix, writes that had found the job committed
  // after the delete in about 1 round of 4), and of concurrent DELETEs exactly one gets 200.
  // Event-driven: the DELETEs go out once every writer has had a write accepted; the writers
  // stop at their first 404.
  TempDir dir;
  const std::string db = dir.file("perseus.db");
  ServeProcess p(dir, db);
  ASSERT_GT(p.port(), 0);
  Api api(p.port());
  for (int round = 0; round < 12; ++round) {
    auto c = api.post("/v1/jobs", profile_job(2, 8));
    ASSERT_EQ(c.status, 201) << c.body;
    const std::string job = c.j["job_id"], base = "/v1/jobs/" + job;
    wait_status(api, job, "ready");
    for (int r = 0; r < 4; ++r)
      ASSERT_EQ(api.post(base + "/ranks", {{"rank", r}, {"dp_rank", 0}, {"pp_rank", r}, {"tp_rank", 0}}).status, 201);
    constexpr int kWriters = 6;
    std::atomic<int> started{0}, unexpected{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        Api mine(p.port());
        bool counted = false;
        for (std::int64_t it = 0;; ++it) {
          const auto r = w < 4 ? mine.post(base + "/ranks/" + std::to_string(w) + "/measurements",
                                           {{"iteration", it}, {"time_s", 1.0}})
                               : mine.post(base + "/stragglers", {{"pipeline", w % 2}, {"slowdown", 1.1 + 0.01 * (it % 7)}});
          if (r.status == 404) break;
          if (r.status != 202 && r.status != 200) {
            ++unexpected;
            break;
          }
          if (!counted) counted = true, ++started;
        }
      });
    }
    while (started.load() < kWriters && unexpected.load() == 0) std::this_thread::yield();
    std::atomic<int> deleted{0};
    std::vector<std::thread> deleters;
    for (int d = 0; d < 3; ++d)
      deleters.emplace_back([&] {
        Api mine(p.port());
        const int status = mine.del(base).status;
        if (status == 200) ++deleted;
        else if (status != 404) ++unexpected;
      });
    for (auto& t : deleters) t.join();
    for (auto& t : writers) t.join();
    ASSERT_EQ(unexpected.load(), 0) << "round " << round;
    EXPECT_EQ(deleted.load(), 1) << "round " << round;
    EXPECT_EQ(rows_of_job(db, job), 0) << "round " << round;
  }
}

// Issue 19: a job's op_overhead_s / p2p_latency_s are stored with it, so that after kill -9 the
// frontier re-derived for a plan never served before is the same as before (identical plans).
// Issue 20: a partial frontier (planning_budget_s 0: stopped before the first graph-cut step,
// deterministic) is stored with every plan and stays partial after the restart.
TEST(Durability, OverheadsAndPartialFrontiersSurviveKillNine) {
  TempDir dir;
  const std::string db = dir.file("perseus.db");
  const double o = 0.004, l = 0.01;
  std::string complete_job, partial_job;
  json complete_before, partial_before;
  {
    ServeProcess p(dir, db);
    ASSERT_GT(p.port(), 0);
    Api api(p.port());
    json body = profile_job();
    body["op_overhead_s"] = o;
    body["p2p_latency_s"] = l;
    auto c = api.post("/v1/jobs", body);
    ASSERT_EQ(c.status, 201) << c.body;
    complete_job = c.j["job_id"];
    body["planning_budget_s"] = 0;
    c = api.post("/v1/jobs", body);
    ASSERT_EQ(c.status, 201) << c.body;
    partial_job = c.j["job_id"];
    complete_before = wait_status(api, complete_job, "ready", 120);
    partial_before = wait_status(api, partial_job, "ready", 120);
    p.kill_hard();
  }
  {
    // A reload reads only the plans it needs (the assigned ones); the partial frontier's other
    // stored plans are read one at a time when fetched (a reload of jobs holding thousands of
    // large plans used to render them all before serving).
    Store store(db);
    for (const auto& sj : store.load_all()) {
      if (sj.job_id != partial_job) continue;
      std::set<int> assigned;
      for (const auto& a : sj.assignments) assigned.insert(a.plan_index);
      std::set<int> loaded;
      for (const auto& [idx, text] : sj.plans)
        if (idx >= 0) loaded.insert(idx);  // besides the special plans (all-max, quick: index < 0)
      EXPECT_EQ(loaded, assigned);
      const int n = static_cast<int>(partial_before["frontier"]["points"].size());
      ASSERT_GE(n, 2);
      for (int i = 0; i < n; ++i) EXPECT_TRUE(store.plan(partial_job, i).has_value()) << i;
      EXPECT_FALSE(store.plan(partial_job, n).has_value());
    }
  }
  ServeProcess p(dir, db);
  ASSERT_GT(p.port(), 0);
  Api api(p.port());
  Dag dag;
  for (const bool partial : {false, true}) {
    SCOPED_TRACE(partial ? "partial frontier" : "complete frontier");
    const std::string job = partial ? partial_job : complete_job;
    const json& before = partial ? partial_before : complete_before;
    const std::string base = "/v1/jobs/" + job;
    const json info = api.get(base).j;
    EXPECT_EQ(info["status"], "ready");
    EXPECT_EQ(info["spec"]["op_overhead_s"], o);
    EXPECT_EQ(info["spec"]["p2p_latency_s"], l);
    EXPECT_EQ(info["frontier"], before["frontier"]);
    EXPECT_EQ(info["frontier"]["partial"], partial);
    EXPECT_EQ(info["pipelines"], before["pipelines"]);
    // The served frontier is the library's for the same overheads (and budget).
    const Frontier fr = library_frontier(o, l, partial ? 0.0 : -1.0, dag);
    EXPECT_EQ(fr.partial(), partial);
    const json& pts = info["frontier"]["points"];
    ASSERT_EQ(pts.size(), fr.size());
    for (std::size_t i = 0; i < fr.size(); ++i) {
      EXPECT_DOUBLE_EQ(pts[i][0].get<double>(), fr.points()[i].time_s) << i;
      EXPECT_DOUBLE_EQ(pts[i][1].get<double>(), fr.points()[i].energy_j) << i;
    }
    Dag plain_dag;
    EXPECT_GT(pts[info["frontier"]["fastest_index"].get<int>()][0].get<double>(),
              library_frontier(0, 0, -1, plain_dag).points().back().time_s)
        << "the overheads lengthen the iteration";
    // A straggler (pipeline 1) whose deadline is the slowest plan's time moves pipeline 0 to a plan never
    // served before: re-derived (complete) or read from the store (partial), the same as the library's.
    for (int r = 0; r < 16; ++r)
      ASSERT_EQ(api.post(base + "/ranks", {{"rank", r}, {"dp_rank", r / 8}, {"pp_rank", r % 8}, {"tp_rank", 0}}).status,
                201);
    auto s = post_when_frontier_ready(api, job, base + "/stragglers", {{"pipeline", 1}, {"iteration_time_s", pts[0][0]}});
    ASSERT_EQ(s.status, 200) << s.body;
    const int chosen = s.j["decision"]["plan_index"];
    EXPECT_NE(chosen, info["frontier"]["fastest_index"].get<int>());
    for (const int r : {0, 3, 7}) {
      const auto plan = api.get(base + "/ranks/" + std::to_string(r) + "/plan");
      ASSERT_EQ(plan.status, 200) << plan.body;
      EXPECT_EQ(plan.j["plan_index"], chosen);
      expect_served_plan(plan.j, fr, dag, chosen, r % 8);
    }
  }
  EXPECT_EQ(p.terminate(), 0);
}

/// Creates a 2 x 8 job in a server on `db` (then stopped), `until_ready` or just created; its
/// id ("" after a failed expectation).
std::string stored_job(const std::string& db, bool until_ready) {
  LocalServer srv(db);
  Api api(srv.port());
  auto c = api.post("/v1/jobs", profile_job(2, 8));
  EXPECT_EQ(c.status, 201) << c.body;
  if (c.status != 201) return "";
  const std::string job = c.j["job_id"];
  if (until_ready) wait_status(api, job, "ready");
  return job;
}

// After a restart a ready job's complete frontier is not in memory. A straggler request that
// needs a plan never served before no longer solves it on the HTTP worker thread (holding the
// job's solve lock, for seconds to minutes): the re-derivation is queued on the planner pool
// and the request is answered 503 frontier_not_ready with Retry-After until it is done.
TEST(Durability, FrontierIsReDerivedOnThePlannerPoolAfterARestart) {
  TempDir dir;
  const std::string db = dir.file("r.db");
  const std::string job = stored_job(db, /*until_ready=*/true);
  ASSERT_FALSE(job.empty());
  LocalServer srv(db);
  Api api(srv.port());
  const std::string base = "/v1/jobs/" + job;
  const json info = api.get(base).j;
  EXPECT_EQ(info["frontier"]["rederiving"], false) << "nothing is solved before it is needed";
  const double solves = metric_value(api, "perseus_planner_solves_started_total");
  // A slowdown of 1.3 selects a slower plan than the fastest (the only one stored).
  const json body = {{"pipeline", 1}, {"slowdown", 1.3}};
  httplib::Client raw("127.0.0.1", srv.port());
  auto first = raw.Post((base + "/stragglers").c_str(), {{"Authorization", "Bearer " + kToken}}, body.dump(),
                        "application/json");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 503) << first->body;
  EXPECT_EQ(first->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(first->body)["error"]["code"], "frontier_not_ready") << first->body;
  EXPECT_TRUE(api.get(base).j["stragglers"].empty()) << "the refused request changed nothing";
  auto s = post_when_frontier_ready(api, job, base + "/stragglers", body);
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_NE(s.j["decision"]["plan_index"], info["frontier"]["fastest_index"]);
  EXPECT_EQ(metric_value(api, "perseus_planner_solves_started_total"), solves + 1) << "solved once, on the pool";
}

// A plan served before a restart is stored, and after the restart it is read from the store
// when it is needed again: no re-derivation of the frontier (no 503, no solve). Since session
// 18 a reload holds only the assigned plans; the others are read on demand.
TEST(Durability, APlanServedBeforeARestartIsReadFromTheStore) {
  TempDir dir;
  const std::string db = dir.file("r.db");
  const std::string job = stored_job(db, /*until_ready=*/true);
  ASSERT_FALSE(job.empty());
  const std::string base = "/v1/jobs/" + job;
  const json body = {{"pipeline", 1}, {"slowdown", 1.3}};
  int chosen = -1;
  {
    LocalServer srv(db);
    Api api(srv.port());
    auto s = post_when_frontier_ready(api, job, base + "/stragglers", body);
    ASSERT_EQ(s.status, 200) << s.body;
    chosen = s.j["decision"]["plan_index"];
    ASSERT_NE(chosen, api.get(base).j["frontier"]["fastest_index"]);
    ASSERT_EQ(api.del(base + "/stragglers/1").status, 200);
    ASSERT_NE(api.get(base).j["pipelines"][0]["plan_index"], chosen) << "back to the fastest plan";
  }
  LocalServer srv(db);
  Api api(srv.port());
  const double solves = metric_value(api, "perseus_planner_solves_started_total");
  auto s = api.post(base + "/stragglers", body);
  ASSERT_EQ(s.status, 200) << "read from the store, not re-derived: " << s.body;
  EXPECT_EQ(s.j["decision"]["plan_index"], chosen);
  EXPECT_EQ(metric_value(api, "perseus_planner_solves_started_total"), solves) << "nothing solved";
  EXPECT_EQ(api.get(base).j["pipelines"][0]["plan_index"], chosen);
}

// Session 18's trial: a *detected* straggler reloaded as *declared* after a restart, so the loop
// never cleared it when its pipeline recovered and the other pipelines stayed on the slow plan.
// Its origin is stored now (schema version 4). Measurements are posted by the test (3 pipelines
// of one stage), pipeline 1 at 1.2 x its plan's time, then healthy again after a SIGTERM restart.
TEST(Durability, ADetectedStragglerIsStillClearedAfterARestart) {
  TempDir dir;
  const std::string db = dir.file("s.db");
  std::string stage0;
  {
    std::istringstream in(example_profile());
    std::string line;
    std::getline(in, line);
    stage0 = line + "\n";
    while (std::getline(in, line))
      if (line.rfind("0,", 0) == 0) stage0 += line + "\n";
  }
  json body = profile_job(3, 1);
  body["profile_csv"] = stage0;
  std::string job, base;
  std::int64_t it = 0;
  auto iterate = [&](Api& api, double slow) {  // one iteration of every pipeline
    std::vector<json> plans;
    for (int r = 0; r < 3; ++r) plans.push_back(api.get(base + "/ranks/" + std::to_string(r) + "/plan").j);
    for (int r = 0; r < 3; ++r) {
      const double t = plans[r]["iteration_time_s"].get<double>() * (r == 1 ? slow : 1.0);
      const auto m = api.post(base + "/ranks/" + std::to_string(r) + "/measurements",
                              {{"iteration", it}, {"time_s", t}, {"energy_j", 100.0}, {"plan_version", plans[r]["version"]}});
      ASSERT_EQ(m.status, 202) << m.body;
    }
    ++it;
  };
  // Both places that name it: the in-memory loop state, and the stragglers list (from the
  // store; it had no origin before session 32's trial).
  auto origin = [&](Api& api) {
    const json got = api.get(base).j;
    const json& listed = got["stragglers"];
    const json in_list = listed.size() == 1 ? listed[0]["origin"] : json("no straggler listed");
    EXPECT_EQ(in_list, got["straggler_loop"]["pipelines"][1]["straggler_origin"]) << got.dump();
    return got["straggler_loop"]["pipelines"][1]["straggler_origin"];
  };
  {
    ServeProcess p(dir, db);
    ASSERT_GT(p.port(), 0);
    Api api(p.port());
    auto c = api.post("/v1/jobs", body);
    ASSERT_EQ(c.status, 201) << c.body;
    job = c.j["job_id"];
    base = "/v1/jobs/" + job;
    wait_status(api, job, "ready", 120);
    for (int r = 0; r < 3; ++r)
      ASSERT_EQ(api.post(base + "/ranks", {{"rank", r}, {"dp_rank", r}, {"pp_rank", 0}, {"tp_rank", 0}}).status, 201);
    for (int i = 0; i < 8; ++i) iterate(api, 1.0);
    for (int i = 0; i < 12 && api.get(base).j["stragglers"].empty(); ++i) iterate(api, 1.2);
    ASSERT_EQ(origin(api), "detected") << api.get(base).body;
    EXPECT_EQ(p.terminate(), 0);
  }
  ServeProcess p(dir, db);
  ASSERT_GT(p.port(), 0);
  Api api(p.port());
  EXPECT_EQ(origin(api), "detected") << "the origin survives the restart";
  for (int i = 0; i < 30 && !api.get(base).j["stragglers"].empty(); ++i) iterate(api, 1.0);
  const json after = api.get(base).j;
  EXPECT_TRUE(after["stragglers"].empty()) << "cleared by detection once pipeline 1 recovered: " << after.dump();
  EXPECT_EQ(after["pipelines"][0]["plan_index"], after["frontier"]["fastest_index"]);
  EXPECT_EQ(p.terminate(), 0);
}

// A stored plan read on demand that is unreadable (a damaged row: malformed JSON, wrong number
// of clocks) is never served: the switch that needs it fails whole (500, nothing changed) and
// the job keeps serving its assigned plan.
TEST(Durability, AnUnreadableStoredPlanIsNeverServed) {
  TempDir dir;
  const std::string db = dir.file("u.db");
  std::string job;
  json before;
  {
    ServeProcess p(dir, db);
    ASSERT_GT(p.port(), 0);
    Api api(p.port());
    json body = profile_job();
    body["planning_budget_s"] = 0;  // partial: every plan stored, none re-derivable
    auto c = api.post("/v1/jobs", body);
    ASSERT_EQ(c.status, 201) << c.body;
    job = c.j["job_id"];
    before = wait_status(api, job, "ready", 120);
    p.kill_hard();
  }
  const std::string base = "/v1/jobs/" + job;
  const json& pts = before["frontier"]["points"];
  ASSERT_NE(before["frontier"]["fastest_index"], 0) << "plan 0 (the slowest) is not assigned";
  for (const char* damaged : {"[1410, 1410", "[1410]"}) {  // malformed JSON; one clock for many computations
    SCOPED_TRACE(damaged);
    {
      sqlite3* h = nullptr;
      ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
      const std::string sql =
          fmt::format("UPDATE plans SET freqs_json = '{}' WHERE job_id = '{}' AND plan_index = 0", damaged, job);
      ASSERT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
      sqlite3_close(h);
    }
    ServeProcess p(dir, db);
    ASSERT_GT(p.port(), 0);
    Api api(p.port());
    const auto s = api.post(base + "/stragglers", {{"pipeline", 1}, {"iteration_time_s", pts[0][0]}});
    EXPECT_EQ(s.status, 500) << s.body;
    const json after = api.get(base).j;
    EXPECT_TRUE(after["stragglers"].empty()) << "the failed switch changed nothing";
    EXPECT_EQ(after["pipelines"], before["pipelines"]);
    EXPECT_EQ(p.terminate(), 0);
  }
}

// A restart listens before it loads the stored jobs (~5 s for a 1024 x 1024 job): until then
// the health check says "starting" and every other route 503 "starting" with Retry-After (it was
// unreachable, so health probes failed and clients saw connection errors). The load is held by
// the test (ServerOptions::before_load) so the starting server is seen for sure.
TEST(Durability, ARestartListensBeforeItLoadsTheJobs) {
  TempDir dir;
  const std::string db = dir.file("r.db");
  const std::string job = stored_job(db, /*until_ready=*/false);
  ASSERT_FALSE(job.empty());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<std::size_t> ready;
  ServerOptions opt;
  opt.port = 0;
  opt.db_path = db;
  opt.token = kToken;
  opt.before_load = [released] { released.wait(); };
  opt.on_ready = [&ready](std::size_t jobs, double) { ready.set_value(jobs); };
  Server srv(opt);
  const int port = srv.bind();
  std::thread run([&srv] { srv.run(); });
  Api api(port);
  auto health = api.get("/v1/health");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(health.j["status"], "starting") << health.body;
  EXPECT_EQ(api.get("/v1/ready").status, 503) << "a readiness probe waits for the load";
  for (const std::string& path : {"/v1/jobs/" + job, std::string("/v1/jobs"), std::string("/metrics")}) {
    httplib::Client raw("127.0.0.1", port);
    auto r = raw.Get(path.c_str(), {{"Authorization", "Bearer " + kToken}});
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 503) << path << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1") << path;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "starting") << r->body;
  }
  EXPECT_EQ(srv.jobs_loaded(), 0u);
  release.set_value();
  EXPECT_EQ(ready.get_future().get(), 1u);
  EXPECT_TRUE(srv.wait_until_ready());
  EXPECT_EQ(api.get("/v1/health").j["status"], "ok");
  EXPECT_EQ(api.get("/v1/ready").status, 200);
  EXPECT_EQ(api.get("/v1/jobs/" + job).status, 200);
  srv.stop();
  run.join();
}

// Stopped (SIGTERM) while the jobs load: the server never announces itself ready (perseus
// serve's port file appeared after "stopping" in session 17's review) and run() returns.
TEST(Durability, AStopDuringTheLoadIsNeverAnnouncedReady) {
  TempDir dir;
  const std::string db = dir.file("r.db");
  ASSERT_FALSE(stored_job(db, /*until_ready=*/false).empty());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> loading;
  bool announced = false;
  ServerOptions opt;
  opt.port = 0;
  opt.db_path = db;
  opt.token = kToken;
  opt.before_load = [&loading, released] {
    loading.set_value();
    released.wait();
  };
  opt.on_ready = [&announced](std::size_t, double) { announced = true; };
  Server srv(opt);
  srv.bind();
  std::thread run([&srv] { srv.run(); });
  loading.get_future().wait();
  srv.stop();
  release.set_value();
  run.join();
  EXPECT_FALSE(announced);
}

// A stored job whose name an older version accepted (before bidirectional controls were
// refused) reloads as it was: the stored spec is not a new request (it failed the job:
// "could not reload the job: field "name" must not contain ...").
// A typo in --db naming another application's SQLite database gave it Perseus's tables and WAL
// mode (session 22's trial): refused, and the file is left as it was.
TEST(Durability, AnotherApplicationsDatabaseIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string db = dir.file("other.db");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE foo(x); INSERT INTO foo VALUES(1);", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  const std::string before = read_file(db);
  try {
    Store store(db);
    ADD_FAILURE() << "opened another application's database";
  } catch (const perseus::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("other.db: not a Perseus database (it has the tables foo and no Perseus "
                                         "schema); refusing to change it"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_file(db), before);
  EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
  Store fresh(dir.file("new.db"));  // an empty file of our own is fine
}

TEST(Durability, AStoredNameAnOlderVersionAcceptedStillLoads) {
  TempDir dir;
  const std::string db = dir.file("r.db");
  const std::string job = stored_job(db, /*until_ready=*/true);
  ASSERT_FALSE(job.empty());
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  const std::string sql = "UPDATE jobs SET spec_json = json_set(spec_json, '$.name', 'big' || char(8238) || 'gnp.exe')";
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  sqlite3_close(h);
  LocalServer srv(db);
  Api api(srv.port());
  const auto r = api.get("/v1/jobs/" + job);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["status"], "ready") << r.body;
  EXPECT_EQ(r.j["spec"]["name"], "big\u202Egnp.exe") << r.body;
}

/// Plays the ranks of a profiling job for `iterations` iterations: every rank fetches its plan
/// and reports per-instruction time/energy at the frequency it was given (a synthetic GPU:
/// time ~ 1/f, energy lowest around 1380 MHz).
int play(Api& api, const std::string& job, int ranks, int first_iteration, int iterations) {
  const std::string base = "/v1/jobs/" + job;
  int it = first_iteration;
  for (; it < first_iteration + iterations; ++it) {
    for (int r = 0; r < ranks; ++r) {
      auto p = api.get(base + "/ranks/" + std::to_string(r) + "/plan");
      if (p.status != 200 || p.j["job_status"] != "profiling") return it;
      const json ins = synthetic_instructions(p.j);
      auto m = api.post(base + "/ranks/" + std::to_string(r) + "/measurements",
                        {{"iteration", it}, {"time_s", 1.0}, {"energy_j", 100.0}, {"instructions", ins},
                         {"plan_version", p.j["version"]}});
      EXPECT_EQ(m.status, 202) << m.body;
    }
  }
  return it;
}

TEST(Profiling, SweepSurvivesRestartAndEndsOptimized) {
  TempDir dir;
  const std::string db = dir.file("p.db");
  json body = {{"pp", 2}, {"dp", 1}, {"microbatches", 2}, {"schedule", "1f1b"}, {"p2p_power_w", 50.0},
               {"unit_time_s", 0.001}, {"mode", "profile"}, {"profile_samples", 1}, {"max_energy_rises", 2},
               {"min_freq_mhz", 1300}};
  std::string job;
  int next_it = 0;
  std::int64_t version_mid = 0;
  {
    LocalServer srv(db);
    Api api(srv.port());
    auto c = api.post("/v1/jobs", body);
    ASSERT_EQ(c.status, 201) << c.body;
    job = c.j["job_id"];
    EXPECT_EQ(c.j["status"], "profiling");
    ASSERT_TRUE(register_sweep_ranks(api, job));
    auto first = api.get("/v1/jobs/" + job + "/ranks/0/plan");
    ASSERT_EQ(first.status, 200) << first.body;
    EXPECT_EQ(first.j["instructions"][0]["freq_mhz"], 1410);
    next_it = play(api, job, 2, 0, 2);
    const json info = api.get("/v1/jobs/" + job).j;
    EXPECT_EQ(info["profiling"]["step"], 2);
    version_mid = api.get("/v1/jobs/" + job + "/ranks/0/plan").j["version"];
    EXPECT_EQ(version_mid, 3);
  }
  LocalServer srv(db);  // reload: the sweep is replayed from stored measurements
  Api api(srv.port());
  auto again = api.get("/v1/jobs/" + job + "/ranks/0/plan");
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.j["version"], version_mid);
  EXPECT_EQ(again.j["instructions"][0]["freq_mhz"], 1380);
  play(api, job, 2, next_it, 50);
  const json done = wait_status(api, job, "ready");
  // Energy rose twice after 1380 MHz (1365, 1350), so the sweep stopped there; 1300 floor unused.
  EXPECT_EQ(done["profiling"]["keys_done"], 4);
  auto fin = api.get("/v1/jobs/" + job + "/ranks/1/plan");
  EXPECT_EQ(fin.j["job_status"], "ready");
  EXPECT_GE(fin.j["plan_index"].get<int>(), 0);
  for (const auto& i : fin.j["instructions"]) {
    EXPECT_GE(i["freq_mhz"].get<int>(), 1350);
    EXPECT_LE(i["freq_mhz"].get<int>(), 1410);
  }
}

// SIGTERM during a long solve: the server cancels the solve and exits 0 (docs/http-api.md,
// "Signals"; the time it takes is measured by bench/server_sigterm.sh, not here). Ordered by
// events: the solve has started (planner gauge) before the signal; afterwards the job is still
// `planning` (the solve neither finished nor was recorded as failed) and the registered rank
// is kept.
TEST(Shutdown, SigtermCancelsALongSolve) {
  TempDir dir;
  const std::string db = dir.file("s.db");
  std::string job;
  {
    ServeProcess p(dir, db);
    Api api(p.port());
    auto r = api.post("/v1/jobs", long_solve_job());
    ASSERT_EQ(r.status, 201) << r.body;
    job = r.j["job_id"];
    ASSERT_EQ(api.post("/v1/jobs/" + job + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status,
              201);
    ASSERT_TRUE(wait_solve_running(api)) << "the solve never started";
    ASSERT_EQ(api.get("/v1/jobs/" + job).j["status"], "planning");
    EXPECT_EQ(p.terminate(), 0) << "SIGTERM during a solve exits cleanly";
  }
  EXPECT_NE(read_file(dir.file("serve.log")).find("signal 15, stopping"), std::string::npos);
  ServeProcess p(dir, db);
  Api api(p.port());
  const json info = api.get("/v1/jobs/" + job).j;
  EXPECT_EQ(info["status"], "planning") << "the cancelled solve is re-queued, not failed: " << info.dump();
  EXPECT_EQ(info["ranks_registered"], 1);
  ASSERT_TRUE(wait_solve_running(api)) << "the restarted server solves the job again";
  EXPECT_EQ(p.terminate(), 0);
}

}  // namespace
}  // namespace perseus::server::testing
