// Requests that must be refused (or readings that must not be acted on) because what they say
// is impossible or inconsistent: plans with a computation twice or impossible times,
// measurements with impossible energies or times or a computation twice, detections beyond any
// straggler, and the messages that name what was wrong.
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "perseus/error.hpp"

#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

/// One 1F1B rank list of a pp = 2, 2-microbatch job: (instruction, microbatch, MHz) in the
/// given order (named entries: the order does not matter).
json rank_list(int stage, const std::vector<std::tuple<const char*, int, int>>& entries) {
  json l = json::array();
  for (const auto& [ins, mb, f] : entries)
    l.push_back({{"instruction", ins}, {"microbatch", mb}, {"freq_mhz", f}, {"stage", stage}});
  return l;
}

json uniform_list(int stage, int f) {
  return rank_list(stage, {{"forward", 0, f}, {"forward", 1, f}, {"backward", 0, f}, {"backward", 1, f}});
}

/// A "plans" job of `dp` pipelines of 2 stages x 2 microbatches: all at 1000 MHz (2 s, 100 J)
/// and all at 1400 MHz (1 s, 150 J; the served one).
json two_plan_job(int dp) {
  return {{"pp", 2}, {"dp", dp}, {"microbatches", 2}, {"p2p_power_w", 60.0},
          {"plans", {{{"time_s", 2.0}, {"energy_j", 100.0}, {"ranks", {uniform_list(0, 1000), uniform_list(1, 1000)}}},
                     {{"time_s", 1.0}, {"energy_j", 150.0}, {"ranks", {uniform_list(0, 1400), uniform_list(1, 1400)}}}}}};
}

/// Creates two_plan_job(1) and registers rank `pp_rank` (pipeline 0, that stage); returns the
/// rank's measurements URL.
std::string measurements_url(Api& api, int pp_rank) {
  const auto c = api.post("/v1/jobs", two_plan_job(1));
  EXPECT_EQ(c.status, 201) << c.body;
  const std::string base = "/v1/jobs/" + c.j["job_id"].get<std::string>();
  const auto r = api.post(base + "/ranks", {{"rank", pp_rank}, {"dp_rank", 0}, {"pp_rank", pp_rank}, {"tp_rank", 0}});
  EXPECT_EQ(r.status, 201) << r.body;
  return base + "/ranks/" + std::to_string(pp_rank) + "/measurements";
}

std::string message(const Resp& r) {
  return r.j.is_object() && r.j.contains("error") ? r.j["error"]["message"].get<std::string>() : r.body;
}

class RequestChecks : public ::testing::Test {
 protected:
  /// A job of two pipelines of two stages (rank = dp_rank * 2 + pp_rank, all registered) whose
  /// detection acts on one sample (window 1, consecutive 1); its path, or "" on failure.
  static std::string detecting_job(Api& api) {
    json job = two_plan_job(2);
    job["straggler_detection"] = {{"window", 1}, {"consecutive", 1}};
    const auto c = api.post("/v1/jobs", job);
    EXPECT_EQ(c.status, 201) << c.body;
    if (c.status != 201) return "";
    const std::string base = "/v1/jobs/" + c.j["job_id"].get<std::string>();
    for (int r = 0; r < 4; ++r) {
      const auto reg = api.post(base + "/ranks", {{"rank", r}, {"dp_rank", r / 2}, {"pp_rank", r % 2}, {"tp_rank", 0}});
      EXPECT_EQ(reg.status, 201) << reg.body;
      if (reg.status != 201) return "";
    }
    return base;
  }
  TempDir dir;
};

// The trial's plan: rank 0 names forward of microbatch 0 twice (1410 and 900 MHz) and never
// forward of microbatch 1, which was then served the duplicate's 900 MHz.
TEST_F(RequestChecks, APlanNamingAComputationTwiceIsRefusedWithTheMissingOne) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  json job = two_plan_job(1);
  job["plans"] = {{{"time_s", 1}, {"energy_j", 1},
                   {"ranks", {rank_list(0, {{"forward", 0, 1410}, {"forward", 0, 900}, {"backward", 0, 1410},
                                            {"backward", 1, 1410}}),
                              uniform_list(1, 1410)}}}};
  const auto r = api.post("/v1/jobs", job);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "invalid_job") << r.body;
  EXPECT_NE(message(r).find("plans[0]: ranks[0][1]: forward of microbatch 0 on stage 0 is listed twice (also at "
                            "ranks[0][0]), and the list lacks forward of microbatch 1 on stage 0"),
            std::string::npos)
      << r.body;
}

