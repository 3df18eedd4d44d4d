// The `perseus` command end to end: exit codes and messages.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>
#include <fmt/core.h>

#include <array>
#include <csignal>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/optimize.hpp"
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
  for (auto e : {MinCutEngine::kWarm, MinCutEngine::kDinic, MinCutEngine::kLemon, MinCutEngine::kBoykovKolmogorov,
                 MinCutEngine::kDynamic})
    EXPECT_EQ(parse_min_cut_engine(to_string(e)), e);
  EXPECT_FALSE(parse_min_cut_engine("Warm").has_value());
  EXPECT_FALSE(parse_min_cut_engine("").has_value());
  EXPECT_FALSE(parse_min_cut_engine("Dynamic").has_value());
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
  // A zero-bubble profile (no backward rows) under the default 1f1b: the message says what to do
  // (it said only "no rows for stage 0 backward", session 31's trial), and zb-h1 plans it.
  const auto zb = dir.write("zb.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,0.02,6\n"
                                      "0,backward_input,1410,0.02,6\n0,backward_weight,1410,0.02,6\n");
  const std::string args = "optimize --profile " + zb + " --stages 1 --microbatches 2 --p2p-power 50 --out " +
                           (dir.path() / "zb").string();
  const auto r1 = run(args);
  EXPECT_EQ(r1.status, 1) << r1.output;
  EXPECT_NE(r1.output.find("no rows for stage 0 backward, which the schedule needs: the profile splits the backward "
                           "into backward_input/backward_weight rows; plan the zero-bubble schedule (--schedule zb-h1)"),
            std::string::npos) << r1.output;
  EXPECT_EQ(run(args + " --schedule zb-h1").status, 0);
}

// A symbolic-link loop given as an input was "internal error: filesystem error: status: Too
// many levels of symbolic links", exit 3 ("a bug"; fresh-user fuzzing, session 20): exit 1,
// naming the path.
TEST(Cli, ASymbolicLinkLoopIsAnInputErrorNotABug) {
  testing::TempDir dir;
  std::filesystem::create_symlink(dir.path() / "loop.csv", dir.path() / "loop.csv");
  const auto r = run("schedule --schedule " + (dir.path() / "loop.csv").string() + " --out " +
                     (dir.path() / "s.csv").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("loop.csv': Too many levels of symbolic links"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "s.csv"));
}

