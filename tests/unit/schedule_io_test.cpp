// Schedule CSV import/export: round trips and the error messages of bad files.
#include <gtest/gtest.h>

#include <filesystem>

#include "perseus/error.hpp"
#include "perseus/problem.hpp"
#include "perseus/schedule.hpp"
#include "perseus/schedule_io.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_schedule_csv(text, "s.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ScheduleIo, FormatAction) {
  EXPECT_EQ(format_action({2, 0, InstructionKind::kForward}), "2F0");
  EXPECT_EQ(format_action({0, 13, InstructionKind::kBackward}), "0B13");
  EXPECT_EQ(format_action({11, 3, InstructionKind::kBackwardInput}), "11I3");
  EXPECT_EQ(format_action({1, 4, InstructionKind::kBackwardWeight}), "1W4");
}

// A torch action list re-saved by a spreadsheet: UTF-8 BOM, CRLF line ends, quoted fields.
TEST(ScheduleIo, SpreadsheetCsvWithBomCrlfAndQuotes) {
  const std::string plain = format_schedule_csv(make_1f1b(2, 2));
  std::string saved = "\xEF\xBB\xBF";
  for (char c : plain) saved += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const Schedule s = parse_schedule_csv(saved, "s.csv");
  EXPECT_EQ(s.order, make_1f1b(2, 2).order);
  const Schedule q = parse_schedule_csv("\"0F0\", \"0F1\",0B0,0B1\n1F0,1B0,1F1,1B1\n", "q.csv");
  EXPECT_EQ(q.num_ranks(), 2);
  EXPECT_EQ(error_of("0F0,\"0B0\n"), "s.csv:1: unterminated quoted field (a quoted field must end on its own line)");
  EXPECT_EQ(error_of("0F0,0B0\r1F0,1B0\r").rfind("s.csv:1: a carriage return (CR) without a line feed", 0), 0u);
  EXPECT_EQ(error_of(std::string("0F0,0B0\n1F0\0,1B0\n", 17)), "s.csv:2: contains a NUL byte (expected CSV text)");
}

TEST(ScheduleIo, RoundTripsEveryGenerator) {
  const std::vector<Schedule> all = {
      make_1f1b(4, 6),  make_gpipe(3, 5), make_interleaved_1f1b(4, 8, 2), make_interleaved_1f1b(2, 6, 3),
      make_zb_h1(4, 8), make_zb_h1(5, 2)};
  testing::TempDir dir;
  for (const Schedule& s : all) {
    SCOPED_TRACE(s.name);
    const std::string path = (dir.path() / (s.name + ".csv")).string();
    write_schedule_csv(s, path);
    const Schedule t = load_schedule_csv(path);
    EXPECT_EQ(t.name, path);
    EXPECT_EQ(t.num_stages, s.num_stages);
    EXPECT_EQ(t.num_microbatches, s.num_microbatches);
    EXPECT_EQ(t.stage_rank, s.stage_rank);
    EXPECT_EQ(t.order, s.order);
    EXPECT_EQ(t.split_backward, s.split_backward);
    EXPECT_EQ(format_schedule_csv(t), format_schedule_csv(s));
  }
}

