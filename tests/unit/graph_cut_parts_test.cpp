// The parts of the graph-cut planner (private, src/planner/): the cost model, the critical
// network's one description, the cut-solver facade (same cut and status from every engine)
// and the walk, on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "../../src/planner/cost_model.hpp"
#include "../../src/planner/critical_network.hpp"
#include "../../src/planner/critical_path.hpp"
#include "../../src/planner/cut_solver.hpp"
#include "../../src/planner/frontier_filter.hpp"
#include "../../src/planner/graph_cut_walk.hpp"
#include "perseus/error.hpp"
#include "perseus/schedule.hpp"

namespace perseus::detail {
namespace {

constexpr MinCutEngine kEngines[] = {MinCutEngine::kWarm, MinCutEngine::kDinic, MinCutEngine::kLemon,
                                     MinCutEngine::kBoykovKolmogorov, MinCutEngine::kDynamic};

/// One stage, one microbatch: the chain forward -> backward. Both at 1 s / 100 J at 1000 MHz,
/// 2 s at 500 MHz: the forward then uses 60 J (speed-up cost 40 J), the backward 90 J (10 J).
struct Chain {
  Dag dag = Dag::build(make_1f1b(1, 1));
  Profile profile;
  int forward = -1, backward = -1;
  Chain() {
    profile.add(0, InstructionKind::kForward, {1000, 1.0, 100.0});
    profile.add(0, InstructionKind::kForward, {500, 2.0, 60.0});
    profile.add(0, InstructionKind::kBackward, {1000, 1.0, 100.0});
    profile.add(0, InstructionKind::kBackward, {500, 2.0, 90.0});
    for (int v = 0; v < dag.num_ops(); ++v) (dag.op(v).kind == InstructionKind::kForward ? forward : backward) = v;
  }
};

TEST(CostModel, QuantizedHullAndUnitCosts) {
  // Times 1, 2, 4 s at unit 1 s; energies 100, 70, 60 J, P_block 0: hull 100 -> 70 -> 60
  // (convex: slopes −30, −5 per unit), interpolated at 3 units: 65 J.
  const std::vector<OperatingPoint> pts = {{1400, 1.0, 100.0}, {1000, 2.0, 70.0}, {600, 4.0, 60.0}};
  const CostModel m = build_cost_model(pts, 1.0, 0.0, false);
  EXPECT_EQ(m.q_min, 1);
  EXPECT_EQ(m.q_max, 4);
  EXPECT_EQ(m.cost, (std::vector<double>{100.0, 70.0, 65.0, 60.0}));
  EXPECT_DOUBLE_EQ(m.speed_up_cost(2), 30.0);
  EXPECT_DOUBLE_EQ(m.slow_down_saving(2), 5.0);
  EXPECT_DOUBLE_EQ(m.slow_down_saving(4), 0.0);  // at the slowest duration
  EXPECT_EQ(m.choice_at(3), 1);                  // 3 units: the 2 s clock (the fastest that fits)
  EXPECT_THROW(build_cost_model(pts, 1e-7, 0.0, false), InputError);  // > 1e6 units apart
}

TEST(CostModels, ProfileMissingAKindIsAnInputError) {
  Chain c;
  Profile forward_only;
  forward_only.add(0, InstructionKind::kForward, {1000, 1.0, 100.0});
  EXPECT_THROW(CostModels(c.dag, forward_only, 1.0, 0.0, false), InputError);
}

TEST(CriticalNetwork, ArcRolesHaveTheirEnds) {
  Chain c;
  const DagCsr csr(c.dag);
  const CriticalNetwork net(csr);
  const int n = c.dag.num_ops(), s = net.source(), t = net.sink();
  EXPECT_EQ(net.num_nodes(), 2 * n + 2);
  const int v = c.forward;
  const int in = CriticalNetwork::start_node(v), out = CriticalNetwork::end_node(v);
  EXPECT_EQ(net.ends(v, ArcRole::kSpeedUp), std::make_pair(in, out));
  EXPECT_EQ(net.ends(v, ArcRole::kFromSource), std::make_pair(s, in));
  EXPECT_EQ(net.ends(v, ArcRole::kToSink), std::make_pair(out, t));
  EXPECT_EQ(net.ends(v, ArcRole::kSlowDownSavingStart), std::make_pair(in, t));
  EXPECT_EQ(net.ends(v, ArcRole::kSlowDownSavingEnd), std::make_pair(s, out));
  EXPECT_EQ(net.ends(v, ArcRole::kSlowDownCostStart), std::make_pair(s, in));
  EXPECT_EQ(net.ends(v, ArcRole::kSlowDownCostEnd), std::make_pair(out, t));
  // The full arc list: every op's roles at arc_index(), then one arc per DAG edge.
  ASSERT_EQ(net.arcs().size(), static_cast<std::size_t>(kArcRolesPerOp * n + c.dag.num_edges()));
  for (int u = 0; u < n; ++u) {
    for (int r = 0; r < kArcRolesPerOp; ++r) {
      const auto role = static_cast<ArcRole>(r);
      EXPECT_EQ(net.arcs()[CriticalNetwork::arc_index(u, role)], net.ends(u, role));
    }
  }
  ASSERT_EQ(net.edge_arcs_end(c.forward) - net.edge_arcs_begin(c.forward), 1);
  EXPECT_EQ(net.arcs()[net.edge_arc_index(c.forward, 0)], CriticalNetwork::edge_ends(c.forward, c.backward));
}

TEST(CriticalOp, CapacitiesByRole) {
  CriticalOp op;
  op.can_speed_up = true;
  op.speed_up_cost = 40;
  op.slow_down_saving = 10;
  op.starts_first = true;
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(op.capacity(ArcRole::kSpeedUp, inf), 30.0);
  EXPECT_EQ(op.capacity(ArcRole::kFromSource, inf), inf);
  EXPECT_EQ(op.capacity(ArcRole::kToSink, inf), 0.0);
  EXPECT_EQ(op.capacity(ArcRole::kSlowDownSavingStart, inf), 10.0);
  EXPECT_EQ(op.capacity(ArcRole::kSlowDownCostEnd, inf), 0.0);
  op.can_speed_up = false;
  EXPECT_EQ(op.capacity(ArcRole::kSpeedUp, 7.0), 7.0);  // at its fastest: "infinite"
  op.slow_down_saving = -3;
  EXPECT_EQ(op.capacity(ArcRole::kSlowDownCostStart, inf), 3.0);
  EXPECT_EQ(op.capacity(ArcRole::kSlowDownSavingEnd, inf), 0.0);
}

TEST(CutSolver, EveryEngineCutsTheCheaperOpOfAChain) {
  Chain c;
  const DagCsr csr(c.dag);
  const CostModels costs(c.dag, c.profile, 1.0, 0.0, false);
  for (MinCutEngine engine : kEngines) {
    SCOPED_TRACE(to_string(engine));
    CriticalPath cpm(csr);
    for (int v = 0; v < c.dag.num_ops(); ++v) cpm.durations()[v] = 2;
    cpm.compute();
    ASSERT_EQ(cpm.iteration_units(), 4);
    auto solver = make_cut_solver(engine, cpm, costs);
    // Both slow: shortening the backward costs 10 J, the forward 40 J.
    CutResult r = solver->find_cut();
    ASSERT_EQ(r.status, CutResult::Status::kSolved);
    EXPECT_EQ(*r.faster, std::vector<int>{c.backward});
    EXPECT_TRUE(r.slower->empty());
    // Same network: the same cut, no max-flow.
    r = solver->find_cut();
    ASSERT_EQ(r.status, CutResult::Status::kReused);
    EXPECT_EQ(*r.faster, std::vector<int>{c.backward});
    // forget_cut(): solved again, same answer.
    solver->forget_cut();
    EXPECT_EQ(solver->find_cut().status, CutResult::Status::kSolved);
    // Backward at its fastest: only the forward can go.
    cpm.durations()[c.backward] = 1;
    cpm.compute();
    r = solver->find_cut();
    ASSERT_EQ(r.status, CutResult::Status::kSolved);
    EXPECT_EQ(*r.faster, std::vector<int>{c.forward});
    // Both at their fastest: every cut crosses an infinite arc.
    cpm.durations()[c.forward] = 1;
    cpm.compute();
    EXPECT_EQ(solver->find_cut().status, CutResult::Status::kInfinite);
  }
}

TEST(GraphCutWalk, ChainWalksFromSlowestToFastest) {
  Chain c;
  const DagCsr csr(c.dag);
  const CostModels costs(c.dag, c.profile, 1.0, 0.0, false);
  for (MinCutEngine engine : kEngines) {
    SCOPED_TRACE(to_string(engine));
    GraphCutWalk walk(csr, costs, engine);
    EXPECT_EQ(walk.iteration_units(), 4);
    EXPECT_EQ(walk.fastest_units(), 2);
    std::vector<std::pair<std::int32_t, std::uint16_t>> changes;
    ASSERT_TRUE(walk.step());
    EXPECT_EQ(walk.iteration_units(), 3);
    ASSERT_TRUE(walk.update_choice(changes));
    EXPECT_EQ(changes, (std::vector<std::pair<std::int32_t, std::uint16_t>>{{c.backward, 0}}));
    ASSERT_TRUE(walk.step());
    EXPECT_EQ(walk.iteration_units(), 2);
    ASSERT_TRUE(walk.update_choice(changes));
    EXPECT_EQ(changes.back(), (std::pair<std::int32_t, std::uint16_t>{c.forward, 0}));
    EXPECT_FALSE(walk.step());  // T_min
    EXPECT_EQ(walk.num_max_flows(), 3);
    EXPECT_EQ(walk.choice(), std::vector<std::uint16_t>(2, 0));
  }
}

/// Synthetic profile (stage-dependent base times, 6 clocks) for a 1F1B pipeline.
Profile synthetic(int stages) {
  Profile p;
  for (int s = 0; s < stages; ++s) {
    for (auto [kind, mult] : {std::pair{InstructionKind::kForward, 1.0}, std::pair{InstructionKind::kBackward, 2.1}}) {
      for (int i = 0; i < 6; ++i) {
        const int f = 1400 - 100 * i;
        const double t = (0.010 + 0.001 * s) * mult * 1400.0 / f;
        p.add(s, kind, {f, t, (60.0 + 200.0 * std::pow(f / 1400.0, 2.5)) * t});
      }
    }
  }
  return p;
}

TEST(GraphCutWalk, EnginesTakeTheSameSteps) {
  const Dag dag = Dag::build(make_1f1b(3, 5));
  const Profile profile = synthetic(3);
  const DagCsr csr(dag);
  const CostModels costs(dag, profile, 1e-4, 40.0, false);
  std::vector<std::vector<std::uint16_t>> reference;
  std::int64_t cold_flows = -1;  // the cold solvers share their reuse test, so their counts agree
  for (MinCutEngine engine : kEngines) {
    SCOPED_TRACE(to_string(engine));
    GraphCutWalk walk(csr, costs, engine);
    std::vector<std::vector<std::uint16_t>> choices;
    std::vector<std::pair<std::int32_t, std::uint16_t>> changes;
    while (walk.step()) {
      walk.update_choice(changes);
      choices.push_back(walk.choice());
    }
    EXPECT_EQ(walk.iteration_units(), walk.fastest_units());
    ASSERT_GT(choices.size(), 10u);
    if (reference.empty()) reference = choices;
    EXPECT_EQ(choices, reference);
    if (engine == MinCutEngine::kWarm || engine == MinCutEngine::kDynamic) continue;  // warm-started: own reuse test
    if (cold_flows < 0) cold_flows = walk.num_max_flows();
    EXPECT_EQ(walk.num_max_flows(), cold_flows);
  }
}

/// A frontier point of time t (s) and energy e (J), for the Pareto filter's tests.
FrontierPoint point(double t, double e) {
  FrontierPoint p;
  p.time_s = t;
  p.energy_j = e;
  return p;
}

// A plan whose time differs from the all-max plan's only by evaluation noise (4e-16 s) and that
// uses less energy replaces it: a partial solve listed both, as two rows of one printed time,
// and reported the costlier one as T_min (session 27's trial). Beyond that noise the all-max
// plan stays the fastest point, as T_min is never slower than it.
TEST(ParetoFilter, APlanWithinTimeNoiseOfTheAllMaxPlanReplacesIt) {
  const double t = 3.8268299999999953;
  std::vector<std::pair<FrontierPoint, bool>> pts = {
      {point(5.5, 38788), false}, {point(t, 43201.6), true}, {point(std::nextafter(t, 4.0), 41402.0), false}};
  auto kept = pareto_filter(pts, 60.0 * 64, kFrontierDominanceRelTol);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].energy_j, 41402.0);
  EXPECT_EQ(kept[1].time_s, 5.5);
  pts[2].first.time_s = t * (1 + 1e-10);  // a genuinely (if slightly) slower plan
  kept = pareto_filter(pts, 60.0 * 64, kFrontierDominanceRelTol);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].energy_j, 43201.6);
  EXPECT_EQ(kept[1].energy_j, 41402.0);
}