// Paths were echoed raw (fresh-user trial, session 30): a profile name holding an escape
// sequence cleared the terminal, a 32 KB "path" printed 32 KB. Every error message is escaped
// and capped (terminal_safe()), whichever layer wrote it (CLI11's "File does not exist", an
// InputError naming the file).
TEST(Cli, PathsInErrorsCannotDriveTheTerminal) {
  testing::TempDir dir;
  const std::string out = (dir.path() / "o").string();
  const auto missing = run("optimize --profile 'nope\x1b[2J.csv' --stages 2 --microbatches 2 --p2p-power 80 --out " + out);
  EXPECT_EQ(missing.status, 2) << missing.output;
  EXPECT_NE(missing.output.find("nope\\x1B[2J.csv"), std::string::npos) << missing.output;
  EXPECT_EQ(missing.output.find('\x1b'), std::string::npos) << missing.output;
  const auto bad = dir.write("bad\x1b[2J.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,-1,20\n");
  const auto r = run("optimize --profile '" + bad + "' --stages 1 --microbatches 2 "
                     "--p2p-power 50 --out " + out);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("bad\\x1B[2J.csv:2: field 'time'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
  const auto huge = run("optimize --profile " + std::string(20000, 'p') + " --stages 2 --microbatches 2 --p2p-power 80 --out " + out);
  EXPECT_EQ(huge.status, 2) << huge.output.substr(0, 200);
  EXPECT_LT(huge.output.size(), 5000u);
}

// An output name of 241..255 bytes is legal, but its temporary sibling `.NAME.partial-PID` was
// not (fresh-user trial, session 30: "File name too long"). Long names get a shortened temporary.
TEST(Cli, OutputNamesUpToTheFileNameLimitAreWritten) {
  testing::TempDir dir;
  for (const std::size_t len : {241u, 255u}) {
    const auto out = dir.path() / std::string(len, 'z');
    const auto r = run("optimize --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                       " --stages 8 --microbatches 2 --p2p-power 83.64 --unit-time 0.01 --quiet --out " + out.string());
    EXPECT_EQ(r.status, 0) << len << ": " << r.output;
    EXPECT_TRUE(std::filesystem::exists(out / "summary.json")) << len;
    const auto again = run("optimize --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                           " --stages 8 --microbatches 2 --p2p-power 83.64 --unit-time 0.01 --quiet --out " + out.string());
    EXPECT_EQ(again.status, 0) << len << ": " << again.output;  // replacing it: the `.old-PID` sibling too
    const auto file = dir.path() / (std::string(len - 4, 'y') + ".csv");
    const auto sched = run("schedule --schedule 1f1b --stages 2 --microbatches 2 --out " + file.string());
    EXPECT_EQ(sched.status, 0) << len << ": " << sched.output;
    EXPECT_TRUE(std::filesystem::exists(file)) << len;
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_NE(entry.path().filename().string().front(), '.') << entry.path();  // no temporary left
}

// A profile whose file name is not UTF-8 (Linux names are bytes) was exit 3, "internal error:
// [json.exception.type_error.316] invalid UTF-8 byte" when summary.json recorded its path
// (fresh-user trial, session 20): the name is recorded with U+FFFD for the bad byte.
TEST(Cli, AProfileNameThatIsNotUtf8IsPlanned) {
  testing::TempDir dir;
  const std::string odd = (dir.path() / "prof\xff.csv").string();
  std::filesystem::copy_file(testing::example("stage_profile_gpt3-175b_a100_sxm.csv"), odd);
  const auto out = (dir.path() / "o").string();
  const auto r = run("optimize --profile '" + odd + "' --stages 8 --microbatches 4 --p2p-power 75 --unit-time 0.01 "
                     "--out " + out);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(testing::slurp(out + "/summary.json").find("prof\xEF\xBF\xBD.csv"), std::string::npos);
}

// The option ranges allow a problem larger than the machine: running out of memory was
// "internal error: std::bad_alloc", exit 3 ("a bug"; session 16's trial). Now exit 1, saying so.
// The address space is capped with ulimit -v (not under ASan, which reserves terabytes of it).
TEST(Cli, OutOfMemoryIsAnErrorNotABug) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ulimit -v and AddressSanitizer do not mix";
#else
  testing::TempDir dir;
  const std::string cmd = "ulimit -v 600000; " + std::string(PERSEUS_BINARY) + " emulate --profile " +
                          testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                          " --stages 8 --microbatches 131072 --p2p-power 75 --slowdown 1.1 --pipelines 2 --out " +
                          (dir.path() / "o").string() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int rc = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 1) << out;
  EXPECT_NE(out.find("perseus: error: out of memory"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "o" / "emulation.csv")) << out;
#endif
}

TEST(Cli, OptimizeBundledProfile) {
  testing::TempDir dir;
  const auto r = run("optimize --quiet --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                     " --stages 8 --microbatches 4 --p2p-power 83.64 --unit-time 0.005 --out " +
                     (dir.path() / "o").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("intrinsic bloat removed"), std::string::npos) << r.output;
  // The certified planner (default) states its bound; the paper's planner has none to state.
  EXPECT_NE(r.output.find("lower bound:       E >= "), std::string::npos) << r.output;
  const auto g = run("optimize --quiet --planner graph-cut --profile " +
                     testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                     " --stages 8 --microbatches 4 --p2p-power 83.64 --unit-time 0.005 --out " +
                     (dir.path() / "g").string());
  EXPECT_EQ(g.status, 0) << g.output;
  EXPECT_EQ(g.output.find("lower bound:"), std::string::npos) << g.output;
  // No bound, no gap: null in summary.json (a 0 would read as "proven optimal"), numbers with one.
  const auto gs = nlohmann::json::parse(testing::slurp(dir.path() / "g" / "summary.json"));
  const auto cs = nlohmann::json::parse(testing::slurp(dir.path() / "o" / "summary.json"));
  for (const char* key : {"lower_bound_at_t_min_j", "max_optimality_gap_pct", "max_deadline_gap_pct"}) {
    EXPECT_TRUE(gs.at(key).is_null()) << key << ": " << gs.at(key);
    EXPECT_TRUE(cs.at(key).is_number()) << key << ": " << cs.at(key);
  }
  // --bound: a validated name; summary.json records the request and the method used.
  const auto h = run("optimize --quiet --bound hull-walk --profile " +
                     testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                     " --stages 8 --microbatches 4 --p2p-power 83.64 --unit-time 0.005 --out " +
                     (dir.path() / "h").string());
  EXPECT_EQ(h.status, 0) << h.output;
  const std::string summary = testing::slurp(dir.path() / "h" / "summary.json");
  EXPECT_NE(summary.find("\"bound_method\": \"hull-walk\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"bound\": \"hull-walk\""), std::string::npos) << summary;
  const auto bad = run("optimize --bound simplex --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                       " --stages 8 --microbatches 4 --p2p-power 83.64 --out " + (dir.path() / "b").string());
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--bound"), std::string::npos) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "b"));
}

// Issue 22: one rule for a profile without a row at its maximum clock for some computation
// (the user trial's min_nomax.csv: stage 0 backward tops out at 1200 MHz): optimize and emulate
// both refuse it, naming the computation and both fixes, and write nothing.
TEST(Cli, ProfileWithoutMaxClockRowIsRefusedByOptimizeAndEmulate) {
  testing::TempDir dir;
  const auto prof = testing::test_data("cases/min_nomax.csv");
  const std::string shape = " --stages 2 --microbatches 4 --p2p-power 60 --quiet";
  const auto opt = run("optimize --profile " + prof + shape + " --out " + (dir.path() / "o").string());
  const auto emu = run("emulate --profile " + prof + " --stages 2 --microbatches 4 --p2p-power 60 --pipelines 4 "
                       "--slowdown 1.1 --out " + (dir.path() / "e").string());
  for (const auto& r : {opt, emu}) {
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("min_nomax.csv: field 'frequency': stage 0 backward (its highest is 1200 MHz) has no row "
                            "at the profile's maximum frequency 1410 MHz"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("profile the missing computations at 1410 MHz, or remove the rows above 1200 MHz"),
              std::string::npos)
        << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "o"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "e"));
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

// --backward-input-fraction is a share in the open interval (0, 1) (0 or 1 leaves I or W with
// nothing): --help says so and 0 or 1 are usage errors (exit status 2) naming the option, refused
// before any work; the planner's "unit time too small" error names --unit-time.
TEST(Cli, BackwardInputFractionAndUnitTimeErrorsNameTheOption) {
  testing::TempDir dir;
  const std::string base = "optimize --quiet --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                           " --stages 8 --microbatches 4 --p2p-power 83.64 --schedule zb-h1 --out " +
                           (dir.path() / "o").string() + " --backward-input-fraction ";
  for (const char* f : {"0", "1", "0.0", "1.0", "-0.5", "1.5"}) {
    const auto r = run(base + f);
    EXPECT_EQ(r.status, 2) << f << ": " << r.output;
    EXPECT_NE(r.output.find(std::string("--backward-input-fraction: expected a number in (0, 1), got '") + f + "'"),
              std::string::npos)
        << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "o"));
  }
  const auto near_ends = run(base + "0.001 --unit-time 0.01");
  EXPECT_EQ(near_ends.status, 0) << near_ends.output;
  EXPECT_EQ(near_ends.output.find("had no effect"), std::string::npos) << near_ends.output;
  // With a schedule that does not split the backward the option is accepted but said to do nothing.
  const auto unused = run(std::regex_replace(base, std::regex("zb-h1"), "1f1b") + "0.3 --unit-time 0.01");
  EXPECT_EQ(unused.status, 0) << unused.output;
  EXPECT_NE(unused.output.find("warning: --backward-input-fraction had no effect"), std::string::npos) << unused.output;
  const auto help = run("optimize --help");
  EXPECT_NE(help.output.find("--backward-input-fraction FLOAT:NUMBER in (0, 1)"), std::string::npos) << help.output;
  // Two computations 0.5 s apart are 5e6 units of 1e-7 s: more than the planner's cost tables hold.
  const auto slow = dir.write("slow.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,0.5,100\n"
                                          "0,forward,1000,1.0,60\n0,backward,1410,1,200\n");
  for (const std::string cmd : {"optimize", "emulate --pipelines 2 --slowdown 1.1"}) {
    const auto r = run(cmd + " --profile " + slow + " --stages 1 --microbatches 2 --p2p-power 10 --unit-time 1e-7 "
                       "--out " + (dir.path() / "u").string());
    EXPECT_EQ(r.status, 1) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("perseus: error: --unit-time: unit time 1e-07 s is too small for a computation whose candidate "
                            "clocks take 0.5 to 1 s"),
              std::string::npos)
        << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("use 1e-06 s or more"), std::string::npos) << cmd << ": " << r.output;  // and it does:
    EXPECT_EQ(run(cmd + " --profile " + slow + " --stages 1 --microbatches 2 --p2p-power 10 --unit-time 1e-6 "
                  "--out " + (dir.path() / "u6").string()).status, 0);
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "u"));
  }
}

