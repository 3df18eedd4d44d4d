// read_input_file() and keep_stream_input(): regular files and streams (pipes, /dev/stdin,
// character devices), one size limit for both; `perseus optimize --profile /dev/stdin`.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <string>

#include "perseus/error.hpp"
#include "perseus/input_file.hpp"
#include "perseus/profile.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;

/// A pipe holding `text` with its write end closed, readable through "/dev/fd/N" (as bash's
/// `<(cmd)` hands it over). `text` must fit the pipe's buffer (64 KiB).
class Pipe {
 public:
  /// `min_fd`: the lowest descriptor number for the read end (a kept stream's "/dev/fd/N" is not
  /// reused by a later pipe of the same test binary).
  explicit Pipe(const std::string& text, int min_fd = 0) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    read_fd_ = min_fd > 0 ? ::fcntl(fds[0], F_DUPFD_CLOEXEC, min_fd) : fds[0];
    if (min_fd > 0) ::close(fds[0]);
    EXPECT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fds[1]);
  }
  ~Pipe() { ::close(read_fd_); }
  std::string path() const { return "/dev/fd/" + std::to_string(read_fd_); }

 private:
  int read_fd_ = -1;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const char* kProfile =
    "stage,instruction,frequency,time,energy\n"
    "0,forward,1410,0.1,20\n0,backward,1410,0.2,40\n1,forward,1410,0.1,20\n1,backward,1410,0.2,40\n";

TEST(InputFile, ReadsAPipeToItsEnd) {
  const Pipe pipe(kProfile);
  EXPECT_EQ(read_input_file(pipe.path()), kProfile);
  const Pipe second(kProfile);
  const Profile p = load_profile_csv(second.path(), 2);  // the profile reader reads streams too
  EXPECT_EQ(p.num_stages(), 2);
}

// Before: the second read of a pipe saw its end and reported "the file is empty".
TEST(InputFile, KeptStreamReadsTheSameTextEveryTime) {
  const Pipe pipe(kProfile, 500);
  keep_stream_input(pipe.path(), "profile");
  EXPECT_EQ(read_input_file(pipe.path()), kProfile);
  EXPECT_EQ(load_profile_csv(pipe.path()).num_stages(), 2);
  EXPECT_EQ(load_profile_csv(pipe.path()).num_stages(), 2);
  keep_stream_input(pipe.path(), "profile");  // kept already: not read again
  EXPECT_EQ(read_input_file(pipe.path()), kProfile);
  // A regular file is not kept: a later read sees its current content.
  testing::TempDir tmp;
  const std::string file = tmp.write("p.csv", "one");
  keep_stream_input(file);
  tmp.write("p.csv", "two");
  EXPECT_EQ(read_input_file(file), "two");
  // Nor is a missing path or a folder: their readers say what they are.
  keep_stream_input((tmp.path() / "missing.csv").string());
  keep_stream_input(tmp.path().string());
  EXPECT_NE(error_of([&] { read_input_file((tmp.path() / "missing.csv").string(), "profile"); })
                .find("missing.csv: cannot open profile: No such file or directory"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { read_input_file(tmp.path().string()); }),
            tmp.path().string() + ": cannot open the file: it is a folder, not a file");
  // An empty path: the message says so (it was ": cannot open profile: No such file or
  // directory", naming nothing; perseus.optimize('') in session 30's trial).
  EXPECT_EQ(error_of([&] { read_input_file("", "profile"); }),
            "cannot open profile: the path is empty (expected a file's path)");
}

