// Runs the plain-C ABI test program against the stub server.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace perseus::runtime