// Fresh-user trial (session 21): computations shorter than --unit-time gave a one-plan frontier
// and no word why; the warning names the median computation and a unit that fits, on the
// terminal and in summary.json. None for the bundled GPT-3 profile at the default unit.
TEST(Cli, ATimeUnitCoarserThanTheComputationsIsWarnedAbout) {
  testing::TempDir dir;
  const std::string tiny = dir.write("tiny.csv",
                                     "stage,instruction,frequency,time,energy\n"
                                     "0,forward,1410,0.0002,0.06\n0,forward,1000,0.00028,0.04\n"
                                     "0,backward,1410,0.0004,0.12\n0,backward,1000,0.00056,0.08\n"
                                     "1,forward,1410,0.0002,0.06\n1,forward,1000,0.00028,0.04\n"
                                     "1,backward,1410,0.0004,0.12\n1,backward,1000,0.00056,0.08\n");
  // The graph-cut planner shows it plainly (the certified planner's LP stage hides part of it).
  const std::string base =
      "optimize --profile " + tiny + " --stages 2 --microbatches 4 --p2p-power 50 --planner graph-cut --out ";
  const auto coarse = run(base + (dir.path() / "coarse").string());
  ASSERT_EQ(coarse.status, 0) << coarse.output;
  EXPECT_NE(coarse.output.find("warning: the median computation takes 0.0004 s at its fastest clock, 0.4 time units "
                               "of 0.001 s; durations are rounded up to whole units, so the frontier is coarse"),
            std::string::npos)
      << coarse.output;
  EXPECT_NE(coarse.output.find("a time unit of 1e-05 s plans these computations finely (--unit-time)"),
            std::string::npos)
      << coarse.output;
  const auto summary = nlohmann::json::parse(testing::slurp(dir.path() / "coarse" / "summary.json"));
  ASSERT_EQ(summary["warnings"].size(), 1u);
  const auto fine = run(base + (dir.path() / "fine").string() + " --unit-time 1e-5");
  ASSERT_EQ(fine.status, 0) << fine.output;
  EXPECT_EQ(fine.output.find("warning:"), std::string::npos) << fine.output;
  EXPECT_GT(nlohmann::json::parse(testing::slurp(dir.path() / "fine" / "summary.json"))["num_plans"].get<int>(),
            summary["num_plans"].get<int>());
  // Computations of 1e-6 s: the suggestion stays within --unit-time's range (it said 1e-08 s,
  // which the option refuses; session 27's trial), and at that finest unit there is none.
  const std::string micro = dir.write("micro.csv", "stage,instruction,frequency,time,energy\n"
                                                   "0,forward,1410,1e-06,1e-4\n0,forward,1000,2e-06,1.5e-4\n"
                                                   "0,backward,1410,1e-06,1e-4\n0,backward,1000,2e-06,1.5e-4\n"
                                                   "1,forward,1410,1e-06,1e-4\n1,forward,1000,2e-06,1.5e-4\n"
                                                   "1,backward,1410,1e-06,1e-4\n1,backward,1000,2e-06,1.5e-4\n");
  const std::string micro_base = "optimize --profile " + micro + " --stages 2 --microbatches 4 --p2p-power 50 --out ";
  const auto coarse_micro = run(micro_base + (dir.path() / "micro").string());
  EXPECT_NE(coarse_micro.output.find("a time unit of 1e-07 s plans these computations finely (--unit-time)"),
            std::string::npos)
      << coarse_micro.output;
  const auto finest = run(micro_base + (dir.path() / "micro_fine").string() + " --unit-time 1e-7");
  ASSERT_EQ(finest.status, 0) << finest.output;
  EXPECT_EQ(finest.output.find("time unit of"), std::string::npos) << finest.output;
  // Computations of 1e-6 s that take 1e5 s at another clock: the warning suggested 1e-07 s, a unit
  // the planner refuses for them (fresh-user trial, session 30); it names the finest it takes.
  const std::string wide = dir.write("wide.csv", "stage,instruction,frequency,time,energy\n"
                                                 "0,forward,1000,1e-06,1e-4\n0,forward,999,1e5,1\n"
                                                 "0,backward,1000,1e-06,1e-4\n0,backward,999,1e5,1\n");
  const std::string wide_base = "optimize --profile " + wide + " --stages 1 --microbatches 2 --p2p-power 0 --out ";
  const auto wide_coarse = run(wide_base + (dir.path() / "wide").string() + " --unit-time 10");
  ASSERT_EQ(wide_coarse.status, 0) << wide_coarse.output;
  EXPECT_NE(wide_coarse.output.find("the finest time unit these computations allow is 1 s (one of them spans 1e+05 s"),
            std::string::npos)
      << wide_coarse.output;
  EXPECT_EQ(run(wide_base + (dir.path() / "wide_fine").string() + " --unit-time 1 --quiet").status, 0);
  const auto gpt3 = run("optimize --quiet --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                        " --stages 8 --microbatches 12 --p2p-power 83.64 --planner graph-cut --out " +
                        (dir.path() / "gpt3").string());
  ASSERT_EQ(gpt3.status, 0) << gpt3.output;
  EXPECT_EQ(nlohmann::json::parse(testing::slurp(dir.path() / "gpt3" / "summary.json"))["warnings"],
            nlohmann::json::array());
}