// An endless stream is refused once it passes the limit, not read into memory without bound;
// a regular file over the limit is refused before it is read.
TEST(InputFile, SizeLimitForStreamsAndFiles) {
  EXPECT_EQ(error_of([] { read_input_file("/dev/zero", "profile", 1 << 20); }),
            "/dev/zero:1: contains a NUL byte (expected text; a binary stream?)");  // at its first byte
  testing::TempDir tmp;
  const std::string file = tmp.write("big.csv", std::string(1001, 'x'));
  EXPECT_EQ(error_of([&] { read_input_file(file, "the file", 1000); }),
            file + ": cannot read the file: it is larger than 1000 bytes, the most an input file may have");
  EXPECT_EQ(read_input_file(file, "the file", 1001).size(), 1001u);
  const Pipe pipe(std::string(1001, 'x'));
  EXPECT_NE(error_of([&] { read_input_file(pipe.path(), "the file", 1000); }).find("larger than 1000 bytes"),
            std::string::npos);
  const Pipe exact(std::string(1000, 'x'));
  EXPECT_EQ(read_input_file(exact.path(), "the file", 1000).size(), 1000u);
}

// The user trial: `--profile /dev/urandom` read 256 MiB before "not a text CSV file". A stream
// is refused at its first NUL byte as it arrives (with the line it is on); a regular file's
// parser reports it as before.
TEST(InputFile, BinaryStreamIsRefusedAtItsFirstNulByte) {
  EXPECT_NE(error_of([] { read_input_file("/dev/urandom", "profile"); }).find(": contains a NUL byte (expected text"),
            std::string::npos);
  const Pipe pipe(std::string("a,b\nc,d\n") + std::string(1, '\0') + "e\n");
  EXPECT_EQ(error_of([&] { read_input_file(pipe.path()); }),
            pipe.path() + ":3: contains a NUL byte (expected text; a binary stream?)");
  testing::TempDir tmp;
  const std::string file = tmp.write("nul.csv", std::string("a\n") + std::string(1, '\0'));
  EXPECT_EQ(read_input_file(file).size(), 3u);  // a regular file: its parser names the byte
}

/// Exit status and output of a shell command line.
testing::Result shell(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  return {WEXITSTATUS(::pclose(p)), out};
}

// The user trial: `cat FILE | perseus optimize --profile /dev/stdin` and `--profile <(cat FILE)`
// said "/dev/fd/63: the file is empty" (the profile is read three times).
TEST(InputFileCli, OptimizeReadsTheProfileFromAPipe) {
  testing::TempDir tmp;
  const std::string csv = testing::example("stage_profile_gpt3-175b_a100_sxm.csv");
  const std::string args = " optimize --quiet --profile /dev/stdin --stages 8 --microbatches 4 --p2p-power 83.64 "
                           "--unit-time 0.005 --out ";
  const auto piped = shell("cat " + csv + " | " + PERSEUS_BINARY + args + (tmp.path() / "piped").string());
  ASSERT_EQ(piped.status, 0) << piped.output;
  EXPECT_NE(piped.output.find("intrinsic bloat removed"), std::string::npos) << piped.output;
  const auto file = testing::run(args.substr(1) + (tmp.path() / "file").string() + " < " + csv);
  ASSERT_EQ(file.status, 0) << file.output;
  // The same plans as from the file itself; the planned profile copy is complete.
  const auto direct = testing::run("optimize --quiet --profile " + csv +
                                   " --stages 8 --microbatches 4 --p2p-power 83.64 --unit-time 0.005 --out " +
                                   (tmp.path() / "direct").string());
  ASSERT_EQ(direct.status, 0) << direct.output;
  for (const char* f : {"frontier.csv", "profile.csv"}) {
    EXPECT_EQ(testing::slurp(tmp.path() / "piped" / f), testing::slurp(tmp.path() / "direct" / f)) << f;
    EXPECT_EQ(testing::slurp(tmp.path() / "file" / f), testing::slurp(tmp.path() / "direct" / f)) << f;
  }
  // A bad row read from a pipe is reported with the path it was read from, line and field.
  const auto bad = shell("printf 'stage,instruction,frequency,time,energy\\n0,forward,1410,x,20\\n' | " +
                         std::string(PERSEUS_BINARY) + args + (tmp.path() / "bad").string());
  EXPECT_EQ(bad.status, 1) << bad.output;
  EXPECT_NE(bad.output.find("/dev/stdin:2: field 'time': expected a number, got 'x'"), std::string::npos)
      << bad.output;
  // emulate reads a piped profile too.
  const auto emu = testing::run("emulate --profile /dev/stdin --stages 8 --microbatches 12 --pipelines 4 "
                                "--p2p-power 83.64 --unit-time 0.01 --slowdown 1.1 --out " +
                                (tmp.path() / "emu").string() + " < " + csv);
  EXPECT_EQ(emu.status, 0) << emu.output;
}

