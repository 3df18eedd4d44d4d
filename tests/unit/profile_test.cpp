#include <fmt/core.h>
#include <gtest/gtest.h>

#include <limits>
#include <sys/stat.h>

#include <filesystem>

#include "perseus/error.hpp"
#include "perseus/profile.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

using testing::TempDir;

std::string error_of(const std::string& text, std::optional<int> stages = std::nullopt) {
  try {
    parse_profile_csv(text, "p.csv", stages);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const char* kGood =
    "stage,instruction,frequency,time,energy\n"
    "0,forward,1410,0.1,20\n0,forward,1200,0.12,18\n0,backward,1410,0.2,40\n"
    "1,forward,1410,0.1,20\n1,backward,1410,0.2,40\n";

TEST(Profile, ReadsBundledExample) {
  const Profile p = load_profile_csv(testing::example("stage_profile_gpt3-175b_a100_sxm.csv"), 8);
  EXPECT_EQ(p.num_stages(), 8);
  EXPECT_EQ(p.points(0, InstructionKind::kForward).size(), 38u);
  EXPECT_EQ(p.max_freq_mhz(), 1410);
  EXPECT_EQ(p.points(7, InstructionKind::kBackward).front().freq_mhz, 1410);
  EXPECT_NEAR(p.points(0, InstructionKind::kForward).front().time_s, 0.05016166687011708, 1e-15);
}

TEST(Profile, IgnoresExtraColumnsAndAnyColumnOrder) {
  const Profile p = parse_profile_csv(
      "rank,energy,time,frequency,instruction,stage,pp_rank\n0,20,0.1,1410,forward,0,0\n0,40,0.2,1410,backward,0,0\n",
      "x");
  ASSERT_EQ(p.num_stages(), 1);
  EXPECT_DOUBLE_EQ(p.points(0, InstructionKind::kBackward)[0].energy_j, 40);
}

// 3D job, one row per GPU: a stage's TP GPUs and DP replicas merge into one point with the
// slowest GPU's time and the mean (one GPU's) energy (docs/validation.md "3D runs").
TEST(Profile, MergesPerGpuRowsOfThreeDimensionalJobs) {
  const Profile p = parse_profile_csv(
      "stage,instruction,frequency,time,energy,dp_rank,pp_rank,tp_rank\n"
      "0,forward,1410,0.10,20,0,0,0\n0,forward,1410,0.12,22,0,0,1\n0,forward,1410,0.11,24,1,0,0\n"
      "0,forward,1410,0.10,18,1,0,1\n0,backward,1410,0.2,40,0,0,0\n0,backward,1410,0.2,40,0,0,1\n"
      "0,backward,1410,0.2,40,1,0,0\n0,backward,1410,0.2,40,1,0,1\n0,backward,1200,0.25,36,0,0,0\n"
      "0,backward,1200,0.24,36,0,0,1\n0,backward,1200,0.23,36,1,0,0\n0,backward,1200,0.25,36,1,0,1\n",
      "x");
  ASSERT_EQ(p.points(0, InstructionKind::kForward).size(), 1u);
  EXPECT_DOUBLE_EQ(p.points(0, InstructionKind::kForward)[0].time_s, 0.12);
  EXPECT_DOUBLE_EQ(p.points(0, InstructionKind::kForward)[0].energy_j, 21);
  ASSERT_EQ(p.points(0, InstructionKind::kBackward).size(), 2u);
  EXPECT_DOUBLE_EQ(p.points(0, InstructionKind::kBackward)[1].time_s, 0.25);
  // The same GPU twice is still a duplicate; a negative rank is an error.
  EXPECT_NE(error_of("stage,instruction,frequency,time,energy,tp_rank\n0,forward,1410,0.1,20,1\n"
                     "0,forward,1410,0.1,20,1\n")
                .find("p.csv:3: field 'frequency': duplicate row for stage 0 forward at 1410 MHz on dp_rank 0 tp_rank 1"),
            std::string::npos);
  EXPECT_NE(error_of("stage,instruction,frequency,time,energy,dp_rank\n0,forward,1410,0.1,20,-1\n")
                .find("p.csv:2: field 'dp_rank'"),
            std::string::npos);
  // A GPU without a row for a point the stage's other GPUs measured: that point would merge
  // fewer GPUs (session 17's trial: accepted silently). Named with the GPU and the counts.
  EXPECT_EQ(error_of("stage,instruction,frequency,time,energy,dp_rank\n0,forward,1410,0.1,20,0\n"
                     "0,forward,1410,0.1,20,1\n0,forward,1200,0.12,18,0\n0,backward,1410,0.2,40,0\n"
                     "0,backward,1410,0.2,40,1\n"),
            "p.csv: field 'frequency': stage 0 forward at 1200 MHz has no row for dp_rank 1 tp_rank 0, which has rows "
            "for other operating points of stage 0: each of a stage's GPUs needs a row for every (instruction, "
            "frequency) of the stage (1 of its 2 GPUs have this one)");
}

TEST(Profile, SkipsBlankLines) {
  const Profile p = parse_profile_csv(
      "stage,instruction,frequency,time,energy\n\n0,forward,1410,0.1,20\n0,backward,1410,0.2,40\n\n", "x");
  EXPECT_EQ(p.num_stages(), 1);
}

// find(): a binary search of the points, highest clock first, whatever order they were added in.
TEST(Profile, FindsAPointByItsClock) {
  Profile p;
  for (const int f : {900, 1410, 1200, 600}) p.add(1, InstructionKind::kForward, {f, 1000.0 / f, 1.0});
  for (const int f : {600, 900, 1200, 1410}) {
    const OperatingPoint* q = p.find(1, InstructionKind::kForward, f);
    ASSERT_NE(q, nullptr) << f;
    EXPECT_EQ(q->freq_mhz, f);
    EXPECT_DOUBLE_EQ(q->time_s, 1000.0 / f);
  }
  for (const int f : {0, 599, 1000, 1411}) EXPECT_EQ(p.find(1, InstructionKind::kForward, f), nullptr) << f;
  EXPECT_EQ(p.find(1, InstructionKind::kBackward, 900), nullptr);
  EXPECT_EQ(p.find(0, InstructionKind::kForward, 900), nullptr);
  EXPECT_EQ(p.find(7, InstructionKind::kForward, 900), nullptr);
  EXPECT_EQ(p.find(-1, InstructionKind::kForward, 900), nullptr);
}

// Profile::add is public: a negative stage indexed out of bounds, a huge one allocated a
// table for every stage below it (session 23's audit).
TEST(Profile, AddRefusesAStageOutsideTheLimit) {
  Profile p;
  const OperatingPoint pt{1410, 0.01, 3.0};
  for (const int bad : {-1, limits::kMaxScheduleStageId + 1, std::numeric_limits<int>::max()}) {
    try {
      p.add(bad, InstructionKind::kForward, pt);
      ADD_FAILURE() << "stage " << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "stage");
    }
  }
  EXPECT_EQ(p.num_stages(), 0);  // nothing half-added
  p.add(limits::kMaxScheduleStageId, InstructionKind::kForward, pt);  // a fitted schedule's largest stage
  EXPECT_EQ(p.num_stages(), limits::kMaxScheduleStageId + 1);
}

TEST(Profile, SortsFrequenciesDescending) {
  const Profile p = parse_profile_csv(kGood, "x");
  EXPECT_EQ(p.points(0, InstructionKind::kForward)[0].freq_mhz, 1410);
  EXPECT_EQ(p.points(0, InstructionKind::kForward)[1].freq_mhz, 1200);
}

TEST(Profile, AnyRowOrderGivesTheSameProfile) {
  // Rows listed slowest clock first, stages interleaved: the same profile as highest first.
  std::string asc = "stage,instruction,frequency,time,energy\n", desc = asc;
  for (int f = 1005; f <= 1410; f += 15)
    for (int s = 1; s >= 0; --s)
      for (const char* k : {"backward", "forward"})
        asc += fmt::format("{},{},{},{},{}\n", s, k, f, 300.0 / f, f / 10.0);
  for (int s = 0; s <= 1; ++s)
    for (const char* k : {"forward", "backward"})
      for (int f = 1410; f >= 1005; f -= 15) desc += fmt::format("{},{},{},{},{}\n", s, k, f, 300.0 / f, f / 10.0);
  EXPECT_EQ(format_profile_csv(parse_profile_csv(asc, "asc")), format_profile_csv(parse_profile_csv(desc, "desc")));
  EXPECT_EQ(parse_profile_csv(asc, "asc").points(1, InstructionKind::kBackward).front().freq_mhz, 1410);
}

TEST(ProfileErrors, MissingColumn) {
  EXPECT_EQ(error_of("stage,instruction,frequency,time\n0,forward,1410,0.1\n"),
            "p.csv:1: the header has no column 'energy' (expected columns stage,instruction,frequency,time,energy, in "
            "any order, extra columns ignored; got 'stage,instruction,frequency,time')");
  EXPECT_NE(error_of("\nstage,frequency\n").find("p.csv:2: the header has no column 'instruction'"), std::string::npos);
  EXPECT_NE(error_of("stage,instruction,frequency,time,energy,stage\n").find("the header has column 'stage' twice"),
            std::string::npos);
}

// Issue 22: a spreadsheet export with ';' (or tab) separators says so.
TEST(ProfileErrors, SemicolonOrTabSeparatorIsNamed) {
  const auto semi = error_of("stage;instruction;frequency;time;energy\n0;forward;1410;0.1;20\n");
  EXPECT_NE(semi.find("p.csv:1: the header has no column 'stage'"), std::string::npos) << semi;
  EXPECT_NE(semi.find("got 'stage;instruction;frequency;time;energy'); the file is separated by ';' (a spreadsheet's "
                      "locale setting?): save it comma-separated"),
            std::string::npos)
      << semi;
  const auto tab = error_of("stage\tinstruction\tfrequency\ttime\tenergy\n");
  EXPECT_NE(tab.find("the file is separated by tabs: save it comma-separated"), std::string::npos) << tab;
}

// A clock in GHz or Hz: the message says MHz and converts.
TEST(ProfileErrors, FrequencyUnitHints) {
  const std::string head = "stage,instruction,frequency,time,energy\n";
  EXPECT_EQ(error_of(head + "0,forward,1.41,0.1,20\n"),
            "p.csv:2: field 'frequency': expected a clock in MHz (an integer 1..100000), got '1.41' (GHz? 1.41 GHz is "
            "1410 MHz)");
  EXPECT_EQ(error_of(head + "0,forward,1410000000,0.1,20\n"),
            "p.csv:2: field 'frequency': expected a clock in MHz (1..100000), got 1410000000 (Hz? 1410000000 Hz is "
            "1410 MHz)");
  EXPECT_EQ(error_of(head + "0,forward,1410.5,0.1,20\n"),
            "p.csv:2: field 'frequency': expected a clock in MHz (an integer 1..100000), got '1410.5'");
}

TEST(ProfileErrors, NonNumericNanInf) {
  const std::string head = "stage,instruction,frequency,time,energy\n";
  auto e = error_of(head + "0,forward,1410,abc,20\n0,backward,1410,0.2,40\n");
  EXPECT_NE(e.find("p.csv:2"), std::string::npos) << e;
  EXPECT_NE(e.find("'time'"), std::string::npos) << e;
  e = error_of(head + "0,forward,1410,0.1,nan\n");
  EXPECT_NE(e.find("'energy'"), std::string::npos) << e;
  e = error_of(head + "0,forward,1410,inf,1\n");
  EXPECT_NE(e.find("finite"), std::string::npos) << e;
  e = error_of(head + "0,forward,14x0,0.1,1\n");
  EXPECT_NE(e.find("'frequency'"), std::string::npos) << e;
  e = error_of(head + "zero,forward,1410,0.1,1\n");
  EXPECT_NE(e.find("'stage'"), std::string::npos) << e;
  // One leading '+' is a sign, as in Python and spreadsheets (session 13's trial: "+1" was
  // refused while "1e0" was read); two signs or a lone '+' are not numbers.
  EXPECT_EQ(error_of(head + "+0,forward,+1410,+.1,+2e1\n+0,backward,1410.0,0.2,40\n"), "");
  for (const char* bad : {"++0.1", "+-0.1", "+", "+ 1", "+inf"}) {
    e = error_of(head + "0,forward,1410," + bad + ",20\n0,backward,1410,0.2,40\n");
    EXPECT_NE(e.find("p.csv:2: field 'time': expected a"), std::string::npos) << bad << ": " << e;
  }
}

TEST(ProfileErrors, TimeAndEnergyRanges) {
  const std::string head = "stage,instruction,frequency,time,energy\n";
  auto e = error_of(head + "0,forward,1410,0,20\n");
  EXPECT_NE(e.find("p.csv:2: field 'time'"), std::string::npos) << e;
  e = error_of(head + "0,forward,1410,1e308,1\n");
  EXPECT_NE(e.find("p.csv:2: field 'time'"), std::string::npos) << e;
  // Below a microsecond a long pipeline's computations would start and end at the same double
  // (plan files with end_s == start_s, which the report then refused).
  e = error_of(head + "0,forward,1410,1e-300,1\n");
  EXPECT_NE(e.find("p.csv:2: field 'time': expected a duration in [1e-06, 100000] s"), std::string::npos) << e;
  e = error_of(head + "0,forward,1410,0.1,1e300\n");
  EXPECT_NE(e.find("p.csv:2: field 'energy'"), std::string::npos) << e;
  e = error_of(head + "0,forward,1410,0.1,-1\n");
  EXPECT_NE(e.find("p.csv:2: field 'energy'"), std::string::npos) << e;
}

TEST(ProfileErrors, DuplicateRow) {
  const auto e = error_of(std::string(kGood) + "0,forward,1200,0.13,17\n");
  EXPECT_NE(e.find("p.csv:7"), std::string::npos) << e;
  EXPECT_NE(e.find("duplicate"), std::string::npos) << e;
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
}

TEST(ProfileErrors, StageWithoutBackwardOrForward) {
  auto e = error_of("stage,instruction,frequency,time,energy\n0,forward,1410,0.1,20\n");
  EXPECT_NE(e.find("stage 0 has no backward"), std::string::npos) << e;
  e = error_of("stage,instruction,frequency,time,energy\n0,backward,1410,0.1,20\n");
  EXPECT_NE(e.find("stage 0 has no forward"), std::string::npos) << e;
}

TEST(ProfileErrors, UnknownInstruction) {
  const auto e = error_of("stage,instruction,frequency,time,energy\n0,fwd,1410,0.1,20\n");
  EXPECT_NE(e.find("'instruction'"), std::string::npos) << e;
}

TEST(ProfileErrors, StageGap) {
  const auto e = error_of(
      "stage,instruction,frequency,time,energy\n0,forward,1,0.1,2\n0,backward,1,0.1,2\n2,forward,1,0.1,2\n"
      "2,backward,1,0.1,2\n");
  EXPECT_NE(e.find("stage 1 has no rows"), std::string::npos) << e;
}

TEST(ProfileErrors, WrongStageCount) {
  EXPECT_NE(error_of(kGood, 3).find("expected 3 stages"), std::string::npos);
  EXPECT_NE(error_of(kGood, 1).find("expected 1 stages"), std::string::npos);
  EXPECT_EQ(error_of(kGood, 2), "");
  // A count below 1 is the caller's error, named as such (not "expected 0 stages (0..-1)").
  EXPECT_EQ(error_of(kGood, 0), "expected_stages must be >= 1, got 0");
  EXPECT_EQ(error_of(kGood, -3), "expected_stages must be >= 1, got -3");
}

TEST(ProfileErrors, EmptyAndMissingFile) {
  const std::string empty = "p.csv: the file is empty; expected a header line stage,instruction,frequency,time,energy, "
                            "then the data rows";
  EXPECT_EQ(error_of(""), empty);
  EXPECT_EQ(error_of("\n \r\n"), empty);
  EXPECT_EQ(error_of("stage,instruction,frequency,time,energy\n"),
            "p.csv: no data rows after the header; expected one row per operating point (stage, instruction, "
            "frequency)");
  try {
    load_profile_csv("/nonexistent/profile.csv");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/profile.csv"), std::string::npos);
  }
}

TEST(ProfileErrors, TooFewColumnsInRow) {
  const auto e = error_of("stage,instruction,frequency,time,energy\n0,forward,1410\n");
  EXPECT_EQ(e, "p.csv:2: too few columns: expected one field per header column (stage,instruction,frequency,time,"
               "energy and any extra columns)")
      << e;
  const auto q = error_of("stage,instruction,frequency,time,energy\n0,forward,1410,0.1,20\n0,\"forward,1200,0.1,20\n");
  EXPECT_EQ(q.rfind("p.csv:3: ", 0), 0u) << q;
}

TEST(ProfileErrors, NulByteIsRejectedWithItsLine) {
  std::string text = "stage,instruction,frequency,time,energy\n0,forward,1410,0.1,20\n0,backward,1410,0.2,40";
  text += std::string("\0,9,9,9\n", 8);
  EXPECT_EQ(error_of(text), "p.csv:3: contains a NUL byte (expected CSV text)");
}

TEST(Profile, AcceptsStandardCsvQuoting) {
  const Profile p = parse_profile_csv(
      "\"stage\",\"instruction\",\"frequency\",\"time\",\"energy\"\n\"0\",\"forward\",\"1410\",\"0.1\",\"20\"\n"
      "0,\"backward\",1410,0.2,40\n",
      "q.csv");
  EXPECT_EQ(p.points(0, InstructionKind::kForward).size(), 1u);
  EXPECT_EQ(p.points(0, InstructionKind::kBackward).front().freq_mhz, 1410);
  EXPECT_EQ(error_of("stage,instruction,frequency,time,energy\n0,\"forward,1410,0.1,20\n").rfind("p.csv:2: unclosed quote", 0),
            0u);
}

// Inputs that read as something else than what they are: each error says what is wrong
// with the file, not that a column is missing or that a number is not a number.
TEST(ProfileErrors, MisleadingInputsGetTheirOwnMessage) {
  const std::string header = "stage,instruction,frequency,time,energy";
  // Old Mac line endings: one long line, so "no column 'energy'" before; the CR's line now.
  EXPECT_EQ(error_of(header + "\r0,forward,1410,0.1,20\r").rfind("p.csv:1: a carriage return (CR) without a line feed", 0),
            0u);
  EXPECT_EQ(error_of(header + "\n0,forward,1410,0.1,20\n0,backward,1410,0.2,40\r0,x").rfind("p.csv:3: a carriage return", 0),
            0u);
  EXPECT_NE(error_of(header + "\n0,\"forw\nard\",1410,0.1,20\n").find("unclosed quote (a quoted field must end on its own line)"),
            std::string::npos);
  EXPECT_EQ(error_of(header + "\n0,forward,1410,1e-400,20\n0,backward,1410,0.2,40\n"),
            "p.csv:2: field 'time': expected a number within a double's range (magnitude about 1e-308 to 1e308, or 0), "
            "got '1e-400'");
  EXPECT_EQ(error_of(header + "\n0,forward,0x582,0.1,20\n0,backward,1410,0.2,40\n"),
            "p.csv:2: field 'frequency': expected a decimal integer, got '0x582'");
  EXPECT_EQ(error_of(header + "\n0,forward,99999999999999999999,0.1,20\n0,backward,1410,0.2,40\n"),
            "p.csv:2: field 'frequency': expected an integer, got '99999999999999999999', which is out of range");
}

// 100,000 clocks of one computation (each within 1..100000 MHz) passed the reader and the
// planner said "profile: too many Pareto-optimal frequencies" with no file, stage or count.
TEST(ProfileErrors, TooManyClocksOfOneComputationAreNamed) {
  std::string text = "stage,instruction,frequency,time,energy\n0,backward,1410,0.2,40\n";
  for (int f = 1; f <= 65536; ++f) text += fmt::format("0,forward,{},{},{}\n", f, 100.0 / f, 1000.0 / f + f * 1e-3);
  EXPECT_EQ(error_of(text), "p.csv: field 'frequency': stage 0 forward has 65536 frequencies; at most 65535 per "
                            "(stage, instruction) (a GPU has a few hundred)");
}

TEST(ProfileErrors, BinaryGarbageDoesNotCrash) {
  std::string junk = "stage,instruction,frequency,time,energy\n";
  for (int i = 0; i < 2000; ++i) junk.push_back(static_cast<char>((i * 7919) % 256));
  EXPECT_NE(error_of(junk), "");
}

TEST(Profile, WriteReadRoundTrip) {
  TempDir dir;
  const Profile p = parse_profile_csv(kGood, "x");
  const auto path = (dir.path() / "out.csv").string();
  write_profile_csv(p, path);
  const Profile q = load_profile_csv(path);
  ASSERT_EQ(q.num_stages(), 2);
  EXPECT_DOUBLE_EQ(q.points(0, InstructionKind::kForward)[1].time_s, 0.12);
}

TEST(ProfileErrors, UnwritableOutputNamesTheReasonAndLeavesNothing) {
  TempDir dir;
  const Profile p = parse_profile_csv(kGood, "x");
  try {
    write_profile_csv(p, (dir.path() / "missing" / "out.csv").string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("out.csv: cannot write the file: No such file or directory"), std::string::npos)
        << e.what();
  }
  try {
    write_profile_csv(p, dir.path().string());  // a folder: never replaced
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write the file: it is a folder"), std::string::npos) << e.what();
  }
  // A device, FIFO or symbolic link is never replaced by a file (e.g. /dev/null).
  const std::string fifo = (dir.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::filesystem::create_symlink(dir.path() / "elsewhere.csv", dir.path() / "link.csv");
  for (const auto& [path, kind] : {std::pair<std::string, std::string>{fifo, "a FIFO"},
                                   {(dir.path() / "link.csv").string(), "a symbolic link"}}) {
    try {
      write_profile_csv(p, path);
      FAIL() << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("it is " + kind + ", not a regular file; refusing to replace it"),
                std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_TRUE(std::filesystem::is_symlink(dir.path() / "link.csv"));
  std::filesystem::remove(fifo);
  std::filesystem::remove(dir.path() / "link.csv");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // no temporary left behind
}

}  // namespace
}  // namespace perseus

namespace perseus {
namespace {

// Units that parse but cannot be right: at most kMaxUnitWarnings points named, then a count;
// P_block against the lowest computation power; the bundled real profile is plausible.
TEST(ProfileUnitWarnings, NamesImplausiblePointsAndPBlockInMilliwatts) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  for (int f = 1000; f < 1008; ++f) csv += fmt::format("0,forward,{},30,9\n0,backward,{},0.06,18\n", f, f);  // ms: 0.3 W
  const Profile ms = parse_profile_csv(csv, "ms.csv");
  const auto w = profile_unit_warnings(ms, 50);
  ASSERT_EQ(w.size(), kMaxUnitWarnings + 2) << "5 points, the count of the other 3, P_block";
  EXPECT_EQ(w[0].rfind("ms.csv: stage 0 forward at 1007 MHz: energy 9 J over time 30 s implies 0.3 W per GPU", 0), 0u) << w[0];
  EXPECT_EQ(w[kMaxUnitWarnings], "ms.csv: ... and 3 more operating points outside 1..3000 W");
  EXPECT_NE(w.back().find("P_block 50 W is above the power of stage 0 forward at 1007 MHz (0.3 W)"), std::string::npos)
      << w.back();
  const Profile real = load_profile_csv(testing::example("stage_profile_gpt3-175b_a100_sxm.csv"));
  EXPECT_TRUE(profile_unit_warnings(real, 83.64).empty());
  const auto mw = profile_unit_warnings(real, 83640);
  ASSERT_EQ(mw.size(), 1u);
  EXPECT_NE(mw[0].find("P_block 83640 W is above the power of stage"), std::string::npos) << mw[0];
}

}  // namespace
}  // namespace perseus
