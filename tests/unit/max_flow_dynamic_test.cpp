// The dynamic max-flow engine (private, src/planner/max_flow_dynamic.hpp, --min-cut-engine
// dynamic): after any sequence of capacity changes its minimal min cut and cut value must
// equal a cold solve's (our Dinic and Boost.Graph's Boykov–Kolmogorov), and the planner's
// frontier must equal the warm engine's.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../src/planner/critical_network.hpp"
#include "../../src/planner/critical_path.hpp"
#include "../../src/planner/max_flow_dynamic.hpp"
#include "../../src/planner/min_cut.hpp"
#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"
#include "test_util.hpp"

namespace perseus::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-9, kEpsAugment = 1e-15;

/// Solves the network cold with `engine` and checks the dynamic engine against it: same
/// minimal source side, and the dynamic side's cut value equals the cold maximum flow.
/// Capacities are integers or +inf (exact in double, so the minimal min cut is unambiguous).
void expect_same_as_cold(DynamicMaxFlow& dyn, int n, const std::vector<std::pair<int, int>>& arcs,
                         const std::vector<double>& cap, int s, int t, MinCutEngine engine, const std::string& where) {
  double total = 0;
  for (double c : cap)
    if (c != kInf) total += c;
  const double big = 2 * total + 1;
  std::vector<FlowArc> cold_arcs;
  for (std::size_t k = 0; k < arcs.size(); ++k)
    cold_arcs.push_back({arcs[k].first, arcs[k].second, cap[k] == kInf ? big : cap[k]});
  MinCut cold;
  cold.set_engine(engine);
  double value = 0;
  const std::vector<char> in_s = cold.solve(n, cold_arcs, s, t, kEps, &value);
  const bool infinite = value >= big * 0.5;
  const bool finite = dyn.maximize(kEps, kEpsAugment);
  ASSERT_EQ(finite, !infinite) << where;
  if (infinite) return;
  double cut = 0;
  for (std::size_t k = 0; k < arcs.size(); ++k)
    if (dyn.in_source_side(arcs[k].first) && !dyn.in_source_side(arcs[k].second)) cut += cap[k];
  EXPECT_EQ(cut, value) << where;
  for (int v = 0; v < n; ++v) ASSERT_EQ(dyn.in_source_side(v), in_s[v] != 0) << where << " node " << v;
}

TEST(DynamicMaxFlow, InfinitePathIsReportedAndTheNextSolveWorks) {
  // s = 0, a = 1, t = 2: s -> a -> t.
  DynamicMaxFlow f;
  f.init(3, {{0, 1}, {1, 2}}, 0, 2);
  f.set_capacity(0, kInf);
  f.set_capacity(1, kInf);
  EXPECT_FALSE(f.maximize(kEps, kEpsAugment));
  f.set_capacity(1, 3.0);
  ASSERT_TRUE(f.maximize(kEps, kEpsAugment));
  EXPECT_TRUE(f.in_source_side(1));  // a -> t saturated, s -> a not
  EXPECT_FALSE(f.in_source_side(2));
  // s = 0, a = 1, b = 2, t = 3: s -> a -> b -> t, the infinite path through an n-link.
  DynamicMaxFlow g;
  g.init(4, {{0, 1}, {1, 2}, {2, 3}}, 0, 3);
  g.set_capacity(0, kInf);
  g.set_capacity(1, 2.0);
  g.set_capacity(2, kInf);
  ASSERT_TRUE(g.maximize(kEps, kEpsAugment));
  EXPECT_TRUE(g.in_source_side(1));
  EXPECT_FALSE(g.in_source_side(2));
  g.set_capacity(1, kInf);
  EXPECT_FALSE(g.maximize(kEps, kEpsAugment));
  g.set_capacity(1, 1.0);
  ASSERT_TRUE(g.maximize(kEps, kEpsAugment));
  EXPECT_TRUE(g.in_source_side(1));
  EXPECT_FALSE(g.in_source_side(2));
}