// Named entries set the clock of the computation they name, in whatever order they are listed
// (the served plan is in execution order: forward 0, forward 1, backward 0, backward 1).
TEST_F(RequestChecks, NamedPlanEntriesSetTheirOwnComputationsClock) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  json job = two_plan_job(1);
  job["plans"] = {{{"time_s", 1}, {"energy_j", 1},
                   {"ranks", {rank_list(0, {{"backward", 1, 1110}, {"forward", 0, 1410}, {"backward", 0, 1200},
                                            {"forward", 1, 900}}),
                              uniform_list(1, 1410)}}}};
  const auto c = api.post("/v1/jobs", job);
  ASSERT_EQ(c.status, 201) << c.body;
  const std::string base = "/v1/jobs/" + c.j["job_id"].get<std::string>();
  ASSERT_EQ(api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status, 201);
  const auto p = api.get(base + "/ranks/0/plan");
  ASSERT_EQ(p.status, 200) << p.body;
  const json& ins = p.j["instructions"];
  ASSERT_EQ(ins.size(), 4u) << p.body;
  const std::vector<std::tuple<std::string, int, int>> want = {
      {"forward", 0, 1410}, {"forward", 1, 900}, {"backward", 0, 1200}, {"backward", 1, 1110}};
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(ins[k]["instruction"], std::get<0>(want[k])) << p.body;
    EXPECT_EQ(ins[k]["microbatch"], std::get<1>(want[k])) << p.body;
    EXPECT_EQ(ins[k]["freq_mhz"], std::get<2>(want[k])) << p.body;
  }
}