// The same holds for any plan that meets the all-max time, not only the all-max plan itself:
// with 3,600 s of overhead per computation (136,803 s iterations) an LP plan at the all-max
// time gave way to one 70 us (5e-10 relative, within kFrontierDominanceRelTol) slower and
// 0.05 J cheaper, and T_min was reported slower than the all-max time (session 31's trial).
TEST(ParetoFilter, APlanAtTheAllMaxTimeIsNotReplacedByASlowerOne) {
  const double t = 136802.8365107651, pipe_w = 83.64 * 8;
  std::vector<std::pair<FrontierPoint, bool>> pts = {{point(t, 91541986.513383), true},
                                                      {point(t, 91541719.376411), false},
                                                      {point(136802.836580387, 91541719.328325), false},
                                                      {point(136802.840685711, 91541707.052929), false}};
  const auto kept = pareto_filter(pts, pipe_w, kFrontierDominanceRelTol);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].time_s, t);  // T_min: the all-max time
  EXPECT_EQ(kept[0].energy_j, 91541719.376411);
  EXPECT_EQ(kept[1].time_s, 136802.836580387);
  // Away from the all-max time the tolerance still merges near-equal times (slowest point).
  for (auto& p : pts) p.second = false;
  EXPECT_EQ(pareto_filter(pts, pipe_w, kFrontierDominanceRelTol).front().time_s, 136802.836580387);
}

// Energies of a few "J" (a profile in kJ): a slower plan 1e-7 J cheaper in E − P_block × R × T
// is not a distinct point at frontier.csv's printed 1e-6 J (session 31's trial: two rows of
// the same printed E − 120 T, against README's "strictly rises as T falls").
TEST(ParetoFilter, ASavingBelowThePrintedResolutionIsNoSaving) {
  const double pipe_w = 120;
  std::vector<std::pair<FrontierPoint, bool>> pts = {{point(0.3285, 6.359055), true},
                                                      {point(0.32885, 6.359055 + 120 * 0.00035 - 1e-7), false}};
  EXPECT_EQ(pareto_filter(pts, pipe_w, kFrontierDominanceRelTol).size(), 1u);
  EXPECT_EQ(pareto_filter(pts, pipe_w).size(), 2u);  // without a tolerance (LP refinement rounds): kept
  pts[1].first.energy_j -= 2e-6;                     // a saving the file shows
  EXPECT_EQ(pareto_filter(pts, pipe_w, kFrontierDominanceRelTol).size(), 2u);
}

}  // namespace
}  // namespace perseus::detail
