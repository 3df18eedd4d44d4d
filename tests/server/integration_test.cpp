// Loopback integration: profile job, 2 DP x 8 PP ranks, plans, measurements, straggler switch.
#include <atomic>
#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

class ServerFlow : public ::testing::Test {
 protected:
  TempDir dir;
};

/// A job of `dp` pipelines of 2 stages x 2 microbatches with two precomputed plans: all at
/// 1000 MHz (2 s, 100 J) and all at 1400 MHz (1 s, 150 J). Ready at once (no solve).
json two_plan_job(int dp) {
  auto rank_list = [](int f) {
    json l = json::array();
    for (int m = 0; m < 2; ++m) l.push_back({{"instruction", "forward"}, {"microbatch", m}, {"freq_mhz", f}});
    for (int m = 0; m < 2; ++m) l.push_back({{"instruction", "backward"}, {"microbatch", m}, {"freq_mhz", f}});
    return l;
  };
  return {{"pp", 2}, {"dp", dp}, {"microbatches", 2}, {"schedule", "1f1b"}, {"p2p_power_w", 60.0},
          {"plans", {{{"time_s", 2.0}, {"energy_j", 100.0}, {"ranks", {rank_list(1000), rank_list(1000)}}},
                     {{"time_s", 1.0}, {"energy_j", 150.0}, {"ranks", {rank_list(1400), rank_list(1400)}}}}}};
}