// Fresh-user trial (session 21): planned from a schedule CSV, summary.json's inputs said 0 stages
// x 0 microbatches and chunks 1 (what was given, not the pipeline), which the report showed
// under its own "4 GPUs, 2 stage(s) per GPU" header; they are the file's now (chunks null for an
// uneven placement, which `perseus report` draws from schedule.csv).
TEST(Cli, ASummaryPlannedFromAScheduleFileRecordsItsShape) {
  testing::TempDir dir;
  std::string text = "stage,instruction,frequency,time,energy\n";
  for (int st = 0; st < 4; ++st)
    for (const char* kind : {"forward", "backward"})
      text += fmt::format("{0},{1},1410,{2},{3}\n{0},{1},1000,{4},{5}\n", st, kind, 0.01 * (st + 1), 3.0 * (st + 1),
                          0.014 * (st + 1), 2.0 * (st + 1));
  const std::string profile = dir.write("four.csv", text);
  const auto sched = run("schedule --schedule interleaved-1f1b --stages 2 --microbatches 4 --chunks 2 --out " +
                         (dir.path() / "i.csv").string());
  ASSERT_EQ(sched.status, 0) << sched.output;
  const std::string uneven =
      dir.write("uneven.csv", "0F0,1F0,2F0,0F1,1F1,2F1,2B0,1B0,0B0,2B1,1B1,0B1\n3F0,3B0,3F1,3B1\n");
  for (const auto& [file, chunks] : {std::pair{(dir.path() / "i.csv").string(), nlohmann::json(2)},
                                     std::pair{uneven, nlohmann::json(nullptr)}}) {
    const std::string out = file + ".out";
    const auto r = run("optimize --quiet --profile " + profile + " --schedule " + file +
                       " --p2p-power 83.64 --unit-time 0.01 --report --out " + out);
    ASSERT_EQ(r.status, 0) << r.output;
    const auto in = nlohmann::json::parse(testing::slurp(std::filesystem::path(out) / "summary.json"))["inputs"];
    EXPECT_EQ(in["stages"], 2) << file;
    EXPECT_EQ(in["microbatches"], chunks.is_null() ? 2 : 4) << file;
    EXPECT_EQ(in["chunks"], chunks) << file;
    const auto report = run("report " + out);
    EXPECT_EQ(report.status, 0) << report.output;
  }
  // --svg says which files it wrote besides the page (it named only report.html; session 26's trial).
  const std::string svg_out = (dir.path() / "i.csv.out").string();
  const auto svgs = run("report --svg " + svg_out);
  EXPECT_EQ(svgs.status, 0) << svgs.output;
  for (const char* svg : {"frontier.svg", "timeline_fastest.svg", "timeline_lowest_energy.svg"}) {
    EXPECT_NE(svgs.output.find("wrote " + (std::filesystem::path(svg_out) / svg).string()), std::string::npos)
        << svgs.output;
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(svg_out) / svg)) << svg;
  }
  // The same limits as `perseus schedule`: --chunks 2048 is planned, not a usage error.
  const std::string one = dir.write("one.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,1,300\n"
                                                "0,forward,1000,1.4,200\n0,backward,1410,2,600\n0,backward,1000,2.8,400\n");
  const auto many = run("optimize --quiet --profile " + one + " --schedule interleaved-1f1b --stages 1 "
                        "--microbatches 1 --chunks 2048 --p2p-power 83.64 --planner graph-cut --sample 1000 --out " +
                        (dir.path() / "many").string());
  EXPECT_EQ(many.status, 0) << many.output;
  // An unknown schedule name lists the names, in `perseus schedule` as in optimize.
  const auto unknown = run("schedule --schedule 1F1B --stages 2 --microbatches 2 --out -");
  EXPECT_EQ(unknown.status, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("'1F1B' is not a schedule name (1f1b, gpipe, interleaved-1f1b, zb-h1) nor an existing "
                                "schedule CSV file"),
            std::string::npos)
      << unknown.output;
  // A near miss gets "did you mean"; a path that exists but is no regular file says what it is
  // (both were "not a schedule name nor an existing schedule CSV file"; session 22's trial).
  for (const std::string& cmd : {std::string("schedule --schedule 1f1 --stages 2 --microbatches 2 --out -"),
                          "optimize --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                              " --schedule 1f1 --stages 2 --microbatches 2 --p2p-power 1 --out o"}) {
    const auto typo = run(cmd);
    EXPECT_EQ(typo.status, 2) << typo.output;
    EXPECT_NE(typo.output.find("schedule CSV file (did you mean 1f1b?)"), std::string::npos) << typo.output;
  }
  const auto folder = run("schedule --schedule " + dir.path().string() + " --stages 2 --microbatches 2 --out -");
  EXPECT_EQ(folder.status, 2) << folder.output;
  EXPECT_NE(folder.output.find("is a folder: neither a schedule name nor a schedule CSV file"), std::string::npos)
      << folder.output;
  // A device or pipe is read as a schedule CSV since session 27 (`--schedule /dev/stdin`):
  // /dev/null is an empty one.
  const auto device = run("schedule --schedule /dev/null --stages 2 --microbatches 2 --out -");
  EXPECT_EQ(device.status, 1) << device.output;
  EXPECT_NE(device.output.find("/dev/null: no ranks (expected one row of actions per rank)"), std::string::npos)
      << device.output;
  // A schedule piped to `perseus schedule` is checked as a file is (InputFileCli has optimize's).
  const std::string exported = dir.write("exported.csv", "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  const auto piped = run("schedule --schedule /dev/stdin --out - < " + exported);
  EXPECT_EQ(piped.status, 0) << piped.output;
  EXPECT_EQ(piped.output, testing::slurp(exported)) << piped.output;

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
  for (const auto& prof : {ms, kj, watts}) {
    const auto warn = run("optimize --profile " + prof + " --p2p-power 50" + args + (dir.path() / "o").string());
    EXPECT_EQ(warn.status, 0) << warn.output;
    const std::string row = prof + ": stage 0 forward at 1410 MHz: energy";
    EXPECT_NE(warn.output.find("warning: " + row), std::string::npos) << warn.output;
    EXPECT_EQ(warn.output.find("(--unit-time)"), std::string::npos) << "printed once, before the solve: " << warn.output;
    const std::string summary = testing::slurp(dir.path() / "o" / "summary.json");
    EXPECT_NE(summary.find(row), std::string::npos) << "summary.json lists it: " << summary;
    const auto strict = run("optimize --strict --profile " + prof + " --p2p-power 50" + args + (dir.path() / "s").string());
    EXPECT_EQ(strict.status, 1) << strict.output;
    EXPECT_NE(strict.output.find(row), std::string::npos) << strict.output;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "s"));
  }
  const auto clean = run("optimize --strict --profile " + ok + " --p2p-power 50" + args + (dir.path() / "c").string());
  EXPECT_EQ(clean.status, 0) << clean.output;
  EXPECT_EQ(clean.output.find("warning"), std::string::npos) << clean.output;
  const auto pblock = run("optimize --strict --profile " + ok + " --p2p-power 750" + args + (dir.path() / "p").string());
  EXPECT_EQ(pblock.status, 1) << pblock.output;
  EXPECT_NE(pblock.output.find("P_block 750 W is above the power of stage 0 forward at 1410 MHz (300 W)"),
            std::string::npos)
      << pblock.output;
}

