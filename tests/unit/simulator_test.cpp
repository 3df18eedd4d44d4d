// Discrete-event simulator: hand-checked timelines, perturbations, and exact agreement with the
// planner for every frontier plan.
#include "perseus/simulator.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

// F 1000 MHz (1 s, 10 J), 500 MHz (2 s, 8 J); B 1000 (2 s, 20 J), 500 (4 s, 16 J), both stages.
Profile uniform() {
  return testing::uniform_profile(2, {{1000, 1.0, 10.0}, {500, 2.0, 8.0}}, {{1000, 2.0, 20.0}, {500, 4.0, 16.0}});
}

TEST(Simulator, AllMaxTimelinesByHand) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  const FrequencyPlan plan = all_max_plan(dag, uniform(), 1.0);
  const SimulationResult r = simulate(dag, plan, 1.0);
  // Rank 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]; rank 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7].
  EXPECT_EQ(r.time_s, 9.0);
  ASSERT_EQ(r.ranks.size(), 2u);
  ASSERT_EQ(r.ranks[0].idle.size(), 2u);
  EXPECT_EQ(r.ranks[0].idle[0].start_s, 2.0);
  EXPECT_EQ(r.ranks[0].idle[0].end_s, 4.0);
  EXPECT_EQ(r.ranks[0].idle[1].start_s, 6.0);
  EXPECT_EQ(r.ranks[0].idle[1].end_s, 7.0);
  ASSERT_EQ(r.ranks[1].idle.size(), 2u);
  EXPECT_EQ(r.ranks[1].idle[0].end_s, 1.0);
  EXPECT_EQ(r.ranks[1].idle[1].start_s, 7.0);
  EXPECT_EQ(r.ranks[1].busy.size(), 4u);
  EXPECT_EQ(r.ranks[1].busy[2].start_s, 4.0);
  EXPECT_EQ(r.ranks[0].idle_s, 3.0);
  EXPECT_EQ(r.compute_energy_j, 120.0);
  EXPECT_EQ(r.blocking_energy_j, 6.0);
  EXPECT_EQ(r.events, 8u);
}

TEST(Simulator, SwitchLatencyByHand) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  std::vector<int> f(dag.num_ops(), 1000);
  f[dag.find({0, 1, InstructionKind::kForward})] = 500;
  const FrequencyPlan plan = evaluate_plan(dag, uniform(), f, 1.0);
  EXPECT_EQ(simulate(dag, plan, 1.0).time_s, 9.0);
  SimulationOptions o;
  o.switch_latency_s = 1.5;
  // Rank 0: F1 starts 1 + 1.5, ends 4.5; B0 waits for the switch back: 6..8; B1 8..10.
  const SimulationResult r = simulate(dag, plan, 1.0, o);
  EXPECT_EQ(r.start_s[dag.find({0, 1, InstructionKind::kForward})], 2.5);
  EXPECT_EQ(r.start_s[dag.find({0, 0, InstructionKind::kBackward})], 6.0);
  EXPECT_EQ(r.time_s, 10.0);
  EXPECT_EQ(r.compute_energy_j, plan.compute_energy_j);
}

TEST(Simulator, SlowedGpuByHand) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  const FrequencyPlan plan = all_max_plan(dag, uniform(), 1.0);
  SimulationOptions o;
  o.slow_rank = 1;
  o.slow_factor = 2.0;
  const SimulationResult r = simulate(dag, plan, 1.0, o);
  EXPECT_EQ(r.time_s, 15.0);
  EXPECT_EQ(r.compute_energy_j, 180.0);
  EXPECT_EQ(r.blocking_energy_j, 12.0);  // idle 9 (rank 0) + 3 (rank 1)
}

TEST(Simulator, JitterIsSeededAndBounded) {
  const Dag dag = Dag::build(make_1f1b(4, 8));
  const FrequencyPlan plan =
      all_max_plan(dag, testing::uniform_profile(4, {{1000, 1.0, 10.0}}, {{1000, 2.0, 20.0}}), 1.0);
  SimulationOptions o;
  o.jitter = 0.1;
  o.seed = 42;
  const SimulationResult a = simulate(dag, plan, 1.0, o);
  const SimulationResult b = simulate(dag, plan, 1.0, o);
  EXPECT_EQ(a.time_s, b.time_s);
  EXPECT_EQ(a.duration_s, b.duration_s);
  o.seed = 43;
  const SimulationResult c = simulate(dag, plan, 1.0, o);
  EXPECT_NE(a.duration_s, c.duration_s);
  for (int i = 0; i < dag.num_ops(); ++i) {
    EXPECT_GE(a.duration_s[i], 0.9 * plan.time_s[i]);
    EXPECT_LT(a.duration_s[i], 1.1 * plan.time_s[i]);
  }
  EXPECT_GT(a.time_s, 0.9 * plan.timeline.time_s);
  EXPECT_LT(a.time_s, 1.1 * plan.timeline.time_s);
}

TEST(Simulator, BadOptions) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  const FrequencyPlan plan = all_max_plan(dag, uniform(), 1.0);
  auto expect_msg = [&](SimulationOptions o, const std::string& what) {
    try {
      simulate(dag, plan, 1.0, o);
      FAIL() << what;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  SimulationOptions o;
  o.jitter = 1.0;
  expect_msg(o, "jitter must be in [0, 1)");
  o = {};
  o.switch_latency_s = -1;
  expect_msg(o, "frequency-switch latency must be >= 0 s");
  o = {};
  o.slow_rank = 2;
  expect_msg(o, "slowed GPU 2 does not exist (ranks 0..1)");
  o = {};
  o.slow_rank = 0;
  o.slow_factor = 0;
  expect_msg(o, "slow factor must be > 0");
  FrequencyPlan bad = plan;
  bad.time_s.pop_back();
  EXPECT_THROW(simulate(dag, bad, 1.0), std::invalid_argument);
}

// The planner's (T, E) and the simulator's agree bit for bit for every frontier plan.
TEST(Simulator, AgreesWithPlannerOnEveryFrontierPlan) {
  const Profile prof = load_profile_csv(testing::test_data("emulation/stage_profile_gpt3-175b_a100_sxm.csv"), 8);
  const Dag dag = Dag::build(make_1f1b(8, 12));
  PlannerOptions opt;
  opt.p_block_w = 83.64;
  opt.unit_time_s = 0.001;
  const Frontier frontier = solve_frontier(dag, prof, opt);
  ASSERT_GT(frontier.size(), 100u);
  std::vector<std::size_t> all(frontier.size());
  std::iota(all.begin(), all.end(), 0);
  std::size_t checked = 0;
  frontier.for_each_plan(all, [&](std::size_t i, const FrequencyPlan& plan) {
    const SimulationResult r = simulate(dag, plan, 83.64);
    ASSERT_EQ(r.time_s, plan.timeline.time_s) << "plan " << i;
    ASSERT_EQ(r.energy_j(), plan.total_energy_j()) << "plan " << i;
    ASSERT_EQ(r.start_s, plan.timeline.start_s) << "plan " << i;
    ASSERT_DOUBLE_EQ(r.time_s, frontier.points()[i].time_s) << "plan " << i;
    ASSERT_DOUBLE_EQ(r.energy_j(), frontier.points()[i].energy_j) << "plan " << i;
    ++checked;
  });
  EXPECT_EQ(checked, frontier.size());
}

}  // namespace
}  // namespace perseus
