// The watchdog resets clocks after the trainer dies, including by kill -9; normal exit
// and SIGTERM reset too. The trainer uses the NVML backend over the fake libnvidia-ml.so.1
// found through LD_LIBRARY_PATH (the default dlopen name), which records every call.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "stub_server.hpp"
#include "test_util.hpp"

namespace perseus::runtime {
namespace {

using namespace perseus::testing;

struct Call {
  long pid;
  std::string rest;
};

std::vector<Call> calls(const std::string& path) {
  std::vector<Call> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    Call c;
    ls >> c.pid;
    std::getline(ls >> std::ws, c.rest);
    out.push_back(c);
  }
  return out;
}

class Watchdog : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.set_plan(0, make_plan(1, {{"forward", 1200}, {"backward", 1005}}));
    server_.start();
  }
  pid_t start_trainer(bool hang) {
    std::vector<std::string> argv = {TEST_TRAINER, "--url", server_.url(), "--token", "secret", "--job", "job1",
                                     "--backend", "nvml", "--stages", "1", "--microbatches", "1",
                                     "--iterations", "2", "--watchdog", WATCHDOG, "--progress", dir_.file("progress"),
                                     "--no-coalesce"};
    if (hang) argv.push_back("--hang");
    return spawn(argv, {{"LD_LIBRARY_PATH", FAKE_NVML_DIR}, {"FAKE_NVML_LOG", log()}, {"PERSEUS_LOCK_DIR", dir_.file("locks")}},
                 dir_.file("out.txt"));
  }
  std::string log() const { return dir_.file("nvml.log"); }
  bool ready() const { return read_file(dir_.file("progress")).find("ready") != std::string::npos; }
  // Reset calls after the last set, by pid.
  std::set<long> resetters() const {
    std::set<long> pids;
    for (const auto& c : calls(log())) {
      if (c.rest == "nvmlDeviceResetGpuLockedClocks 0") pids.insert(c.pid);
    }
    return pids;
  }
  std::string output() const { return read_file(dir_.file("out.txt")); }
  TempDir dir_;
  StubServer server_;
};

TEST_F(Watchdog, KillMinus9OfTheTrainerResetsClocks) {
  const pid_t trainer = start_trainer(true);
  ASSERT_TRUE(wait_for([&] { return ready(); }, 20)) << output();
  EXPECT_NE(read_file(log()).find("nvmlDeviceSetGpuLockedClocks 0 1200 1200"), std::string::npos);
  EXPECT_TRUE(resetters().empty());
  ASSERT_EQ(::kill(trainer, SIGKILL), 0);
  const int status = wait_exit(trainer);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_TRUE(wait_for([&] { return !resetters().empty(); }, 10)) << read_file(log());
  const auto pids = resetters();
  EXPECT_EQ(pids.count(trainer), 0u);  // reset by another process: the watchdog
  // The watchdog ran its own NVML session (init, handle, reset, shutdown).
  const long wd = *pids.begin();
  std::vector<std::string> wd_calls;
  for (const auto& c : calls(log())) {
    if (c.pid == wd) wd_calls.push_back(c.rest);
  }
  EXPECT_EQ(wd_calls, (std::vector<std::string>{"nvmlInit_v2", "nvmlDeviceGetHandleByIndex_v2 0",
                                                "nvmlDeviceGetUUID 0", "nvmlDeviceResetGpuLockedClocks 0",
                                                "nvmlShutdown"}));
}

TEST_F(Watchdog, NormalExitResetsInProcessAndDisarmsTheWatchdog) {
  const pid_t trainer = start_trainer(false);
  const int status = wait_exit(trainer);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output();
  const auto pids = resetters();
  EXPECT_EQ(pids, (std::set<long>{trainer}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a stray watchdog reset would show now
  EXPECT_EQ(resetters(), (std::set<long>{trainer}));
  EXPECT_EQ(server_.measurements(0).size(), 2u);
}

TEST_F(Watchdog, SigtermResetsClocksAndTheTrainerStillDiesBySigterm) {
  const pid_t trainer = start_trainer(true);
  ASSERT_TRUE(wait_for([&] { return ready(); }, 20)) << output();
  ASSERT_EQ(::kill(trainer, SIGTERM), 0);
  const int status = wait_exit(trainer);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  ASSERT_TRUE(wait_for([&] { return resetters().count(trainer) == 1; }, 10)) << read_file(log());
}

}  // namespace
}  // namespace perseus::runtime
