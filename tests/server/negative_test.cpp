// Negative tests: every endpoint answers bad requests with a 4xx JSON error and keeps serving.
#include <gtest/gtest.h>

#include "raw_socket.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

void expect_error(const Resp& r, int status, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << ": " << r.body;
  ASSERT_TRUE(r.j.is_object()) << what << ": body is not JSON: " << r.body;
  EXPECT_TRUE(r.j.contains("error")) << what;
  EXPECT_TRUE(r.j["error"]["code"].is_string()) << what;
  EXPECT_TRUE(r.j["error"]["message"].is_string()) << what;
}

class Negative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new TempDir();
    ServerOptions opt;
    opt.max_body_bytes = 1 << 20;
    opt.zeus_plan_texts = {"[[1410, 1410], [1200, 1200]]"};  // pp 2, 1 microbatch
    srv = new LocalServer(dir->file("n.db"), opt);
    Api api(srv->port());
    auto r = api.post("/v1/jobs", profile_job(2, 8));
    ASSERT_EQ(r.status, 201) << r.body;
    job = r.j["job_id"];
    wait_status(api, job, "ready");
    ASSERT_EQ(api.post("/v1/jobs/" + job + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status,
              201);
    r = api.post("/register_job", {{"job_id", ""}, {"pp_degree", 2}, {"dp_degree", 1}, {"tp_degree", 1}, {"world_size", 2}});
    ASSERT_EQ(r.status, 200) << r.body;
    zjob = r.j.get<std::string>();  // Zeus routes reach only Zeus jobs
    ASSERT_EQ(api.post("/register_rank/" + zjob, {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status,
              200);
  }
  static void TearDownTestSuite() {
    delete srv;
    delete dir;
  }
  static inline TempDir* dir = nullptr;
  static inline LocalServer* srv = nullptr;
  static inline std::string job, zjob;
  std::string base() const { return "/v1/jobs/" + job; }
};

TEST_F(Negative, AuthOnEveryRoute) {
  Api none(srv->port(), "");
  Api wrong(srv->port(), "wrong-token-wrong-token");
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"GET", "/metrics"}, {"GET", "/v1/jobs"}, {"POST", "/v1/jobs"}, {"GET", base()}, {"DELETE", base()},
      {"POST", base() + "/ranks"}, {"GET", base() + "/ranks/0/plan"}, {"POST", base() + "/ranks/0/measurements"},
      {"POST", base() + "/stragglers"}, {"DELETE", base() + "/stragglers/0"}, {"POST", "/register_job"},
      {"POST", "/register_rank/" + zjob}, {"GET", "/schedule/" + zjob + "?rank=0"}, {"POST", "/result/" + zjob}};
  for (Api* api : {&none, &wrong})
    for (const auto& [method, path] : routes) {
      Resp r = method == "GET" ? api->get(path) : method == "DELETE" ? api->del(path) : api->post(path, json::object());
      expect_error(r, 401, method + " " + path);
    }
  EXPECT_EQ(none.get("/v1/health").status, 200);
  Api ok(srv->port());
  EXPECT_EQ(ok.get(base()).status, 200) << "job still there";
}

TEST_F(Negative, MalformedJsonEverywhere) {
  Api api(srv->port());
  for (const std::string& path : {std::string("/v1/jobs"), base() + "/ranks", base() + "/ranks/0/measurements",
                                 base() + "/stragglers", std::string("/register_job"), "/register_rank/" + zjob,
                                 "/result/" + zjob}) {
    expect_error(api.post_raw(path, "{\"pp\": 4,"), 400, path);
    expect_error(api.post_raw(path, ""), 400, path + " empty");
    expect_error(api.post_raw(path, "[1, 2]"), 422, path + " array");
    expect_error(api.post_raw(path, "\xff\xfe garbage"), 400, path + " binary");
  }
}

