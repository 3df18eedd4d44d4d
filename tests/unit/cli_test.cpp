// The `perseus` command end to end: exit codes and messages.
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/schedule.hpp"
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
  const auto bad_engine = run("optimize --profile " + prof + " --stages 8 --microbatches 4 --p2p-power 1 "
                              "--min-cut-engine fast --out x");
  EXPECT_EQ(bad_engine.status, 2) << bad_engine.output;
  EXPECT_NE(bad_engine.output.find("--min-cut-engine"), std::string::npos) << bad_engine.output;
  EXPECT_FALSE(std::filesystem::exists("x"));
}

TEST(PlannerOptions, MinCutEngineNamesRoundTripAndUnknownIsRefused) {
  for (auto e : {MinCutEngine::kWarm, MinCutEngine::kDinic, MinCutEngine::kLemon, MinCutEngine::kBoykovKolmogorov})
    EXPECT_EQ(parse_min_cut_engine(to_string(e)), e);
  EXPECT_FALSE(parse_min_cut_engine("Warm").has_value());
  EXPECT_FALSE(parse_min_cut_engine("").has_value());
  const Dag dag = Dag::build(make_1f1b(2, 2));
  Profile prof;
  for (int s = 0; s < 2; ++s)
    for (auto k : {InstructionKind::kForward, InstructionKind::kBackward}) prof.add(s, k, {1410, 0.1, 20});
  PlannerOptions opt;
  opt.min_cut_engine = static_cast<MinCutEngine>(9);
  EXPECT_THROW(solve_frontier(dag, prof, opt), InputError);
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

// Issue 19: timeline overheads lengthen the plans (summary records them; `perseus report`
// rebuilds the same problem from it); bad values are usage errors naming the option.
TEST(Cli, OptimizeWithTimelineOverheads) {
  testing::TempDir dir;
  const std::string base = "optimize --quiet --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                           " --stages 8 --microbatches 4 --p2p-power 83.64 --unit-time 0.005 --out ";
  ASSERT_EQ(run(base + (dir.path() / "plain").string()).status, 0);
  const auto r = run(base + (dir.path() / "o").string() + " --p2p-latency 0.01 --op-overhead 0.002 --report");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto summary = [&](const char* out) {
    std::ifstream in(dir.path() / out / "summary.json");
    return nlohmann::json::parse(in);
  };
  const auto plain = summary("plain"), with = summary("o");
  EXPECT_FALSE(plain["inputs"].contains("p2p_latency_s"));
  EXPECT_EQ(with["inputs"]["p2p_latency_s"], 0.01);
  EXPECT_EQ(with["inputs"]["op_overhead_s"], 0.002);
  // All-max: every GPU runs 8 computations (4 microbatches) at 2 ms more each, plus sends.
  EXPECT_GT(with["allmax_time_s"].get<double>(), plain["allmax_time_s"].get<double>() + 8 * 0.002);
  const auto bad = run(base + (dir.path() / "x").string() + " --p2p-latency -0.1");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--p2p-latency"), std::string::npos) << bad.output;
  EXPECT_EQ(run(base + (dir.path() / "x").string() + " --op-overhead nan").status, 2);
}

// Issue 16 row 9: a profile that parses but whose units are wrong (times in ms, energy in kJ,
// power in the energy column) or a P_block above the computations' power: a warning naming
// file and line; an error with --strict (nothing written).
TEST(Cli, ImplausibleUnitsWarnOrFailWithStrict) {
  testing::TempDir dir;
  const std::string header = "stage,instruction,frequency,time,energy\n";
  const auto ms = dir.write("ms.csv", header + "0,forward,1410,30,9\n0,backward,1410,60,18\n");  // 0.3 W
  const auto kj = dir.write("kj.csv", header + "0,forward,1410,0.03,0.009\n0,backward,1410,0.06,0.018\n");
  const auto watts = dir.write("w.csv", header + "0,forward,1410,0.03,300\n0,backward,1410,0.06,300\n");  // 10 kW
  const auto ok = dir.write("ok.csv", header + "0,forward,1410,0.03,9\n0,backward,1410,0.06,18\n");  // 300 W
  const std::string args = " --stages 1 --microbatches 2 --quiet --out ";
  for (const auto& [prof, line] : {std::pair{ms, 2}, std::pair{kj, 2}, std::pair{watts, 2}}) {
    const auto warn = run("optimize --profile " + prof + " --p2p-power 50" + args + (dir.path() / "o").string());
    EXPECT_EQ(warn.status, 0) << warn.output;
    EXPECT_NE(warn.output.find("warning: " + prof + ":" + std::to_string(line) + ": energy"), std::string::npos)
        << warn.output;
    const auto strict = run("optimize --strict --profile " + prof + " --p2p-power 50" + args + (dir.path() / "s").string());
    EXPECT_EQ(strict.status, 1) << strict.output;
    EXPECT_NE(strict.output.find(prof + ":" + std::to_string(line) + ":"), std::string::npos) << strict.output;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "s"));
  }
  const auto clean = run("optimize --strict --profile " + ok + " --p2p-power 50" + args + (dir.path() / "c").string());
  EXPECT_EQ(clean.status, 0) << clean.output;
  EXPECT_EQ(clean.output.find("warning"), std::string::npos) << clean.output;
  const auto pblock = run("optimize --strict --profile " + ok + " --p2p-power 750" + args + (dir.path() / "p").string());
  EXPECT_EQ(pblock.status, 1) << pblock.output;
  EXPECT_NE(pblock.output.find("P_block (--p2p-power) 750 W is above"), std::string::npos) << pblock.output;
}

}  // namespace
}  // namespace perseus
