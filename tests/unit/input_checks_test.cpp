// Rough edges a new-user trial of the CLI found: each error path says what was wrong, where,
// and what was expected (exit 1 for input that does not fit a file, 2 for bad usage).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "perseus/error.hpp"
#include "perseus/job_report.hpp"
#include "perseus/json_input.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule_io.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

using testing::run;
using testing::TempDir;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A 2-rank, 2-chunk interleaved schedule CSV with 4 microbatches, written by `perseus schedule`.
std::string interleaved_csv(const TempDir& dir) {
  const std::string path = (dir.path() / "il.csv").string();
  const auto r = run("schedule --schedule interleaved-1f1b --stages 2 --microbatches 4 --chunks 2 --out " + path);
  EXPECT_EQ(r.status, 0) << r.output;
  return path;
}

// 1. `perseus schedule --schedule FILE` checks --stages/--microbatches/--chunks against the file.
TEST(CliInputChecks, ScheduleCsvOptionsMustMatchTheFile) {
  TempDir dir;
  const std::string csv = interleaved_csv(dir);
  const std::string out = " --out " + (dir.path() / "x.csv").string();
  auto r = run("schedule --schedule " + csv + " --stages 8" + out);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "--stages 8 does not match schedule file " + csv + ", which has 2 ranks (rows)")) << r.output;
  r = run("schedule --schedule " + csv + " --microbatches 3" + out);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "--microbatches 3 does not match schedule file " + csv + ", which has 4 microbatches"))
      << r.output;
  r = run("schedule --schedule " + csv + " --chunks 1" + out);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "--chunks 1 does not match schedule file " + csv + ", which has 2 chunks")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "x.csv"));
  // Matching values (or none) are fine.
  r = run("schedule --schedule " + csv + " --stages 2 --microbatches 4 --chunks 2" + out);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(testing::slurp(dir.path() / "x.csv"), testing::slurp(csv));
}

// 2. `perseus optimize --chunks V` with a schedule CSV of another chunk count is refused, 1 included.
TEST(CliInputChecks, OptimizeChunksMustMatchTheScheduleCsv) {
  TempDir dir;
  const std::string csv = interleaved_csv(dir);
  const std::string prof = testing::example("stage_profile_gpt3-175b_a100_sxm.csv");
  for (const char* chunks : {"1", "3"}) {
    const auto r = run("optimize --quiet --profile " + prof + " --schedule " + csv + " --chunks " + chunks +
                       " --p2p-power 83.64 --out " + (dir.path() / "o").string());
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_TRUE(has(r.output, std::string("--chunks ") + chunks + " does not match schedule file " + csv +
                                  ", which has 2 chunks (stages per rank): 4 stages on 2 ranks"))
        << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "o"));
  }
}