TEST_F(ServerFlow, PlansMeasurementsAndStragglers) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  ASSERT_EQ(api.get("/v1/health").status, 200);

  auto created = api.post("/v1/jobs", profile_job());
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string job = created.j["job_id"];
  EXPECT_EQ(created.j["status"], "planning");
  const std::string base = "/v1/jobs/" + job;

  // Ranks: rank = dp * 8 + pp.
  // A GPU that lacks the profile's clocks is refused at registration, naming the field.
  auto wrong = api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0},
                                          {"supported_freqs_mhz", {1410, 1395}}});
  ASSERT_EQ(wrong.status, 422) << wrong.body;
  EXPECT_EQ(wrong.j["error"]["code"], "unsupported_clock");
  EXPECT_NE(wrong.j["error"]["message"].get<std::string>().find("supported_freqs_mhz"), std::string::npos);
  for (int d = 0; d < 2; ++d)
    for (int p = 0; p < 8; ++p) {
      auto r = api.post(base + "/ranks", {{"rank", d * 8 + p}, {"dp_rank", d}, {"pp_rank", p}, {"tp_rank", 0},
                                          {"supported_freqs_mhz", a100_clocks()}});
      ASSERT_EQ(r.status, 201) << r.body;
    }
  // The registration answer carries the job's shape (the client bounds plan responses with it).
  auto again = api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0},
                                          {"supported_freqs_mhz", a100_clocks()}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.j["microbatches"], 4);
  EXPECT_EQ(again.j["chunks"], 1);
  // While planning, ranks get the quick T_min plan at once (no barrier).
  auto early = api.get(base + "/ranks/3/plan");
  ASSERT_EQ(early.status, 200);
  EXPECT_TRUE(early.j["plan_index"] == -3 || early.j["job_status"] == "ready") << early.body;

  const json info = wait_status(api, job, "ready");
  const json points = info["frontier"]["points"];
  ASSERT_GT(points.size(), 2u);
  const int fastest = info["frontier"]["fastest_index"];

  // Cross-check with the planner library directly.
  const Profile prof = parse_profile_csv(example_profile(), "x", 8);
  const Dag dag = Dag::build(make_schedule("1f1b", 8, 4, 1));
  PlannerOptions popt;
  popt.p_block_w = 83.64;
  popt.unit_time_s = 0.01;
  const Frontier fr = solve_frontier(dag, prof, popt);
  ASSERT_EQ(fr.size(), points.size());

  std::map<int, json> plans;
  for (int rank = 0; rank < 16; ++rank) {
    auto r = api.get(base + "/ranks/" + std::to_string(rank) + "/plan");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j["job_status"], "ready");
    EXPECT_EQ(r.j["plan_index"], fastest);
    EXPECT_EQ(r.j["version"], 2);
    const auto& ins = r.j["instructions"];
    ASSERT_EQ(ins.size(), 8u);  // 4 forward + 4 backward
    for (const auto& i : ins) EXPECT_EQ(i["stage"], rank % 8);
    std::multiset<std::string> kinds;
    for (const auto& i : ins) kinds.insert(i["instruction"].get<std::string>());
    EXPECT_EQ(kinds.count("forward"), 4u);
    plans[rank] = r.j;
  }
  for (int p = 0; p < 8; ++p) EXPECT_EQ(plans[p]["instructions"], plans[8 + p]["instructions"]) << "DP replicas";
  const auto expected = fr.plan(fastest);
  for (const auto& i : plans[0]["instructions"]) {
    const int op = dag.find({0, i["microbatch"].get<int>(), *parse_instruction_kind(i["instruction"].get<std::string>())});
    EXPECT_EQ(i["freq_mhz"], expected.freq_mhz[op]);
  }
  EXPECT_EQ(api.get(base + "/ranks/0/plan?since_version=2").status, 304);
  EXPECT_EQ(api.get(base + "/ranks/0/plan?since_version=1").status, 200);
  // A version this job never issued (a client ahead of a server restored from an older
  // database): the plan in force, so that the client can follow the server again.
  const auto ahead = api.get(base + "/ranks/0/plan?since_version=50");
  EXPECT_EQ(ahead.status, 200);
  EXPECT_EQ(ahead.j["version"], 2);

  // Measurements: idempotent per (rank, iteration); batch form.
  json m = {{"iteration", 1}, {"time_s", 1.5}, {"energy_j", 300.0}, {"plan_version", 2},
            {"instructions", {{{"instruction", "forward"}, {"microbatch", 0}, {"freq_mhz", 1410}, {"time_s", 0.05}}}}};
  auto m1 = api.post(base + "/ranks/0/measurements", m);
  EXPECT_EQ(m1.status, 202) << m1.body;
  auto m2 = api.post(base + "/ranks/0/measurements", m);
  EXPECT_EQ(m2.status, 200);
  EXPECT_EQ(m2.j["duplicate"], true);
  json batch = {{"measurements", {{{"iteration", 1}, {"time_s", 1.5}, {"energy_j", 300.0}},
                                  {{"iteration", 2}, {"time_s", 1.4}, {"energy_j", 290.0}}}}};
  auto mb = api.post(base + "/ranks/5/measurements", batch);
  EXPECT_EQ(mb.status, 202) << mb.body;
  EXPECT_EQ(mb.j["accepted"], 2);
  EXPECT_EQ(api.post(base + "/ranks/5/measurements", batch).j["duplicates"], 2);
  EXPECT_EQ(api.get(base).j["measurements"]["count"], 3);

  // Per-item acceptance: one impossible item (a counter that jumped: 1 MJ in 1 s) and one
  // malformed item are rejected by index; the valid ones, with known or unknown energy, kept.
  json mixed = {{"measurements",
                 {{{"iteration", 10}, {"time_s", 1.0}, {"energy_j", 300.0}},
                  {{"iteration", 11}, {"time_s", 1.0}, {"energy_j", 1e6}},
                  {{"iteration", 12}, {"time_s", 1.0}},  // energy unknown
                  {{"iteration", 13}, {"time_s", "x"}},
                  {{"iteration", 14}, {"time_s", 1.0}, {"energy_j", 310.0},
                   {"instructions", {{{"instruction", "forward"}, {"freq_mhz", 1410}, {"time_s", 0.001},
                                      {"energy_j", 500.0}}}}},
                  {{"iteration", 15}, {"time_s", 1.0}, {"energy_j", 310.0},
                   {"instructions", {{{"instruction", "fwd\x1b[2J"}, {"freq_mhz", 1410}, {"time_s", 0.001},
                                      {"energy_j", 500.0}}}}}}}};
  auto mx = api.post(base + "/ranks/5/measurements", mixed);
  ASSERT_EQ(mx.status, 202) << mx.body;
  EXPECT_EQ(mx.j["accepted"], 2);
  ASSERT_EQ(mx.j["rejected"].size(), 4u) << mx.body;
  // A caller's string is quoted escaped in the error: no raw terminal escape goes back.
  const std::string escaped = mx.j["rejected"][3]["error"].get<std::string>();
  EXPECT_NE(escaped.find("field \"instruction\" must be forward, backward, backward_input or backward_weight, got "
                         "'fwd\\x1B[2J'"),
            std::string::npos)
      << escaped;
  EXPECT_EQ(escaped.find('\x1b'), std::string::npos) << escaped;
  EXPECT_EQ(mx.j["rejected"][0]["iteration"], 11);
  EXPECT_EQ(mx.j["rejected"][1]["index"], 3);
  EXPECT_EQ(mx.j["rejected"][2]["iteration"], 14);  // 500 J in 1 ms in one computation
  EXPECT_NE(mx.j["rejected"][0]["error"].get<std::string>().find("implausible"), std::string::npos) << mx.body;
  // Errors name the element: the batch item and, inside it, the instruction (issue 22).
  EXPECT_NE(mx.j["rejected"][1]["error"].get<std::string>().find("measurements[3]: field \"time_s\""), std::string::npos)
      << mx.body;
  EXPECT_NE(mx.j["rejected"][2]["error"].get<std::string>().find("measurements[4]: instructions[0]: "), std::string::npos)
      << mx.body;
  const json summary = api.get(base).j["measurements"];
  EXPECT_EQ(summary["count"], 5);
  EXPECT_EQ(summary["energy_unknown"], 1);
  EXPECT_DOUBLE_EQ(summary["mean_iteration_energy_j"].get<double>(), (300.0 + 300.0 + 290.0 + 300.0) / 4);
  // A single report is still refused whole.
  EXPECT_EQ(api.post(base + "/ranks/5/measurements", {{"iteration", 20}, {"time_s", 1.0}, {"energy_j", 1e6}}).status,
            422);

  // Straggler on pipeline 1: pipeline 0 moves to the lowest-energy plan with T <= T'.
  const double t_min = points[fastest][0];
  auto s = api.post(base + "/stragglers", {{"pipeline", 1}, {"slowdown", 1.2}});
  ASSERT_EQ(s.status, 200) << s.body;
  const json dec = s.j["decision"];
  const double t_prime = 1.2 * t_min;
  EXPECT_NEAR(dec["target_time_s"].get<double>(), t_prime, 1e-9);
  const int chosen = dec["plan_index"];
  EXPECT_EQ(static_cast<std::size_t>(chosen), fr.lowest_energy_within(t_prime));
  EXPECT_LE(dec["plan_time_s"].get<double>(), t_prime + 1e-12);
  EXPECT_LT(dec["plan_energy_j"].get<double>(), dec["fastest_energy_j"].get<double>());
  EXPECT_GT(dec["predicted_saving_j_per_iteration"].get<double>(), 0);
  EXPECT_EQ(dec["pipelines_switched"], 1);

  auto p0 = api.get(base + "/ranks/3/plan?since_version=2");
  ASSERT_EQ(p0.status, 200);
  EXPECT_EQ(p0.j["version"], 3);
  EXPECT_EQ(p0.j["plan_index"], chosen);
  EXPECT_NE(p0.j["instructions"], plans[3]["instructions"]) << "frequencies changed";
  const auto chosen_plan = fr.plan(chosen);
  for (const auto& i : p0.j["instructions"]) {
    const int op = dag.find({3, i["microbatch"].get<int>(), *parse_instruction_kind(i["instruction"].get<std::string>())});
    EXPECT_EQ(i["freq_mhz"], chosen_plan.freq_mhz[op]);
  }
  EXPECT_EQ(api.get(base + "/ranks/11/plan?since_version=2").status, 304) << "the straggler keeps T_min";

  // Clear: everyone back to the fastest plan.
  EXPECT_EQ(api.del(base + "/stragglers/0").status, 404);
  auto c = api.del(base + "/stragglers/1");
  ASSERT_EQ(c.status, 200) << c.body;
  auto back = api.get(base + "/ranks/3/plan?since_version=3");
  ASSERT_EQ(back.status, 200);
  EXPECT_EQ(back.j["version"], 4);
  EXPECT_EQ(back.j["plan_index"], fastest);
  const json after = api.get(base).j;
  EXPECT_EQ(after["decisions"].size(), 2u);
  EXPECT_TRUE(after["stragglers"].empty());

  // Straggler by iteration time; list; metrics; delete.
  auto s2 = api.post(base + "/stragglers", {{"pipeline", 0}, {"iteration_time_s", 10 * t_min}});
  ASSERT_EQ(s2.status, 200) << s2.body;
  EXPECT_EQ(s2.j["decision"]["plan_index"], fr.lowest_energy_within(10 * t_min));
  EXPECT_EQ(api.get("/v1/jobs").j["jobs"].size(), 1u);
  auto metrics = api.get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("perseus_plan_fetches_total"), std::string::npos);
  EXPECT_EQ(api.del(base).status, 200);
  EXPECT_EQ(api.get(base).status, 404);
}

