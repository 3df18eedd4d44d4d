// Plan repairs at a deadline (src/planner/plan_improve.hpp). Ruin and recreate escapes a plan no single
// move improves, never returns a worse plan or one that misses the deadline, and is
// deterministic for a seed. tighten() meets any deadline from any plan, also past its rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"
#include "perseus/schedule.hpp"
#include "../../src/planner/plan_improve.hpp"
#include "planner_oracle.hpp"

namespace perseus {
namespace {

Candidates candidates(std::vector<OperatingPoint> pts) { return Candidates{std::move(pts), {}}; }

/// Time (s) of `choice` and its energy (J) at deadline tau (s), GPUs blocking at p_block (W).
std::pair<double, double> time_and_energy_at(const Dag& dag, const std::vector<const Candidates*>& cands,
                                             const std::vector<std::uint16_t>& choice, double p_block, double tau) {
  std::vector<double> times(dag.num_ops());
  double energy = 0;
  for (int i = 0; i < dag.num_ops(); ++i) {
    times[i] = cands[i]->points[choice[i]].time_s;
    energy += cands[i]->points[choice[i]].energy_j;
  }
  const double busy = std::accumulate(times.begin(), times.end(), 0.0);
  return {compute_timeline(dag, times).time_s, energy + p_block * (dag.num_ranks() * tau - busy)};
}

TEST(RuinAndRecreate, MovesTimeToTheOpThatSavesMorePerSecond) {
  // One GPU, F then B, deadline 2 + 1 s. F saves 1 J in its slow second, B saves 4 J. The plan
  // "F slow, B fast" (19 J) has no float, so no single move improves it; ruining both and
  // recreating gives the second to B (16 J).
  const Dag dag = Dag::build(make_1f1b(1, 1));
  const Candidates f = candidates({{1400, 1.0, 10.0}, {1000, 2.0, 9.0}});
  const Candidates b = candidates({{1400, 1.0, 10.0}, {1000, 2.0, 6.0}});
  const int first = dag.topological_order()[0];
  std::vector<const Candidates*> cands(2);
  cands[first] = &f;
  cands[1 - first] = &b;
  const detail::HullVertices hull(cands, 0.0);
  std::vector<std::uint16_t> choice(2);
  choice[first] = 1;
  choice[1 - first] = 0;
  EXPECT_TRUE(detail::ruin_and_recreate(dag, cands, hull, 0.0, 3.0, choice, 8, 8, 4, 1));
  EXPECT_EQ(choice[first], 0);
  EXPECT_EQ(choice[1 - first], 1);
  EXPECT_DOUBLE_EQ(time_and_energy_at(dag, cands, choice, 0.0, 3.0).second, 16.0);
  // Optimal now: another call changes nothing.
  EXPECT_FALSE(detail::ruin_and_recreate(dag, cands, hull, 0.0, 3.0, choice, 8, 8, 4, 2));
}

TEST(RuinAndRecreate, NeverWorseNeverLateAndDeterministic) {
  // Random 3 x 4 pipelines, starting from the all-fastest plan or a slack-filled one, at
  // deadlines from T_min to 1.5 x T_min.
  std::mt19937 rng(5);
  int improved = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const Profile profile = testing::random_profile(3, 6, rng);
    const double p_block = std::uniform_real_distribution<double>(0.0, 100.0)(rng);
    const Dag dag = Dag::build(make_1f1b(3, 4));
    std::vector<Candidates> lists;
    lists.reserve(dag.num_ops());
    for (int i = 0; i < dag.num_ops(); ++i)
      lists.push_back(candidates(pareto_points(profile.points(dag.op(i).stage, dag.op(i).kind), p_block)));
    std::vector<const Candidates*> cands;
    for (const auto& l : lists) cands.push_back(&l);
    const detail::HullVertices hull(cands, p_block);
    const std::vector<std::uint16_t> fastest(dag.num_ops(), 0);
    const double t_min = time_and_energy_at(dag, cands, fastest, p_block, 0).first;
    for (double x : {1.0, 1.02, 1.1, 1.5}) {
      const double tau = t_min * x;
      std::vector<std::uint16_t> start = fastest;
      std::vector<double> scratch, latest;
      if (trial % 2 == 1) detail::fill_slack(dag, cands, start, scratch, latest, tau);
      const double before = time_and_energy_at(dag, cands, start, p_block, tau).second;
      std::vector<std::uint16_t> a = start, b = start;
      const bool changed = detail::ruin_and_recreate(dag, cands, hull, p_block, tau, a, 100, 30, 8, 3);
      detail::ruin_and_recreate(dag, cands, hull, p_block, tau, b, 100, 30, 8, 3);
      EXPECT_EQ(a, b) << "trial " << trial << ": same seed, same plan";
      const auto [t, e] = time_and_energy_at(dag, cands, a, p_block, tau);
      EXPECT_LE(t, tau * (1 + 1e-9)) << "trial " << trial << " x " << x;
      EXPECT_LE(e, before + 1e-9 * before) << "trial " << trial << " x " << x;
      EXPECT_EQ(changed, a != start);
      improved += e < before - 1e-9 * before;
    }
  }
  EXPECT_GT(improved, 20);  // from the all-fastest plan there is nearly always something to gain
}

TEST(Tighten, MeetsTheDeadlineFromTheSlowestPlanPastItsRounds) {
  // 4 x 8 pipelines whose ops have 3 x kTightenRounds clocks 1 % apart: from every op at its
  // slowest clock, the critical-path rounds alone cannot reach deadlines near T_min, so the
  // one-pass finish does. Every result meets its deadline and no op gets slower.
  const Dag dag = Dag::build(make_1f1b(4, 8));
  const int clocks = 3 * detail::kTightenRounds;
  std::mt19937 rng(7);
  std::vector<Candidates> lists(dag.num_ops());
  std::vector<const Candidates*> cands(dag.num_ops());
  std::vector<double> fastest(dag.num_ops());
  for (int i = 0; i < dag.num_ops(); ++i) {
    const double base = std::uniform_real_distribution<double>(1.0, 2.0)(rng);
    for (int k = 0; k < clocks; ++k) lists[i].points.push_back({1410 - 5 * k, base * (1 + 0.01 * k), 100.0 - k});
    cands[i] = &lists[i];
    fastest[i] = base;
  }
  const double t_min = compute_timeline(dag, fastest).time_s;
  for (double factor : {1.0, 1.001, 1.05, 1.5}) {
    std::vector<std::uint16_t> choice(dag.num_ops(), static_cast<std::uint16_t>(clocks - 1));
    const std::vector<std::uint16_t> slowest = choice;
    detail::tighten(dag, cands, choice, factor * t_min);
    EXPECT_LE(time_and_energy_at(dag, cands, choice, 0.0, factor * t_min).first, factor * t_min * (1 + 1e-12))
        << "deadline " << factor << " x T_min";
    for (int i = 0; i < dag.num_ops(); ++i) EXPECT_LE(choice[i], slowest[i]);
    if (factor > 1.0) {
      EXPECT_GT(*std::max_element(choice.begin(), choice.end()), 0) << "some op keeps a slower clock";
    }
  }
}

}  // namespace
}  // namespace perseus