TEST(ScheduleIo, TorchLeniencies) {
  // Idle steps (empty fields), communication actions, spaces, quotes, CRLF, comments and blank lines.
  const Schedule s = parse_schedule_csv(
      "# a comment\n"
      "0F0, ,0RECV_B0,\"0F1\",0SEND_F1,0B0,0B1,0REDUCE_GRAD\r\n"
      "\n"
      ",1F0,1B0,1RECV_F1,1F1,1B1,1UNSHARD,1RESHARD\n",
      "t.csv");
  EXPECT_EQ(s.num_ranks(), 2);
  EXPECT_EQ(s.num_stages, 2);
  EXPECT_EQ(s.num_microbatches, 2);
  EXPECT_EQ(format_schedule_csv(s), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST(ScheduleIo, ChunksAndSplitBackwardInferred) {
  // Two ranks, two chunks each (V shape: rank 0 holds stages 0 and 3), split backward.
  const Schedule s = parse_schedule_csv(
      "0F0,3F0,3I0,0I0,3W0,0W0\n"
      "1F0,2F0,2I0,1I0,2W0,1W0\n",
      "v.csv");
  EXPECT_EQ(s.num_stages, 4);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_TRUE(s.split_backward);
}

TEST(ScheduleIo, MissingComputation) {
  EXPECT_EQ(error_of("0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n"),
            "s.csv: computation '0B1' is missing from line 1 (rank 0, which runs stage 0); every stage needs F and B "
            "of each microbatch 0..1");
  EXPECT_NE(error_of("0F0,0I0\n").find("computation '0W0' is missing"), std::string::npos);
}

TEST(ScheduleIo, Duplicate) {
  EXPECT_EQ(error_of("0F0,0B0\n1F0,1B0,1F0\n"),
            "s.csv:2 (rank 1), action 3: '1F0' is a duplicate; it already appears at line 2, action 1");
}

TEST(ScheduleIo, CyclicOrder) {
  // Rank 0 waits for 1B0 before running 0F0, which rank 1 needs first.
  const std::string e = error_of("0B0,0F0\n1F0,1B0\n");
  EXPECT_EQ(e,
            "s.csv: the per-rank orders deadlock (dependency cycle):\n"
            "  line 1 (rank 0) waits at action 1 '0B0', which needs 0F0 (line 1, action 2, later on the same rank: it "
            "must come first) and 1B0 (line 2, action 2)\n"
            "  line 2 (rank 1) waits at action 1 '1F0', which needs 0F0 (line 1, action 2)");
  // Cross-rank cycle: rank 1 runs microbatch 1 first, rank 0 waits for microbatch 0's backward.
  EXPECT_EQ(error_of("0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n"),
            "s.csv: the per-rank orders deadlock (dependency cycle):\n"
            "  line 1 (rank 0) waits at action 2 '0B0', which needs 1B0 (line 2, action 3)\n"
            "  line 2 (rank 1) waits at action 1 '1F1', which needs 0F1 (line 1, action 3)");
  // W before its I, B before its F: the dependency is later on the same rank.
  EXPECT_NE(error_of("0F0,0W0,0I0\n")
                .find("line 1 (rank 0) waits at action 2 '0W0', which needs 0I0 (line 1, action 3, later on the "
                      "same rank: it must come first)"),
            std::string::npos);
  EXPECT_NE(error_of("0B0,0F0\n").find("needs 0F0 (line 1, action 2, later on the same rank: it must come first)"),
            std::string::npos);
}

TEST(ScheduleIo, UnknownKindAndMalformed) {
  EXPECT_EQ(error_of("0F0,0X0\n"),
            "s.csv:1 (rank 0), action 2: '0X0' has unknown kind 'X'; expected F (forward), B (full backward), I "
            "(backward input) or W (backward weight)");
  EXPECT_NE(error_of("0F0,F0\n")
                .find("s.csv:1 (rank 0), action 2: 'F0' is not an action; expected "
                      "{stage}{F|B|I|W}{microbatch}, e.g. 2F0"),
            std::string::npos);
  EXPECT_NE(error_of("0F0,0B\n").find("action 2: '0B' has no microbatch id (e.g. 0B0)"), std::string::npos);
  EXPECT_NE(error_of("0F0,0B0x\n").find("'0B0x': microbatch id must be an integer"), std::string::npos);
  EXPECT_NE(error_of("0F0,0B99999999999\n").find("microbatch id must be an integer 0..1048575"), std::string::npos);
  EXPECT_NE(error_of("0F0,0B1048576\n").find("microbatch id must be an integer 0..1048575"), std::string::npos);
  EXPECT_NE(error_of("1048576F0\n").find("stage id must be 0..1048575"), std::string::npos);
  // The largest ids `perseus schedule` can write (--stages/--microbatches up to 2^20) read back
  // as ids (this file then lacks the other stages and microbatches: another error).
  EXPECT_EQ(error_of("0F1048575,0B1048575\n").find("microbatch id must be"), std::string::npos);
  EXPECT_EQ(error_of("1048575F0,1048575B0\n").find("stage id must be"), std::string::npos);
  // torch's fused action is named as such (it was "is not an action"), and a negative
  // microbatch id as one (it was "unknown kind 'F-'"): session 23's trial.
  EXPECT_NE(error_of("(0F1;1B0)OVERLAP_F_B\n").find("is torch's overlapped F/B action, which is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("0F0,0F-1\n").find("'0F-1': microbatch id must be an integer 0..1048575, not negative"),
            std::string::npos);
}

TEST(ScheduleIo, StructureErrors) {
  EXPECT_EQ(error_of(""), "s.csv: no ranks (expected one row of actions per rank)");
  EXPECT_EQ(error_of("0F0,0B0\n,1RECV_F0\n"), "s.csv:2 (rank 1): the rank has no computations (F/B/I/W actions)");
  EXPECT_EQ(error_of("0F0,0B0\n0F1,0B1\n"),
            "s.csv:2 (rank 1), action 1: '0F1' puts stage 0 on rank 1, but line 1 (rank 0) already runs it; a stage "
            "must stay on one rank");
  EXPECT_EQ(error_of("0F0,0B0\n2F0,2B0\n"),
            "s.csv:2 (rank 1), action 1: '2F0': stage 2 is out of range; expected a stage id in 0..1, the stages the "
            "rest of the file runs (2 ranks x 1 chunk(s) of stages)");
  EXPECT_EQ(error_of("0F0,0B0\n1F0,1I0,1W0\n"),
            "s.csv: mixes full backward B (line 1, action 2) with split backward I/W (line 2, action 2); use one or "
            "the other for the whole pipeline");
}

// Fresh-user trial (session 21): Python's InputError had source '', line 0 and field '' for a
// schedule file's errors, while the message named file and line. The text is unchanged; a
// program now reads where from the error too.
TEST(ScheduleIo, ErrorsTellSourceLineAndField) {
  const auto located = [](const std::string& text) -> InputError {
    try {
      parse_schedule_csv(text, "s.csv");
    } catch (const InputError& e) {
      return e;
    }
    return InputError("(no error)");
  };
  const InputError dup = located("0F0,0B0\n1F0,1B0,1F0\n");
  EXPECT_EQ(std::string(dup.what()), "s.csv:2 (rank 1), action 3: '1F0' is a duplicate; it already appears at line 2, action 1");
  EXPECT_EQ(dup.source(), "s.csv");
  EXPECT_EQ(dup.line(), 2);
  EXPECT_EQ(dup.field(), "schedule");
  EXPECT_EQ(dup.phrased([](const std::string& f) { return "--" + f; }), dup.what());  // the text as it was
  const InputError none = located("");
  EXPECT_EQ(none.source(), "s.csv");
  EXPECT_EQ(none.line(), 0);
  const InputError missing = located("0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n");
  EXPECT_EQ(missing.line(), 1);  // the line of the rank that lacks it
  EXPECT_EQ(located("0F0,0B0\n1F0,1X0\n").line(), 2);
}

// Fresh-user trial (session 21): 4 stages placed 3 + 1 on 2 ranks were accepted as `chunks` 2
// (4 / 2), and chunks 3 was refused with "2 chunks". Each rank must hold `chunks` stages.
TEST(ScheduleIo, ChunksOfAnUnevenPlacementAreRefusedByRank) {
  testing::TempDir dir;
  const std::string file = dir.write("uneven.csv", "0F0,1F0,2F0,0F1,1F1,2F1,2B0,1B0,0B0,2B1,1B1,0B1\n3F0,3B0,3F1,3B1\n");
  EXPECT_EQ(stages_per_rank(load_schedule_csv(file)), (std::vector<int>{3, 1}));
  ProblemSpec spec;
  spec.schedule = file;
  EXPECT_EQ(resolve_schedule(spec).num_stages, 4);  // chunks not given: the file's placement
  for (const int chunks : {1, 2, 3}) {
    spec.chunks = chunks;
    spec.chunks_given = true;
    try {
      resolve_schedule(spec);
      ADD_FAILURE() << chunks;
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "chunks");
      EXPECT_NE(std::string(e.what()).find("which has an uneven number of stages per rank (rank 0: 3, rank 1: 1; "
                                           "leave chunks out): 4 stages on 2 ranks"),
                std::string::npos)
          << e.what();
    }
  }
  spec.schedule = dir.write("even.csv", format_schedule_csv(make_schedule("interleaved-1f1b", 2, 4, 2)));
  spec.chunks = 2;
  EXPECT_EQ(resolve_schedule(spec).num_stages, 4);
  spec.chunks = 1;
  EXPECT_THROW(resolve_schedule(spec), InputError);
}

TEST(ScheduleIo, FileErrors) {
  EXPECT_THROW(load_schedule_csv("/nonexistent/perseus/s.csv"), InputError);
  try {
    load_schedule_csv("/nonexistent/perseus/s.csv");
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/perseus/s.csv: cannot open schedule file: No such file or directory");
  }
  // A folder opens as an empty stream on Linux: it must be named as a folder, not read as an
  // empty file (the shared reader, also used by report --points/--reference and JSON inputs).
  const std::string folder = std::filesystem::temp_directory_path().string();
  try {
    load_schedule_csv(folder);
    ADD_FAILURE() << "a folder was read as a schedule";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), folder + ": cannot open schedule file: it is a folder, not a file");
  }
  try {
    write_schedule_csv(make_1f1b(2, 2), "/nonexistent/perseus/out.csv");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/perseus/out.csv: cannot write the file: No such file or directory");
  }
}

}  // namespace
}  // namespace perseus