TEST_F(ServerFlow, PrecomputedPlansAndIdenticalConcurrentJobs) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  // Two plans for pp=2, 2 microbatches, given as explicit per-rank lists.
  auto rank_list = [](int stage, int f) {
    json l = json::array();
    for (int m = 0; m < 2; ++m) l.push_back({{"instruction", "forward"}, {"microbatch", m}, {"freq_mhz", f}});
    for (int m = 0; m < 2; ++m) l.push_back({{"instruction", "backward"}, {"microbatch", m}, {"freq_mhz", f}});
    (void)stage;
    return l;
  };
  json body = {{"pp", 2}, {"dp", 1}, {"microbatches", 2}, {"schedule", "1f1b"}, {"p2p_power_w", 60.0},
               {"plans", {{{"time_s", 2.0}, {"energy_j", 100.0}, {"ranks", {rank_list(0, 1000), rank_list(1, 1000)}}},
                          {{"time_s", 1.0}, {"energy_j", 150.0}, {"ranks", {rank_list(0, 1400), rank_list(1, 1400)}}}}}};
  std::vector<std::thread> ts;
  std::vector<std::string> ids(8);
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      Api a(srv.port());
      auto r = a.post("/v1/jobs", body);
      if (r.status == 201) ids[i] = r.j["job_id"];
    });
  for (auto& t : ts) t.join();
  std::set<std::string> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), 8u) << "job ids must be unique";
  EXPECT_FALSE(unique.count(""));
  const std::string base = "/v1/jobs/" + ids[0];
  ASSERT_EQ(api.post(base + "/ranks", {{"rank", 1}, {"dp_rank", 0}, {"pp_rank", 1}, {"tp_rank", 0}}).status, 201);
  auto p = api.get(base + "/ranks/1/plan");
  ASSERT_EQ(p.status, 200);
  EXPECT_EQ(p.j["plan_index"], 1);
  EXPECT_EQ(p.j["instructions"][0]["freq_mhz"], 1400);
  EXPECT_EQ(p.j["instructions"][0]["stage"], 1);
}