// 3. An out-of-range action names the file, line, action and the valid range.
TEST(CliInputChecks, ScheduleCsvActionOutOfRangeNamesTheRange) {
  auto error_of = [](const std::string& text) {
    try {
      (void)parse_schedule_csv(text, "s.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("0F0,0F9,0B0,0B1\n1F0,1F1,1B0,1B1\n"),
            "s.csv:1 (rank 0), action 2: '0F9': microbatch 9 is out of range; expected a microbatch id in 0..1, the "
            "microbatches the rest of the file runs");
  EXPECT_EQ(error_of("0F0,0B0,0F1,0B1\n1F0,1B0,1F1,3B1\n"),
            "s.csv:2 (rank 1), action 4: '3B1': stage 3 is out of range; expected a stage id in 0..1, the stages "
            "the rest of the file runs (2 ranks x 1 chunk(s) of stages)");
  // A skipped microbatch id is named as missing, not as a range error of the ids after it.
  EXPECT_EQ(error_of("0F0,0F2,0B0,0F3,0B2,0B3\n1F0,1B0,1F2,1B2,1F3,1B3\n"),
            "s.csv: microbatch 1 is missing: the file runs microbatches up to 3 but no action of microbatch 1 "
            "(microbatch ids must be 0..M-1 with none skipped)");
  // An interleaved file: stage 4 of 2 ranks x 2 chunks.
  EXPECT_TRUE(has(error_of("0F0,2F0,2B0,0B0,4F0\n1F0,3F0,3B0,1B0\n"),
                  "s.csv:1 (rank 0), action 5: '4F0': stage 4 is out of range; expected a stage id in 0..3, the "
                  "stages the rest of the file runs (2 ranks x 2 chunk(s) of stages)"));
  // A microbatch one rank runs whole (forward and backward) and another rank lacks: both readings
  // are named, the lacking line among them.
  EXPECT_EQ(error_of("0F0,0F1,0B0,0B1\n1F0,1B0\n"),
            "s.csv:1 (rank 0), action 2: '0F1': microbatch 1 is out of range; expected a microbatch id in 0..0, the "
            "microbatches the rest of the file runs (or, if the file runs microbatch 1, line 2 (rank 1) has no action "
            "of it)");
  // Another separator is named (the action would run into the next one).
  EXPECT_TRUE(has(error_of("0F0;0B0\n1F0;1B0\n"), "; the row looks separated by ';' (a spreadsheet's export): a "
                                                    "schedule CSV separates its actions with commas"));
  EXPECT_TRUE(has(error_of("0F0\t0B0\n1F0\t1B0\n"), "the row looks separated by '\\t'"));
  // A missing computation (no stray id) still says which one.
  EXPECT_TRUE(has(error_of("0F0,0B0,0F1,0B1\n1F0,1B0,1F1\n"), "computation '1B1' is missing"));
  // Through the CLI: exit 1 with the same message.
  TempDir dir;
  const auto path = dir.write("bad.csv", "0F0,0F9,0B0\n1F0,1B0\n");
  const auto r = run("schedule --schedule " + path + " --out -");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, path + ":1 (rank 0), action 2: '0F9': microbatch 9 is out of range; expected a "
                                   "microbatch id in 0..0"))
      << r.output;
}

// 4. `--out ''` is a usage error (exit 2) naming the option, for every command that takes --out.
TEST(CliInputChecks, EmptyOutPathIsAUsageError) {
  TempDir dir;
  const std::string prof = testing::test_data("cases/llama_a100_4st.csv");
  const auto job = dir.write("job.json", "{}");
  const std::pair<const char*, std::string> commands[] = {
      {"an output folder", "optimize --profile " + prof + " --stages 4 --microbatches 8 --p2p-power 75"},
      {"an output folder", "emulate --profile " + prof + " --stages 4 --microbatches 8 --global-batch 64 "
                           "--p2p-power 75 --tp 1 --time-scale 1 --slowdown 1.1"},
      {"an output file or -", "schedule --stages 2 --microbatches 2"},
      {"an output file", "report --job " + job},
  };
  for (const auto& [what, args] : commands) {
    const auto r = run(args + " --out ''");
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, std::string("--out: expected ") + what + ", got an empty path")) << args << "\n"
                                                                                                  << r.output;
  }
  // Input paths likewise (they said "File does not exist: ").
  const std::pair<const char*, const char*> inputs[] = {
      {"optimize --profile '' --stages 4 --microbatches 8 --p2p-power 75 --out x",
       "--profile: expected a profile CSV file, got an empty path ''"},
      {"emulate --profile '' --stages 4 --microbatches 8 --pipelines 2 --p2p-power 75 --slowdown 1.1 --out x",
       "--profile: expected a profile CSV file, got an empty path ''"},
      {"validate --real-gpu ''", "--real-gpu: expected a workload folder, got an empty path ''"},
  };
  for (const auto& [args, message] : inputs) {
    const auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
  }
}

