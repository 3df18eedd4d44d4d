// Per-job authority (issue 15, rows 9 and 10): the admin token vs each job's own token, Zeus
// routes that reach only Zeus jobs, and the quota of jobs made without a token (--zeus-no-auth).
// Every check is one request and its answer; nothing waits on time.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "job.hpp"  // token helpers (private header)
#include "perseus/server/store.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

/// How a request must be answered: let through (any status but 401/403), 401 or 403 "forbidden".
enum class Expect { kAllowed, kUnauthorized, kForbidden };

void expect_access(const Resp& r, Expect e, const std::string& what) {
  switch (e) {
    case Expect::kAllowed:
      EXPECT_TRUE(r.status != 401 && r.status != 403 && r.status > 0) << what << ": " << r.status << " " << r.body;
      break;
    case Expect::kUnauthorized:
      EXPECT_EQ(r.status, 401) << what << ": " << r.body;
      break;
    case Expect::kForbidden:
      EXPECT_EQ(r.status, 403) << what << ": " << r.body;
      if (r.j.is_object()) {
        EXPECT_EQ(r.j["error"]["code"], "forbidden") << what;
      }
      break;
  }
}

Resp send(Api& api, const std::string& method, const std::string& path, const json& body = json::object()) {
  if (method == "GET") return api.get(path);
  if (method == "DELETE") return api.del(path);
  return api.post(path, body);
}

/// A job made of precomputed plans (ready at once, no solve): pp 2, 1 microbatch.
json plans_job() {
  json ranks = json::array();
  for (int s = 0; s < 2; ++s)
    ranks.push_back(json::array({{{"instruction", "forward"}, {"microbatch", 0}, {"freq_mhz", 1410}, {"stage", s}},
                                 {{"instruction", "backward"}, {"microbatch", 0}, {"freq_mhz", 1410}, {"stage", s}}}));
  return {{"name", "auth"}, {"pp", 2}, {"dp", 2}, {"microbatches", 1}, {"p2p_power_w", 80},
          {"plans", json::array({{{"time_s", 1.0}, {"energy_j", 100.0}, {"ranks", ranks}}})}};
}

json rank_body(int rank) { return {{"rank", rank}, {"dp_rank", rank / 2}, {"pp_rank", rank % 2}, {"tp_rank", 0}}; }

/// Two plans_job() jobs made with the admin token (asserted 201): their creation answers.
std::pair<Resp, Resp> two_jobs(Api& admin) {
  auto a = admin.post("/v1/jobs", plans_job());
  auto b = admin.post("/v1/jobs", plans_job());
  EXPECT_EQ(a.status, 201) << a.body;
  EXPECT_EQ(b.status, 201) << b.body;
  return {a, b};
}