// --max-jobs holds under concurrent creations (a slot is reserved before the job is built), and
// a straggler target faster than the fastest plan is refused.
TEST_F(ServerFlow, MaxJobsHoldsUnderConcurrentCreates) {
  ServerOptions opt;
  opt.max_jobs = 12;
  LocalServer srv(dir.file("m.db"), opt);
  const json body = two_plan_job(2);
  std::atomic<int> created{0}, refused{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      Api a(srv.port());
      for (int k = 0; k < 5; ++k) {
        const auto r = a.post("/v1/jobs", body);
        if (r.status == 201) ++created;
        else if (r.status == 503) ++refused;
      }
    });
  for (auto& t : ts) t.join();
  Api api(srv.port());
  EXPECT_EQ(created.load(), 12);
  EXPECT_EQ(refused.load(), 40 - 12);
  const json jobs = api.get("/v1/jobs").j["jobs"];
  ASSERT_EQ(jobs.size(), 12u);
  const std::string base = "/v1/jobs/" + jobs[0]["job_id"].get<std::string>();
  const auto fast = api.post(base + "/stragglers", {{"pipeline", 0}, {"iteration_time_s", 0.5}});  // T_min is 1 s
  EXPECT_EQ(fast.status, 422) << fast.body;
  EXPECT_NE(fast.body.find("must be >= the job's fastest plan's time"), std::string::npos) << fast.body;
  EXPECT_EQ(api.post(base + "/stragglers", {{"pipeline", 0}, {"iteration_time_s", 1.5}}).status, 200);
  // The cap of "slowdown" (1000) holds for a time too: 1e7 s is a unit mistake, not a straggler
  // every other pipeline should slow down for (session 21's trial).
  const auto huge = api.post(base + "/stragglers", {{"pipeline", 0}, {"iteration_time_s", 1e7}});
  EXPECT_EQ(huge.status, 422) << huge.body;
  EXPECT_NE(huge.body.find("must be <= 1000 x the job's fastest plan's time"), std::string::npos) << huge.body;
  EXPECT_EQ(api.post(base + "/stragglers", {{"pipeline", 0}, {"iteration_time_s", 1000.0}}).status, 200);
  // An iteration of 0 s is a broken timer, not a measurement.
  ASSERT_EQ(api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status, 201);
  const auto zero = api.post(base + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", 0.0}});
  EXPECT_EQ(zero.status, 422) << zero.body;
  EXPECT_NE(zero.body.find("got 0"), std::string::npos) << zero.body;
}

