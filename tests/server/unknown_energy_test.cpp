// Unknown energy in the straggler loop: a report without energy_j (the client leaves out an
// impossible counter reading) is unknown, never 0 J. A pipeline iteration with one rank's energy
// unknown has unknown energy, and a measured saving computed from none known is null in the
// decision and in GET /v1/jobs/{id}, and absent from /metrics.
#include <gtest/gtest.h>

#include <algorithm>

#include "straggler_detector.hpp"
#include "switch_verifier.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

TEST(UnknownEnergy, OneUnknownRankMakesThePipelineIterationUnknown) {
  IterationAggregator agg(2);
  EXPECT_FALSE(agg.add(0, 0, 1, 1.0, 10.0, 1.0));
  const auto s = agg.add(0, 1, 1, 1.0, std::nullopt, 1.0);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->energy_j) << "not " << s->energy_j.value_or(-1) << " J";
  EXPECT_FALSE(agg.add(0, 1, 2, 1.0, std::nullopt, 1.0));  // the unknown rank first
  const auto t = agg.add(0, 0, 2, 1.0, 10.0, 1.0);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->energy_j);
}

TEST(UnknownEnergy, SavingWithoutKnownEnergyAfterTheSwitchIsUnknown) {
  StragglerOptions o;
  o.window = 2;
  o.verify_iterations = 2;
  SwitchVerifier v(o, 2, 10.0, 4);
  for (int it = 0; it < 2; ++it) {
    v.observe({0, it, 1.2, 400.0, 1.0});
    v.observe({1, it, 1.0, 400.0, 1.0});
  }
  v.start(1, {{1, 1.2}}, {{1, 1.2}}, {0}, true);
  std::optional<VerificationRound> r;
  for (int it = 2; it < 4; ++it) {
    if (auto x = v.observe({0, it, 1.2, 400.0, 1.0})) r = x;
    if (auto x = v.observe({1, it, 1.2, std::nullopt, 1.0})) r = x;
  }
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->verdicts.at(0).measured_saving_j);
}

/// A ready job of 2 pipelines × 8 stages with its 16 ranks registered, detection off and
/// verification after 2 iterations; returns its path "/v1/jobs/ID".
std::string verified_job(Api& api) {
  json body = profile_job(2, 8);
  body["straggler_detection"] = {{"enabled", false}, {"verify", true}, {"window", 2}, {"verify_iterations", 2}};
  auto c = api.post("/v1/jobs", body);
  EXPECT_EQ(c.status, 201) << c.body;
  if (c.status != 201) return "";
  const std::string job = c.j["job_id"], base = "/v1/jobs/" + job;
  wait_status(api, job, "ready");
  for (int r = 0; r < 16; ++r)
    EXPECT_EQ(api.post(base + "/ranks", {{"rank", r}, {"dp_rank", r / 8}, {"pp_rank", r % 8}, {"tp_rank", 0}}).status,
              201);
  return base;
}