// Issue 22: `perseus <unknown> --help` is an error (exit 2), not the general help; typos of a
// command or option get "did you mean".
TEST(Cli, UnknownCommandOrOptionSuggestsTheNearestName) {
  const auto help = run("frobnicate --help");
  EXPECT_EQ(help.status, 2) << help.output;
  EXPECT_NE(help.output.find("unknown command 'frobnicate'; commands: optimize, emulate"), std::string::npos)
      << help.output;
  const auto typo = run("optimze --help");
  EXPECT_EQ(typo.status, 2) << typo.output;
  EXPECT_NE(typo.output.find("unknown command 'optimze' (did you mean optimize?)"), std::string::npos) << typo.output;
  const auto opt = run("optimize --stage 4 --microbatch=8 --frobnicate --p2p-power 1");
  EXPECT_EQ(opt.status, 2) << opt.output;
  EXPECT_NE(opt.output.find("unknown option --stage (did you mean --stages?)"), std::string::npos) << opt.output;
  EXPECT_NE(opt.output.find("unknown option --microbatch (did you mean --microbatches?)"), std::string::npos)
      << opt.output;
  EXPECT_NE(opt.output.find("unknown option --frobnicate\n"), std::string::npos) << opt.output;
  EXPECT_EQ(run("optimize --help").status, 0);
  // Two swapped letters count as one typo, so short names get a hint too (--otu: 3 letters, at
  // most one typo; `serve` is not in builds without the runtime).
  const auto swapped = run("optimize --otu x");
  EXPECT_EQ(swapped.status, 2) << swapped.output;
  EXPECT_NE(swapped.output.find("unknown option --otu (did you mean --out?)"), std::string::npos) << swapped.output;
}

// `schedule --out FILE` keeps an existing file unless --force.
TEST(Cli, ScheduleKeepsAnExistingFileUnlessForce) {
  testing::TempDir dir;
  const auto mine = dir.write("mine.csv", "0F0,0B0\n");
  const auto r = run("schedule --stages 2 --microbatches 2 --out " + mine);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("mine.csv: exists; pass --force to replace it"), std::string::npos) << r.output;
  std::ifstream kept(mine);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "0F0,0B0\n");
  const auto forced = run("schedule --stages 2 --microbatches 2 --force --out " + mine);
  EXPECT_EQ(forced.status, 0) << forced.output;
  std::ifstream now(mine);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(now), {}), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  EXPECT_EQ(run("schedule --stages 2 --microbatches 2 --out " + dir.path().string()).status, 1);
  // Even with --force a FIFO, device or symbolic link is never replaced by a file.
  const std::string fifo = (dir.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& target : {fifo, std::string("/dev/null")}) {
    const auto special = run("schedule --stages 2 --microbatches 2 --force --out " + target);
    EXPECT_EQ(special.status, 1) << special.output;
    EXPECT_NE(special.output.find("not a regular file; refusing to replace it"), std::string::npos) << special.output;
  }
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

// "--p2p-power -0" is zero: summary.json never holds a negative zero.
TEST(Cli, NegativeZeroPowerIsZero) {
  testing::TempDir dir;
  const auto out = dir.path() / "o";
  const auto r = run("optimize --quiet --planner graph-cut --profile " +
                     testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                     " --stages 8 --microbatches 2 --p2p-power -0 --unit-time 0.005 --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(out / "summary.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["inputs"]["p2p_power_w"].get<double>(), 0.0);
  EXPECT_FALSE(std::signbit(j["inputs"]["p2p_power_w"].get<double>())) << j["inputs"].dump();
}

// `--out -` writes only to stdout: a failed write there (full disk, closed descriptor) is an
// error, not a silent success.
TEST(Cli, FailedWritesToStandardOutputExitOne) {
  testing::TempDir dir;
  const std::string err = (dir.path() / "err.txt").string();
  for (const std::string& redirect : {std::string("> /dev/full"), std::string(">&-")}) {
    const std::string cmd = std::string(PERSEUS_BINARY) + " schedule --stages 4 --microbatches 4 --out - " + redirect +
                            " 2> " + err;
    const int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc)) << cmd;
    EXPECT_EQ(WEXITSTATUS(rc), 1) << cmd;
    std::ifstream in(err);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find("cannot write to standard output"), std::string::npos) << cmd << ": " << text;
  }
}

// A write that fails part-way (here EFBIG: the file size limit stands in for a full disk, with
// SIGXFSZ ignored so the write returns the error): exit 1, the message names the file and the
// OS reason, the earlier output folder or file is untouched and no temporary is left.
TEST(Cli, WritesThatFailMidwayLeaveTheEarlierOutput) {
  testing::TempDir dir;
  const std::string out = (dir.path() / "out").string(), sched = (dir.path() / "sched.csv").string();
  const std::string optimize = "optimize --quiet --profile " + testing::test_data("cases/llama_a100_4st.csv") +
                               " --stages 4 --microbatches 8 --p2p-power 75 --out " + out;
  const std::string schedule = "schedule --stages 8 --microbatches 64 --out " + sched;
  ASSERT_EQ(run(optimize).status, 0);
  ASSERT_EQ(run(schedule).status, 0);
  const std::string earlier = testing::slurp(dir.path() / "out" / "summary.json");
  const std::string earlier_sched = testing::slurp(sched);
  for (const auto& [args, path] : {std::pair{optimize, out}, std::pair{schedule + " --force", sched}}) {
    // 4 blocks (2 KiB in dash's 512-byte units): smaller than each output. SIGXFSZ keeps its
    // default action (end the process) here: perseus ignores it, so the write fails instead
    // and the cleanup runs (before, the signal left the hidden temporary folder behind).
    const std::string cmd = "ulimit -f 4; exec " + std::string(PERSEUS_BINARY) + " " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string text;
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), p)) text += buf.data();
    const int rc = ::pclose(p);
    ASSERT_TRUE(WIFEXITED(rc)) << cmd;
    EXPECT_EQ(WEXITSTATUS(rc), 1) << cmd << ": " << text;
    EXPECT_NE(text.find(path), std::string::npos) << text;
    EXPECT_NE(text.find("File too large"), std::string::npos) << text;
  }
  EXPECT_EQ(testing::slurp(dir.path() / "out" / "summary.json"), earlier);
  EXPECT_EQ(testing::slurp(sched), earlier_sched);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"out", "sched.csv"}));
}

