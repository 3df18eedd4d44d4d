// The `perseus` command end to end: exit codes and messages.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "test_util.hpp"

namespace perseus {
namespace {

using testing::run;

TEST(Cli, BadArgumentsExitTwoWithUsage) {
  const auto r = run("optimize --stages 8");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--profile"), std::string::npos) << r.output;
  EXPECT_EQ(run("optimize --profile /nonexistent.csv --stages 8 --microbatches 4 --p2p-power 1 --out x").status, 2);
  EXPECT_EQ(run("frobnicate").status, 2);
  // Conditionally required options are usage errors too.
  const auto prof = testing::example("stage_profile_gpt3-175b_a100_sxm.csv");
  const auto no_stages = run("optimize --profile " + prof + " --microbatches 4 --p2p-power 1 --out x");
  EXPECT_EQ(no_stages.status, 2) << no_stages.output;
  EXPECT_NE(no_stages.output.find("--stages"), std::string::npos) << no_stages.output;
  EXPECT_EQ(run("optimize --profile " + prof + " --stages 8 --p2p-power 1 --out x").status, 2);
  EXPECT_EQ(run("optimize --profile " + prof + " --stages 8 --microbatches 4 --p2p-power 1 --threads -1 --out x").status, 2);
  // Range checks name the option and the expected range; NaN is not a number in range.
  const auto nan = run("optimize --profile " + prof + " --stages 8 --microbatches 4 --p2p-power nan --out x");
  EXPECT_EQ(nan.status, 2) << nan.output;
  EXPECT_NE(nan.output.find("--p2p-power: expected a number in [0, 100000] W, got 'nan'"), std::string::npos)
      << nan.output;
  const auto bad_schedule = run("optimize --profile " + prof + " --schedule nosuch --p2p-power 1 --out x");
  EXPECT_EQ(bad_schedule.status, 2) << bad_schedule.output;
  EXPECT_NE(bad_schedule.output.find("'nosuch' is not a schedule name"), std::string::npos) << bad_schedule.output;
  EXPECT_FALSE(std::filesystem::exists("x"));
}

TEST(Cli, BadProfileExitsOneWithMessage) {
  testing::TempDir dir;
  const auto prof = dir.write("p.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,-1,20\n");
  const auto r = run("optimize --profile " + prof + " --stages 1 --microbatches 2 --p2p-power 50 --out " +
                     (dir.path() / "o").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("p.csv:2: field 'time'"), std::string::npos) << r.output;
}

TEST(Cli, OptimizeBundledProfile) {
  testing::TempDir dir;
  const auto r = run("optimize --quiet --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                     " --stages 8 --microbatches 4 --p2p-power 83.64 --unit-time 0.005 --out " +
                     (dir.path() / "o").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("intrinsic bloat removed"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace perseus
