// The gpud config file: every error names file, line and field; the allow matrix.
#include <cstdio>
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "perseus/error.hpp"
#include "perseus/gpud/config.hpp"

namespace {

using perseus::gpud::GpudConfig;
using perseus::gpud::parse_gpud_config;
using perseus::gpud::PeerCredentials;

std::string error_of(const std::string& text) {
  try {
    parse_gpud_config(text, "gpud.conf");
  } catch (const perseus::InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(GpudConfig, ParsesEveryDirective) {
  const GpudConfig c = parse_gpud_config(
      "# comment\n"
      "socket /tmp/x/gpud.sock\n"
      "socket_mode 0600   # owner only\n"
      "socket_group 0\n"
      "state_dir /tmp/x/state\n"
      "backend dry-run\n"
      "library /opt/lib.so\n"
      "gpus 1 0\n"
      "rate_limit 5 10\n"
      "max_clients 3\n"
      "allow 0 uid:1000 group:root\n"
      "allow * gid:50\n",
      "gpud.conf");
  EXPECT_EQ(c.socket_path, "/tmp/x/gpud.sock");
  EXPECT_EQ(c.socket_mode, 0600u);
  EXPECT_EQ(c.socket_gid, 0u);
  EXPECT_EQ(c.backend, "dry-run");
  EXPECT_EQ(c.gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(c.rate_per_s, 5);
  EXPECT_EQ(c.rate_burst, 10);
  EXPECT_EQ(c.max_clients, 3);
  ASSERT_EQ(c.rules.size(), 2u);
  EXPECT_EQ(c.rules[0].line, 11);
}

TEST(GpudConfig, ErrorsNameFileLineAndField) {
  EXPECT_EQ(error_of("allow * uid:1\nsocket_mode 0666\n"),
            "gpud.conf:2: field 'socket_mode': 0666 gives access to every user of the machine; use 0660 or stricter "
            "(access is granted through socket_group and allow rules)");
  EXPECT_EQ(error_of("allow * uid:1\nsocket_mode 0662\n").substr(0, 32), "gpud.conf:2: field 'socket_mode'");
  EXPECT_EQ(error_of("allow * uid:1\nsocket_mode 9\n"), "gpud.conf:2: field 'socket_mode': '9' is not an integer");
  EXPECT_EQ(error_of("allow * user:no-such-user-perseus\n"), "gpud.conf:1: field 'allow': unknown user 'no-such-user-perseus'");
  EXPECT_EQ(error_of("allow * group:no-such-group-perseus\n"),
            "gpud.conf:1: field 'allow': unknown group 'no-such-group-perseus'");
  EXPECT_EQ(error_of("allow 0 alice\n"),
            "gpud.conf:1: field 'allow': 'alice' is not a principal (expected user:NAME, uid:N, group:NAME or gid:N)");
  EXPECT_EQ(error_of("allow 300 uid:1\n"), "gpud.conf:1: field 'allow': 300 is out of range 0..255");
  // Beyond long long it is still an integer, only out of range (it said "is not an integer").
  EXPECT_EQ(error_of("allow * uid:1\nmax_clients 99999999999999999999\n"),
            "gpud.conf:2: field 'max_clients': 99999999999999999999 is out of range 1..4096");
  EXPECT_EQ(error_of("allow * uid:1\nmax_clients 12x\n"), "gpud.conf:2: field 'max_clients': '12x' is not an integer");
  EXPECT_EQ(error_of("allow 0\n"), "gpud.conf:1: field 'allow': expected 'allow GPU|* user:NAME|uid:N|group:NAME|gid:N ...'");
  EXPECT_EQ(error_of("\n\nlisten 80\nallow * uid:1\n").substr(0, 34), "gpud.conf:3: field 'listen': unkno");
  EXPECT_EQ(error_of("allow * uid:1\nbackend cuda\n"),
            "gpud.conf:2: field 'backend': unknown backend 'cuda' (expected nvml, rocm-smi or dry-run)");
  // Caught by the config check itself (so `perseus gpud --check` says it), not only at start.
  EXPECT_NE(error_of("allow * uid:1\nbackend dry-run\n").find("backend dry-run needs a 'gpus' list"),
            std::string::npos);
  EXPECT_EQ(error_of("allow * uid:1\nsocket relative.sock\n"), "gpud.conf:2: field 'socket': 'relative.sock' must be an absolute path");
  EXPECT_EQ(error_of("allow * uid:1\nrate_limit 0 5\n"), "gpud.conf:2: field 'rate_limit': '0' is not a positive number below 1e6");
  EXPECT_EQ(error_of("gpus 0 1\nallow 2 uid:1\n"), "gpud.conf:2: field 'allow': GPU 2 is not in the 'gpus' list this helper serves");
  EXPECT_EQ(error_of("gpus 0 0\nallow * uid:1\n"), "gpud.conf:1: field 'gpus': a GPU is listed twice");
  EXPECT_EQ(error_of("socket /x.sock\n"), "gpud.conf: field 'allow': no allow rule: nobody could use the helper (add e.g. "
                                          "'allow * group:perseus')");
  EXPECT_EQ(error_of(""), error_of("# only a comment\n"));
  // A single-value directive given twice: the second would silently win.
  EXPECT_EQ(error_of("socket /a.sock\nallow * uid:0\nsocket /b.sock\n"),
            "gpud.conf:3: field 'socket': given twice (first on line 1); give it once");
  EXPECT_EQ(error_of("allow * uid:0\nallow 0 uid:1\nbackend dry-run\ngpus 0\n"), "accepted") << "allow rules add up";
  // A NUL byte: named, not copied into the message (it would cut the message short).
  const std::string with_nul = error_of(std::string("allow * uid:0\n\0junk\n", 20));
  EXPECT_EQ(with_nul, "gpud.conf:2: field 'config': the line contains a NUL byte");
  // Terminal escapes, direction marks and long values are escaped and cut like every quoted
  // input: they reached the terminal raw, a 1 MB word whole (fresh-user fuzzing, session 20).
  EXPECT_EQ(error_of("allow * user:\x1b[2Jx\n"), "gpud.conf:1: field 'allow': unknown user '\\x1B[2Jx'");
  EXPECT_EQ(error_of("\x1b[31mbogus 1\n"), "gpud.conf:1: field '\\x1B[31mbogus': unknown directive (expected socket, "
                                           "socket_mode, socket_group, state_dir, backend, library, dry_run_log, gpus, "
                                           "rate_limit, max_clients or allow)");
  EXPECT_EQ(error_of("allow * uid:1\nstate_dir \u2066/tmp/x\n"),
            "gpud.conf:2: field 'state_dir': '\\u2066/tmp/x' must be an absolute path");
  const std::string long_error = error_of("allow * user:" + std::string(1 << 20, 'a') + "\n");
  EXPECT_LT(long_error.size(), 200u);
  EXPECT_NE(long_error.find("(1048576 bytes)"), std::string::npos) << long_error;
}

TEST(GpudConfig, MissingFileIsAnInputError) {
  EXPECT_THROW(perseus::gpud::load_gpud_config("/nonexistent/gpud.conf"), perseus::InputError);
  auto load_error = [](const std::string& path) {
    try {
      perseus::gpud::load_gpud_config(path);
    } catch (const perseus::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(load_error("/nonexistent/gpud.conf"),
            "/nonexistent/gpud.conf: cannot open the gpud config file: No such file or directory");
  // A folder is named as one, not parsed as an empty file ("no allow rule").
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(load_error(dir), dir + ": cannot open the gpud config file: it is a folder, not a file");
  // A device is refused before any read (session 32's trial: /dev/zero was read without end).
  EXPECT_EQ(load_error("/dev/zero"),
            "/dev/zero: cannot read the gpud config file: it is not a regular file (a device, FIFO or socket)");
  // A file beyond the limit is refused, not read into memory.
  const std::string big = dir + "/perseus-gpud-big-" + std::to_string(::getpid()) + ".conf";
  {
    std::FILE* f = std::fopen(big.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string line = "# " + std::string(1000, 'x') + "\n";
    for (std::size_t written = 0; written <= perseus::gpud::kMaxGpudConfigBytes; written += line.size())
      std::fputs(line.c_str(), f);
    std::fclose(f);
  }
  EXPECT_NE(load_error(big).find("cannot read the gpud config file: it is larger than"), std::string::npos) << load_error(big);
  std::remove(big.c_str());
}

TEST(GpudConfig, AllowMatrixByUserPrimaryGroupAndSupplementaryGroup) {
  const GpudConfig c = parse_gpud_config("allow 0 uid:1000\nallow 1 gid:200\nallow * gid:300\n", "t");
  PeerCredentials alice{1, 1000, 100, {}};
  PeerCredentials bob{2, 1001, 200, {}};
  PeerCredentials carol{3, 1002, 100, {300}};
  PeerCredentials mallory{4, 1003, 100, {201, 299}};
  EXPECT_TRUE(c.allows(0, alice));
  EXPECT_FALSE(c.allows(1, alice));
  EXPECT_FALSE(c.allows(0, bob));
  EXPECT_TRUE(c.allows(1, bob));
  EXPECT_TRUE(c.allows(0, carol));
  EXPECT_TRUE(c.allows(7, carol));
  EXPECT_FALSE(c.allows(0, mallory));
  EXPECT_FALSE(c.allows(1, mallory));
}

}  // namespace
