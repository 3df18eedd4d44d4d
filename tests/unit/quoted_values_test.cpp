// Error messages quote a bad input value short and escaped (quote_input()): a 10 MB field does
// not make a 10 MB message, and a value with a newline or an escape sequence cannot forge
// terminal output.
#include <gtest/gtest.h>

#include <string>

#include "perseus/error.hpp"
#include "perseus/json_input.hpp"
#include "perseus/dag.hpp"
#include "perseus/plan_files.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"
#include "perseus/schedule_io.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(QuoteInput, ShortPrintableValuesAreUnchanged) {
  EXPECT_EQ(quote_input("abc"), "'abc'");
  EXPECT_EQ(quote_input(""), "''");
  EXPECT_EQ(quote_input("1,5 µs – ok"), "'1,5 µs – ok'");  // UTF-8 text stays readable
  EXPECT_EQ(quote_input(std::string(80, 'x')), "'" + std::string(80, 'x') + "'");
}

TEST(QuoteInput, LongValuesAreCutWithTheirSize) {
  const std::string big = "1" + std::string(1 << 20, '0');
  EXPECT_EQ(quote_input(big), "'1" + std::string(79, '0') + "…' (1048577 bytes)");
  EXPECT_EQ(quote_input(std::string(81, 'x')), "'" + std::string(80, 'x') + "…' (81 bytes)");
  EXPECT_EQ(quote_input("abcdef", 3), "'abc…' (6 bytes)");
  // Never half a character: "é" is 2 bytes, the cut falls before it.
  EXPECT_EQ(escape_input("abé", 3), "ab…");
  EXPECT_EQ(escape_input("abé", 4), "abé");
}