// /metrics has per-pipeline series only for pipelines with data (a report, a straggler
// decision): a job of many pipelines costs nothing there until they report.
TEST_F(ServerFlow, MetricsHaveSeriesOnlyForPipelinesWithData) {
  LocalServer srv(dir.file("p.db"));
  Api api(srv.port());
  const json body = two_plan_job(5000);
  const auto created = api.post("/v1/jobs", body);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string job = created.j["job_id"], base = "/v1/jobs/" + job;
  auto series = [&] {
    const auto m = api.get("/metrics");
    EXPECT_EQ(m.status, 200);
    std::vector<std::string> lines;
    std::istringstream in(m.body);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("perseus_pipeline_", 0) == 0 && line.find("job=\"" + job + "\"") != std::string::npos)
        lines.push_back(line);
    return lines;
  };
  EXPECT_TRUE(series().empty()) << series().front();
  ASSERT_EQ(api.post(base + "/stragglers", {{"pipeline", 4321}, {"iteration_time_s", 1.5}}).status, 200);
  // The decision gives every pipeline a predicted saving (so each has series now); the
  // straggler gauge is 1 for the declared pipeline alone.
  std::vector<std::string> stragglers;
  for (const auto& l : series())
    if (l.rfind("perseus_pipeline_straggler{", 0) == 0 && l.substr(l.size() - 2) == " 1") stragglers.push_back(l);
  ASSERT_EQ(stragglers.size(), 1u);
  EXPECT_NE(stragglers[0].find("pipeline=\"4321\",origin=\"declared\"}"), std::string::npos) << stragglers[0];
}

}  // namespace
}  // namespace perseus::server::testing