// A detection whose slowdown is beyond what a declaration may say (1000) is an impossible
// reading: not acted on (no pipeline moves to its slowest plan), recorded with its reason, and
// a plausible slowdown afterwards is still detected.
TEST_F(RequestChecks, ADetectedSlowdownBeyondTheDeclarableIsIgnoredAndRecorded) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  const std::string base = detecting_job(api);
  ASSERT_FALSE(base.empty());
  auto iteration = [&](int it, double slow_time_s) {
    for (int r = 0; r < 4; ++r) {
      const auto m = api.post(base + "/ranks/" + std::to_string(r) + "/measurements",
                              {{"iteration", it}, {"time_s", r < 2 ? 1.0 : slow_time_s}, {"plan_version", 1}});
      ASSERT_EQ(m.status, 202) << m.body;
    }
  };
  iteration(0, 1e7);  // pipeline 1 reports 10^7 times its plan's 1 s (the measurement limit)
  json info = api.get(base).j;
  EXPECT_EQ(info["stragglers"], json::array()) << info.dump();
  EXPECT_EQ(info["decisions_total"], 0) << info.dump();
  EXPECT_EQ(info["pipelines"][0]["version"], 1) << info.dump();
  const json& ignored = info["straggler_loop"]["pipelines"][1]["ignored_detection"];
  ASSERT_TRUE(ignored.is_object()) << info.dump();
  EXPECT_EQ(ignored["iteration"], 0);
  EXPECT_DOUBLE_EQ(ignored["slowdown"].get<double>(), 1e7);
  EXPECT_NE(ignored["reason"].get<std::string>().find("above 1000, the most a straggler may have"), std::string::npos)
      << ignored.dump();
  iteration(1, 2.0);  // a plausible straggler: detected, within the declarable range
  info = api.get(base).j;
  ASSERT_EQ(info["stragglers"].size(), 1u) << info.dump();
  EXPECT_EQ(info["stragglers"][0]["pipeline"], 1);
  EXPECT_DOUBLE_EQ(info["stragglers"][0]["slowdown"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(info["stragglers"][0]["target_time_s"].get<double>(), 2.0);
}

// The energy bound and its message agree: 3000 W × time_s + 300 J (one 0.1 s energy-counter
// update at 3000 W), stated with the values.
TEST_F(RequestChecks, TheEnergyBoundIsStatedAsApplied) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  const std::string url = measurements_url(api, 0);
  auto r = api.post(url, {{"iteration", 1}, {"time_s", 1e-9}, {"energy_j", 300.000004}, {"plan_version", 1}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "implausible_energy") << r.body;
  EXPECT_NE(message(r).find("measurement: energy_j 300.000004 J is more than a GPU can use in time_s 1e-09 s: the "
                            "bound is 3000 W × time_s + 300 J (one energy-counter update of 0.1 s at that power) = "
                            "300.000003 J"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(message(r).find(" W, above"), std::string::npos) << "the old wording named a power the rule never used";
  // An entry of "instructions" by the same rule.
  r = api.post(url, {{"iteration", 2}, {"time_s", 2.0}, {"plan_version", 1},
                     {"instructions", {{{"instruction", "forward"}, {"microbatch", 0}, {"freq_mhz", 1410},
                                        {"time_s", 0.5}, {"energy_j", 1800.5}}}}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(message(r).find("instructions[0]: instruction 'forward' microbatch 0: energy_j 1800.5 J is more than a "
                            "GPU can use in time_s 0.5 s: the bound is 3000 W × time_s + 300 J"),
            std::string::npos)
      << r.body;
  // Within the bound: accepted.
  EXPECT_EQ(api.post(url, {{"iteration", 3}, {"time_s", 0.5}, {"energy_j", 1799.0}, {"plan_version", 1}}).status, 202);
}

// A plan's time_s and energy_j are in the ranges of a measured iteration: time in [1e-9, 1e7] s
// (0 made a straggler's target 0 s), energy in [0, 1e13] J.
TEST_F(RequestChecks, PlanTimesAndEnergiesAreInTheMeasurementsRanges) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  for (const auto& [key, value, shown] :
       std::vector<std::tuple<std::string, json, std::string>>{{"time_s", 0, "0"},
                                                               {"time_s", 1e300, "1e+300"},
                                                               {"time_s", -1, "-1"},
                                                               {"time_s", "1", "\"1\""},
                                                               {"energy_j", -1, "-1"},
                                                               {"energy_j", 1e14, "100000000000000"}}) {
    json job = two_plan_job(1);
    job["plans"][1][key] = value;
    const auto r = api.post("/v1/jobs", job);
    EXPECT_EQ(r.status, 422) << key << " " << value << ": " << r.body;
    const std::string range = key == "time_s" ? "[1e-9, 1e7] s" : "[0, 1e13] J";
    EXPECT_NE(message(r).find("field \"plans[1]." + key + "\" must be a number in " + range), std::string::npos) << r.body;
    EXPECT_NE(message(r).find("got " + shown), std::string::npos) << r.body;
  }
  json job = two_plan_job(1);
  job["plans"][1]["time_s"] = 0.001;  // short, but a time
  EXPECT_EQ(api.post("/v1/jobs", job).status, 201);
}

// A report names each computation once; plan_version 0 ("no plan in use yet", what the client
// sends before its first plan) is accepted and never fed to the straggler loop.
TEST_F(RequestChecks, AReportNamingAComputationTwiceIsRefused) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  const std::string url = measurements_url(api, 1);
  const json fwd0 = {{"instruction", "forward"}, {"microbatch", 0}, {"freq_mhz", 1410}, {"time_s", 0.1}};
  json fwd0_staged = fwd0;
  fwd0_staged["stage"] = 1;
  const json fwd1 = {{"instruction", "forward"}, {"microbatch", 1}, {"freq_mhz", 1410}, {"time_s", 0.1}};
  auto r = api.post(url, {{"iteration", 1}, {"time_s", 1.0}, {"plan_version", 1},
                          {"instructions", {fwd0, fwd1, fwd0_staged}}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(message(r).find("instructions[2]: forward of microbatch 0 is listed twice (also instructions[0]); each "
                            "computation of the iteration is reported once"),
            std::string::npos)
      << r.body;
  // In a batch, that item alone is rejected.
  r = api.post(url, {{"measurements", {{{"iteration", 2}, {"time_s", 1.0}, {"instructions", {fwd0, fwd0}}},
                                       {{"iteration", 3}, {"time_s", 1.0}, {"instructions", {fwd0, fwd1}}}}}});
  EXPECT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(r.j["accepted"], 1) << r.body;
  ASSERT_EQ(r.j["rejected"].size(), 1u) << r.body;
  EXPECT_EQ(r.j["rejected"][0]["index"], 0) << r.body;
  EXPECT_EQ(api.post(url, {{"iteration", 4}, {"time_s", 1.0}, {"plan_version", 0}}).status, 202);
}

// One GPU runs its computations one after another: a report whose instructions take longer
// than its iteration (cumulative times, say) is refused, naming the sum and the iteration time;
// within the 1 % slack it is accepted.
TEST_F(RequestChecks, InstructionsLongerThanTheirIterationAreRefused) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  const std::string url = measurements_url(api, 1);
  auto entry = [](const char* ins, int mb, double t) {
    return json{{"instruction", ins}, {"microbatch", mb}, {"freq_mhz", 1410}, {"time_s", t}};
  };
  // Cumulative times (0.3, 0.6, 0.9 s of a 1 s iteration): 1.8 s in all.
  auto r = api.post(url, {{"iteration", 1}, {"time_s", 1.0}, {"plan_version", 1},
                          {"instructions", {entry("forward", 0, 0.3), entry("forward", 1, 0.6), entry("backward", 0, 0.9)}}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "implausible_time") << r.body;
  EXPECT_NE(message(r).find("the 3 instructions take 1.8 s in all, more than the iteration's time_s 1 s (+1 %)"),
            std::string::npos)
      << r.body;
  // 1.005 s of a 1 s iteration: two timers' disagreement, accepted.
  r = api.post(url, {{"iteration", 2}, {"time_s", 1.0}, {"plan_version", 1},
                     {"instructions", {entry("forward", 0, 0.5), entry("backward", 0, 0.505)}}});
  EXPECT_EQ(r.status, 202) << r.body;
  // In a batch, only the impossible item is rejected.
  r = api.post(url, {{"measurements", {{{"iteration", 3}, {"time_s", 1.0}, {"instructions", {entry("forward", 0, 0.6), entry("forward", 1, 0.6)}}},
                                       {{"iteration", 4}, {"time_s", 1.0}, {"instructions", {entry("forward", 0, 0.4)}}}}}});
  EXPECT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(r.j["accepted"], 1) << r.body;
  ASSERT_EQ(r.j["rejected"].size(), 1u) << r.body;
  EXPECT_EQ(r.j["rejected"][0]["index"], 0) << r.body;
}

/// A profile of 2 stages at 1410, 1170 and 900 MHz.
std::string three_clock_profile() {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  for (int stage = 0; stage < 2; ++stage)
    for (const auto& [f, scale] : {std::pair{1410, 1.0}, std::pair{1170, 1.15}, std::pair{900, 1.4}}) {
      csv += fmt::format("{},forward,{},{},{}\n", stage, f, 0.03 * scale, 11.0 / scale);
      csv += fmt::format("{},backward,{},{},{}\n", stage, f, 0.06 * scale, 22.0 / scale);
    }
  return csv;
}

json zeus_job_info(int pp) {
  return {{"job_id", ""}, {"pp_degree", pp}, {"dp_degree", 1}, {"tp_degree", 1}, {"world_size", pp}};
}

// A Zeus job serves only its Zeus plans (the profile gives them times; nothing re-plans): a GPU
// is checked against the plans' clocks for its stage, not every clock of the profile.
TEST_F(RequestChecks, AZeusRankIsCheckedAgainstThePlansClocksOnly) {
  ServerOptions opt;
  opt.zeus_plan_texts = {"[[1410, 1410, 1170, 1170], [1410, 1410, 1410, 1410]]"};
  opt.zeus_profile_csv = three_clock_profile();
  LocalServer srv(dir.file("s.db"), opt);
  Api api(srv.port());
  const auto job = api.post("/register_job", zeus_job_info(2));
  ASSERT_EQ(job.status, 200) << job.body;
  const std::string id = job.j.get<std::string>();
  auto r = api.post("/register_rank/" + id, {{"rank", 1}, {"dp_rank", 0}, {"pp_rank", 1}, {"tp_rank", 0},
                                             {"available_frequencies", {1410}}});
  EXPECT_EQ(r.status, 200) << r.body;
  r = api.post("/register_rank/" + id, {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0},
                                        {"available_frequencies", {1410}}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "unsupported_clock") << r.body;
  EXPECT_NE(message(r).find(": 1170 MHz (nearest 1410 MHz). "), std::string::npos) << r.body;
  EXPECT_EQ(message(r).find("900 MHz"), std::string::npos) << r.body;
  // The field a Zeus client sent, not Perseus's name for it (session 27's trial); one clock,
  // however often it is listed, is "1 clock".
  EXPECT_NE(message(r).find("field \"available_frequencies\": the job's plans for pp_rank 0"), std::string::npos)
      << r.body;
  EXPECT_EQ(message(r).find("supported_freqs_mhz"), std::string::npos) << r.body;
  r = api.post("/register_rank/" + id, {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0},
                                        {"available_frequencies", {1410, 1410, 1410}}});
  EXPECT_NE(message(r).find("(1410..1410 MHz (1 clock); "), std::string::npos) << r.body;
  r = api.post("/register_rank/" + id, {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0},
                                        {"available_frequencies", {1410, "x"}}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(message(r).find("field \"available_frequencies[1]\" must be an integer"), std::string::npos) << r.body;
  EXPECT_EQ(message(r).find("supported_freqs_mhz"), std::string::npos) << r.body;
}

// A Zeus job served without --zeus-profile has plans without times (session 32's trial): a
// pipeline's measured_over_planned is unknown (null), not its measured seconds, and a detected
// straggler is recorded as not acted on (no plan meets any T'), instead of nothing at all.
TEST_F(RequestChecks, WithoutPlanTimesTheRatioIsUnknownAndADetectionIsRecordedAsNotActedOn) {
  ServerOptions opt;
  opt.zeus_plan_texts = {"[[1410, 1410], [1200, 1200]]"};  // pp 2, 1 microbatch
  LocalServer srv(dir.file("s.db"), opt);
  Api api(srv.port());
  json info = zeus_job_info(2);
  info["dp_degree"] = 2;
  info["world_size"] = 4;
  const auto job = api.post("/register_job", info);
  ASSERT_EQ(job.status, 200) << job.body;
  const std::string id = job.j.get<std::string>(), base = "/v1/jobs/" + id;
  for (int r = 0; r < 4; ++r)  // rank = dp_rank * 2 + pp_rank
    ASSERT_EQ(api.post("/register_rank/" + id, {{"rank", r}, {"dp_rank", r / 2}, {"pp_rank", r % 2}, {"tp_rank", 0}}).status, 200);
  for (int it = 0; it < 12; ++it)
    for (int r = 0; r < 4; ++r) {
      const auto m = api.post(base + "/ranks/" + std::to_string(r) + "/measurements",
                              {{"iteration", it}, {"time_s", r < 2 ? 1.0 : 1.5}, {"plan_version", 1}});
      ASSERT_EQ(m.status, 202) << m.body;
    }
  const json got = api.get(base).j;
  const json& loop = got["straggler_loop"]["pipelines"];
  ASSERT_EQ(loop.size(), 2u) << got.dump();
  EXPECT_TRUE(got["pipelines"][1]["iteration_time_s"].is_null()) << got.dump();
  for (int d = 0; d < 2; ++d) {
    EXPECT_TRUE(loop[d].contains("measured_over_planned")) << loop.dump();
    EXPECT_TRUE(loop[d]["measured_over_planned"].is_null()) << loop.dump();
  }
  EXPECT_DOUBLE_EQ(loop[1]["median_iteration_time_s"].get<double>(), 1.5);
  EXPECT_EQ(got["stragglers"], json::array()) << got.dump();
  const json& ignored = loop[1]["ignored_detection"];
  ASSERT_TRUE(ignored.is_object()) << loop.dump();
  EXPECT_NE(ignored["reason"].get<std::string>().find("the job's plans have no iteration times"), std::string::npos)
      << ignored.dump();
}

// One rank whose iteration counter is far ahead (session 32's trial: a report of iteration
// 1,000,000) no longer makes every later report of its pipeline "too old": the report is
// counted in ignored_reports and a straggler in that pipeline is still detected.
TEST_F(RequestChecks, AFarAheadIterationIsIgnoredAndDetectionGoesOn) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  const std::string base = detecting_job(api);
  ASSERT_FALSE(base.empty());
  auto report = [&](int r, std::int64_t it, double time_s) {
    const auto m = api.post(base + "/ranks/" + std::to_string(r) + "/measurements",
                            {{"iteration", it}, {"time_s", time_s}, {"plan_version", 1}});
    ASSERT_EQ(m.status, 202) << m.body;
  };
  for (int r = 0; r < 4; ++r) report(r, 0, 1.0);
  report(2, 1000000, 1.0);
  for (int r = 0; r < 4; ++r) report(r, 1, r < 2 ? 1.0 : 2.0);
  const json info = api.get(base).j;
  ASSERT_EQ(info["stragglers"].size(), 1u) << info.dump();
  EXPECT_EQ(info["stragglers"][0]["pipeline"], 1);
  EXPECT_EQ(info["stragglers"][0]["origin"], "detected");
  const json& ig = info["straggler_loop"]["pipelines"][1]["ignored_reports"];
  ASSERT_TRUE(ig.is_object()) << info.dump();
  EXPECT_EQ(ig["count"], 1);
  EXPECT_EQ(ig["rank"], 2);
  EXPECT_EQ(ig["iteration"], 1000000);
  EXPECT_EQ(ig["pipeline_iteration"], 0);
  EXPECT_TRUE(info["straggler_loop"]["pipelines"][0]["ignored_reports"].is_null()) << info.dump();
}

// GET /v1/jobs/{id} lists a page of the pipelines (session 32's trial: a job of 65,536
// pipelines answered 22-31 MB and took seconds of an event-loop thread per request).
TEST_F(RequestChecks, AJobsPipelinesAreListedAPageAtATime) {
  LocalServer srv(dir.file("s.db"));
  Api api(srv.port());
  const auto c = api.post("/v1/jobs", two_plan_job(1500));
  ASSERT_EQ(c.status, 201) << c.body;
  const std::string base = "/v1/jobs/" + c.j["job_id"].get<std::string>();
  json got = api.get(base).j;
  EXPECT_EQ(got["pipelines_from"], 0);
  EXPECT_EQ(got["pipelines_total"], 1500);
  EXPECT_EQ(got["pipelines"].size(), 1024u);
  EXPECT_EQ(got["straggler_loop"]["pipelines"].size(), 1024u);
  got = api.get(base + "?pipelines_from=1400").j;
  ASSERT_EQ(got["pipelines"].size(), 100u) << got.dump();
  EXPECT_EQ(got["pipelines"][0]["pipeline"], 1400);
  EXPECT_EQ(got["straggler_loop"]["pipelines"][99]["pipeline"], 1499);
  got = api.get(base + "?pipelines_from=7&pipelines_count=2").j;
  ASSERT_EQ(got["pipelines"].size(), 2u) << got.dump();
  EXPECT_EQ(got["pipelines"][1]["pipeline"], 8);
  EXPECT_EQ(api.get(base + "?pipelines_from=1500").j["pipelines"], json::array());
  for (const auto& [query, needle] : std::vector<std::pair<std::string, std::string>>{
           {"?pipelines_from=1501", "query parameter \"pipelines_from\" must be in [0, 1500] (the job has 1500 pipelines), got 1501"},
           {"?pipelines_count=0", "query parameter \"pipelines_count\" must be in [1, 1024], got 0"},
           {"?pipelines_count=1025", "must be in [1, 1024], got 1025"},
           {"?pipelines_from=-1", "pipelines_from"},
           {"?pipeline_from=1", "pipeline_from"}}) {
    const auto r = api.get(base + query);
    EXPECT_EQ(r.status, 400) << query << ": " << r.body;
    EXPECT_EQ(r.j["error"]["code"], "invalid_query") << r.body;
    EXPECT_NE(message(r).find(needle), std::string::npos) << query << ": " << r.body;
  }
}

// Zeus settings that cannot work are refused when the server starts, naming the setting, not
// by a 422 to every client at POST /register_job.
TEST_F(RequestChecks, ZeusSettingsThatCannotWorkStopTheStart) {
  auto start_error = [&](const ServerOptions& base) {
    ServerOptions o = base;
    o.db_path = ":memory:";
    o.token = kToken;
    o.port = 0;
    try {
      Server s(o);
      return std::string();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
  };
  ServerOptions o;
  o.zeus_plan_texts = {"[[1410, 1410], [1410, 1410]]"};
  EXPECT_EQ(start_error(o), "");
  o.zeus_schedule = "bogus";
  EXPECT_NE(start_error(o).find("--zeus-schedule: 'bogus' is not a schedule name; expected one of "), std::string::npos)
      << start_error(o);
  // Without --zeus-plan too: the server started and kept the typo (session 27's trial).
  o.zeus_plan_texts.clear();
  EXPECT_NE(start_error(o).find("--zeus-schedule: 'bogus' is not a schedule name; expected one of "), std::string::npos)
      << start_error(o);
  o = {};
  o.zeus_plan_texts = {"[[1410, 1410], [1410]]"};
  o.zeus_plan_names = {"z.py"};
  EXPECT_NE(start_error(o).find("z.py: stage 1 has 1 computations, the schedule has 2"), std::string::npos)
      << start_error(o);
  o = {};
  o.zeus_plan_texts = {"[[1410, 1410], [1410, 1410]]", "[[1410, 1410], [1410, 1410], [1410, 1410]]"};
  EXPECT_NE(start_error(o).find("--zeus-plan (plan 2 of 2): has 3 stage lists, --zeus-plan (plan 1 of 2) has 2"),
            std::string::npos)
      << start_error(o);
  o = {};
  o.zeus_plan_texts = {"[[1410, 1410], [1300, 1300]]"};
  o.zeus_profile_csv = three_clock_profile();
  EXPECT_NE(start_error(o).find("--zeus-plan (plan 1 of 1): plan: 1300 MHz is not in the profile for stage 1"),
            std::string::npos)
      << start_error(o);
}

// What still depends on the client: a pp_degree other than the plans' is the client's mismatch.
TEST_F(RequestChecks, AZeusJobOfAnotherDepthIsRefusedNamingPpDegree) {
  ServerOptions opt;
  opt.zeus_plan_texts = {"[[1410, 1410], [1410, 1410]]"};
  LocalServer srv(dir.file("s.db"), opt);
  Api api(srv.port());
  const auto r = api.post("/register_job", zeus_job_info(4));
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(message(r).find("JobInfo.pp_degree is 4, but this server's --zeus-plan has 2 stage lists"),
            std::string::npos)
      << r.body;
}

// Messages name the range and the value, the limit's option, and every unsupported clock.
TEST_F(RequestChecks, MessagesNameRangesValuesAndLimits) {
  ServerOptions opt;
  opt.max_jobs = 1;
  LocalServer srv(dir.file("s.db"), opt);
  Api api(srv.port());
  json job = two_plan_job(1);
  job["plans"][0]["ranks"][1][2]["freq_mhz"] = 100001;
  auto r = api.post("/v1/jobs", job);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(message(r).find("plans[0]: ranks[1][2]: \"freq_mhz\" (or \"frequency_mhz\") must be an integer in [1, "
                            "100000] MHz, got 100001"),
            std::string::npos)
      << r.body;
  job = two_plan_job(1);
  job["pp"] = 1024;
  job["dp"] = 1024;
  job["tp"] = 2;
  r = api.post("/v1/jobs", job);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(message(r).find("pp*dp*tp must be at most 1048576, got 1024*1024*2 = 2097152"), std::string::npos) << r.body;

  const auto c = api.post("/v1/jobs", profile_job(1, 8));
  ASSERT_EQ(c.status, 201) << c.body;
  r = api.post("/v1/jobs", two_plan_job(1));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(message(r).find("the server holds 1 jobs, its limit (--max-jobs 1)"), std::string::npos) << r.body;

  // The bundled profile has 38 clocks per stage (1410 down to 855 MHz): 36 of them unsupported
  // (1395 MHz is within the 15 MHz tolerance); the message lists the lowest 5 and counts the rest.
  const std::string base = "/v1/jobs/" + c.j["job_id"].get<std::string>();
  r = api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0},
                                 {"supported_freqs_mhz", {1410}}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(message(r).find("915 MHz (nearest 1410 MHz), and 31 more."), std::string::npos) << r.body;

  // A report refused alone counts as a rejection, as an item of a batch does.
  ASSERT_EQ(api.post(base + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}}).status, 201);
  const double before = metric_value(api, "perseus_measurements_rejected_total");
  EXPECT_EQ(api.post(base + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", 0}}).status, 422);
  EXPECT_EQ(api.post(base + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", 1}, {"plan_version", 99}}).status,
            422);
  EXPECT_EQ(metric_value(api, "perseus_measurements_rejected_total"), before + 2);
}

}  // namespace
}  // namespace perseus::server::testing