// `--schedule /dev/stdin` was refused as "not a regular file (a FIFO or device)" (a leftover of
// session 26's trial): a schedule CSV from a pipe plans like the file, and report draws it.
TEST(InputFileCli, OptimizeReadsTheScheduleFromAPipe) {
  testing::TempDir tmp;
  const std::string schedule = (tmp.path() / "s.csv").string();
  ASSERT_EQ(testing::run("schedule --schedule 1f1b --stages 4 --microbatches 4 --out " + schedule).status, 0);
  const std::string args = " optimize --quiet --profile " + testing::test_data("cases/llama_a100_4st.csv") +
                           " --p2p-power 75 --unit-time 0.005 --out ";
  const auto piped = shell("cat " + schedule + " | " + PERSEUS_BINARY + args + (tmp.path() / "piped").string() +
                           " --schedule /dev/stdin");
  ASSERT_EQ(piped.status, 0) << piped.output;
  const auto direct = testing::run(args.substr(1) + (tmp.path() / "direct").string() + " --schedule " + schedule);
  ASSERT_EQ(direct.status, 0) << direct.output;
  for (const char* f : {"frontier.csv", "schedule.csv"}) {
    EXPECT_EQ(testing::slurp(tmp.path() / "piped" / f), testing::slurp(tmp.path() / "direct" / f)) << f;
  }
  const auto report = testing::run("report " + (tmp.path() / "piped").string());
  EXPECT_EQ(report.status, 0) << report.output;
  // A bad row read from the pipe names the path it was read from.
  const auto bad = shell("printf '0F0,0X9\\n' | " + std::string(PERSEUS_BINARY) + args +
                         (tmp.path() / "bad").string() + " --schedule /dev/stdin");
  EXPECT_EQ(bad.status, 1) << bad.output;
  EXPECT_NE(bad.output.find("/dev/stdin:1 (rank 0), action 2: '0X9' has unknown kind 'X'"), std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(tmp.path() / "bad"));
  // One stream cannot be both the profile and the schedule (the profile was reported as a bad
  // schedule; session 27's trial).
  const auto twice = shell("cat " + schedule + " | " + std::string(PERSEUS_BINARY) +
                           " optimize --profile /dev/stdin --schedule /dev/stdin --p2p-power 75 --out " +
                           (tmp.path() / "twice").string());
  EXPECT_EQ(twice.status, 2) << twice.output;
  EXPECT_NE(twice.output.find("--schedule: reads the same stream as --profile (/dev/stdin), which can be read once"),
            std::string::npos)
      << twice.output;
}

TEST(InputFileCli, EndlessStreamIsRefused) {
  testing::TempDir tmp;
  const std::string out = " --p2p-power 83.64 --out " + (tmp.path() / "o").string();
  // An endless text stream: at the size limit.
  const auto endless = shell("yes 0,forward,1410,1,100 | " + std::string(PERSEUS_BINARY) +
                             " optimize --stages 8 --microbatches 4 --profile /dev/stdin" + out);
  EXPECT_EQ(endless.status, 1) << endless.output;
  EXPECT_EQ(endless.output,
            "perseus: error: /dev/stdin: cannot read profile: it is larger than 268435456 bytes (256 MiB), the most "
            "an input file may have\n");
  // An endless binary stream: at its first NUL byte.
  const auto zero = testing::run("optimize --stages 8 --microbatches 4 --profile /dev/zero" + out);
  EXPECT_EQ(zero.status, 1) << zero.output;
  EXPECT_EQ(zero.output, "perseus: error: /dev/zero:1: contains a NUL byte (expected text; a binary stream?)\n");
  EXPECT_FALSE(fs::exists(tmp.path() / "o"));
}

}  // namespace
}  // namespace perseus
