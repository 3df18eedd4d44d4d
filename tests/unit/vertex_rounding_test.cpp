// LP rounding to hull vertices (src/planner/plan_improve.hpp): which candidates are hull
// vertices, that a fractional schedule rounded to them never misses its deadline, and that
// whole jumps between vertices beat rounding to a candidate above the hull.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"
#include "perseus/schedule.hpp"
#include "../../src/planner/lower_bound.hpp"
#include "../../src/planner/plan_improve.hpp"
#include "planner_oracle.hpp"

namespace perseus {
namespace {

double effective(const OperatingPoint& p, double p_block_w) { return p.energy_j - p_block_w * p.time_s; }

Candidates candidates(std::vector<OperatingPoint> pts) { return Candidates{std::move(pts), {}}; }

TEST(HullVertices, KeepsExactlyThePointsBelowTheirNeighboursChord) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const double p_block = std::uniform_real_distribution<double>(0.0, 100.0)(rng);
    std::vector<OperatingPoint> raw;
    for (int k = 0; k < 12; ++k) {
      const double t = 0.1 * (1 + 0.1 * k + 0.02 * std::uniform_real_distribution<double>(0, 1)(rng));
      raw.push_back({1500 - 50 * k, t, t * std::uniform_real_distribution<double>(150.0, 300.0)(rng)});
    }
    const Candidates c = candidates(pareto_points(raw, p_block));
    const std::vector<std::uint16_t> hull = detail::hull_vertex_indices(c, p_block);
    ASSERT_FALSE(hull.empty());
    EXPECT_EQ(hull.front(), 0);
    EXPECT_EQ(hull.back(), c.points.size() - 1);  // the slowest Pareto point is the cheapest
    for (std::size_t v = 0; v + 1 < hull.size(); ++v) {
      const auto& a = c.points[hull[v]];
      const auto& b = c.points[hull[v + 1]];
      // Every candidate lies on or above each hull edge's line (the hull is lower and convex).
      for (const auto& p : c.points) {
        const double line = effective(a, p_block) + (effective(b, p_block) - effective(a, p_block)) *
                                                       (p.time_s - a.time_s) / (b.time_s - a.time_s);
        EXPECT_GE(effective(p, p_block), line - 1e-9) << "trial " << trial;
      }
    }
  }
}

TEST(VertexRounding, JumpsBetweenVerticesInsteadOfStoppingAboveTheHull) {
  // One GPU: F then B, each with a candidate at 1.5 s lying 0.5 J above the chord of the
  // others. The LP gives each op 1.5 s (deadline 3 s): rounding to the nearest candidate pays
  // 2 x 0.5 J; rounding to vertices runs F fast and gives B the whole second.
  const Dag dag = Dag::build(make_1f1b(1, 1));
  const Candidates c = candidates({{1400, 1.0, 10.0}, {1200, 1.5, 9.0}, {1000, 2.0, 7.0}});
  const std::vector<const Candidates*> cands(2, &c);
  const detail::HullVertices hull(cands, 0.0);
  ASSERT_EQ(hull.lists.size(), 1u);  // one list shared by both ops
  EXPECT_EQ(*hull.of_op[0], (std::vector<std::uint16_t>{0, 2}));
  const int first = dag.topological_order()[0];
  std::vector<double> start(2), duration(2, 1.5);
  start[first] = 0.0;
  start[1 - first] = 1.5;
  std::vector<std::uint16_t> nearest, vertex;
  std::vector<double> scratch, latest;
  detail::round_lp_schedule(dag, cands, start, duration, nearest);
  detail::fill_slack(dag, cands, nearest, scratch, latest, 3.0);
  EXPECT_EQ(nearest, (std::vector<std::uint16_t>{1, 1}));  // 18 J
  for (const auto start_at : {detail::VertexStart::kLowerVertex, detail::VertexStart::kUpperWhereItFits}) {
    detail::round_to_hull_vertices(dag, cands, hull, 0.0, duration, 3.0, start_at, vertex, scratch, latest);
    // One op fast, the other at the slow vertex (which one is a tie): 10 + 7 = 17 J in 3 s.
    std::sort(vertex.begin(), vertex.end());
    EXPECT_EQ(vertex, (std::vector<std::uint16_t>{0, 2}));
  }
  // From the upper start the op that fits takes the slow vertex in step 1: B (F would end late).
  detail::round_to_hull_vertices(dag, cands, hull, 0.0, duration, 3.0, detail::VertexStart::kUpperWhereItFits, vertex,
                                 scratch, latest);
  EXPECT_EQ(vertex[first], 0);
  EXPECT_EQ(vertex[1 - first], 2);
}

TEST(VertexRounding, LpSchedulesRoundToPlansThatMeetTheDeadline) {
  // Random 3 x 4 pipelines: the LP optimum at deadlines from T_min up, rounded to vertices,
  // never ends later than the deadline and never costs less than the certified bound.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const Profile profile = testing::random_profile(3, 6, rng);
    const double p_block = std::uniform_real_distribution<double>(0.0, 100.0)(rng);
    const Dag dag = Dag::build(make_1f1b(3, 4));
    std::vector<Candidates> lists;
    std::vector<const std::vector<OperatingPoint>*> raw;
    lists.reserve(dag.num_ops());
    for (int i = 0; i < dag.num_ops(); ++i) {
      raw.push_back(&profile.points(dag.op(i).stage, dag.op(i).kind));
      lists.push_back(candidates(pareto_points(*raw.back(), p_block)));
    }
    std::vector<const Candidates*> cands;
    for (const auto& l : lists) cands.push_back(&l);
    const detail::HullVertices hull(cands, p_block);
    detail::HullLowerBound lp(dag, raw, p_block);
    std::vector<double> fastest(dag.num_ops());
    for (int i = 0; i < dag.num_ops(); ++i) fastest[i] = cands[i]->points[0].time_s;
    const double t_min = compute_timeline(dag, fastest).time_s;
    for (double x : {1.0, 1.01, 1.05, 1.2, 1.5}) {
      const double tau = t_min * x;
      const auto sol = lp.solve(tau);
      ASSERT_TRUE(sol.feasible);
      std::vector<std::uint16_t> choice;
      std::vector<double> scratch, latest, times(dag.num_ops());
      for (const auto start_at : {detail::VertexStart::kLowerVertex, detail::VertexStart::kUpperWhereItFits}) {
      detail::round_to_hull_vertices(dag, cands, hull, p_block, sol.duration_s, tau, start_at, choice, scratch, latest);
      double energy = 0;
      for (int i = 0; i < dag.num_ops(); ++i) {
        times[i] = cands[i]->points[choice[i]].time_s;
        energy += cands[i]->points[choice[i]].energy_j;
      }
      const double t = compute_timeline(dag, times).time_s;
      EXPECT_LE(t, tau * (1 + 1e-9)) << "trial " << trial << " x " << x;
      // Energy at τ: computation plus every GPU blocking at P_block whenever it is not computing.
      const double at_deadline = energy + p_block * (dag.num_ranks() * tau - std::accumulate(times.begin(), times.end(), 0.0));
      EXPECT_GE(at_deadline, sol.bound_j - 1e-6) << "trial " << trial << " x " << x;
      }
    }
  }
}

}  // namespace
}  // namespace perseus