// Through the HTTP API: pipeline 0 is declared a straggler, pipeline 1 switches to a slower
// plan, and on it one of its ranks reports no energy_j. Before the fix that rank counted as
// 0 J: the pipeline's energy lost a rank and the switch showed a large "measured" saving.
TEST(UnknownEnergy, MeasuredSavingIsNullWhenARankEnergyIsUnknown) {
  TempDir dir;
  LocalServer srv(dir.file("e.db"));
  Api api(srv.port());
  const std::string base = verified_job(api);
  ASSERT_FALSE(base.empty() || ::testing::Test::HasFailure());
  // Every rank reports its plan's time (pipeline 0, the straggler, 30 % longer) and 50 J,
  // except rank 8 (pipeline 1) after the switch, whose energy is unknown.
  auto iteration = [&](int it, bool switched) {
    for (int r = 0; r < 16; ++r) {
      const json plan = api.get(base + "/ranks/" + std::to_string(r) + "/plan").j;
      const double t = plan["iteration_time_s"].get<double>() * (r < 8 && switched ? 1.3 : 1.0);
      json m = {{"iteration", it}, {"time_s", t}, {"plan_version", plan["version"]}};
      if (!(switched && r == 8)) m["energy_j"] = 50.0;
      ASSERT_EQ(api.post(base + "/ranks/" + std::to_string(r) + "/measurements", m).status, 202);
    }
  };
  for (int it = 0; it < 2; ++it) iteration(it, false);  // the baseline: every energy known
  auto s = api.post(base + "/stragglers", {{"pipeline", 0}, {"slowdown", 1.3}});
  ASSERT_EQ(s.status, 200) << s.body;
  ASSERT_EQ(s.j["decision"]["pipelines_switched"], 1) << s.body;
  for (int it = 2; it < 4; ++it) iteration(it, true);
  // The verification ran within the last report's request (its decision is recorded before the
  // response): no waiting needed.
  const json info = api.get(base).j;
  json verification;
  for (const auto& d : info["decisions"])
    if (d["action"] == "verification") verification = d;
  ASSERT_TRUE(verification.is_object()) << "no verification decision: " << info["decisions"].dump();
  ASSERT_EQ(verification["verdicts"].size(), 1u);
  EXPECT_TRUE(verification["verdicts"][0]["measured_saving_j_per_iteration"].is_null()) << verification.dump();
  EXPECT_TRUE(verification["measured_saving_j_per_iteration"].is_null()) << verification.dump();
  EXPECT_TRUE(verification["predicted_saving_j_per_iteration"].is_number());
  EXPECT_TRUE(info["straggler_loop"]["pipelines"][1]["measured_saving_j_per_iteration"].is_null())
      << info["straggler_loop"].dump();
  const std::string metrics = api.get("/metrics").body;
  EXPECT_EQ(metrics.find("perseus_pipeline_measured_saving_joules{"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("perseus_pipeline_predicted_saving_joules{"), std::string::npos);
  // The server's decision counter counts the verification too, as the job's decisions_total.
  const std::string name = "\nperseus_straggler_decisions_total ";
  const auto at = metrics.find(name);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_EQ(std::stod(metrics.substr(at + name.size())), info["decisions_total"].get<double>()) << metrics;
  EXPECT_GE(info["decisions_total"].get<int>(), 2) << "straggler_set and verification";
}

// A verification that re-targets a pipeline (it finished far ahead of the straggler) moves it
// to a slower plan. The "replanned" decision named the rule's plan for T' (plan_index,
// plan_time_s, plan_energy_j) and a percentage of that plan, beside pipeline_plans and a saving
// in J of the plan the pipeline really runs (a fresh-user trial, session 19).
TEST(VerificationReplan, TheDecisionDescribesThePlanThePipelinesRun) {
  TempDir dir;
  LocalServer srv(dir.file("r.db"));
  Api api(srv.port());
  const std::string base = verified_job(api);
  ASSERT_FALSE(base.empty() || ::testing::Test::HasFailure());
  auto s = api.post(base + "/stragglers", {{"pipeline", 1}, {"slowdown", 1.3}});
  ASSERT_EQ(s.status, 200) << s.body;
  const double target = s.j["decision"]["target_time_s"];
  // Pipeline 1 (the straggler) takes T'; pipeline 0 runs 30 % faster than its new plan.
  for (int it = 0; it < 8; ++it) {
    for (int r = 0; r < 16; ++r) {
      const json plan = api.get(base + "/ranks/" + std::to_string(r) + "/plan").j;
      const double t = r >= 8 ? target : 0.7 * plan["iteration_time_s"].get<double>();
      ASSERT_EQ(api.post(base + "/ranks/" + std::to_string(r) + "/measurements",
                         {{"iteration", it}, {"time_s", t}, {"energy_j", 50.0}, {"plan_version", plan["version"]}})
                    .status,
                202);
    }
  }
  const json info = api.get(base).j;
  json replanned;
  for (const auto& d : info["decisions"])
    if (d["action"] == "replanned") replanned = d;
  ASSERT_TRUE(replanned.is_object()) << "no re-plan: " << info["decisions"].dump();
  const int runs = replanned["pipeline_plans"][0];
  const json& point = info["frontier"]["points"][runs];
  EXPECT_EQ(replanned["plan_index"], runs) << replanned.dump();
  EXPECT_DOUBLE_EQ(replanned["plan_time_s"].get<double>(), point[0].get<double>()) << replanned.dump();
  EXPECT_DOUBLE_EQ(replanned["plan_energy_j"].get<double>(), point[1].get<double>()) << replanned.dump();
  // The percentage is the J saving over the same baseline (http-api.md): at T_min, then
  // blocking at P_block on 8 GPUs until the later of T' and the plan's own time.
  const double t_fast = replanned["fastest_time_s"], e_fast = replanned["fastest_energy_j"];
  const double horizon = std::max({target, t_fast, point[0].get<double>()});
  const double base_j = e_fast + 83.64 * 8 * (horizon - t_fast);
  EXPECT_NEAR(replanned["predicted_saving_pct"].get<double>(),
              100 * replanned["predicted_saving_j_per_iteration"].get<double>() / base_j, 1e-9)
      << replanned.dump();
}

}  // namespace
}  // namespace perseus::server::testing