// `perseus report ''` is an empty path (exit 2, naming the argument), not a missing DIR; so are
// its other path options, which '' would otherwise silently leave unset.
TEST(CliInputChecks, EmptyReportPathsAreUsageErrors) {
  const std::pair<const char*, std::string> cases[] = {
      {"report ''", "DIR: expected the output folder of perseus optimize, got an empty path ''"},
      {"report --job ''", "--job: expected a job export file, got an empty path ''"},
      {"report / --profile ''", "--profile: expected a profile CSV file, got an empty path ''"},
      {"report / --reference ''", "--reference: expected a reference frontier CSV file, got an empty path ''"},
      {"report / --points ' '", "--points: expected a points CSV file, got an empty path ' '"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
  }
  const auto none = run("report");  // nothing given: still "DIR or --job is required"
  EXPECT_EQ(none.status, 2) << none.output;
  EXPECT_TRUE(has(none.output, "DIR or --job is required")) << none.output;
}

// Every number option takes decimal numbers only (strtod also read "0x1p3" as 8, "inf",
// " 5"); every integer option decimal digits without a leading zero (CLI11 reads "010" as
// octal 8 and "0x10" as 16). Refused as usage errors (exit 2) naming the option.
TEST(CliInputChecks, NumberOptionsAreDecimalOnly) {
  TempDir dir;
  const std::string prof = testing::test_data("cases/llama_a100_4st.csv");
  const std::string optimize = "optimize --profile " + prof + " --stages 4 --microbatches 8 --p2p-power 75 --out " +
                               (dir.path() / "o").string();
  const std::string emulate = "emulate --profile " + prof + " --stages 4 --microbatches 8 --pipelines 2 "
                              "--p2p-power 75 --out " + (dir.path() / "e").string();
  const std::pair<std::string, std::string> cases[] = {
      {optimize + " --polish 0x1p3", "--polish: expected a number in [0, 86400] s, got '0x1p3'"},
      {optimize + " --polish inf", "--polish: expected a number in [0, 86400] s, got 'inf'"},
      {optimize + " --polish infinity", "--polish: expected a number in [0, 86400] s, got 'infinity'"},
      {optimize + " --unit-time NaN", "--unit-time: expected a number in [1e-07, 10] s, got 'NaN'"},
      {optimize + " --time-budget ' 5'", "--time-budget: expected a number in [0, 1000000000] s, got ' 5'"},
      {optimize + " --op-overhead '0.1 '", "--op-overhead: expected a number in [0, 3600] s, got '0.1 '"},
      {optimize + " --p2p-latency 1e999", "--p2p-latency: expected a number in [0, 3600] s, got '1e999'"},
      {optimize + " --p2p-latency 1e", "--p2p-latency: expected a number in [0, 3600] s, got '1e'"},
      {optimize + " --p2p-latency .", "--p2p-latency: expected a number in [0, 3600] s, got '.'"},
      {optimize + " --p2p-latency 1_0", "--p2p-latency: expected a number in [0, 3600] s, got '1_0'"},
      {optimize + " --backward-input-fraction 0x0.8p0", "--backward-input-fraction: expected a number in (0, 1), got"},
      {emulate + " --slowdown 0x1.2p0", "--slowdown: expected a number in [1, 100], got '0x1.2p0'"},
      {emulate + " --slowdown 1.1 --time-scale inf", "--time-scale: expected a number in (0, 1000000], got 'inf'"},
      {"validate --real-gpu " + dir.path().string() + " --p2p-latency 0x1p-4",
       "--p2p-latency: expected a number in [0, 3600] s, got '0x1p-4'"},
      {optimize + " --threads 010", "--threads: expected an integer in [0, 1024], got '010' (without leading zeros)"},
      {optimize + " --sample 0x10", "--sample: expected an integer in [0, 1000000000], got '0x10'"},
      {"schedule --schedule 1f1b --stages 010 --microbatches 2 --out -",
       "--stages: expected an integer in [1, 1048576], got '010' (without leading zeros)"},
      // An option given twice (CLI11: "--stages: At Most 1 required but received 2").
      {optimize + " --stages 3", "perseus optimize: error: --stages is given 2 times; give it once"},
      {emulate + " --slowdown 1.1 --global-batch 8 --global-batch 16",
       "perseus emulate: error: --global-batch is given 2 times; give it once"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "o"));
  // Decimal forms are all accepted (the run then stops at --out, a file: exit 1, not 2).
  const std::string file = dir.write("a_file", "x");
  for (const char* v : {"75", "+75", "75.", ".75e2", "7.5E+1", "750e-1", "-0"}) {
    const auto r = run("optimize --profile " + prof + " --stages 4 --microbatches 8 --p2p-power " + v + " --out " + file);
    EXPECT_EQ(r.status, 1) << v << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "exists and is not a folder")) << v << "\n" << r.output;
  }
  if (run("serve --help").status == 0) {  // built with the server
    for (const auto& [args, message] : std::initializer_list<std::pair<std::string, std::string>>{
             {"serve --port 0x10", "--port: expected an integer in [0, 65535], got '0x10'"},
             {"serve --threads 08", "--threads: expected an integer in [1, 256], got '08'"},
             {"serve --request-deadline-s inf", "--request-deadline-s: expected a number in [0.01, 3600] s, got 'inf'"},
             {"serve --zeus-no-auth-max-mb 0x10", "--zeus-no-auth-max-mb: expected a number in [0, 1000000] MiB"},
             {"serve --max-connections-per-ip -1", "--max-connections-per-ip: expected an integer in [0, 1000000]"},
         }) {
      const auto r = run(args);
      EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
      EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
    }
  }
}