TEST(DynamicMaxFlow, BadStructureIsRefused) {
  DynamicMaxFlow f;
  EXPECT_THROW(f.init(3, {{0, 2}}, 0, 2), std::invalid_argument);  // s -> t
  EXPECT_THROW(f.init(3, {{1, 0}}, 0, 2), std::invalid_argument);  // into s
  EXPECT_THROW(f.init(3, {{2, 1}}, 0, 2), std::invalid_argument);  // out of t
}

// Random networks with cycles, several t-links per node in both directions (like the
// planner's node weights), small integer capacities (many tied min cuts), +inf n-links; each
// round raises, lowers or zeroes a quarter of the arcs.
TEST(DynamicMaxFlow, MatchesColdEnginesAfterRandomCapacityChanges) {
  std::mt19937 rng(11);
  for (MinCutEngine engine : {MinCutEngine::kDinic, MinCutEngine::kBoykovKolmogorov}) {
    for (int trial = 0; trial < 25; ++trial) {
      const int inner = 6 + static_cast<int>(rng() % 20), n = inner + 2, s = inner, t = inner + 1;
      std::vector<std::pair<int, int>> arcs;
      for (int x = 0; x < inner; ++x) {
        const int links = static_cast<int>(rng() % 4);  // 0..3 t-links, either direction
        for (int i = 0; i < links; ++i) arcs.emplace_back(rng() % 2 ? std::pair{s, x} : std::pair{x, t});
      }
      const int nlinks = inner * (1 + static_cast<int>(rng() % 3));
      for (int i = 0; i < nlinks; ++i) {
        const int u = static_cast<int>(rng() % inner), v = static_cast<int>(rng() % inner);
        if (u != v) arcs.emplace_back(u, v);
      }
      DynamicMaxFlow dyn;
      dyn.init(n, arcs, s, t);
      std::vector<double> cap(arcs.size(), 0.0);
      for (int round = 0; round < 40; ++round) {
        for (std::size_t k = 0; k < arcs.size(); ++k) {
          if (round > 0 && rng() % 4 != 0) continue;
          const bool nlink = arcs[k].first != s && arcs[k].second != t;
          const int r = static_cast<int>(rng() % 9);
          cap[k] = r == 0 ? 0.0 : (r == 8 && nlink ? kInf : static_cast<double>(r % 4));
          dyn.set_capacity(static_cast<int>(k), cap[k]);
        }
        expect_same_as_cold(dyn, n, arcs, cap, s, t, engine,
                            std::string(to_string(engine)) + " trial " + std::to_string(trial) + " round " +
                                std::to_string(round));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The planner's own network (critical_network.hpp) over a 1F1B DAG, capacities by arc role as
// the walk sets them (+inf only where a role allows it), changed at random step after step.
TEST(DynamicMaxFlow, MatchesColdEnginesOnCriticalNetworks) {
  std::mt19937 rng(5);
  const Dag dag = Dag::build(make_1f1b(3, 4));
  const DagCsr csr(dag);
  const CriticalNetwork net(csr);
  const auto& arcs = net.arcs();
  const int n = net.num_nodes(), s = net.source(), t = net.sink();
  for (MinCutEngine engine : {MinCutEngine::kDinic, MinCutEngine::kBoykovKolmogorov}) {
    DynamicMaxFlow dyn;
    dyn.init(n, arcs, s, t);
    std::vector<double> cap(arcs.size(), 0.0);
    for (int round = 0; round < 300; ++round) {
      const int changes = round == 0 ? static_cast<int>(arcs.size()) : 1 + static_cast<int>(rng() % 8);
      for (int c = 0; c < changes; ++c) {
        const int k = round == 0 ? c : static_cast<int>(rng() % arcs.size());
        const int r = static_cast<int>(rng() % 7);
        double value = 0;
        if (k < kArcRolesPerOp * csr.num_ops) {
          switch (static_cast<ArcRole>(k % kArcRolesPerOp)) {
            case ArcRole::kSpeedUp: value = r == 6 ? kInf : r; break;
            case ArcRole::kFromSource:
            case ArcRole::kToSink: value = r == 6 ? kInf : 0.0; break;
            default: value = r % 4; break;
          }
        } else {
          value = r >= 3 ? kInf : 0.0;  // a DAG edge: critical or not
        }
        cap[k] = value;
        dyn.set_capacity(k, value);
      }
      expect_same_as_cold(dyn, n, arcs, cap, s, t, engine,
                          std::string(to_string(engine)) + " round " + std::to_string(round));
      if (HasFatalFailure()) return;
    }
  }
}

// Residuals between the augmenting threshold and the cut tolerance: the source side must be
// the reachability through residuals > eps (the cut tolerance), not > eps_augment.
TEST(DynamicMaxFlow, SourceSideUsesCutToleranceNotAugmentThreshold) {
  // Nodes: a = 0, b = 1, s = 2, t = 3. Max flow 2 - 1e-12 leaves 1e-12 on s->a and a->b.
  const std::vector<std::pair<int, int>> arcs = {{2, 0}, {0, 3}, {0, 1}, {1, 3}};
  const std::vector<double> caps = {2.0, 1.0, 1.0, 1.0 - 1e-12};
  DynamicMaxFlow dyn;
  dyn.init(4, arcs, 2, 3);
  for (int k = 0; k < 4; ++k) dyn.set_capacity(k, caps[k]);
  for (int solve = 0; solve < 2; ++solve) {  // first solve, then again with nothing changed
    ASSERT_TRUE(dyn.maximize(kEps, kEpsAugment));
    EXPECT_TRUE(dyn.in_source_side(2));
    EXPECT_FALSE(dyn.in_source_side(0)) << "solve " << solve;
    EXPECT_FALSE(dyn.in_source_side(1)) << "solve " << solve;
    EXPECT_FALSE(dyn.in_source_side(3));
  }
  EXPECT_GE(dyn.counters().cut_searches, 1);
  // Raising b->t opens an augmenting path only through the 1e-12 residuals.
  dyn.set_capacity(3, 1.0);
  ASSERT_TRUE(dyn.maximize(kEps, kEpsAugment));
  EXPECT_FALSE(dyn.in_source_side(0));
  EXPECT_FALSE(dyn.in_source_side(1));
}

// The whole planner: --min-cut-engine dynamic gives the warm engine's frontier, bit for bit.
TEST(DynamicMaxFlow, FrontierEqualsTheWarmEngines) {
  const Profile full = load_profile_csv(testing::example("stage_profile_gpt3-175b_a100_sxm.csv"));
  const Dag dag = Dag::build(make_1f1b(full.num_stages(), 6));
  for (PlannerMode mode : {PlannerMode::kGraphCut, PlannerMode::kCertified}) {
    PlannerOptions opt;
    opt.p_block_w = 83.64;
    opt.unit_time_s = 0.001;
    opt.mode = mode;
    opt.min_cut_engine = MinCutEngine::kWarm;
    const Frontier warm = solve_frontier(dag, full, opt);
    opt.min_cut_engine = MinCutEngine::kDynamic;
    const Frontier dyn = solve_frontier(dag, full, opt);
    ASSERT_GT(warm.size(), 20u);
    ASSERT_EQ(dyn.size(), warm.size());
    EXPECT_EQ(dyn.num_steps, warm.num_steps);
    EXPECT_EQ(dyn.num_max_flows, warm.num_max_flows);
    for (std::size_t i = 0; i < warm.size(); ++i) {
      EXPECT_EQ(dyn.points()[i].time_s, warm.points()[i].time_s) << i;
      EXPECT_EQ(dyn.points()[i].energy_j, warm.points()[i].energy_j) << i;
      EXPECT_EQ(dyn.points()[i].step, warm.points()[i].step) << i;
    }
    EXPECT_GT(dyn.max_flow_work.grown_nodes, 0);
    EXPECT_EQ(dyn.max_flow_work.dinic_phases, 0);
  }
}

}  // namespace
}  // namespace perseus::detail
