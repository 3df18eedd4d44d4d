// `perseus serve` start checks: empty paths are usage errors (exit 2), a token or a Zeus
// setting that cannot work stops the start naming the file or option (exit 1).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "perseus/error.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

struct ServeRun {
  int status = -1;
  std::string output;
};

/// Runs `perseus serve ARGS` in `cwd` with $PERSEUS_TOKEN set, stdout and stderr together. Each
/// case is expected to exit at once; `timeout` only guards against a server that did start.
ServeRun serve(const std::string& cwd, const std::string& args,
              const std::string& token_env = std::string("PERSEUS_TOKEN=") + kToken) {
  const std::string cmd = "cd '" + cwd + "' && " + token_env + " timeout 60 " + PERSEUS_BINARY +
                          " serve --port 0 " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ServeRun r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) r.output += buf.data();
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// Runs `script` with sh, stdout (and whatever the script redirects there) as text.
std::string shell_output(const std::string& script) {
  FILE* p = ::popen(script.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  ::pclose(p);
  return out;
}

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name)) << text;
  std::filesystem::permissions(dir.file(name), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return dir.file(name);
}

// `--db ''` was SQLite's temporary database, with the token written to ./.token.
TEST(ServeCli, EmptyPathsAreUsageErrors) {
  TempDir dir;
  const std::pair<std::string, std::string> cases[] = {
      {"--db ''", "--db: expected a database file (or :memory:), got an empty path ''"},
      {"--db :memory: --token-file ''", "--token-file: expected a token file, got an empty path ''"},
      {"--db :memory: --port-file ''", "--port-file: expected a file for the port, got an empty path ''"},
      {"--db :memory: --zeus-plan ''", "--zeus-plan: expected a Zeus plan file or folder, got an empty path ''"},
      {"--db :memory: --zeus-profile ''", "--zeus-profile: expected a profile CSV file, got an empty path ''"},
  };
  for (const auto& [args, message] : cases) {
    const ServeRun r = serve(dir.path.string(), args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << ": " << r.output;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path)) << "nothing written, no .token";
}

TEST(ServeCli, AShortTokenNamesItsFile) {
  TempDir dir;
  const std::string token = write(dir, "short.token", "abcde\n");
  const ServeRun r = serve(dir.path.string(), "--db :memory: --token-file " + token);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(token + ": the token in the file has 5 characters; expected a bearer token of at least 16"),
            std::string::npos)
      << r.output;
}

// A token with a space passed the length check, yet neither perseus.Client nor the Python API
// can send it (fresh-user trial, session 20): refused at start, naming the file or variable.
TEST(ServeCli, ATokenNoClientCanSendIsRefused) {
  TempDir dir;
  const std::string token = write(dir, "spaced.token", "correct horse battery staple\n");
  ServeRun r = serve(dir.path.string(), "--db :memory: --token-file " + token);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(token + ": holds a token with a space at character 8: no Perseus client can send it"),
            std::string::npos)
      << r.output;
  r = serve(dir.path.string(), "--db :memory:", "PERSEUS_TOKEN='0123456789abcdef\tx'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("PERSEUS_TOKEN holds a token with a control character or non-ASCII byte at character 17"),
            std::string::npos)
      << r.output;
  ServerOptions opt;
  opt.db_path = ":memory:";
  opt.token = "correct horse battery staple";
  EXPECT_THROW(Server{opt}, perseus::InputError);
}

// Zeus settings that no registration could use stop the start, naming the option or file.
TEST(ServeCli, ZeusSettingsAreCheckedAtStart) {
  TempDir dir;
  const std::string plan = write(dir, "z4.py", "[[1410, 1410, 1170, 1170], [1410, 1410, 1410, 1410]]\n");
  ServeRun r = serve(dir.path.string(), "--db :memory: --zeus-plan " + plan + " --zeus-schedule bogus");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--zeus-schedule: 'bogus' is not a schedule name; expected one of "), std::string::npos)
      << r.output;
  const std::string uneven = write(dir, "uneven.py", "[[1410, 1410], [1410]]\n");
  r = serve(dir.path.string(), "--db :memory: --zeus-plan " + uneven);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(uneven + ": stage 1 has 1 computations, the schedule has 2"), std::string::npos) << r.output;
  const std::string profile = write(dir, "p.csv",
                                    "stage,instruction,frequency,time,energy\n0,forward,1410,0.03,11\n"
                                    "0,backward,1410,0.06,22\n1,forward,1410,0.03,11\n1,backward,1410,0.06,22\n");
  r = serve(dir.path.string(), "--db :memory: --zeus-plan " + plan + " --zeus-profile " + profile);
  EXPECT_EQ(r.status, 2) << r.output;  // P_block is never a silent 0 W
  EXPECT_NE(r.output.find("--zeus-profile requires --zeus-p2p-power-w"), std::string::npos) << r.output;
  r = serve(dir.path.string(), "--db :memory: --zeus-plan " + plan + " --zeus-profile " + profile + " --zeus-p2p-power-w 80");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(plan + ": plan: 1170 MHz is not in the profile for stage 0"), std::string::npos) << r.output;
}

