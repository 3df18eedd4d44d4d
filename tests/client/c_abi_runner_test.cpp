// Runs the plain-C ABI test program against the stub server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "stub_server.hpp"
#include "test_util.hpp"

namespace perseus::runtime {
namespace {

using namespace perseus::testing;

TEST(CAbi, PlainCProgramPasses) {
  TempDir dir;
  StubServer server;
  server.set_plan(0, make_plan(1, {{"forward", 1200}, {"backward", 1005}}));
  server.start();
  const pid_t pid = spawn({C_ABI_TEST, server.url(), "secret", "job1", dir.file("")}, {}, dir.file("out.txt"));
  const int status = wait_exit(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir.file("out.txt"));
  EXPECT_EQ(server.measurements(0).size(), 2u);
  const std::string freq = read_file(dir.file("freq.csv"));
  EXPECT_NE(freq.find(",0,0,1200,1200,applied,"), std::string::npos) << freq;
}

// Fresh-user trial (session 21): an installed libperseus_client.so (<prefix>/lib) looked for
// perseus-watchdog next to the program, next to itself, in the build tree it was compiled in and
// in the configure-time prefix, so any other prefix lost the kill -9 safety net, and a build tree
// left on the machine had its watchdog run by the installed copy. Now: <prefix>/bin beside the
// library, wherever the prefix is, and the build tree only for code running from it.
TEST(CAbi, AnInstalledLibraryStartsTheWatchdogOfItsOwnPrefix) {
  namespace fs = std::filesystem;
  TempDir dir;
  StubServer server;
  server.set_plan(0, make_plan(1, {{"forward", 1200}, {"backward", 1005}}));
  server.start();
  const fs::path prefix = dir.file("moved/prefix");
  fs::create_directories(prefix / "lib");
  fs::create_directories(prefix / "bin");
  fs::copy_file(CLIENT_SHARED_LIBRARY, prefix / "lib" / CLIENT_SHARED_SONAME);
  const fs::path app = dir.file("app/probe");
  fs::create_directories(app.parent_path());
  fs::copy_file(C_ABI_WATCHDOG_PROBE, app);
  // The prefix's watchdog: records that it ran, then is the real one.
  const fs::path watchdog = prefix / "bin" / "perseus-watchdog";
  const std::string marker = dir.file("watchdog-ran");
  std::ofstream(watchdog) << "#!/bin/sh\necho \"$0\" > '" << marker << "'\nexec '" << WATCHDOG << "' \"$@\"\n";
  fs::permissions(watchdog, fs::perms::owner_all);
  const std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", (prefix / "lib").string()},
                                                  {"PERSEUS_WATCHDOG", ""}};
  const std::string out1 = dir.file("out1.txt");
  int status = wait_exit(spawn({app.string(), server.url(), "secret", "job1"}, env, out1));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(out1);
  EXPECT_NE(read_file(out1).find("library: " + (prefix / "lib").string()), std::string::npos) << read_file(out1);
  std::string ran = read_file(marker);
  while (!ran.empty() && ran.back() == '\n') ran.pop_back();
  EXPECT_EQ(fs::canonical(ran), fs::canonical(watchdog)) << read_file(out1);

  // Without it, the build tree's watchdog is not a fallback for an installed library: the client
  // says that none was found (unless one is installed at the configure-time prefix).
  fs::remove(watchdog);
  if (fs::exists(fs::path(WATCHDOG_INSTALL_DIR) / "perseus-watchdog")) GTEST_SKIP() << "a watchdog is installed";
  const std::string out2 = dir.file("out2.txt");
  status = wait_exit(spawn({app.string(), server.url(), "secret", "job1"}, env, out2));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(out2);
  EXPECT_NE(read_file(out2).find("perseus-watchdog not found"), std::string::npos) << read_file(out2);
}

}  // namespace
}  // namespace perseus::runtime