TEST(QuoteInput, ControlCharactersAndInvalidBytesAreEscaped) {
  EXPECT_EQ(quote_input("a\nb"), "'a\\nb'");
  EXPECT_EQ(quote_input("a\r\tb"), "'a\\r\\tb'");
  EXPECT_EQ(quote_input("\x1b[31mred\x1b[0m"), "'\\x1B[31mred\\x1B[0m'");  // ANSI colour
  EXPECT_EQ(quote_input(std::string("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(quote_input("\x7f"), "'\\x7F'");
  EXPECT_EQ(quote_input("\xc2\x9b" "31m"), "'\\u009B31m'");  // the 8-bit CSI (U+009B)
  EXPECT_EQ(quote_input("\xff\xfe"), "'\\xFF\\xFE'");        // not UTF-8
  EXPECT_EQ(quote_input("\xed\xa0\x80"), "'\\xED\\xA0\\x80'");  // a UTF-16 surrogate is not UTF-8
  EXPECT_EQ(quote_input("C:\\tmp"), "'C:\\\\tmp'");  // a backslash is doubled: "\n" in the text stays distinct
  // Invisible and direction-changing characters would hide in the quote or reorder the line.
  EXPECT_EQ(quote_input("\xef\xbb\xbf" "0"), "'\\uFEFF0'");                // a BOM in the middle of a file
  EXPECT_EQ(quote_input("forward\xe2\x80\x8b"), "'forward\\u200B'");     // zero-width space
  EXPECT_EQ(quote_input("a\xe2\x80\xae" "b"), "'a\\u202Eb'");                // right-to-left override
  EXPECT_EQ(quote_input("\xe2\x81\xa6x"), "'\\u2066x'");                  // left-to-right isolate
  EXPECT_EQ(quote_input("caf\xc3\xa9 \xe2\x82\xac \xe4\xb8\xad"), "'caf\xc3\xa9 \xe2\x82\xac \xe4\xb8\xad'");  // text stays
  // Each escape counts the input bytes it stands for.
  const std::string newlines(1000, '\n');
  EXPECT_EQ(quote_input(newlines), "'" + [] {
    std::string s;
    for (int i = 0; i < 80; ++i) s += "\\n";
    return s;
  }() + "…' (1000 bytes)");
}

TEST(TerminalSafe, WholeMessagesKeepLinesAndBackslashesAndLoseControlCharacters) {
  // What the CLI and the Python module print errors with: a path nobody quoted must not clear
  // the screen or run 32 KB long; the message's own lines and quoted values stay as they are.
  EXPECT_EQ(terminal_safe("--profile: File does not exist: nope\x1b[2J.csv\nRun with --help"),
            "--profile: File does not exist: nope\\x1B[2J.csv\nRun with --help");
  EXPECT_EQ(terminal_safe("field 'time': got '8\\x1B[2J'"), "field 'time': got '8\\x1B[2J'");  // escaped once only
  EXPECT_EQ(terminal_safe("C:\\tmp\tx\r"), "C:\\tmp\\tx\\r");
  EXPECT_EQ(terminal_safe("\xc2\x9b" "31m \xff \xe2\x80\xae"), "\\u009B31m \\xFF \\u202E");
  EXPECT_EQ(terminal_safe(std::string(5000, 'x')), std::string(4096, 'x') + "…");
  EXPECT_EQ(terminal_safe("abcdef", 3), "abc…");
}

const std::string kHeader = "stage,instruction,frequency,time,energy\n";

// The user trial: a profile row whose time field is a huge string gave a message as large.
TEST(QuoteInput, ProfileErrorWithAHugeFieldIsShortAndNamesFileLineField) {
  for (const char* column : {"time", "instruction", "frequency", "stage"}) {
    std::string row = "0,forward,1410,0.1,20";
    const std::string big = "9" + std::string(1 << 20, 'x');
    const std::string col = column;
    if (col == "time") row = "0,forward,1410," + big + ",20";
    if (col == "instruction") row = "0," + big + ",1410,0.1,20";
    if (col == "frequency") row = "0,forward," + big + ",0.1,20";
    if (col == "stage") row = big + ",forward,1410,0.1,20";
    const std::string e = error_of([&] { parse_profile_csv(kHeader + "0,backward,1410,0.2,40\n" + row + "\n", "p.csv"); });
    EXPECT_LT(e.size(), 1024u) << col << ": " << e.size() << " bytes";
    EXPECT_EQ(e.rfind("p.csv:3: field '" + col + "': expected ", 0), 0u) << e;
    EXPECT_NE(e.find("'9xxxxxxx"), std::string::npos) << e;
    EXPECT_NE(e.find("…' (1048577 bytes)"), std::string::npos) << e;
  }
  // From a file, through the CLI: the same short message on stderr.
  testing::TempDir dir;
  const auto prof = dir.write("big.csv", kHeader + "0,forward,1410,0.1,20\n0,backward,1410," + std::string(1 << 20, '7') +
                                             "x,40\n");
  const auto r = testing::run("optimize --profile " + prof + " --stages 1 --microbatches 2 --p2p-power 50 --out " +
                              (dir.path() / "o").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_LT(r.output.size(), 1024u) << r.output.size() << " bytes";
  EXPECT_EQ(r.output.rfind("perseus: error: " + prof + ":3: field 'time': expected a number, got '777", 0), 0u)
      << r.output.substr(0, 300);
}

TEST(QuoteInput, EscapeSequencesInValuesCannotForgeOutput) {
  // A JSON plan's instruction may hold any character ("\u001b" is ESC); the message escapes it.
  const std::string e = error_of([] {
    const Schedule s = make_1f1b(1, 1);
    const Dag dag = Dag::build(s);
    (void)plan_frequencies_from_json(
        parse_json_text(R"({"ranks": [{"rank": 0, "instructions": [{"instruction": "\u001b[2J\nperseus: ok",)"
                        R"( "stage": 0, "microbatch": 0, "frequency_mhz": 1410}, {"frequency_mhz": 1410}]}]})",
                        "plan.json"),
        dag, "plan.json");
  });
  EXPECT_NE(e.find("unknown instruction '\\x1B[2J\\nperseus: ok'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // A schedule CSV action with a control character (a tab is text in CSV) and a huge one.
  const std::string tab = error_of([] { (void)parse_schedule_csv("0F0,0\tB0\n", "s.csv"); });
  EXPECT_NE(tab.find("'0\\tB0'"), std::string::npos) << tab;
  const std::string huge = error_of([] { (void)parse_schedule_csv("0F0," + std::string(1 << 20, 'Q') + "\n", "s.csv"); });
  EXPECT_LT(huge.size(), 1024u) << huge.size();
  EXPECT_NE(huge.find("(1048576 bytes) is not an action"), std::string::npos) << huge.substr(0, 300);
}

TEST(QuoteInput, MalformedJsonWithAHugeStringIsShort) {
  // An unescaped newline ends nlohmann's token "last read: '\"xxx...'", as long as the string.
  const std::string text = "{\"name\": \"" + std::string(1 << 20, 'x') + "\n\"}";
  const std::string e = error_of([&] { (void)parse_json_text(text, "big.json"); });
  EXPECT_LT(e.size(), 1024u) << e.size();
  EXPECT_EQ(e.rfind("big.json:1: field 'name': malformed JSON at column", 0), 0u) << e.substr(0, 300);
  EXPECT_NE(e.find("last read: '\"xxxx"), std::string::npos) << e;
  EXPECT_NE(e.find(" bytes)"), std::string::npos) << e;
  // A huge key names the field cut and escaped too.
  const std::string key = "{\"" + std::string(1000, 'k') + "\\u001b\": [1, x]}";  // the key ends with ESC
  const std::string k = error_of([&] { (void)parse_json_text(key, "k.json"); });
  EXPECT_LT(k.size(), 1024u) << k.size();
  EXPECT_NE(k.find("k.json:1: field '" + std::string(64, 'k') + "…[1]': malformed JSON"), std::string::npos) << k;
  EXPECT_EQ(k.find('\x1b'), std::string::npos) << k;
  const std::string esc = error_of([] { (void)parse_json_text("{\"a\\u001b[2J\": [x]}", "e.json"); });
  EXPECT_NE(esc.find("field 'a\\x1B[2J[0]'"), std::string::npos) << esc;
}

}  // namespace
}  // namespace perseus