// The permission matrix of every /v1 route for: the admin token, the job's own token, another
// job's token, no token and an unknown token. Refused requests change nothing.
TEST(Authority, PermissionMatrix) {
  TempDir dir;
  LocalServer srv(dir.file("a.db"));
  Api admin(srv.port());
  const auto [a, b] = two_jobs(admin);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string job = a.j["job_id"], token_a = a.j["job_token"], token_b = b.j["job_token"];
  ASSERT_NE(token_a, token_b);
  EXPECT_GE(token_a.size(), 64u) << "256 random bits";
  EXPECT_EQ(admin.get("/v1/jobs/" + job).body.find(token_a), std::string::npos) << "the token is shown only once";

  Api own(srv.port(), token_a), other(srv.port(), token_b), none(srv.port(), ""),
      unknown(srv.port(), "pjt-0000000000000000000000000000000000000000000000000000000000000000");
  const std::string base = "/v1/jobs/" + job;
  struct Row {
    std::string method, path;
    json body;
    Expect own;  // the job's own token (admin: always allowed; other job: 403; none/unknown: 401)
  };
  const std::vector<Row> rows = {
      {"GET", "/v1/jobs", {}, Expect::kForbidden},
      {"POST", "/v1/jobs", plans_job(), Expect::kForbidden},
      {"GET", "/metrics", {}, Expect::kForbidden},
      {"GET", base, {}, Expect::kAllowed},
      {"POST", base + "/ranks", rank_body(0), Expect::kAllowed},
      {"GET", base + "/ranks/0/plan", {}, Expect::kAllowed},
      {"POST", base + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", 1.0}, {"energy_j", 100.0}}, Expect::kAllowed},
      {"POST", base + "/stragglers", {{"pipeline", 1}, {"slowdown", 1.2}}, Expect::kAllowed},
      {"DELETE", base + "/stragglers/1", {}, Expect::kAllowed},
      {"POST", "/register_job", {{"job_id", ""}, {"pp_degree", 2}, {"dp_degree", 1}, {"tp_degree", 1}, {"world_size", 2}},
       Expect::kForbidden},
  };
  for (const Row& row : rows) {
    const std::string what = row.method + " " + row.path;
    // Refused callers first: nothing they send may change the job.
    const json before = admin.get(base).j;
    expect_access(send(other, row.method, row.path, row.body), Expect::kForbidden, "other job's token: " + what);
    expect_access(send(none, row.method, row.path, row.body), Expect::kUnauthorized, "no token: " + what);
    expect_access(send(unknown, row.method, row.path, row.body), Expect::kUnauthorized, "unknown token: " + what);
    const json after = admin.get(base).j;
    EXPECT_EQ(after["ranks_registered"], before["ranks_registered"]) << what;
    EXPECT_EQ(after["version"], before["version"]) << what;
    EXPECT_EQ(after["measurements"]["count"], before["measurements"]["count"]) << what;
    expect_access(send(own, row.method, row.path, row.body), row.own, "own token: " + what);
    expect_access(send(admin, row.method, row.path, row.body), Expect::kAllowed, "admin: " + what);
  }
  // What the job's token did took effect: its rank, measurement and straggler round trip.
  const json info = admin.get(base).j;
  EXPECT_EQ(info["ranks_registered"], 1);
  EXPECT_EQ(info["measurements"]["count"], 1);
  EXPECT_GE(info["decisions_total"], 2);
  // Deleting: admin only. Afterwards the job's token reaches nothing.
  expect_access(own.del(base), Expect::kForbidden, "own token: DELETE job");
  expect_access(other.del(base), Expect::kForbidden, "other token: DELETE job");
  EXPECT_EQ(admin.del(base).status, 200);
  expect_access(own.get(base), Expect::kUnauthorized, "token of a deleted job");
  EXPECT_EQ(other.get("/v1/jobs/" + b.j["job_id"].get<std::string>()).status, 200) << "job B's token still works";
}

// - A typo in the URL's job id, sent with a job's token, was answered "this bearer token is
//   another job's token", and the client added "check the token": the message now names the
//   path's job and the token's job, whether or not the path's job exists.
TEST(Authority, AJobTokenOnAnotherJobIdNamesBothJobs) {
  TempDir dir;
  LocalServer srv(dir.file("a.db"));
  Api admin(srv.port());
  const auto [a, b] = two_jobs(admin);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string job_a = a.j["job_id"], job_b = b.j["job_id"];
  Api own(srv.port(), a.j["job_token"].get<std::string>());
  for (const std::string& path_job : {job_b, job_a + "x"}) {  // another job; a typo (no such job)
    const Resp r = own.post("/v1/jobs/" + path_job + "/ranks", rank_body(0));
    expect_access(r, Expect::kForbidden, path_job);
    const std::string msg = r.j["error"]["message"];
    EXPECT_NE(msg.find("the path names job '" + path_job + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("this bearer token is job " + job_a + "'s"), std::string::npos) << msg;
    EXPECT_NE(msg.find("check the job id in the URL"), std::string::npos) << msg;
  }
  EXPECT_EQ(admin.post("/v1/jobs/" + job_a + "x/ranks", rank_body(0)).status, 404) << "the admin learns it is unknown";
}

// A job's token is stored (as its SHA-256) and keeps working after a restart; the database
// holds no token in clear.
TEST(Authority, JobTokensSurviveRestart) {
  TempDir dir;
  std::string job, token;
  {
    LocalServer srv(dir.file("a.db"));
    Api admin(srv.port());
    auto r = admin.post("/v1/jobs", plans_job());
    ASSERT_EQ(r.status, 201) << r.body;
    job = r.j["job_id"];
    token = r.j["job_token"];
  }
  EXPECT_EQ(read_file(dir.file("a.db")).find(token), std::string::npos) << "token stored in clear";
  LocalServer srv(dir.file("a.db"));
  Api own(srv.port(), token);
  EXPECT_EQ(own.get("/v1/jobs/" + job).status, 200);
  EXPECT_EQ(own.get("/v1/jobs").status, 403);
}

const char* kZeusPlan = "[[1410, 1410], [1200, 1200]]";  // pp 2, 1 microbatch (kronos integer form)

json zeus_job(int dp = 1) {
  return {{"job_id", ""}, {"pp_degree", 2}, {"dp_degree", dp}, {"tp_degree", 1}, {"world_size", 2 * dp}};
}

// Zeus routes reach only Zeus jobs; under --zeus-no-auth an unauthenticated caller reaches Zeus
// routes of Zeus jobs and nothing else.
TEST(Authority, ZeusRoutesReachOnlyZeusJobs) {
  TempDir dir;
  ServerOptions opt;
  opt.zeus_plan_texts = {kZeusPlan};
  opt.zeus_require_token = false;
  LocalServer srv(dir.file("z.db"), opt);
  Api admin(srv.port()), anon(srv.port(), "");
  auto v1 = admin.post("/v1/jobs", plans_job());
  ASSERT_EQ(v1.status, 201) << v1.body;
  const std::string v1_job = v1.j["job_id"];
  ASSERT_EQ(admin.post("/v1/jobs/" + v1_job + "/ranks", rank_body(0)).status, 201);

  auto z = anon.post("/register_job", zeus_job());
  ASSERT_EQ(z.status, 200) << z.body;
  const std::string zjob = z.j.get<std::string>();
  EXPECT_EQ(anon.post("/register_rank/" + zjob, rank_body(0)).status, 200);
  EXPECT_EQ(anon.get("/schedule/" + zjob + "?rank=0").status, 200);
  EXPECT_EQ(anon.post("/result/" + zjob, {{"rank", 0}, {"iter_time", {1.0}}, {"iter_energy", {100.0}}}).status, 200);

  // Zeus routes on a /v1 job: 404 for everyone (as if it did not exist), nothing registered.
  for (Api* api : {&anon, &admin}) {
    EXPECT_EQ(api->post("/register_rank/" + v1_job, rank_body(1)).status, 404);
    EXPECT_EQ(api->get("/schedule/" + v1_job + "?rank=0").status, 404);
    EXPECT_EQ(api->post("/result/" + v1_job, {{"rank", 0}, {"iter_time", {1.0}}, {"iter_energy", {100.0}}}).status, 404);
  }
  EXPECT_EQ(admin.get("/v1/jobs/" + v1_job).j["ranks_registered"], 1);
  EXPECT_EQ(admin.get("/v1/jobs/" + v1_job).j["measurements"]["count"], 0);
  // No /v1 route without a token, not even on the Zeus job.
  for (const std::string& path : {std::string("/v1/jobs"), "/v1/jobs/" + zjob, "/v1/jobs/" + v1_job, std::string("/metrics")})
    EXPECT_EQ(anon.get(path).status, 401) << path;
  EXPECT_EQ(anon.del("/v1/jobs/" + zjob).status, 401);
  // The admin reaches the Zeus job through /v1 too.
  EXPECT_EQ(admin.get("/v1/jobs/" + zjob).j["measurements"]["count"], 1);
}

// Jobs made without a token have their own quota (jobs, ranks, bytes); the admin's are not
// counted; deleting frees quota; the byte count survives a restart.
TEST(Authority, AnonymousQuota) {
  TempDir dir;
  ServerOptions opt;
  opt.zeus_plan_texts = {kZeusPlan};
  opt.zeus_require_token = false;
  opt.zeus_anonymous_max_jobs = 2;
  opt.zeus_anonymous_max_ranks = 6;
  opt.zeus_anonymous_max_bytes = 1000;
  std::string first;
  {
    LocalServer srv(dir.file("q.db"), opt);
    Api admin(srv.port()), anon(srv.port(), "");
    auto r = anon.post("/register_job", zeus_job(2));  // 4 ranks
    ASSERT_EQ(r.status, 200) << r.body;
    first = r.j.get<std::string>();
    r = anon.post("/register_job", zeus_job(2));  // 4 + 4 > 6 ranks
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_EQ(r.j["error"]["code"], "quota_exceeded");
    EXPECT_NE(r.j["error"]["message"].get<std::string>().find("--zeus-no-auth-max-ranks"), std::string::npos) << r.body;
    ASSERT_EQ(anon.post("/register_job", zeus_job(1)).status, 200);  // 4 + 2 = 6 ranks, 2 jobs
    r = anon.post("/register_job", zeus_job(1));
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_NE(r.j["error"]["message"].get<std::string>().find("--zeus-no-auth-max-jobs"), std::string::npos) << r.body;
    EXPECT_EQ(admin.post("/register_job", zeus_job(8)).status, 200) << "the admin is not under the quota";
    EXPECT_EQ(admin.get("/v1/jobs").j["jobs"].size(), 3u) << "refused creations left no job";

    // Bytes: each iteration stores ~70 bytes; 10 fit in 1000, 20 do not.
    ASSERT_EQ(anon.post("/register_rank/" + first, rank_body(0)).status, 200);
    json times = json::array(), energies = json::array();
    for (int i = 0; i < 10; ++i) {
      times.push_back(1.0 + i * 0.01);
      energies.push_back(100.0);
    }
    ASSERT_EQ(anon.post("/result/" + first, {{"rank", 0}, {"iter_time", times}, {"iter_energy", energies}}).status, 200);
    for (auto& t : times) t = t.get<double>() + 1;
    r = anon.post("/result/" + first, {{"rank", 0}, {"iter_time", times}, {"iter_energy", energies}});
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_NE(r.j["error"]["message"].get<std::string>().find("--zeus-no-auth-max-mb"), std::string::npos) << r.body;
    EXPECT_EQ(admin.get("/v1/jobs/" + first).j["measurements"]["count"], 10) << "a refused result is not stored";
  }
  LocalServer srv(dir.file("q.db"), opt);
  Api admin(srv.port()), anon(srv.port(), "");
  json times = json::array({5.0, 5.1, 5.2, 5.3, 5.4, 5.5, 5.6, 5.7, 5.8, 5.9});
  json energies = json::array({1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(anon.post("/result/" + first, {{"rank", 0}, {"iter_time", times}, {"iter_energy", energies}}).status, 403)
      << "the stored bytes count after a restart";
  EXPECT_EQ(anon.post("/register_job", zeus_job(1)).status, 403) << "2 anonymous jobs reloaded";
  ASSERT_EQ(admin.del("/v1/jobs/" + first).status, 200);
  EXPECT_EQ(anon.post("/register_job", zeus_job(1)).status, 200) << "deleting frees jobs, ranks and bytes";
  auto r = anon.post("/register_job", zeus_job(1));
  EXPECT_EQ(r.status, 403) << r.body;
}

// The anonymous byte quota is reserved atomically (check and count in one step): before the fix
// POST /result read the count without a lock and added its bytes only once stored, so
// concurrent results could pass the quota together. Deterministic in outcome: whatever the
// interleaving, exactly `limit` one-byte reservations succeed.
TEST(Authority, ByteQuotaReservesAtomically) {
  ByteQuota q(100);
  EXPECT_TRUE(q.try_reserve(60));
  EXPECT_FALSE(q.try_reserve(41)) << "60 + 41 > 100";
  EXPECT_EQ(q.used(), 60) << "a refused reservation counts nothing";
  EXPECT_TRUE(q.try_reserve(40));
  q.release(40);
  EXPECT_EQ(q.used(), 60);

  constexpr int kThreads = 8, kTries = 5000, kLimit = 10007;
  ByteQuota shared(kLimit);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kTries; ++i)
        if (shared.try_reserve(1)) ++granted;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), kLimit);
  EXPECT_EQ(shared.used(), kLimit);
}

// The token digest is SHA-256 (FIPS 180-4 test vector "abc"); tokens are fresh and long.
TEST(Authority, TokenDigestAndFreshTokens) {
  EXPECT_EQ(token_sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string a = new_job_token(), b = new_job_token();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 4u + 64u);
  EXPECT_TRUE(equal_constant_time(a, a));
  EXPECT_FALSE(equal_constant_time(a, b));
  EXPECT_FALSE(equal_constant_time(a, a.substr(0, 10)));
}

/// Writes a database of an older schema with `sql`, as an older server left it.
void write_old_database(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// Schema version 4 (session 18) stores a straggler's origin; a version 3 database's stragglers
// were all kept as declared (what a restart made of them before), and new ones keep theirs.
TEST(Authority, SchemaVersionThreeIsUpgraded) {
  TempDir dir;
  const std::string path = dir.file("v3.db");
  {
    const char* v3 = R"sql(
      CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO meta VALUES('schema_version', '3');
      CREATE TABLE jobs(job_id TEXT PRIMARY KEY, created_s REAL NOT NULL, last_activity_s REAL NOT NULL,
        spec_json TEXT NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
        version_counter INTEGER NOT NULL, built_profile_csv TEXT NOT NULL DEFAULT '',
        points_json TEXT NOT NULL DEFAULT '', origin TEXT NOT NULL DEFAULT 'v1',
        token_sha256 TEXT NOT NULL DEFAULT '', frontier_partial_json TEXT NOT NULL DEFAULT '');
      INSERT INTO jobs(job_id, created_s, last_activity_s, spec_json, status, version_counter)
        VALUES('job-old', 1, 1, '{}', 'ready', 1);
      CREATE TABLE stragglers(job_id TEXT NOT NULL, pipeline INTEGER NOT NULL, target_time_s REAL NOT NULL,
        slowdown REAL NOT NULL, created_s REAL NOT NULL, PRIMARY KEY(job_id, pipeline));
      INSERT INTO stragglers VALUES('job-old', 1, 2.0, 1.2, 5);)sql";
    ASSERT_NO_FATAL_FAILURE(write_old_database(path, v3));
  }
  Store store(path);
  auto jobs = store.load_all();
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_EQ(jobs[0].stragglers.size(), 1u);
  EXPECT_EQ(jobs[0].stragglers[0].origin, "declared");
  StoredStraggler detected{0, 2.5, 1.25, 6, "detected"};
  store.update_assignments("job-old", 2, {}, detected);
  jobs = store.load_all();
  ASSERT_EQ(jobs[0].stragglers.size(), 2u);
  for (const auto& s : jobs[0].stragglers) EXPECT_EQ(s.origin, s.pipeline == 0 ? "detected" : "declared");
}

// A database of schema version 1 (before per-job tokens) is upgraded in place: its jobs become
// /v1 jobs without a token (only the admin reaches them), and new jobs store their auth; the
// upgrade also adds version 3's frontier_partial_json (empty: old frontiers are complete).
TEST(Authority, SchemaVersionOneIsUpgraded) {
  TempDir dir;
  const std::string path = dir.file("old.db");
  {
    const char* v1 = R"sql(
      CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO meta VALUES('schema_version', '1');
      CREATE TABLE jobs(job_id TEXT PRIMARY KEY, created_s REAL NOT NULL, last_activity_s REAL NOT NULL,
        spec_json TEXT NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
        version_counter INTEGER NOT NULL, built_profile_csv TEXT NOT NULL DEFAULT '',
        points_json TEXT NOT NULL DEFAULT '');
      INSERT INTO jobs(job_id, created_s, last_activity_s, spec_json, status, version_counter)
        VALUES('job-old', 1, 1, '{}', 'ready', 1);)sql";
    ASSERT_NO_FATAL_FAILURE(write_old_database(path, v1));
  }
  Store store(path);
  auto jobs = store.load_all();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].auth.origin, "v1");
  EXPECT_EQ(jobs[0].auth.token_sha256, "");
  EXPECT_EQ(jobs[0].frontier_partial_json, "") << "version 3's column: an old frontier is complete";
  // set_frontier() replaces the job's frontier plans (index >= 0) in one transaction.
  store.put_plan("job-old", -3, "[1]");
  store.put_plan("job-old", 5, "[2]");
  store.set_frontier("job-old", "[[1,2],[0.5,3]]", R"({"reason":"time_budget","detail":"d"})", {{0, "[3]"}, {1, "[4]"}});
  jobs = store.load_all();
  EXPECT_EQ(jobs[0].points_json, "[[1,2],[0.5,3]]");
  EXPECT_EQ(jobs[0].frontier_partial_json, R"({"reason":"time_budget","detail":"d"})");
  // load_all() holds the special plans and the assigned ones (none here); plan() reads any.
  std::map<int, std::string> plans(jobs[0].plans.begin(), jobs[0].plans.end());
  EXPECT_EQ(plans, (std::map<int, std::string>{{-3, "[1]"}}));
  EXPECT_EQ(store.plan("job-old", 0), "[3]");
  EXPECT_EQ(store.plan("job-old", 1), "[4]");
  EXPECT_EQ(store.plan("job-old", 5), std::nullopt);
  ASSERT_TRUE(store.insert_job("job-new", 2, JobAuth{"zeus_anonymous", "ab"}, "{}", "ready", 1, {}));
  jobs = store.load_all();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].auth.origin, "zeus_anonymous");
  EXPECT_EQ(jobs[1].auth.token_sha256, "ab");
}

}  // namespace
}  // namespace perseus::server::testing