// Session 14's trial: `perseus serve` on a taken port left the new <db> and <db>.lock behind,
// and a --port-file outlived the server that wrote it.
TEST(ServeCli, AFailedStartLeavesNoNewFilesAndThePortFileGoesWithTheServer) {
  TempDir dir;
  const int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string port = std::to_string(ntohs(a.sin_port));
  const std::string cmd = "cd '" + dir.path.string() + "' && PERSEUS_TOKEN=" + kToken + " timeout 60 " +
                          PERSEUS_BINARY + " serve --port " + port + " --db new.db 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int st = ::pclose(p);
  ::close(taken);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0) << out;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path)) << "left behind after: " << out;
  // --db naming a file that is not a database: refused, and its <file>.lock (made by this start)
  // was left beside it (session 16's trial).
  std::ofstream(dir.path / "notes.csv") << "a,b\n1,2\n";
  const std::string not_db = "cd '" + dir.path.string() + "' && PERSEUS_TOKEN=" + kToken + " timeout 60 " +
                             PERSEUS_BINARY + " serve --port 0 --db notes.csv 2>&1";
  p = ::popen(not_db.c_str(), "r");
  out.clear();
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int st2 = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(st2) && WEXITSTATUS(st2) != 0) << out;
  EXPECT_NE(out.find("notes.csv"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path / "notes.csv.lock")) << out;
  std::filesystem::remove(dir.path / "notes.csv");
  // A --port-file that cannot be written is refused before the database is made (the server
  // came up first, then stopped, keeping its new database and lock; session 27's trial).
  out = shell_output("cd '" + dir.path.string() + "' && PERSEUS_TOKEN=" + kToken + " timeout 60 " + PERSEUS_BINARY +
                     " serve --port 0 --db new.db --port-file no/such/p 2>&1; echo rc=$?");
  EXPECT_NE(out.find("rc=1"), std::string::npos) << out;
  EXPECT_NE(out.find("--port-file"), std::string::npos) << out;
  EXPECT_EQ(out.find("listening"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path)) << "left behind after: " << out;
  // A server that ran removes its port file when it stops (SIGTERM, or SIGHUP: a closed
  // terminal, which killed it with the file left behind); waits are for the file.
  for (const char* sig : {"TERM", "HUP"}) {
    const std::string script = "cd '" + dir.path.string() + "' && (PERSEUS_TOKEN=" + kToken + " timeout 60 " +
                               PERSEUS_BINARY +
                               " serve --port 0 --port-file port.txt --db :memory: 2>/dev/null & pid=$!; "
                               "while [ ! -s port.txt ]; do sleep 0.05; done; kill -" + sig +
                               " $pid; wait $pid; echo rc=$?; [ -e port.txt ] && echo port-file-left || echo "
                               "port-file-gone)";
    out = shell_output(script);
    EXPECT_NE(out.find("rc=0"), std::string::npos) << sig << ": " << out;
    EXPECT_NE(out.find("port-file-gone"), std::string::npos) << sig << ": " << out;
  }
}

// Session 22's trial: a token file and a (restored) database readable by everyone were taken
// silently. Both are warned about (a group may be meant to read them, so not refused).
TEST(ServeCli, SecretsReadableByOthersAreWarnedAbout) {
  TempDir dir;
  const std::string script =
      "cd '" + dir.path.string() + "' && umask 022 && echo " + kToken + " > tok && : > p.db && (timeout 60 " +
      PERSEUS_BINARY +
      " serve --port 0 --port-file port.txt --db p.db --token-file tok 2>log.txt & pid=$!; "
      "while [ ! -s port.txt ]; do sleep 0.05; done; kill -TERM $pid; wait $pid; echo rc=$?; cat log.txt)";
  const std::string out = shell_output(script);
  EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
  EXPECT_NE(out.find("WARNING: token file tok is readable by group or others (mode 0644): whoever reads it has the "
                     "admin token; chmod 600 it"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("WARNING: database p.db is readable by group or others (mode 0644)"), std::string::npos) << out;
}

// A port file that cannot be written stops the server after the token it generated was kept:
// the token's path is printed first (it was printed after the port file, so never; session 22).
// Since session 27 a port file that cannot be written (here a folder) is refused before the
// server makes anything, so no token is generated and kept unnamed (session 22's trial: the
// server came up, generated a token, then stopped at the port file without naming the token).
TEST(ServeCli, AGeneratedTokenKeptByAFailedPortFileIsNamed) {
  TempDir dir;
  const std::string script = "cd '" + dir.path.string() + "' && mkdir pf && env -u PERSEUS_TOKEN timeout 60 " +
                             PERSEUS_BINARY + " serve --port 0 --port-file pf --db g.db 2>&1; echo rc=$?";
  const std::string out = shell_output(script);
  EXPECT_NE(out.find("rc=1"), std::string::npos) << out;
  EXPECT_NE(out.find("--port-file pf: is a folder; give a file name"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path / "g.db.token")) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path / "g.db")) << out;
}

// Session 17's trial: `--host ::1` printed "http://::1:35359", which curl and perseus.Client
// cannot take; an IPv6 literal goes in brackets (RFC 3986). Waits are for the port file.
TEST(ServeCli, AnIpv6HostIsPrintedInBrackets) {
  TempDir dir;
  const std::string script = "cd '" + dir.path.string() + "' && (PERSEUS_TOKEN=" + kToken + " timeout 60 " +
                             PERSEUS_BINARY +
                             " serve --host ::1 --port 0 --port-file port.txt --db :memory: 2>log.txt & pid=$!; "
                             "while [ ! -s port.txt ] && kill -0 $pid 2>/dev/null; do sleep 0.05; done; "
                             "echo port=$(cat port.txt); kill -TERM $pid 2>/dev/null; wait $pid; echo rc=$?; cat log.txt)";
  const std::string out = shell_output(script);
  if (out.find("rc=0") == std::string::npos) GTEST_SKIP() << "no IPv6 loopback here: " << out;
  const std::size_t at = out.find("port=") + 5;
  const std::string port = out.substr(at, out.find('\n', at) - at);
  ASSERT_FALSE(port.empty()) << out;
  EXPECT_NE(out.find("listening on http://[::1]:" + port + " "), std::string::npos) << out;
}

}  // namespace
}  // namespace perseus::server::testing
