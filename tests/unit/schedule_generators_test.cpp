// Interleaved 1F1B and ZB-H1 generators: golden orders, structure, timing and errors.
#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/schedule.hpp"
#include "perseus/schedule_io.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

std::string golden(const std::string& name) {
  const std::string path = std::string(PERSEUS_EXAMPLES_DIR) + "/../tests/golden/schedules/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

using testing::input_error_of;

// Iteration time with every op taking the time given by its kind (and stage scale).
double iteration_time(const Schedule& s, double f, double b, double i, double w) {
  const Dag dag = Dag::build(s);
  std::vector<double> d(dag.num_ops());
  for (int id = 0; id < dag.num_ops(); ++id) {
    switch (dag.op(id).kind) {
      case InstructionKind::kForward:
        d[id] = f;
        break;
      case InstructionKind::kBackward:
        d[id] = b;
        break;
      case InstructionKind::kBackwardInput:
        d[id] = i;
        break;
      case InstructionKind::kBackwardWeight:
        d[id] = w;
        break;
    }
  }
  return compute_timeline(dag, d).time_s;
}

TEST(ScheduleGenerators, InterleavedMatchesMegatronGolden) {
  const Schedule s = make_schedule("interleaved-1f1b", 4, 8, 2);
  EXPECT_EQ(format_schedule_csv(s), golden("interleaved_1f1b_p4_v2_m8.csv"));
}

TEST(ScheduleGenerators, ZbH1MatchesTorchGolden) {
  const Schedule s = make_schedule("zb-h1", 4, 8);
  EXPECT_EQ(format_schedule_csv(s), golden("zb_h1_p4_m8.csv"));
}

TEST(ScheduleGenerators, InterleavedStructure) {
  for (int p : {1, 2, 4, 8}) {
    for (int v : {1, 2, 3}) {
      for (int m : {p, 2 * p, 3 * p}) {
        SCOPED_TRACE(fmt::format("p={} v={} m={}", p, v, m));
        const Schedule s = make_interleaved_1f1b(p, m, v);
        ASSERT_EQ(s.num_ranks(), p);
        ASSERT_EQ(s.num_stages, p * v);
        EXPECT_FALSE(s.split_backward);
        for (int c = 0; c < v; ++c)
          for (int r = 0; r < p; ++r) EXPECT_EQ(s.stage_rank[c * p + r], r);
        for (int r = 0; r < p; ++r) {
          ASSERT_EQ(s.order[r].size(), static_cast<std::size_t>(2 * m * v));
          // Warm-up length: forwards before the first backward.
          const auto first_b = std::find_if(s.order[r].begin(), s.order[r].end(),
                                            [](const Computation& c) { return c.kind == InstructionKind::kBackward; });
          const int warmup = static_cast<int>(first_b - s.order[r].begin());
          const int w = std::min(2 * (p - 1 - r) + (v - 1) * p, m * v);
          EXPECT_EQ(warmup, w < m * v ? w + 1 : w);  // the 1F1B phase starts with a forward
        }
        EXPECT_NO_THROW(Dag::build(s));  // every computation once, no deadlock
      }
    }
  }
}

TEST(ScheduleGenerators, ZbH1Structure) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, p, 2 * p + 1}) {
      SCOPED_TRACE(fmt::format("p={} m={}", p, m));
      const Schedule s = make_zb_h1(p, m);
      const Schedule ref = make_1f1b(p, m);
      ASSERT_TRUE(s.split_backward);
      ASSERT_EQ(s.num_ranks(), p);
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(s.order[r].size(), static_cast<std::size_t>(3 * m));
        // F and I follow 1F1B's F and B order (same activation memory as 1F1B).
        std::vector<Computation> fi;
        int pending = 0, max_pending = 0;
        for (const Computation& c : s.order[r]) {
          if (c.kind == InstructionKind::kBackwardWeight) {
            --pending;
            continue;
          }
          if (c.kind == InstructionKind::kBackwardInput) ++pending;
          max_pending = std::max(max_pending, pending);
          fi.push_back(
              {c.stage, c.microbatch, c.kind == InstructionKind::kBackwardInput ? InstructionKind::kBackward : c.kind});
        }
        EXPECT_EQ(fi, ref.order[r]);
        // Rank r defers at most r weight gradients (r + 1 right after an I, before its W).
        EXPECT_LE(max_pending, std::min(r + 1, m));
      }
      EXPECT_NO_THROW(Dag::build(s));
    }
  }
}