// SIGINT or SIGTERM while optimize runs: the process exits 128 + signal, the output folder is
// the earlier one or (signal after the commit) the complete new one, and no hidden temporary
// (.out.partial-PID, .out.old-PID) is left. The signal is sent once the run's temporary
// folder exists (an event, not a delay).
TEST(Cli, InterruptedOptimizeLeavesNoTemporaries) {
  testing::TempDir dir;
  const std::string out = (dir.path() / "out").string();
  const std::string profile = testing::test_data("emulation/stage_profile_gpt3-175b_a40.csv");
  ASSERT_EQ(run("optimize --quiet --profile " + testing::test_data("cases/llama_a100_4st.csv") +
                " --stages 4 --microbatches 2 --p2p-power 75 --unit-time 0.01 --out " + out).status, 0);
  const std::string earlier = testing::slurp(dir.path() / "out" / "summary.json");
  auto temporaries = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      n += e.path().filename().string().rfind(".out.", 0) == 0;
    return n;
  };
  for (const int sig : {SIGINT, SIGTERM}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    const std::string err = (dir.path() / ("err-" + std::to_string(sig) + ".txt")).string();
    if (pid == 0) {
      const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) ::dup2(fd, STDERR_FILENO);
      ::execl(PERSEUS_BINARY, "perseus", "optimize", "--quiet", "--profile", profile.c_str(), "--stages", "8",
              "--microbatches", "48", "--p2p-power", "70.38", "--sample", "1", "--out", out.c_str(), nullptr);
      ::_exit(127);
    }
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0) {
      if (temporaries() > 0) {
        ::kill(pid, sig);
        done = ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(done, pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_TRUE(WEXITSTATUS(status) == 128 + sig || WEXITSTATUS(status) == 0) << WEXITSTATUS(status);
    if (WEXITSTATUS(status) == 128 + sig) {
      // Only the interruption is reported: not a write that failed because the signal thread
      // removed the temporary folder under it ("cannot write the file: No such file...").
      const std::string text = testing::slurp(err);
      EXPECT_NE(text.find("interrupted ("), std::string::npos) << text;
      EXPECT_EQ(text.find("error"), std::string::npos) << text;
    }
    std::filesystem::remove(err);
    EXPECT_EQ(temporaries(), 0);
    // Interrupted before its commit: the earlier folder, untouched; after it (or finished before
    // the signal): the new folder, complete. Never anything in between.
    const std::string now = testing::slurp(dir.path() / "out" / "summary.json");
    if (now != earlier) {
      EXPECT_NE(now.find("\"microbatches\": 48"), std::string::npos) << now;
      EXPECT_TRUE(std::filesystem::exists(dir.path() / "out" / "frontier.csv"));
      return;
    }
  }
}

// An output folder given as a symbolic link (even a dangling one) is refused, not renamed away.
TEST(Cli, OutputFolderThatIsASymbolicLinkIsRefused) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "real");
  std::filesystem::create_directory_symlink(dir.path() / "real", dir.path() / "link");
  std::filesystem::create_directory_symlink(dir.path() / "gone", dir.path() / "dangling");
  for (const char* name : {"link", "dangling"}) {
    const auto r = run("optimize --quiet --profile " + testing::test_data("cases/llama_a100_4st.csv") +
                       " --stages 4 --microbatches 2 --p2p-power 75 --unit-time 0.01 --out " +
                       (dir.path() / name).string());
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("is a symbolic link, not a folder; refusing to replace it"), std::string::npos) << r.output;
    EXPECT_TRUE(std::filesystem::is_symlink(dir.path() / name));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / "real"));
}

