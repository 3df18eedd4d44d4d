// Real-framework schedules on the bundled GPT-3 175B profile, and `perseus optimize --schedule`.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/optimize.hpp"
#include "perseus/plan.hpp"
#include "perseus/profile_transform.hpp"
#include "perseus/schedule_io.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

constexpr double kP2pPowerW = 83.64;
const char* kProfile = "stage_profile_gpt3-175b_a100_sxm.csv";

double allmax_time_s(const Schedule& s, const Profile& p) {
  return all_max_plan(Dag::build(s), p, kP2pPowerW).timeline.time_s;
}

TEST(SchedulesGpt3, FewerBubblesThanOneFOneBAtAllMax) {
  const Profile per_gpu = load_profile_csv(testing::example(kProfile), 8);
  const Profile chunks2 = split_profile_into_chunks(per_gpu, 2);
  const Profile split = split_backward_profile(per_gpu, 0.5);
  for (int m : {16, 24}) {
    SCOPED_TRACE(m);
    const double t_1f1b = allmax_time_s(make_1f1b(8, m), per_gpu);
    const double t_zb = allmax_time_s(make_zb_h1(8, m), split);
    const double t_il = allmax_time_s(make_interleaved_1f1b(8, m, 2), chunks2);
    EXPECT_LT(t_zb, t_1f1b);
    EXPECT_LT(t_il, t_1f1b);
    // Total work is the same, so the gain is bubble: 1F1B idles (p−1)(t_F+t_B) ≈ 1 s per rank.
    EXPECT_GT(t_1f1b - t_zb, 0.5);
    EXPECT_GT(t_1f1b - t_il, 0.3);
  }
  EXPECT_LT(allmax_time_s(make_zb_h1(8, 12), split), allmax_time_s(make_1f1b(8, 12), per_gpu));
}

OptimizeConfig small_job(const testing::TempDir& dir, const std::string& schedule) {
  OptimizeConfig c;
  c.profile_path = testing::example(kProfile);
  c.problem.num_ranks = 8;
  c.problem.microbatches = 8;
  c.problem.schedule = schedule;
  c.problem.p_block_w = kP2pPowerW;
  c.unit_time_s = 0.01;
  c.out_dir = (dir.path() / "out").string();
  return c;
}

TEST(SchedulesGpt3, OptimizeRunsOnPerGpuProfile) {
  testing::TempDir dir;
  OptimizeConfig c = small_job(dir, "zb-h1");
  const OptimizeSummary zb = run_optimize(c);
  ASSERT_EQ(zb.approximations.size(), 1u);
  EXPECT_NE(zb.approximations[0].find("backward split 0.5/0.5 into I/W"), std::string::npos);
  EXPECT_LE(zb.energy_at_t_min_j, zb.allmax_energy_j);
  // The order planned is written next to the plans, and re-imports to the same schedule.
  EXPECT_EQ(format_schedule_csv(load_schedule_csv(c.out_dir + "/schedule.csv")), format_schedule_csv(make_zb_h1(8, 8)));

  c.problem.schedule = "interleaved-1f1b";
  c.problem.chunks = 2;
  const OptimizeSummary il = run_optimize(c);
  ASSERT_EQ(il.approximations.size(), 1u);
  EXPECT_NE(il.approximations[0].find("split evenly over 16 chunk stages"), std::string::npos);
  std::ifstream in(c.out_dir + "/summary.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schedule"]["stages"], 16);
  EXPECT_EQ(j["approximations"].size(), 1u);
}

TEST(SchedulesGpt3, OptimizeImportsScheduleFile) {
  testing::TempDir dir;
  const std::string file = (dir.path() / "mine.csv").string();
  write_schedule_csv(make_1f1b(8, 8), file);
  OptimizeConfig c = small_job(dir, file);
  c.problem.num_ranks = 0;  // taken from the file
  c.problem.microbatches = 0;
  const OptimizeSummary from_file = run_optimize(c);
  c.problem.schedule = "1f1b";
  c.problem.num_ranks = 8;
  c.problem.microbatches = 8;
  const OptimizeSummary by_name = run_optimize(c);
  EXPECT_DOUBLE_EQ(from_file.allmax_time_s, by_name.allmax_time_s);
  EXPECT_DOUBLE_EQ(from_file.energy_at_t_min_j, by_name.energy_at_t_min_j);
  EXPECT_TRUE(from_file.approximations.empty());
}