TEST(ScheduleGenerators, FewerBubblesThanOneFOneB) {
  // Uniform stages, t_F = 1, t_B = 2 (t_I = t_W = 1); interleaved chunks take 1/v of that.
  const int p = 4, m = 8;
  const double t_1f1b = iteration_time(make_1f1b(p, m), 1, 2, 0, 0);
  EXPECT_DOUBLE_EQ(t_1f1b, (m + p - 1) * 3.0);  // the textbook (m + p − 1)(t_F + t_B)
  const double t_zb = iteration_time(make_zb_h1(p, m), 1, 0, 1, 1);
  EXPECT_LT(t_zb, t_1f1b);
  EXPECT_DOUBLE_EQ(t_zb, m * 3.0 + (p - 1) * 1.0);  // ZB-H1: bubble (p−1)(t_F + t_I − t_W)
  const double t_il = iteration_time(make_interleaved_1f1b(p, m, 2), 0.5, 1.0, 0, 0);
  EXPECT_LT(t_il, t_1f1b);
  EXPECT_DOUBLE_EQ(t_il, m * 3.0 + (p - 1) * 3.0 / 2);  // bubble shrinks by v (Megatron-LM SC'21 §2.2.2)
}

TEST(ScheduleGenerators, Registered) {
  const auto names = schedule_names();
  for (const char* n : {"1f1b", "gpipe", "interleaved-1f1b", "zb-h1"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  EXPECT_EQ(make_schedule("interleaved-1f1b", 2, 4, 2).num_stages, 4);
  EXPECT_TRUE(make_schedule("zb-h1", 2, 4).split_backward);
}

TEST(ScheduleGenerators, Errors) {
  EXPECT_EQ(input_error_of([] { make_schedule("interleaved-1f1b", 8, 12, 2); }),
            "schedule interleaved-1f1b: microbatches (12) must be a multiple of the pipeline ranks (8), as "
            "Megatron-LM requires for the interleaved schedule; use e.g. 8 or 16 microbatches");
  EXPECT_NE(input_error_of([] { make_schedule("interleaved-1f1b", 4, 2, 2); }).find("use e.g. 4 microbatches"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { make_schedule("interleaved-1f1b", 4, 8, 0); }).find("chunks must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { make_schedule("interleaved-1f1b", 0, 8, 2); }).find("ranks (GPUs) must be >= 1"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { make_schedule("interleaved-1f1b", 4, 0, 2); }).find("microbatches must be >= 1"),
            std::string::npos);
  EXPECT_NE(
      input_error_of([] { make_schedule("zb-h1", 4, 8, 2); }).find("zb-h1: holds one stage per GPU, so chunks must be 1"),
      std::string::npos);
  EXPECT_NE(input_error_of([] { make_zb_h1(0, 8); }).find("zb-h1: stages must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(input_error_of([] { make_zb_h1(4, 0); }).find("zb-h1: microbatches must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(input_error_of([] { make_schedule("zb-v", 4, 8); }).find("interleaved-1f1b, zb-h1"), std::string::npos);
}

}  // namespace
}  // namespace perseus

namespace perseus {
namespace {

// Size cap: (stage, microbatch) pairs, chunks counted as stages, refused before anything is
// built (4 x 1,048,576 was accepted and took 4 GB before).
TEST(ScheduleGenerators, TooLargePipelinesAreRefusedUpFront) {
  for (const auto& [name, ranks, microbatches, chunks] :
       std::vector<std::tuple<std::string, int, int, int>>{{"1f1b", 4, 1048576, 1},
                                                           {"gpipe", 1025, 1024, 1},
                                                           {"interleaved-1f1b", 4, 131076, 2}}) {
    try {
      make_schedule(name, ranks, microbatches, chunks);
      ADD_FAILURE() << name << " " << ranks << " x " << microbatches << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("too large (at most 1048576"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(make_schedule("1f1b", 64, 1024, 1));  // the largest benchmarked pipeline
}

}  // namespace
}  // namespace perseus