// A path that cannot be looked at says why, not "is unreadable ..., not a folder" (session 26's
// trial). A link loop stands in for a folder that cannot be entered (root enters every folder).
TEST(Cli, OutputPathThatCannotBeLookedAtSaysWhy) {
  testing::TempDir dir;
  std::filesystem::create_directory_symlink(dir.path() / "loop", dir.path() / "loop");
  const auto r = run("optimize --quiet --profile " + testing::test_data("cases/llama_a100_4st.csv") +
                     " --stages 4 --microbatches 2 --p2p-power 75 --unit-time 0.01 --out " +
                     (dir.path() / "loop" / "out").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("out: cannot be looked at (Too many levels of symbolic links)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("not a folder"), std::string::npos) << r.output;
}

// validate --markdown: an empty path is a usage error, an existing file is kept unless --force,
// and the same workload twice is refused.
TEST(Cli, ValidateMarkdownFollowsTheOutputRules) {
  testing::TempDir dir;
  const std::string w = testing::test_data("real_gpu/a100_pp4_bert-huge-uncased");
  EXPECT_EQ(run("validate --real-gpu " + w + " --markdown ''").status, 2);
  // --force alone replaces nothing: a usage error (it was silently accepted; session 26's trial).
  const auto force_alone = run("validate --real-gpu " + w + " --force");
  EXPECT_EQ(force_alone.status, 2) << force_alone.output;
  EXPECT_NE(force_alone.output.find("--force requires --markdown"), std::string::npos) << force_alone.output;
  const auto mine = dir.write("mine.md", "hi\n");
  const auto kept = run("validate --real-gpu " + w + " --markdown " + mine);
  EXPECT_EQ(kept.status, 1) << kept.output;
  EXPECT_NE(kept.output.find("mine.md: exists; pass --force to replace it"), std::string::npos) << kept.output;
  EXPECT_EQ(testing::slurp(mine), "hi\n");
  const auto forced = run("validate --real-gpu " + w + " --markdown " + mine + " --force");
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_NE(testing::slurp(mine).find("| a100_pp4_bert-huge-uncased |"), std::string::npos) << testing::slurp(mine);
  // A missing folder is found before the work (no table printed, then an error), and an input
  // of the run is never the output, even with --force.
  const auto missing = run("validate --real-gpu " + w + " --markdown " + dir.path().string() + "/no/such/x.md");
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_NE(missing.output.find("does not exist"), std::string::npos) << missing.output;
  EXPECT_EQ(missing.output.find("| a100_pp4_bert-huge-uncased |"), std::string::npos) << missing.output;
  std::filesystem::copy(w, dir.path() / "copy", std::filesystem::copy_options::recursive);
  const std::string copy = (dir.path() / "copy").string();
  const std::string before = testing::slurp(copy + "/info.json");
  const auto input = run("validate --real-gpu " + copy + " --markdown " + copy + "/info.json --force");
  EXPECT_EQ(input.status, 1) << input.output;
  EXPECT_NE(input.output.find("an input of this run"), std::string::npos) << input.output;
  EXPECT_EQ(testing::slurp(copy + "/info.json"), before);
  const auto twice = run("validate --real-gpu " + w + " --real-gpu " + w + "/");
  EXPECT_EQ(twice.status, 1) << twice.output;
  EXPECT_NE(twice.output.find("are the same folder"), std::string::npos) << twice.output;
}

// `serve --db :memory:` writes no token file: it needs --token-file or $PERSEUS_TOKEN.
TEST(Cli, ServeInMemoryNeedsAToken) {
  // ("serve" also occurs inside "server" in the general help: ask the command itself.)
  if (run("serve --help").status != 0) GTEST_SKIP() << "perseus built without the server";
  testing::TempDir dir;
  const std::string cmd = "cd " + dir.path().string() + " && env -u PERSEUS_TOKEN " + PERSEUS_BINARY +
                          " serve --db :memory: --port 0 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  EXPECT_EQ(WEXITSTATUS(::pclose(p)), 2) << out;
  EXPECT_NE(out.find("--db: :memory: keeps nothing on disk, so there is no <db>.token"), std::string::npos) << out;
  EXPECT_NE(out.find("give --token-file FILE or set PERSEUS_TOKEN"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// A bad token source is named with its reason, never "the server needs a bearer token" when
// one was given.
TEST(Cli, ServeNamesWhatIsWrongWithTheToken) {
  if (run("serve --help").status != 0) GTEST_SKIP() << "perseus built without the server";
  testing::TempDir dir;
  const auto empty = dir.write("empty.token", "\n");
  std::filesystem::permissions(empty, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const auto r = run("serve --db :memory: --port 0 --token-file " + empty);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(empty + ": the token file is empty; expected a bearer token of at least 16 characters"),
            std::string::npos) << r.output;
  const auto folder = run("serve --db :memory: --port 0 --token-file " + dir.path().string());
  EXPECT_EQ(folder.status, 1) << folder.output;
  EXPECT_NE(folder.output.find("the token file is not a regular file"), std::string::npos) << folder.output;
  const auto missing = run("serve --db :memory: --port 0 --token-file " + (dir.path() / "nope").string());
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_NE(missing.output.find("cannot read token file: No such file or directory"), std::string::npos)
      << missing.output;
  // With this environment variable (env(1) sets or unsets it for the one command).
  auto run_env = [](const std::string& env_args, const std::string& args) {
    const std::string cmd = "env " + env_args + " " + PERSEUS_BINARY + " " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
    return testing::Result{WEXITSTATUS(::pclose(p)), out};
  };
  const auto no_folder = run_env("-u PERSEUS_TOKEN", "serve --port 0 --db " + (dir.path() / "nope" / "x.db").string());
  // A usage error naming the missing folder (it named the token file, session 31's trial).
  EXPECT_EQ(no_folder.status, 2) << no_folder.output;
  EXPECT_NE(no_folder.output.find("the folder " + (dir.path() / "nope").string() + " does not exist"), std::string::npos)
      << no_folder.output;
  const std::string file = dir.write("plain.txt", "x");
  const auto not_folder = run_env("-u PERSEUS_TOKEN", "serve --port 0 --db " + file + "/x.db");
  EXPECT_EQ(not_folder.status, 2) << not_folder.output;
  EXPECT_NE(not_folder.output.find(file + "/x.db: " + file + " is not a folder"), std::string::npos) << not_folder.output;
  EXPECT_FALSE(std::filesystem::exists(file + ".token"));
  const auto blank = run_env("PERSEUS_TOKEN='   '", "serve --db :memory: --port 0");
  EXPECT_EQ(blank.status, 1) << blank.output;
  EXPECT_NE(blank.output.find("PERSEUS_TOKEN holds only white space"), std::string::npos) << blank.output;
}

// serve's options have ranges like every command's (exit 2), and a port file that cannot be
// written stops the start (exit 1) instead of a server nobody can find.
TEST(Cli, ServeOptionRangesAndPortFile) {
  if (run("serve --help").status != 0) GTEST_SKIP() << "perseus built without the server";
  testing::TempDir dir;
  const auto token = dir.write("t.token", "0123456789abcdef0123\n");
  std::filesystem::permissions(token, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string base = "serve --db :memory: --port 0 --token-file " + token + " ";
  const std::pair<std::string, std::string> usage[] = {
      {"--max-body-mb -1", "--max-body-mb: expected a number in (0, 4096] MiB, got '-1'"},
      {"--max-body-mb nan", "--max-body-mb: expected a number in (0, 4096] MiB, got 'nan'"},
      {"--expiry-interval-s 0", "--expiry-interval-s: expected a number in [0.05, 86400] s, got '0'"},
      {"--job-idle-ttl-s -1", "--job-idle-ttl-s: expected a number in [0, 3200000000] s, got '-1'"},
      {"--rate-limit-rps -5", "--rate-limit-rps: expected a number in [0, 1000000000], got '-5'"},
      {"--rate-limit-burst 0", "--rate-limit-burst: expected a number in [1, 1000000000], got '0'"},
      {"--max-jobs 0", "--max-jobs: expected an integer in [1, 100000000], got '0'"},
      {"--zeus-p2p-power-w nan", "--zeus-p2p-power-w: expected a number in [0, 100000] W, got 'nan'"},
      {"--host ''", "--host: expected a bind address such as 127.0.0.1, got an empty one"},
  };
  for (const auto& [args, message] : usage) {
    const auto r = run(base + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
  const auto missing = run(base + "--port-file " + (dir.path() / "nope" / "port").string());
  EXPECT_EQ(missing.status, 1) << missing.output;
  // Refused before the server starts (session 27; it came up first and stopped at the file).
  EXPECT_NE(missing.output.find("--port-file " + (dir.path() / "nope" / "port").string() +
                                ": cannot write there: No such file or directory"),
            std::string::npos)
      << missing.output;
  EXPECT_EQ(missing.output.find("listening"), std::string::npos) << missing.output;
  const auto folder = run(base + "--port-file " + dir.path().string());
  EXPECT_EQ(folder.status, 1) << folder.output;
  EXPECT_NE(folder.output.find("--port-file " + dir.path().string() + ": is a folder; give a file name"),
            std::string::npos)
      << folder.output;
  EXPECT_EQ(folder.output.find("internal error"), std::string::npos) << folder.output;
}

// A bad --zeus-plan / --zeus-profile stops the start naming the file (and line), instead of
// a 500 at the first POST /register_job.
TEST(Cli, ServeChecksZeusFilesAtStart) {
  if (run("serve --help").status != 0) GTEST_SKIP() << "perseus built without the server";
  testing::TempDir dir;
  const auto token = dir.write("t.token", "0123456789abcdef0123\n");
  std::filesystem::permissions(token, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string base = "serve --db :memory: --port 0 --token-file " + token + " ";
  const auto json_plan = dir.write("plan.py", "{\"job_id\": \"x\"}\n");
  const auto r = run(base + "--zeus-plan " + json_plan);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(json_plan + ":"), std::string::npos) << r.output;
  const auto bad_profile = dir.write("p.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,abc,1\n");
  const auto p = run(base + "--zeus-plan " + dir.write("ok.py", "[[1410, 1410], [1200, 1200]]\n") +
                     " --zeus-profile " + bad_profile + " --zeus-p2p-power-w 80");
  EXPECT_EQ(p.status, 1) << p.output;
  EXPECT_NE(p.output.find(bad_profile + ":2:"), std::string::npos) << p.output;
}

TEST(Cli, ServeThatFailsToStartLeavesNoGeneratedToken) {
  if (run("serve --help").status != 0) GTEST_SKIP() << "perseus built without the server";
  testing::TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  const auto r = run("serve --db " + db + " --port 0 --host 256.1.1.1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("cannot listen on 256.1.1.1"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(db + ".token"));
}

// A noisy profile where 1350 MHz is faster than 1410 MHz for every computation: T_min is below
// the all-max time, and optimize says so (and by how much). A clean profile prints no such line.
TEST(Cli, OptimizeSaysWhenTMinIsBelowAllMaxTime) {
  testing::TempDir dir;
  const std::string header = "stage,instruction,frequency,time,energy\n";
  const auto noisy = dir.write("noisy.csv", header + "0,forward,1410,0.0100,3\n0,forward,1350,0.0099,2.9\n"
                                                     "0,backward,1410,0.0200,6\n0,backward,1350,0.0198,5.8\n"
                                                     "1,forward,1410,0.0100,3\n1,forward,1350,0.0099,2.9\n"
                                                     "1,backward,1410,0.0200,6\n1,backward,1350,0.0198,5.8\n");
  const std::string args = " --stages 2 --microbatches 4 --p2p-power 50 --unit-time 0.0001 --quiet --out ";
  const auto r = run("optimize --profile " + noisy + args + (dir.path() / "o").string());
  EXPECT_EQ(r.status, 0) << r.output;
  // all-max: (M + p - 1)(F + B) = 5 × 0.03 = 0.15 s; all at 1350: 0.1485 s (1 % less).
  EXPECT_NE(r.output.find("all-max baseline:  T = 0.1500 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("T_min = 0.1485 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("T_min is 1.00% below the all-max time: the computations of 4 (stage, instruction) pair(s) run "
                          "faster at a lower clock "
                          "(stage 0 forward: 0.0099 s at 1350 MHz, 0.01 s at 1410 MHz)"),
            std::string::npos)
      << r.output;
  const auto clean = run("optimize --profile " + testing::test_data("cases/llama_a100_4st.csv") +
                         " --stages 4 --microbatches 8 --p2p-power 75 --quiet --out " + (dir.path() / "c").string());
  EXPECT_EQ(clean.status, 0) << clean.output;
  EXPECT_EQ(clean.output.find("below the all-max time"), std::string::npos) << clean.output;
  EXPECT_NE(clean.output.find("E includes waiting at P_block until T)"), std::string::npos) << clean.output;
}

TEST(OptimizeOptions, MaxLpSolvesIsValidatedAndHonoured) {
  for (int bad : {0, -3, 100001}) {
    OptimizeConfig cfg;
    cfg.max_lp_solves = bad;
    cfg.profile_path = "/nonexistent.csv";  // the option is checked first
    try {
      optimize(cfg);
      ADD_FAILURE() << "max_lp_solves " << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("max_lp_solves"), std::string::npos) << e.what();
    }
  }
  const testing::TempDir dir;
  const std::string base = "optimize --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                           " --stages 8 --microbatches 2 --p2p-power 83.64 --quiet --out " +
                           (dir.path() / "o").string();
  for (const char* bad : {"0", "-1", "100001", "x", "2.5"}) {
    const auto r = testing::run(base + " --max-lp-solves " + bad);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("--max-lp-solves"), std::string::npos) << r.output;
  }
  const auto ok = testing::run(base + " --max-lp-solves 5");
  ASSERT_EQ(ok.status, 0) << ok.output;
  const auto summary = nlohmann::json::parse(testing::slurp(dir.path() / "o" / "summary.json"));
  EXPECT_EQ(summary["inputs"]["max_lp_solves"], 5);
  EXPECT_GE(summary["num_lp_solves"].get<int>(), 1);
  EXPECT_LE(summary["num_lp_solves"].get<int>(), 5);
  EXPECT_EQ(ok.output.find("no effect"), std::string::npos) << ok.output;
  // Options that cannot act on the solve are said so on stderr (the run still succeeds).
  const auto g = testing::run(base + "g --planner graph-cut --max-lp-solves 5 --polish 1");
  ASSERT_EQ(g.status, 0) << g.output;
  EXPECT_NE(g.output.find("warning: --max-lp-solves has no effect with --planner graph-cut"), std::string::npos)
      << g.output;
  EXPECT_NE(g.output.find("warning: --polish has no effect with --planner graph-cut"), std::string::npos) << g.output;
  // Above 2,048 computations (8 x 130 x 2) the hull walk gives the bound with no LP solve at all.
  const auto h = testing::run("optimize --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                              " --stages 8 --microbatches 130 --p2p-power 83.64 --unit-time 0.5 --max-lp-solves 5 --out " +
                              (dir.path() / "h").string());
  ASSERT_EQ(h.status, 0) << h.output;
  EXPECT_NE(h.output.find("note: --max-lp-solves had no effect: the bound came from the hull walk"), std::string::npos)
      << h.output;
  // Up to 2,048 computations a few LP solves refine the hull walk's frontier: no note.
  const auto s = testing::run(base + "s --bound hull-walk --max-lp-solves 5");
  ASSERT_EQ(s.status, 0) << s.output;
  EXPECT_EQ(s.output.find("no effect"), std::string::npos) << s.output;
  EXPECT_GE(nlohmann::json::parse(testing::slurp(dir.path() / "os" / "summary.json"))["num_lp_solves"].get<int>(), 1);
}

}  // namespace
}  // namespace perseus
