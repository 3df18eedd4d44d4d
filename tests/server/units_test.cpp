// Unit tests of server pieces: Zeus plan parser, sweep, rate limiter, field access, job spec.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "perseus/error.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/plan_files.hpp"
#include "perseus/problem.hpp"
#include "perseus/quick_plan.hpp"
#include "perseus/server/job_model.hpp"
#include "perseus/server/job_spec.hpp"
#include "perseus/server/rate_limiter.hpp"
#include "perseus/server/sweep.hpp"
#include "perseus/zeus_plan_file.hpp"

namespace perseus::server {
namespace {

using nlohmann::json;

// The quick plan a job is served while its frontier is solved: the all-max iteration time,
// no more energy than all-max, and no better than the frontier's fastest point (which
// includes the all-max plan with its slack reclaimed among its candidates).
TEST(QuickPlan, AllMaxTimeLessEnergyFrontierAtLeastAsGood) {
  JobSpec spec;
  spec.pp = 8;
  spec.microbatches = 4;
  spec.p_block_w = 83.64;
  spec.unit_time_s = 0.01;
  spec.profile_csv = [] {
    std::ifstream in(std::string(PERSEUS_EXAMPLES_DIR) + "/stage_profile_gpt3-175b_a100_sxm.csv");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }();
  const JobModel model = prepare_model(spec);
  const FrequencyPlan all_max = all_max_plan(*model.dag, *model.profile, spec.p_block_w);
  const FrequencyPlan quick = quick_fastest_plan(*model.dag, *model.profile, spec.p_block_w);
  EXPECT_NEAR(quick.timeline.time_s, all_max.timeline.time_s, 1e-9 * all_max.timeline.time_s);
  EXPECT_LT(quick.total_energy_j(), all_max.total_energy_j()) << "1F1B has slack off the critical path";
  const auto frontier = solve_model_frontier(model, spec);
  const auto& fastest = frontier->points().back();
  EXPECT_NEAR(fastest.time_s, quick.timeline.time_s, 1e-6 * quick.timeline.time_s);
  EXPECT_LE(fastest.energy_j, quick.total_energy_j() * (1 + 1e-12));
  // What the server serves is that plan, rendered.
  const auto served = quick_plan(model, spec);
  EXPECT_EQ(served->plan_index, kQuickPlanIndex);
  EXPECT_EQ(served->freq_mhz, quick.freq_mhz);
  EXPECT_DOUBLE_EQ(served->point.energy_j, quick.total_energy_j());
}

TEST(ZeusPlan, ParsesIntegerListsWithComments) {
  const auto p = parse_zeus_plan("[[1410, 1395,], [1200, 1100]]\n# cost change: 1.0\n# total cost: 3\n", "t");
  ASSERT_EQ(p.size(), 2u);
  ASSERT_EQ(p[0].size(), 2u);
  EXPECT_EQ(p[0][1].freq_mhz, 1395);
  EXPECT_FALSE(p[0][0].instruction.has_value());
  EXPECT_EQ(p[1][1].freq_mhz, 1100);
}

TEST(ZeusPlan, ParsesTuplesAndRoundTrips) {
  const auto p = parse_zeus_plan("[[('forward', 1410), (\"backward\", 1200)], [[\"forward\", 900]]]", "t");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(*p[0][1].instruction, "backward");
  EXPECT_EQ(p[1][0].freq_mhz, 900);
  const auto q = parse_zeus_plan(zeus_plan_text(p, "a comment\nover two lines"), "t");
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(*q[0][0].instruction, "forward");
}

TEST(ZeusPlan, RejectsCodeAndGarbage) {
  for (const char* bad : {"__import__('os').system('x')", "[[1410]] + [[1]]", "[[1.5]]", "[[-3]]", "[[0]]",
                          "[[\"forward\"]]", "", "[]", "[[1410]", "[[1e3]]", "[[(\"f\\n\", 1)]]", "[[open('x')]]"}) {
    EXPECT_THROW(parse_zeus_plan(bad, "t"), InputError) << bad;
  }
}

// Errors give the line and column, as the CSV readers (they gave a byte offset); a stage
// without entries is named (it became the job field "microbatches" = 0).
TEST(ZeusPlan, ErrorsNameLineAndColumn) {
  auto error_of = [](const std::string& text) {
    try {
      (void)parse_zeus_plan(text, "p.py");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of("[\n  [(\"forward\", 1410),\n   (\"backward\" 1410)]]"),
            "p.py:3: Zeus plan, column 16: expected ',' between instruction name and frequency");
  EXPECT_EQ(error_of("[[],[]]"),
            "p.py:1: Zeus plan, column 4: a stage has no (instruction, frequency) entries; expected one per "
            "computation it runs");
}

TEST(ZeusPlan, EntryLimit) {
  EXPECT_THROW(parse_zeus_plan("[[1,2,3,4]]", "t", 3), InputError);
}

// The plan files `perseus optimize` writes (plan JSON, Zeus .py) are accepted as they are.
TEST(JobModel, AcceptsThePlanFilesOptimizeWrites) {
  const std::string csv =
      "stage,instruction,frequency,time,energy\n"
      "0,forward,1000,0.010,5\n0,forward,800,0.012,4\n0,backward,1000,0.020,10\n0,backward,800,0.024,8\n"
      "1,forward,1000,0.011,5\n1,forward,800,0.013,4\n1,backward,1000,0.021,10\n1,backward,800,0.025,8\n";
  ProblemSpec ps;
  ps.num_ranks = 2;
  ps.microbatches = 3;
  ps.p_block_w = 10;
  const Problem problem = make_problem(ps, parse_profile_csv(csv, "t"));
  std::vector<int> freq(problem.dag.num_ops(), 1000);
  freq[0] = 800;
  const FrequencyPlan plan = evaluate_plan(problem.dag, problem.profile, freq, ps.p_block_w);

  JobSpec spec;
  spec.pp = 2;
  spec.microbatches = 3;
  spec.p_block_w = 10;
  spec.source = PlanSource::kPlans;
  spec.plans = json::array({json::parse(plan_json_text(problem.dag, plan, 7))});
  JobModel m = prepare_model(spec);
  ASSERT_EQ(m.explicit_plans.size(), 1u);
  EXPECT_EQ(m.explicit_plans[0], freq);
  EXPECT_DOUBLE_EQ(m.points[0].time_s, plan.timeline.time_s);

  spec.source = PlanSource::kZeusPlans;
  spec.plans = nullptr;
  spec.zeus_plans = {zeus_plan_text(problem.dag, plan, 7)};
  m = prepare_model(spec);
  ASSERT_EQ(m.explicit_plans.size(), 1u);
  EXPECT_EQ(m.explicit_plans[0], freq);

  spec.schedule = "/etc/passwd";  // names only: the server never opens a client's path
  try {
    prepare_model(spec);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "schedule");
    EXPECT_EQ(e.phrased(json_field_name), "\"schedule\" \"/etc/passwd\" is not a schedule name");
  }
}

TEST(Sweep, StepsDownAndStopsOnEnergyRises) {
  Sweep s({{1400, 1300, 1200, 1100, 1000, 900, 800, 700, 600}, 2, 2}, {{0, 0}, {0, 1}});
  EXPECT_EQ(s.freq_mhz({0, 0}), 1400);
  // Key (0,0): energy falls, then rises twice -> stops at 1100 after measuring 1100.
  const double e00[] = {10, 9, 9.5, 9.8};
  const double e01[] = {20, 19, 18, 17, 16, 15, 14, 13, 12};
  int f = 0;
  for (int step = 0; step < 4; ++step, ++f) {
    for (int k = 0; k < 2; ++k) {
      const int fr = 1400 - 100 * step;
      s.add_sample({0, 0}, fr, 1.0 + step, e00[step]);
      EXPECT_EQ(s.add_sample({0, 1}, fr, 1.0, e01[step]), k == 1) << step;
    }
  }
  EXPECT_EQ(s.step(), 4);
  EXPECT_EQ(s.freq_mhz({0, 0}), 1400) << "stopped keys run at the top frequency";
  EXPECT_EQ(s.freq_mhz({0, 1}), 1000);
  EXPECT_FALSE(s.done());
  // Samples at a stale frequency are ignored.
  EXPECT_FALSE(s.add_sample({0, 1}, 1100, 1, 1));
  for (int step = 4; step < 9; ++step) {
    const int fr = 1400 - 100 * step;
    s.add_sample({0, 1}, fr, 1.0, e01[step]);
    s.add_sample({0, 1}, fr, 1.0, e01[step]);
  }
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.rows().size(), 4u + 9u);
}

TEST(RateLimiter, TokenBucket) {
  RateLimiter r(10, 5);
  int ok = 0;
  for (int i = 0; i < 20; ++i) ok += r.allow("a", 100.0);
  EXPECT_EQ(ok, 5);
  EXPECT_TRUE(r.allow("b", 100.0));
  EXPECT_TRUE(r.allow("a", 100.2));  // 2 tokens refilled
  RateLimiter off(0, 0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(off.allow("a", 0));
}

TEST(RateLimiter, AClockThatStepsBackRefusesNoMoreThanTheEmptyBucket) {
  // A wall clock stepped back 30 s drained the bucket by 300 tokens: every request from the
  // address was refused with 429 until the clock caught up (fresh-user trial, session 20).
  RateLimiter r(10, 5);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(r.allow("a", 100.0));
  EXPECT_FALSE(r.allow("a", 70.0));  // empty, and no time has passed as far as it can tell
  EXPECT_TRUE(r.allow("a", 70.2));   // 2 tokens refilled since the step
  EXPECT_TRUE(r.allow("a", 70.2));
  EXPECT_FALSE(r.allow("a", 70.2));
}

TEST(ApiFields, TypesAndRanges) {
  const json j = {{"i", 3}, {"f", 2.5}, {"s", "x"}, {"neg", -1}, {"big", 18446744073709551615ull}};
  EXPECT_EQ(get_int(j, "i", std::nullopt, 0, 10), 3);
  EXPECT_EQ(get_int(j, "missing", 7, 0, 10), 7);
  EXPECT_THROW(get_int(j, "f", std::nullopt, 0, 10), ApiError);
  EXPECT_THROW(get_int(j, "s", std::nullopt, 0, 10), ApiError);
  EXPECT_THROW(get_int(j, "neg", std::nullopt, 0, 10), ApiError);
  EXPECT_THROW(get_int(j, "big", std::nullopt, 0, 10), ApiError);
  EXPECT_THROW(get_int(j, "missing", std::nullopt, 0, 10), ApiError);
  EXPECT_DOUBLE_EQ(get_number(j, "i", std::nullopt, 0, 10), 3.0);
  EXPECT_THROW(get_number(j, "s", std::nullopt, 0, 10), ApiError);
  EXPECT_THROW(parse_json_body("{"), ApiError);
  EXPECT_THROW(parse_index("12a", "rank"), ApiError);
  EXPECT_THROW(parse_index("-1", "rank"), ApiError);
  EXPECT_EQ(parse_index("42", "rank"), 42);
  const json e = json::parse(error_body("c", "m"));
  EXPECT_EQ(e["error"]["code"], "c");
}

// A refused value is quoted one way in every message: its JSON text, so a string "8" and the
// number 8 read apart (session 32's trial found '"1.1"', 'true', "8" and '5').
TEST(ApiFields, RefusedValuesAreQuotedAsJson) {
  const json j = {{"s", "1.1"}, {"b", true}, {"n", 5}, {"q", "8"}, {"long", std::string(100, 'x')}, {"u", "\u00e9\n"}};
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const ApiError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message([&] { get_number(j, "s", std::nullopt, 0, 10); }),
            "field \"s\" must be a finite number in [0, 10], got \"1.1\"");
  EXPECT_EQ(message([&] { get_number(j, "b", std::nullopt, 0, 10); }), "field \"b\" must be a finite number in [0, 10], got true");
  EXPECT_EQ(message([&] { get_string(j, "n", std::nullopt, 10); }), "field \"n\" must be a string, got 5");
  EXPECT_EQ(message([&] { get_int(j, "q", std::nullopt, 1, 1024); }), "field \"q\" must be an integer in [1, 1024], got \"8\"");
  EXPECT_EQ(message([&] { get_int(j, "long", std::nullopt, 1, 2); }),
            "field \"long\" must be an integer in [1, 2], got \"" + std::string(63, 'x') + "... (102 bytes)");
  EXPECT_EQ(message([&] { get_int(j, "u", std::nullopt, 1, 2); }), "field \"u\" must be an integer in [1, 2], got \"\\u00e9\\n\"");
}

// A profiling grid's clock listed twice is kept once, in the order given (the spec echoes the
// grid that is swept); [] is the default grid (session 32's trial).
TEST(JobSpec, AProfilingGridKeepsEachClockOnce) {
  const json body = {{"pp", 2}, {"microbatches", 4}, {"mode", "profile"}, {"p2p_power_w", 80.0},
                     {"freqs_mhz", {1410, 1410, 1200, 1410, 900}}};
  EXPECT_EQ(JobSpec::from_json(body).freqs_mhz, (std::vector<int>{1410, 1200, 900}));
  json empty = body;
  empty["freqs_mhz"] = json::array();
  EXPECT_TRUE(JobSpec::from_json(empty).freqs_mhz.empty());
}

TEST(JobSpec, ValidatesAndRoundTrips) {
  json body = {{"pp", 4}, {"dp", 2}, {"microbatches", 8}, {"p2p_power_w", 80.0}, {"profile_csv", "x"}};
  const JobSpec s = JobSpec::from_json(body);
  EXPECT_EQ(s.world_size(), 8);
  EXPECT_EQ(s.source, PlanSource::kProfile);
  const JobSpec t = JobSpec::from_json(s.to_json());
  EXPECT_EQ(t.pp, 4);
  EXPECT_EQ(t.profile_csv, "x");
  EXPECT_THROW(JobSpec::from_json({{"pp", 4}, {"microbatches", 8}}), ApiError);  // no plan source
  EXPECT_THROW(JobSpec::from_json({{"pp", "4"}, {"microbatches", 8}, {"profile_csv", "x"}}), ApiError);
  EXPECT_THROW(JobSpec::from_json({{"pp", 0}, {"microbatches", 8}, {"profile_csv", "x"}}), ApiError);
  EXPECT_THROW(JobSpec::from_json({{"pp", 1024}, {"dp", 65536}, {"microbatches", 8}, {"profile_csv", "x"}}), ApiError);
  EXPECT_THROW(JobSpec::from_json(json::array()), ApiError);
  try {  // P_block is required, as `perseus optimize --p2p-power`
    JobSpec::from_json({{"pp", 4}, {"microbatches", 8}, {"profile_csv", "x"}});
    ADD_FAILURE() << "a job without p2p_power_w was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_NE(std::string(e.what()).find("p2p_power_w"), std::string::npos) << e.what();
  }
  // Issue 19: the timeline overheads default to 0 (the computation-only model), round-trip
  // through the stored JSON, and are refused outside [0, 3600] s naming the field.
  EXPECT_EQ(s.op_overhead_s, 0.0);
  EXPECT_EQ(s.p2p_latency_s, 0.0);
  json with = body;
  with["op_overhead_s"] = 0.004;
  with["p2p_latency_s"] = 0.01;
  with["planning_budget_s"] = 0;  // 0 is allowed: a partial frontier at once (issue 20)
  const JobSpec w = JobSpec::from_json(JobSpec::from_json(with).to_json());
  EXPECT_EQ(w.op_overhead_s, 0.004);
  EXPECT_EQ(w.p2p_latency_s, 0.01);
  EXPECT_EQ(w.planning_budget_s, 0.0);
  EXPECT_EQ(problem_spec(w).overheads.op_overhead_s, 0.004);
  EXPECT_EQ(problem_spec(w).overheads.p2p_latency_s, 0.01);
  const std::vector<std::pair<const char*, json>> bad_values = {
      {"op_overhead_s", -1e-9},     {"op_overhead_s", 3601.0},    {"op_overhead_s", "0.1"},
      {"p2p_latency_s", -1e-9},     {"p2p_latency_s", 3601.0},    {"p2p_latency_s", json::array()},
      {"planning_budget_s", -1e-9}, {"planning_budget_s", 1e9}};
  for (const auto& [key, bad] : bad_values) {
    json b = body;
    b[key] = bad;
    try {
      JobSpec::from_json(b);
      ADD_FAILURE() << key << " = " << bad.dump() << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 422);
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  const JobSpec p = JobSpec::from_json(
      {{"pp", 2}, {"microbatches", 2}, {"p2p_power_w", 80.0}, {"mode", "profile"}, {"freqs_mhz", {1400, 1300}}});
  EXPECT_EQ(p.source, PlanSource::kProfiling);
  EXPECT_EQ(JobSpec::from_json(p.to_json()).freqs_mhz.size(), 2u);
  // The bad element is named.
  try {
    JobSpec::from_json(
        {{"pp", 2}, {"microbatches", 2}, {"p2p_power_w", 80.0}, {"mode", "profile"}, {"freqs_mhz", {1400, 0}}});
    ADD_FAILURE() << "freqs_mhz [1400, 0] was accepted";
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("freqs_mhz[1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(MHz), got 0"), std::string::npos) << e.what();
  }
}

// Profiling-mode settings on a job that plans from a profile (or serves given plans) would be
// ignored silently: refused, naming the field.
TEST(JobSpecFields, ProfilingSettingsOnlyWithModeProfile) {
  const json base = {{"pp", 2}, {"microbatches", 2}, {"p2p_power_w", 80.0}, {"profile_csv", "x"}};
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"freqs_mhz", json::array({1400})}, {"min_freq_mhz", 900}, {"profile_samples", 3}, {"max_energy_rises", 2}}) {
    json b = base;
    b[key] = value;
    try {
      JobSpec::from_json(b);
      ADD_FAILURE() << key << " on a profile_csv job was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 422);
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("mode"), std::string::npos) << e.what();
    }
    b[key] = nullptr;  // null stands for absent
    EXPECT_NO_THROW(JobSpec::from_json(b)) << key;
  }
}

}  // namespace
}  // namespace perseus::server
