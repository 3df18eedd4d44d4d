#include <gtest/gtest.h>

#include <string>

#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/schedule.hpp"

namespace perseus {
namespace {

std::string order_string(const std::vector<Computation>& order) {
  std::string s;
  for (const auto& c : order) s += std::string(1, to_letter(c.kind)) + std::to_string(c.microbatch) + " ";
  return s;
}

TEST(Schedule, OneF1BMatchesDeepSpeedOrder) {
  // PERSEUS_PLANNER.md §3.1: N=8, M=12.
  const Schedule s = make_1f1b(8, 12);
  EXPECT_EQ(order_string(s.order[0]),
            "F0 F1 F2 F3 F4 F5 F6 F7 B0 F8 B1 F9 B2 F10 B3 F11 B4 B5 B6 B7 B8 B9 B10 B11 ");
  EXPECT_EQ(order_string(s.order[7]),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 F8 B8 F9 B9 F10 B10 F11 B11 ");
  for (const auto& o : s.order) EXPECT_EQ(o.size(), 24u);
}

TEST(Schedule, FewerMicrobatchesThanStages) {
  const Schedule s = make_1f1b(4, 2);
  EXPECT_EQ(order_string(s.order[0]), "F0 F1 B0 B1 ");
  EXPECT_EQ(order_string(s.order[3]), "F0 B0 F1 B1 ");
  EXPECT_NO_THROW(Dag::build(s));
}

TEST(Schedule, GPipeAllForwardsThenBackwards) {
  const Schedule s = make_gpipe(2, 3);
  EXPECT_EQ(order_string(s.order[1]), "F0 F1 F2 B0 B1 B2 ");
  EXPECT_NO_THROW(Dag::build(s));
}

TEST(Schedule, BadSizesAndNames) {
  EXPECT_THROW(make_1f1b(0, 4), InputError);
  EXPECT_THROW(make_gpipe(4, 0), InputError);
  try {
    make_schedule("pipedream", 4, 4);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown schedule 'pipedream'"), std::string::npos);
  }
  EXPECT_THROW(make_schedule("1f1b", 4, 4, 2), InputError);
  EXPECT_THROW(make_schedule("1f1b", 2147483647, 2), InputError);  // bounded, not bad_alloc
  EXPECT_THROW(make_1f1b(100000, 100000), InputError);
}

TEST(Dag, SizesAndDependencies) {
  const Dag dag = Dag::build(make_1f1b(8, 12));
  EXPECT_EQ(dag.num_ops(), 2 * 8 * 12);
  // Cross-stage dependencies exist.
  const int f00 = dag.find({0, 0, InstructionKind::kForward});
  const int f10 = dag.find({1, 0, InstructionKind::kForward});
  const int b10 = dag.find({1, 0, InstructionKind::kBackward});
  const int b00 = dag.find({0, 0, InstructionKind::kBackward});
  auto has_edge = [&](int u, int v) {
    for (int w : dag.successors(u))
      if (w == v) return true;
    return false;
  };
  EXPECT_TRUE(has_edge(f00, f10));
  EXPECT_TRUE(has_edge(b10, b00));
  // Topological order respects every edge.
  std::vector<int> pos(dag.num_ops());
  for (std::size_t i = 0; i < dag.topological_order().size(); ++i) pos[dag.topological_order()[i]] = static_cast<int>(i);
  for (int u = 0; u < dag.num_ops(); ++u)
    for (int v : dag.successors(u)) EXPECT_LT(pos[u], pos[v]);
}

TEST(Dag, SingleStage) {
  const Dag dag = Dag::build(make_1f1b(1, 3));
  EXPECT_EQ(dag.num_ops(), 6);
  const Timeline t = compute_timeline(dag, std::vector<double>(6, 1.0));
  EXPECT_DOUBLE_EQ(t.time_s, 6.0);
}

TEST(Dag, LongestPathOfTwoStages) {
  // 2 stages x 2 microbatches, F = 1 s, B = 2 s. 1F1B: stage0 F0 F1 B0 B1, stage1 F0 B0 F1 B1.
  const Dag dag = Dag::build(make_1f1b(2, 2));
  std::vector<double> d(dag.num_ops());
  for (int i = 0; i < dag.num_ops(); ++i) d[i] = dag.op(i).kind == InstructionKind::kForward ? 1.0 : 2.0;
  const Timeline t = compute_timeline(dag, d);
  // F0(0,1) F0'(1,2) B0'(2,4) F1'(4,5)... stage1: F0 1-2, B0 2-4, F1 4-5 (F1 on stage0 1-2), B1 5-7;
  // stage0: B0 4-6, B1 7-9.
  EXPECT_DOUBLE_EQ(t.time_s, 9.0);
  EXPECT_DOUBLE_EQ(t.start_s[dag.find({0, 1, InstructionKind::kBackward})], 7.0);
}

TEST(DagErrors, DeadlockIsReported) {
  Schedule s = make_1f1b(2, 2);
  std::swap(s.order[1][0], s.order[1][1]);  // stage 1: B0 before F0
  try {
    Dag::build(s);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1 waits at 1B0"), std::string::npos) << e.what();
  }
}

TEST(DagErrors, MissingDuplicateAndMisplaced) {
  Schedule s = make_1f1b(2, 2);
  s.order[0].pop_back();
  EXPECT_THROW(
      {
        try {
          Dag::build(s);
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("0B1 is missing"), std::string::npos) << e.what();
          throw;
        }
      },
      InputError);
  s = make_1f1b(2, 2);
  s.order[0].push_back(s.order[0][0]);
  try {
    Dag::build(s);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("more than once"), std::string::npos) << e.what();
  }
  s = make_1f1b(2, 2);
  s.order[0][0].stage = 1;
  try {
    Dag::build(s);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to rank 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace perseus