TEST_F(Negative, WrongTypesAndRanges) {
  Api api(srv->port());
  json j = profile_job();
  j["pp"] = "8";
  expect_error(api.post("/v1/jobs", j), 422, "pp string");
  j = profile_job();
  j["microbatches"] = 2.5;
  expect_error(api.post("/v1/jobs", j), 422, "microbatches float");
  j = profile_job();
  j["schedule"] = "no-such-schedule";
  expect_error(api.post("/v1/jobs", j), 422, "schedule");
  j = profile_job();
  j["profile_csv"] = "stage,instruction\n0,forward\n";
  expect_error(api.post("/v1/jobs", j), 422, "bad csv");
  j = profile_job(2, 4);  // profile has 8 stages
  expect_error(api.post("/v1/jobs", j), 422, "stage count");
  for (const char* name : {"a\nforged log line", "\x1b[31mred", "tab\there", "del\x7f"}) {
    j = profile_job();
    j["name"] = name;
    const auto r = api.post("/v1/jobs", j);
    expect_error(r, 422, "control character in name");
    EXPECT_NE(r.body.find("must not contain control characters"), std::string::npos) << r.body;
  }
  // A name that displays as another (right-to-left override: "job\u202Egnp.exe" shows as
  // "jobexe.png"), or a C1 control (U+009B is a terminal's CSI), is refused by code point.
  for (const auto& [name, what] : std::vector<std::pair<std::string, std::string>>{
           {"job\u202Egnp.exe", "bidirectional text controls (U+202E at offset 3)"},
           {"a\u2067b", "bidirectional text controls (U+2067 at offset 1)"},
           {"\u061Cx", "bidirectional text controls (U+061C at offset 0)"},
           {"x\u009B31m", "C1 control characters (U+009B at offset 1)"}}) {
    j = profile_job();
    j["name"] = name;
    const auto r = api.post("/v1/jobs", j);
    expect_error(r, 422, "display-changing character in name");
    EXPECT_NE(r.body.find("must not contain " + what), std::string::npos) << r.body;
  }
  j = profile_job();
  j["name"] = "GPT-3 \u00e9t\u00e9 \u2014 \u65e5\u672c";  // other non-ASCII text stays a fine name
  EXPECT_EQ(api.post("/v1/jobs", j).status, 201);
  j = profile_job();
  j["zeus_plans"] = {"[[1410]]"};
  expect_error(api.post("/v1/jobs", j), 422, "zeus plan shape");
  j = profile_job();
  j.erase("profile_csv");
  j["zeus_plans"] = {"__import__('os')"};
  expect_error(api.post("/v1/jobs", j), 422, "zeus code");
  j["zeus_plans"] = 5;
  expect_error(api.post("/v1/jobs", j), 422, "zeus type");
  j.erase("zeus_plans");
  j["plans"] = {{{"time_s", 1}, {"energy_j", 1}, {"ranks", {{}}}}};
  expect_error(api.post("/v1/jobs", j), 422, "plans shape");
  j["dp"] = -1;
  expect_error(api.post("/v1/jobs", j), 422, "dp negative");
  // Timeline overheads (issue 19): finite, in [0, 3600] s; the message names the field.
  for (const char* key : {"op_overhead_s", "p2p_latency_s"}) {
    for (const json& bad : {json(-0.001), json(3600.5), json("0.01"), json(true)}) {
      j = profile_job();
      j[key] = bad;
      const Resp r = api.post("/v1/jobs", j);
      expect_error(r, 422, std::string(key) + " = " + bad.dump());
      EXPECT_NE(r.body.find(key), std::string::npos) << r.body;
    }
  }

  // The same rank, coordinates and clocks again is a restarted trainer: 200; other coordinates: 409.
  EXPECT_EQ(api.post(base() + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status, 200);
  expect_error(api.post(base() + "/ranks", {{"rank", 0}, {"dp_rank", 1}, {"pp_rank", 0}, {"tp_rank", 0}}), 409, "dup");
  expect_error(api.post(base() + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0},
                                            {"supported_freqs_mhz", {1410}}}), 422, "restart on a GPU lacking the clocks");
  expect_error(api.post(base() + "/ranks", {{"rank", 1}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}), 409, "slot");
  expect_error(api.post(base() + "/ranks", {{"rank", 16}, {"dp_rank", 0}, {"pp_rank", 1}, {"tp_rank", 0}}), 422, "range");
  expect_error(api.post(base() + "/ranks", {{"rank", 2}, {"dp_rank", 2}, {"pp_rank", 1}, {"tp_rank", 0}}), 422, "dp");
  expect_error(api.post(base() + "/ranks", {{"rank", 2}, {"dp_rank", 0}, {"pp_rank", 8}, {"tp_rank", 0}}), 422, "pp");
  expect_error(api.post(base() + "/ranks", {{"rank", "2"}, {"dp_rank", 0}, {"pp_rank", 1}, {"tp_rank", 0}}), 422, "type");
  expect_error(api.post(base() + "/ranks", {{"rank", 2}, {"dp_rank", 0}, {"pp_rank", 1}, {"tp_rank", 0},
                                            {"supported_freqs_mhz", {"x"}}}), 422, "freqs");

  expect_error(api.get(base() + "/ranks/5/plan"), 404, "unregistered rank");
  expect_error(api.get(base() + "/ranks/abc/plan"), 400, "rank path");
  expect_error(api.get(base() + "/ranks/99999999999999999999/plan"), 400, "rank overflow");
  expect_error(api.get(base() + "/ranks/0/plan?since_version=x"), 400, "since");

  expect_error(api.post(base() + "/ranks/0/measurements", {{"iteration", -1}, {"time_s", 1}}), 422, "iteration");
  expect_error(api.post(base() + "/ranks/0/measurements", {{"iteration", 1}}), 422, "time missing");
  {
    const Resp r = api.post(base() + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", nullptr}});
    expect_error(r, 422, "time null");
    EXPECT_NE(r.body.find("got null"), std::string::npos) << r.body;
  }
  expect_error(api.post(base() + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", "1"}}), 422, "time type");
  expect_error(api.post(base() + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", 1}, {"instructions", 3}}), 422,
               "instructions");
  expect_error(api.post(base() + "/ranks/0/measurements", {{"measurements", json::array()}}), 422, "empty batch");
  // A plan version the job never issued is refused: alone with 422, in a batch per item.
  const auto future = api.post(base() + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", 1.0}, {"plan_version", 99999}});
  expect_error(future, 422, "future plan_version");
  EXPECT_NE(future.j["error"]["message"].get<std::string>().find("must be a version this job has issued"),
            std::string::npos) << future.body;
  const auto mixed = api.post(base() + "/ranks/0/measurements",
                              {{"measurements", {{{"iteration", 2}, {"time_s", 1.0}, {"plan_version", 99999}},
                                                 {{"iteration", 3}, {"time_s", -1.0}},
                                                 {{"iteration", 4}, {"time_s", 1.0}, {"plan_version", 1}}}}});
  ASSERT_EQ(mixed.status, 202) << mixed.body;
  EXPECT_EQ(mixed.j["accepted"], 1);
  ASSERT_EQ(mixed.j["rejected"].size(), 2u) << mixed.body;
  EXPECT_EQ(mixed.j["rejected"][0]["index"], 0);  // in batch order
  EXPECT_EQ(mixed.j["rejected"][1]["index"], 1);
  // Instruction entries must fit the job: a name, microbatch and stage its schedule has, a time
  // within the iteration's.
  auto instruction = [](json e) {
    json base_entry = {{"instruction", "forward"}, {"microbatch", 0}, {"freq_mhz", 1410}, {"time_s", 0.1}};
    for (auto& [k, v] : e.items()) base_entry[k] = v;
    return json{{"iteration", 1}, {"time_s", 1.0}, {"instructions", {base_entry}}};
  };
  for (const auto& [entry, needle] : {std::pair{json{{"instruction", "fwd"}}, "must be forward, backward"},
                                      {json{{"microbatch", 999}}, "\"microbatch\" must be an integer in [0, "},
                                      {json{{"stage", 99}}, "\"stage\" must be an integer in [0, "},
                                      {json{{"time_s", 50.0}}, "\"time_s\" must be a finite number in [1e-09, 1], got 50"},
                                      {json{{"time_s", 0.0}}, "\"time_s\" must be a finite number in [1e-09, 1], got 0"}}) {
    const auto r = api.post(base() + "/ranks/0/measurements", instruction(entry));
    expect_error(r, 422, entry.dump());
    const std::string message = r.j["error"]["message"].get<std::string>();
    EXPECT_NE(message.find("instructions[0]"), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
  expect_error(api.post(base() + "/ranks/9/measurements", {{"iteration", 1}, {"time_s", 1}}), 404, "rank");
  {  // a stage another pp_rank runs, a missing microbatch, one report's fields beside a batch
    json e = {{"instruction", "forward"}, {"microbatch", 0}, {"stage", 1}, {"freq_mhz", 1410}, {"time_s", 0.1}};
    auto r = api.post(base() + "/ranks/0/measurements", json{{"iteration", 1}, {"time_s", 1.0}, {"instructions", {e}}});
    expect_error(r, 422, "another rank's stage");
    EXPECT_NE(r.body.find("not a stage of this rank"), std::string::npos) << r.body;
    e.erase("microbatch");
    e["stage"] = 0;
    r = api.post(base() + "/ranks/0/measurements", json{{"iteration", 1}, {"time_s", 1.0}, {"instructions", {e}}});
    expect_error(r, 422, "microbatch missing");
    EXPECT_NE(r.body.find("microbatch"), std::string::npos) << r.body;
    r = api.post(base() + "/ranks/0/measurements",
                 {{"iteration", 1}, {"time_s", 1.0}, {"measurements", {{{"iteration", 2}, {"time_s", 1.0}}}}});
    expect_error(r, 422, "a report beside a batch");
    EXPECT_NE(r.body.find("beside"), std::string::npos) << r.body;
  }
  expect_error(api.post(base() + "/ranks", {{"rank", 2}, {"dp_rank", 0}, {"pp_rank", 1}, {"tp_rank", 0},
                                            {"supported_freqs_mhz", json::array()}}), 422, "an empty clock list");

  expect_error(api.post(base() + "/stragglers", {{"pipeline", 2}, {"slowdown", 1.1}}), 422, "pipeline");
  expect_error(api.post(base() + "/stragglers", {{"pipeline", 0}, {"slowdown", 0.5}}), 422, "slowdown");
  expect_error(api.post(base() + "/stragglers", {{"pipeline", 0}}), 422, "neither");
  expect_error(api.post(base() + "/stragglers", {{"pipeline", 0}, {"slowdown", 1.1}, {"iteration_time_s", 3}}), 422, "both");
  expect_error(api.del(base() + "/stragglers/1"), 404, "no straggler");
  expect_error(api.del(base() + "/stragglers/x"), 400, "pipeline path");

  expect_error(api.get("/schedule/" + zjob), 400, "zeus rank missing");
  expect_error(api.post("/register_job", {{"job_id", "x"}, {"pp_degree", 1}, {"dp_degree", 1}, {"tp_degree", 1},
                                          {"world_size", 1}}), 422, "zeus job id");
  expect_error(api.post("/register_job", {{"job_id", ""}, {"pp_degree", 2}, {"dp_degree", 1}, {"tp_degree", 1},
                                          {"world_size", 3}}), 422, "zeus world");
  expect_error(api.post("/result/" + zjob, {{"rank", 0}, {"iter_time", {1.0}}, {"iter_energy", {}}}), 422, "zeus result");
  // A bad pair is named as the Zeus request names it (it said field "energy_j", session 31).
  for (const auto& [times, energies, named] :
       {std::tuple{json{1.5, 1.6}, json{100, -5}, "iter_energy[1] must be"}, {json{1.5, 0}, json{100, 5}, "iter_time[1] must be"}}) {
    const auto r = api.post("/result/" + zjob, {{"rank", 0}, {"iter_time", times}, {"iter_energy", energies}});
    expect_error(r, 422, "zeus result pair");
    const std::string msg = r.j["error"]["message"].get<std::string>();
    EXPECT_NE(msg.find(named), std::string::npos) << msg;
    EXPECT_EQ(msg.find("energy_j"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("time_s"), std::string::npos) << msg;
  }
}

TEST(ZeusNotConfigured, RegisterJobAnswers503) {
  TempDir dir;
  LocalServer srv(dir.file("z.db"));
  Api api(srv.port());
  expect_error(api.post("/register_job", {{"job_id", ""}, {"pp_degree", 2}, {"dp_degree", 1}, {"tp_degree", 1},
                                          {"world_size", 2}}), 503, "zeus not configured");
}

TEST_F(Negative, UnknownJobEverywhere) {
  Api api(srv->port());
  const std::string b = "/v1/jobs/job-doesnotexist";
  expect_error(api.get(b), 404, "get");
  expect_error(api.del(b), 404, "delete");
  expect_error(api.post(b + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}), 404, "ranks");
  expect_error(api.get(b + "/ranks/0/plan"), 404, "plan");
  expect_error(api.post(b + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", 1}}), 404, "measure");
  expect_error(api.post(b + "/stragglers", {{"pipeline", 0}, {"slowdown", 1.1}}), 404, "straggler");
  expect_error(api.del(b + "/stragglers/0"), 404, "clear");
  expect_error(api.post("/register_rank/nope", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}), 404, "z");
  expect_error(api.get("/schedule/nope?rank=0"), 404, "zeus schedule");
  expect_error(api.post("/result/nope", {{"rank", 0}, {"iter_time", {1.0}}, {"iter_energy", {1.0}}}), 404, "zeus result");
  expect_error(api.get("/no/such/route"), 404, "route");
  expect_error(api.get("/v1/jobs/" + std::string(300, 'a')), 400, "long id");  // beyond the id rule (128)
  expect_error(api.post("/v1/health", json::object()), 405, "method");
  expect_error(api.del("/v1/jobs"), 405, "method");
}

TEST_F(Negative, HugeBodies) {
  Api api(srv->port());
  // The 413 comes as soon as the headers are in, before any body byte is read: a raw client
  // reads it before sending the body (as with Expect: 100-continue).
  for (const std::string& path : {std::string("/v1/jobs"), base() + "/ranks", base() + "/ranks/0/measurements"}) {
    RawConn c(srv->port());
    ASSERT_TRUE(c.send("POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kToken +
                       "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(2 << 20) + "\r\n\r\n"));
    const std::string resp = c.read_response();
    EXPECT_EQ(raw_status(resp), 413) << path << ": " << resp;
    EXPECT_NE(raw_body(resp).find("limit of 1048576 bytes"), std::string::npos) << resp;
    EXPECT_TRUE(c.wait_closed()) << "the unread body is never read: the connection closes";
  }
  // Deeply nested JSON within the limit: rejected cleanly, no crash.
  std::string deep(200000, '[');
  expect_error(api.post_raw("/v1/jobs", deep), 400, "deep");
  EXPECT_EQ(api.get("/v1/health").status, 200);
  EXPECT_EQ(api.get(base()).status, 200);
}

TEST(RateLimit, Answers429) {
  TempDir dir;
  ServerOptions opt;
  opt.rate_limit_rps = 5;
  opt.rate_limit_burst = 5;
  LocalServer srv(dir.file("r.db"), opt);
  Api api(srv.port());
  int limited = 0;
  for (int i = 0; i < 30; ++i) {
    auto r = api.get("/v1/jobs");
    if (r.status == 429) {
      ++limited;
      EXPECT_EQ(r.j["error"]["code"], "rate_limited");
    }
  }
  EXPECT_GT(limited, 10);
  // Probes are never limited (they share an address with trainers behind a NAT or proxy; a
  // refused readiness probe took a healthy server out of service).
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(api.get("/v1/health").status, 200) << i;
    EXPECT_EQ(api.get("/v1/ready").status, 200) << i;
  }
}

}  // namespace
}  // namespace perseus::server::testing
