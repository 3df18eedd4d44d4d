// The planner's flow engines (private, src/): the warm-started max-flow must give the same
// minimal min cut as a cold solve after any sequence of capacity changes.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "../../src/planner/max_flow_warm.hpp"
#include "../../src/planner/min_cut.hpp"

namespace perseus::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(MinCut, HandCheckedNetwork) {
  // s=0 -> 1 (3), s -> 2 (2), 1 -> 2 (1), 1 -> t=3 (2), 2 -> t (3). Max flow 5; the minimal
  // source side is {s}: both source arcs are saturated.
  MinCut mc;
  double value = 0;
  const auto& in_s = mc.solve(4, {{0, 1, 3}, {0, 2, 2}, {1, 2, 1}, {1, 3, 2}, {2, 3, 3}}, 0, 3, 1e-9, &value);
  EXPECT_DOUBLE_EQ(value, 5.0);
  EXPECT_EQ(std::vector<char>(in_s.begin(), in_s.end()), (std::vector<char>{1, 0, 0, 0}));
}

TEST(WarmMaxFlow, InfinitePathIsReported) {
  WarmMaxFlow f;
  f.init(3, {{0, 1}, {1, 2}}, 0, 2);
  f.set_capacity(0, kInf);
  f.set_capacity(1, kInf);
  EXPECT_FALSE(f.maximize(1e-9, 1e-15));
}

// Random layered DAGs with integer capacities (exact in double, so the minimal min cut is
// unambiguous): after each round of random capacity changes, warm == cold.
TEST(WarmMaxFlow, MatchesColdSolveAfterCapacityChanges) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int layers = 4, width = 5, n = layers * width + 2, s = n - 2, t = n - 1;
    std::vector<std::pair<int, int>> arcs;
    for (int x = 0; x < width; ++x) arcs.emplace_back(s, x), arcs.emplace_back((layers - 1) * width + x, t);
    for (int l = 0; l + 1 < layers; ++l)
      for (int x = 0; x < width; ++x)
        for (int y = 0; y < width; ++y)
          if (rng() % 3 == 0) arcs.emplace_back(l * width + x, (l + 1) * width + y);
    WarmMaxFlow warm;
    warm.init(n, arcs, s, t);
    std::vector<double> cap(arcs.size(), 0.0);
    for (int round = 0; round < 30; ++round) {
      for (std::size_t k = 0; k < arcs.size(); ++k) {
        if (round == 0 || rng() % 4 == 0) {
          const int r = static_cast<int>(rng() % 12);
          cap[k] = r == 0 ? 0.0 : (r == 11 && arcs[k].first != s ? kInf : static_cast<double>(r));
          warm.set_capacity(static_cast<int>(k), cap[k]);
        }
      }
      std::vector<FlowArc> cold_arcs;
      double total = 0;
      for (std::size_t k = 0; k < arcs.size(); ++k)
        if (cap[k] != kInf) total += cap[k];
      for (std::size_t k = 0; k < arcs.size(); ++k)
        cold_arcs.push_back({arcs[k].first, arcs[k].second, cap[k] == kInf ? 2 * total + 1 : cap[k]});
      MinCut cold;
      double value = 0;
      const auto& in_s = cold.solve(n, cold_arcs, s, t, 1e-9, &value);
      ASSERT_TRUE(warm.maximize(1e-9, 1e-15)) << "trial " << trial << " round " << round;
      for (int v = 0; v < n; ++v) {
        ASSERT_EQ(warm.in_source_side(v), in_s[v] != 0) << "trial " << trial << " round " << round << " node " << v;
      }
    }
  }
}

// Residuals between the augmenting threshold and the cut tolerance: the source side must be
// the reachability through residuals > eps (the cut tolerance), not > eps_augment.
TEST(WarmMaxFlow, SourceSideUsesCutToleranceNotAugmentThreshold) {
  // Nodes: a = 0, b = 1, s = 2, t = 3. Max flow 2 - 1e-12 leaves 1e-12 on s->a and a->b.
  const std::vector<std::pair<int, int>> arcs = {{2, 0}, {0, 3}, {0, 1}, {1, 3}};
  const std::vector<double> caps = {2.0, 1.0, 1.0, 1.0 - 1e-12};
  WarmMaxFlow warm;
  warm.init(4, arcs, 2, 3);
  for (int k = 0; k < 4; ++k) warm.set_capacity(k, caps[k]);
  for (int solve = 0; solve < 2; ++solve) {  // cold start, then warm (nothing changed)
    ASSERT_TRUE(warm.maximize(1e-9, 1e-15));
    EXPECT_TRUE(warm.in_source_side(2));
    EXPECT_FALSE(warm.in_source_side(0)) << "solve " << solve;
    EXPECT_FALSE(warm.in_source_side(1)) << "solve " << solve;
    EXPECT_FALSE(warm.in_source_side(3));
  }
  // Raising b->t opens an augmenting path only through the 1e-12 residuals; the warm solve
  // must use it (threshold 1e-15) and then still report the eps-level source side.
  warm.set_capacity(3, 1.0);
  ASSERT_TRUE(warm.maximize(1e-9, 1e-15));
  EXPECT_FALSE(warm.in_source_side(0));
  std::vector<FlowArc> cold_arcs;
  for (int k = 0; k < 4; ++k) cold_arcs.push_back({arcs[k].first, arcs[k].second, k == 3 ? 1.0 : caps[k]});
  MinCut cold;
  double value = 0;
  const auto& in_s = cold.solve(4, cold_arcs, 2, 3, 1e-9, &value);
  for (int v = 0; v < 4; ++v) EXPECT_EQ(warm.in_source_side(v), in_s[v] != 0) << v;
}

}  // namespace
}  // namespace perseus::detail