TEST(SchedulesGpt3, OptimizeScheduleErrors) {
  testing::TempDir dir;
  auto msg = [](const OptimizeConfig& c) {
    try {
      run_optimize(c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string file = (dir.path() / "mine.csv").string();
  write_schedule_csv(make_1f1b(4, 8), file);
  OptimizeConfig c = small_job(dir, file);
  EXPECT_EQ(msg(c), "num_ranks 8 does not match schedule file " + file + ", which has 4 ranks (rows)");
  c.problem.num_ranks = 4;
  c.problem.microbatches = 6;
  EXPECT_EQ(msg(c), "microbatches 6 does not match schedule file " + file + ", which has 8 microbatches");
  c.problem.microbatches = 8;
  EXPECT_EQ(msg(c), c.profile_path + ": profile has 8 stages, but schedule '" + file +
                        "' has 4 stages on 4 ranks; give one profile stage per schedule stage, or one per rank (then "
                        "each rank's stage is split evenly over its chunks)");
  c = small_job(dir, "no-such-schedule");
  EXPECT_EQ(msg(c),
            "schedule no-such-schedule: not a schedule name (1f1b, gpipe, interleaved-1f1b, zb-h1) nor an existing "
            "schedule CSV file");
  c = small_job(dir, "/dev/null");  // exists, but no regular file (session 18's trial: "nor an existing")
  EXPECT_EQ(msg(c),
            "schedule /dev/null: not a schedule name (1f1b, gpipe, interleaved-1f1b, zb-h1) nor a schedule CSV file "
            "(it exists but is not a regular file)");
  c = small_job(dir, "interleaved-1f1b");
  c.problem.chunks = 2;
  c.problem.microbatches = 12;
  EXPECT_NE(msg(c).find("microbatches (12) must be a multiple of the pipeline ranks (8)"), std::string::npos);
  c = small_job(dir, "1f1b");
  c.problem.num_ranks = 0;
  EXPECT_EQ(msg(c), "num_ranks is required (GPUs per pipeline) unless schedule is a schedule CSV file");
  c.problem.num_ranks = 8;
  c.problem.microbatches = 0;
  EXPECT_EQ(msg(c), "microbatches is required unless schedule is a schedule CSV file");
  c.problem.microbatches = -1;
  EXPECT_EQ(msg(c), "microbatches must be >= 1, got -1");
  c = small_job(dir, "zb-h1");
  c.problem.backward_input_fraction = 1.5;
  EXPECT_EQ(msg(c), "backward input fraction must be in (0, 1), got 1.5");
}

TEST(SchedulesGpt3, CliExportAndImport) {
  testing::TempDir dir;
  const std::string out = (dir.path() / "il.csv").string();
  const std::string bin = PERSEUS_BINARY;
  ASSERT_EQ(std::system((bin + " schedule --schedule interleaved-1f1b --stages 4 --microbatches 8 --chunks 2 --out " +
                         out + " > /dev/null")
                            .c_str()),
            0);
  EXPECT_EQ(format_schedule_csv(load_schedule_csv(out)), format_schedule_csv(make_interleaved_1f1b(4, 8, 2)));
  // A file given as --schedule is validated and rewritten.
  const std::string again = (dir.path() / "again.csv").string();
  ASSERT_EQ(std::system((bin + " schedule --schedule " + out + " --out " + again + " > /dev/null").c_str()), 0);
  EXPECT_EQ(format_schedule_csv(load_schedule_csv(again)), format_schedule_csv(load_schedule_csv(out)));
  // Bad input: exit status 1 with the message on stderr.
  const std::string bad = dir.write("bad.csv", "0F0,0B0\n1F0,1X0\n");
  const std::string err = (dir.path() / "err.txt").string();
  EXPECT_EQ(WEXITSTATUS(std::system((bin + " schedule --schedule " + bad + " --out - 2> " + err).c_str())), 1);
  std::ifstream e(err);
  std::string text((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(bad + ":2 (rank 1), action 2: '1X0' has unknown kind 'X'"), std::string::npos) << text;
  // A schedule name without --stages is a usage error (exit status 2), as for optimize.
  EXPECT_EQ(WEXITSTATUS(std::system((bin + " schedule --schedule zb-h1 --out - 2> " + err).c_str())), 2);
  std::ifstream e2(err);
  std::string text2((std::istreambuf_iterator<char>(e2)), std::istreambuf_iterator<char>());
  EXPECT_NE(text2.find("--stages: required with a schedule name"), std::string::npos) << text2;
}

}  // namespace
}  // namespace perseus