// 9. A binary file given as a profile: "not a text CSV file" with the file and a real line number.
TEST(CliInputChecks, BinaryProfileIsNotATextCsvFile) {
  auto error_of = [](const std::string& text) {
    try {
      (void)parse_profile_csv(text, "p.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // No NUL byte, no newline: libfccp used to answer "Escaped string was not closed in line -1".
  EXPECT_EQ(error_of("\"\x8b\x1f\xff rest"), "p.csv:1: not a text CSV file: byte 0x8B at column 2 is not UTF-8 text (a "
                                            "binary or compressed file, or text in another encoding such as Latin-1: "
                                            "save it as UTF-8)");
  // UTF-16 is named, with what to do (session 32's trial: "binary or compressed?").
  EXPECT_EQ(error_of(std::string("\xFF\xFEs\0t\0", 6)),
            "p.csv:1: not a UTF-8 CSV file: it starts with a UTF-16 byte-order mark (0xFF 0xFE); save it as UTF-8 "
            "(e.g. iconv -f UTF-16 -t UTF-8)");
  EXPECT_EQ(error_of("stage,instruction,frequency,time,energy\n0,forward,1410,0.1,1\n\x01\x02\n"),
            "p.csv:3: not a text CSV file: byte 0x01 at column 1 is a control character (a binary or compressed "
            "file?)");
  // An overlong encoding and a UTF-16 surrogate are not UTF-8 (RFC 3629).
  EXPECT_EQ(error_of("a\xC0\xAF\n"), "p.csv:1: not a text CSV file: byte 0xC0 at column 2 is not UTF-8 text (a "
                                     "binary or compressed file, or text in another encoding such as Latin-1: save "
                                     "it as UTF-8)");
  EXPECT_EQ(error_of("ab\n\xED\xA0\x80\n"), "p.csv:2: not a text CSV file: byte 0xED at column 1 is not UTF-8 text (a "
                                           "binary or compressed file, or text in another encoding such as Latin-1: "
                                           "save it as UTF-8)");
  // UTF-8 text (an extra column with a unit sign) is text.
  EXPECT_EQ(error_of("stage,instruction,frequency,time,energy,note\n0,forward,1410,0.1,1,µs → s\n0,backward,1410,0.2,2,"
                     "x\n"),
            "no error");
  // An unclosed quote in the header: a line number, not libfccp's -1.
  const auto unclosed = error_of("\"stage,instruction,frequency,time,energy\n0,forward,1410,0.1,1\n");
  EXPECT_FALSE(has(unclosed, "-1")) << unclosed;
  EXPECT_TRUE(has(unclosed, "p.csv:1: the header has an unclosed quote")) << unclosed;
  // Through the CLI, with a gzip'd profile: exit 1, the file named.
  TempDir dir;
  const auto path = dir.write("gz.csv", std::string("\x1f\x8b\x08\x08\xa5\x9c", 6) + "x\xc3\x28");
  const auto r = run("optimize --profile " + path + " --stages 4 --microbatches 8 --p2p-power 75 --out " +
                     (dir.path() / "o").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, path + ":1: not a text CSV file: byte 0x1F at column 1 is a control character")) << r.output;
}

// 7. JSON numbers outside a double and malformed JSON: the field path and line, no library text.
TEST(JsonInput, NumberOutOfRangeNamesTheFieldAndLine) {
  try {
    (void)parse_json_text("{\"ranks\": [{\"rank\": 0},\n {\"time_s\": 1e400}]}", "plan.json");
    FAIL() << "no error";
  } catch (const JsonTextError& e) {
    EXPECT_TRUE(e.number_out_of_range());
    EXPECT_EQ(e.field(), "ranks[1].time_s");
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(std::string(e.what()), "plan.json:2: field 'ranks[1].time_s': number 1e400 is outside the range of a "
                                     "double (±1.8e308); expected a finite number");
  }
  try {
    (void)parse_json_text("{\"a\": [1, 2,\n\n  x]}", "f.json");
    FAIL() << "no error";
  } catch (const JsonTextError& e) {
    EXPECT_FALSE(e.number_out_of_range());
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.column(), 3);
    EXPECT_TRUE(has(e.what(), "f.json:3: field 'a[2]': malformed JSON at column 3: syntax error")) << e.what();
    EXPECT_FALSE(has(e.what(), "json.exception")) << e.what();
  }
  // Python's json.dump writes NaN / Infinity: the message says why they fail (session 27's trial).
  for (const char* text : {"{\"a\": [1.0, NaN]}", "{\"a\": -Infinity}", "{\"a\": [Infinity, 1]}"}) {
    try {
      (void)parse_json_text(text, "nan.json");
      FAIL() << text;
    } catch (const JsonTextError& e) {
      EXPECT_TRUE(has(e.what(), "(NaN and Infinity are not JSON: give a finite number)")) << e.what();
    }
  }
  try {
    (void)parse_json_text("{\"a\": [1, Nope]}", "n.json");
    FAIL();
  } catch (const JsonTextError& e) {
    EXPECT_FALSE(has(e.what(), "NaN")) << e.what();
  }
  EXPECT_EQ(parse_json_text(" {\"a\": [1, {\"b\": null}]} ", "ok.json"),
            nlohmann::json::parse(R"({"a": [1, {"b": null}]})"));
  EXPECT_THROW((void)parse_json_text("{} {}", "two.json"), JsonTextError);
  EXPECT_THROW((void)parse_json_text("", "empty.json"), JsonTextError);
}

// A bad value is shown in one short line whatever it is: a number field holding 100,000 nested
// arrays crashed `perseus report` / `validate` / `emulate` with SIGSEGV (dump() recursed), a 1 MB
// string was quoted whole and a right-to-left override raw (fresh-user fuzzing, session 20).
TEST(JsonInput, BadValuesAreDescribedBoundedAndEscaped) {
  const std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
  try {
    (void)parse_json_text("{\"t\": " + deep + "}", "deep.json");
    FAIL() << "no error";
  } catch (const JsonTextError& e) {
    EXPECT_EQ(std::string(e.what()), "deep.json:1: malformed JSON at column 70: arrays and objects nest deeper than 64 "
                                     "levels");
  }
  const std::string nested = std::string(63, '[') + "1" + std::string(63, ']');
  EXPECT_EQ(describe_json_value(parse_json_text("{\"t\": " + nested + "}", "ok.json").at("t")), "an array of 1 value");
  EXPECT_EQ(describe_json_value(nlohmann::json::object()), "an empty object");
  EXPECT_EQ(describe_json_value(nlohmann::json{{"a", 1}, {"b", 2}}), "an object of 2 keys");
  EXPECT_EQ(describe_json_value(nlohmann::json(2.5)), "2.5");
  EXPECT_EQ(describe_json_value(nlohmann::json(nullptr)), "null");
  EXPECT_EQ(describe_json_value(nlohmann::json("\u202etwo\u0085")), "'\\u202Etwo\\u0085'");
  const std::string long_value = describe_json_value(nlohmann::json(std::string(1 << 20, '7')));
  EXPECT_LT(long_value.size(), 120u) << long_value;
  EXPECT_TRUE(has(long_value, "(1048576 bytes)")) << long_value;
  // Through a reader: the job export's first field.
  TempDir dir;
  const auto path = dir.write("job.json", "{\"job_id\": [[1]]}");
  try {
    (void)load_job_export(path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_TRUE(has(e.what(), "field 'job_id': expected a string, got an array of 1 value")) << e.what();
  }
}

// 7/8 through the CLI: a real-GPU run's info.json with 1e400, and with a pp beyond 64 bits.
TEST(CliInputChecks, ValidateInfoJsonNamesFieldAndRange) {
  TempDir dir;
  const auto folder = dir.path() / "run";
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "info.json") << "{\"pp\": 4,\n \"num_microbatches\": 1e400}";
  auto r = run("validate --real-gpu " + folder.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "info.json:2: field 'num_microbatches': number 1e400 is outside the range of a double"))
      << r.output;
  EXPECT_FALSE(has(r.output, "json.exception")) << r.output;
  std::ofstream(folder / "info.json") << "{\"pp\": 99999999999999999999, \"num_microbatches\": 4}";
  r = run("validate --real-gpu " + folder.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "info.json: field 'pp': expected an integer in [1, 1048576], got 1e+20")) << r.output;
}

}  // namespace
}  // namespace perseus
