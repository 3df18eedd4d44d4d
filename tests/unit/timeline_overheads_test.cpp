// Timeline overheads (blocking P2P send, per-computation overhead): which computations get them,
// hand-checked timelines, exact planner/simulator agreement, and the unchanged default.
#include "perseus/timeline_overheads.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/plan.hpp"
#include "perseus/problem.hpp"
#include "perseus/simulator.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

using K = InstructionKind;

// F 1000 MHz (1 s, 10 J), 500 MHz (2 s, 8 J); B 1000 (2 s, 20 J), 500 (4 s, 16 J).
Profile uniform(int stages) {
  return testing::uniform_profile(stages, {{1000, 1.0, 10.0}, {500, 2.0, 8.0}}, {{1000, 2.0, 20.0}, {500, 4.0, 16.0}});
}

TEST(TimelineOverheads, SendersGetTheP2pLatency) {
  const TimelineOverheads o{0.5, 0.1};
  const Schedule s = make_1f1b(3, 4);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(s, 0, K::kForward, o), 0.6);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(s, 1, K::kForward, o), 0.6);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(s, 2, K::kForward, o), 0.1);  // last stage: no send
  EXPECT_DOUBLE_EQ(timeline_overhead_s(s, 0, K::kBackward, o), 0.1);  // first stage: no send
  EXPECT_DOUBLE_EQ(timeline_overhead_s(s, 2, K::kBackward, o), 0.6);
  // Split backward: I sends the input gradient, W sends nothing.
  const Schedule zb = make_zb_h1(3, 4);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(zb, 1, K::kBackwardInput, o), 0.6);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(zb, 1, K::kBackwardWeight, o), 0.1);
  // Interleaved: stage 1 (chunk 0 of rank 1) sends forward to stage 2 on rank 0 — another GPU.
  const Schedule il = make_interleaved_1f1b(2, 4, 2);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(il, 1, K::kForward, o), 0.6);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(il, 3, K::kForward, o), 0.1);
  // Two consecutive stages on one GPU: no transfer between them.
  Schedule v = s;
  v.stage_rank = {0, 0, 1};
  EXPECT_DOUBLE_EQ(timeline_overhead_s(v, 0, K::kForward, o), 0.1);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(v, 1, K::kBackward, o), 0.1);
  EXPECT_DOUBLE_EQ(timeline_overhead_s(v, 2, K::kBackward, o), 0.6);
}

TEST(TimelineOverheads, ProfilePointsAreLengthenedAndIdleAtBlockingPower) {
  const Schedule s = make_1f1b(2, 2);
  const Profile p = add_timeline_overheads(uniform(2), s, {0.5, 0.1}, 40.0);
  ASSERT_EQ(p.points(0, K::kForward).size(), 2u);
  EXPECT_DOUBLE_EQ(p.points(0, K::kForward)[0].time_s, 1.6);
  EXPECT_DOUBLE_EQ(p.points(0, K::kForward)[0].energy_j, 10.0 + 40.0 * 0.6);
  EXPECT_DOUBLE_EQ(p.points(0, K::kForward)[1].time_s, 2.6);
  EXPECT_EQ(p.points(0, K::kForward)[1].freq_mhz, 500);
  EXPECT_DOUBLE_EQ(p.points(1, K::kForward)[0].time_s, 1.1);
  EXPECT_DOUBLE_EQ(p.points(1, K::kBackward)[1].energy_j, 16.0 + 40.0 * 0.6);
}

// Zero overheads are the computation-only model: the profile (and so every plan) is unchanged.
TEST(TimelineOverheads, ZeroIsTodaysModel) {
  ProblemSpec spec;
  spec.num_ranks = 2;
  spec.microbatches = 2;
  spec.p_block_w = 40;
  const Problem a = make_problem(spec, uniform(2));
  EXPECT_EQ(format_profile_csv(a.profile), format_profile_csv(uniform(2)));
}

// 2 stages, 2 microbatches, all at 1000 MHz, P2P 0.5 s, 0.1 s per computation:
// s0: F0 [0,1.6] F1 [1.6,3.2]            B0 [5.3,7.4]            B1 [9.0,11.1]
// s1:      F0 [1.6,2.7] B0 [2.7,5.3] F1 [5.3,6.4] B1 [6.4,9.0]
TEST(TimelineOverheads, TwoStageTimelineByHand) {
  ProblemSpec spec;
  spec.num_ranks = 2;
  spec.microbatches = 2;
  spec.p_block_w = 40;
  spec.overheads = {0.5, 0.1};
  const Problem pr = make_problem(spec, uniform(2));
  const FrequencyPlan plan = all_max_plan(pr.dag, pr.profile, spec.p_block_w);
  EXPECT_DOUBLE_EQ(plan.timeline.time_s, 11.1);
  const SimulationResult r = simulate(pr.dag, plan, spec.p_block_w);
  EXPECT_DOUBLE_EQ(r.time_s, 11.1);
  EXPECT_DOUBLE_EQ(r.start_s[pr.dag.find({0, 0, K::kBackward})], 5.3);
  EXPECT_DOUBLE_EQ(r.start_s[pr.dag.find({1, 1, K::kForward})], 5.3);
  // Energy: computations (2×(10+20) per stage) + P_block × (overheads + idle) = P_block × (2T − 12).
  EXPECT_NEAR(r.energy_j(), 120.0 + 40.0 * (2 * 11.1 - 12.0), 1e-9);
  EXPECT_EQ(r.energy_j(), plan.total_energy_j());
}

TEST(TimelineOverheads, BadValuesNameTheField) {
  for (const TimelineOverheads& o : {TimelineOverheads{-1, 0}, TimelineOverheads{0, std::nan("")},
                                     TimelineOverheads{1e9, 0}}) {
    ProblemSpec spec;
    spec.num_ranks = 2;
    spec.microbatches = 2;
    spec.overheads = o;
    try {
      make_problem(spec, uniform(2));
      ADD_FAILURE() << "accepted " << o.p2p_latency_s << ", " << o.op_overhead_s;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(o.p2p_latency_s != 0 ? "p2p_latency_s" : "op_overhead_s"),
                std::string::npos)
          << e.what();
    }
  }
}

// The planner's (T, E) and the simulator's agree bit for bit for every frontier plan of a
// problem with timeline overheads, in both planner modes; and the overheads change the plans.
class OverheadAgreement : public ::testing::TestWithParam<PlannerMode> {};

TEST_P(OverheadAgreement, PlannerAndSimulatorAgree) {
  ProblemSpec spec;
  spec.num_ranks = 4;
  spec.microbatches = 6;
  spec.p_block_w = 83.64;
  spec.overheads = {0.004, 0.002};
  const Profile gpt = load_profile_csv(testing::test_data("emulation/stage_profile_gpt3-175b_a100_sxm.csv"), 8);
  Profile prof;  // the first 4 stages of the 8-stage profile
  for (int s = 0; s < 4; ++s)
    for (K k : {K::kForward, K::kBackward})
      for (const auto& p : gpt.points(s, k)) prof.add(s, k, p);
  const Problem pr = make_problem(spec, prof);
  PlannerOptions opt;
  opt.p_block_w = spec.p_block_w;
  opt.unit_time_s = 0.001;
  opt.mode = GetParam();
  const Frontier frontier = solve_frontier(pr.dag, pr.profile, opt);
  ASSERT_GT(frontier.size(), 10u);
  std::vector<std::size_t> all(frontier.size());
  std::iota(all.begin(), all.end(), 0);
  std::size_t checked = 0;
  frontier.for_each_plan(all, [&](std::size_t i, const FrequencyPlan& plan) {
    const SimulationResult r = simulate(pr.dag, plan, spec.p_block_w);
    ASSERT_EQ(r.time_s, plan.timeline.time_s) << "plan " << i;
    ASSERT_EQ(r.energy_j(), plan.total_energy_j()) << "plan " << i;
    ASSERT_DOUBLE_EQ(r.time_s, frontier.points()[i].time_s) << "plan " << i;
    ASSERT_DOUBLE_EQ(r.energy_j(), frontier.points()[i].energy_j) << "plan " << i;
    ++checked;
  });
  EXPECT_EQ(checked, frontier.size());
  // The fastest plan (the last) is all-max on both models; with overheads it is longer by more than the
  // per-computation overhead on one GPU's 2M computations.
  const Dag dag = Dag::build(make_1f1b(4, 6));
  const double t_plain = all_max_plan(dag, prof, spec.p_block_w).timeline.time_s;
  EXPECT_GT(frontier.points().back().time_s, t_plain + 12 * 0.002);
}

INSTANTIATE_TEST_SUITE_P(BothModes, OverheadAgreement, ::testing::Values(PlannerMode::kCertified, PlannerMode::kGraphCut));

}  // namespace
}  // namespace perseus
