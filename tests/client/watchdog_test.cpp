// The watchdog resets clocks after the trainer dies, including by kill -9; normal exit
// and SIGTERM reset too. The trainer uses the NVML backend over the fake libnvidia-ml.so.1
// found through LD_LIBRARY_PATH (the default dlopen name), which records every call.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
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
  pid_t start_trainer(bool hang, std::map<std::string, std::string> env = {},
                      const std::vector<std::string>& extra_args = {}) {
    std::vector<std::string> argv = {TEST_TRAINER, "--url", server_.url(), "--token", "secret", "--job", "job1",
                                     "--backend", "nvml", "--stages", "1", "--microbatches", "1",
                                     "--iterations", "2", "--watchdog", WATCHDOG, "--progress", dir_.file("progress"),
                                     "--no-coalesce"};
    if (hang) argv.push_back("--hang");
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    env.insert({{"LD_LIBRARY_PATH", FAKE_NVML_DIR}, {"FAKE_NVML_LOG", log()}, {"PERSEUS_LOCK_DIR", dir_.file("locks")}});
    return spawn(argv, env, dir_.file("out.txt"));
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
  /// Runs a trainer to its exit with the fake NVML playing `scenario` and keeping the GPU's lock
  /// state in state_dir() (locked_0 while locked); returns the trainer's pid.
  pid_t run_trainer_with(const std::string& scenario) {
    std::filesystem::create_directories(state_dir());
    std::ofstream(dir_.file("scenario")) << scenario;
    const pid_t trainer =
        start_trainer(false, {{"FAKE_NVML_SCENARIO", dir_.file("scenario")}, {"FAKE_NVML_STATE_DIR", state_dir()}});
    const int status = wait_exit(trainer);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output();
    return trainer;
  }
  std::string state_dir() const { return dir_.file("state"); }
  /// True while a watchdog process started for `trainer` lives (its command line holds
  /// "--parent PID"; an exited one, even a zombie, has none).
  static bool watchdog_running(pid_t trainer) { return watchdog_of(trainer) > 0; }
  /// The pid of that watchdog process, or 0.
  static pid_t watchdog_of(pid_t trainer) {
    const std::string parent = std::string("--parent") + '\0' + std::to_string(trainer) + '\0';
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string cmdline = read_file(e.path().string() + "/cmdline");
      if (cmdline.find("watchdog") != std::string::npos && cmdline.find(parent) != std::string::npos)
        return static_cast<pid_t>(std::stol(e.path().filename().string()));
    }
    return 0;
  }
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
  auto read_wd_calls = [&] {
    wd_calls.clear();
    for (const auto& c : calls(log())) {
      if (c.pid == wd) wd_calls.push_back(c.rest);
    }
    return !wd_calls.empty() && wd_calls.back() == "nvmlShutdown";
  };
  // The watchdog shuts NVML down last, after emptying the lock record (which may wait for the
  // dying trainer's flock): wait for it, not for the reset alone (failed once in CI under load).
  EXPECT_TRUE(wait_for(read_wd_calls, 20)) << read_file(log());
  EXPECT_EQ(wd_calls, (std::vector<std::string>{"nvmlInit_v2", "nvmlDeviceGetHandleByIndex_v2 0",
                                                "nvmlDeviceGetUUID 0", "nvmlDeviceResetGpuLockedClocks 0",
                                                "nvmlShutdown"}));
  // The watchdog then empties the trainer's lock record: the next client neither resets again
  // nor warns of a container teardown (session 21's trial saw both after a plain kill -9).
  std::string record;
  for (const auto& e : std::filesystem::directory_iterator(dir_.file("locks"))) record = e.path().string();
  ASSERT_FALSE(record.empty());
  ASSERT_TRUE(wait_for([&] { return read_file(record).empty(); }, 10)) << read_file(record);
  const int next = wait_exit(start_trainer(false));
  EXPECT_TRUE(WIFEXITED(next) && WEXITSTATUS(next) == 0) << output();
  EXPECT_EQ(output().find("died without releasing"), std::string::npos) << output();
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

// Session 24: the trainer's own reset on SIGTERM is a cleanup. The watchdog also reset the
// clocks after it (a second driver session) and printed "exited without cleanup"; now the reset
// disarms it, as close() does.
TEST_F(Watchdog, SigtermResetsClocksAndTheTrainerStillDiesBySigterm) {
  const pid_t trainer = start_trainer(true);
  ASSERT_TRUE(wait_for([&] { return ready(); }, 20)) << output();
  ASSERT_TRUE(watchdog_running(trainer)) << output();
  ASSERT_EQ(::kill(trainer, SIGTERM), 0);
  const int status = wait_exit(trainer);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  ASSERT_TRUE(wait_for([&] { return resetters().count(trainer) == 1; }, 10)) << read_file(log());
  ASSERT_TRUE(wait_for([&] { return !watchdog_running(trainer); }, 30)) << output();
  EXPECT_EQ(resetters(), (std::set<long>{trainer})) << read_file(log());
  EXPECT_EQ(output().find("without cleanup"), std::string::npos) << output();
  for (const auto& f : std::filesystem::directory_iterator(dir_.file("locks")))
    EXPECT_EQ(read_file(f.path().string()), "") << f.path();  // released: the next client finds nothing stale
}

// Session 25's trial: a child fork()ed after the client existed (a DataLoader worker) kept the
// watchdog's pipe open, so close() waited for the watchdog as long as the child lived (for ever
// with persistent workers); and the child inherited the SIGTERM handler, whose byte went to the
// parent's reset thread: the terminated child lived on and the trainer died instead.
TEST_F(Watchdog, AForkedChildNeitherHoldsUpCloseNorTakesTheTrainersSigterm) {
  const std::string pidfile = dir_.file("child.pid");
  const pid_t trainer = start_trainer(false, {}, {"--fork-child", pidfile});
  const int status = wait_exit(trainer);  // close() returns while the child lives
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << " " << output();
  ASSERT_TRUE(wait_for([&] { return !read_file(pidfile).empty(); }, 10));
  const pid_t child = std::stoi(read_file(pidfile));
  auto alive = [](pid_t pid) {  // a zombie (not yet reaped by its new parent) counts as dead
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
  };
  ASSERT_TRUE(alive(child));
  EXPECT_EQ(resetters(), (std::set<long>{trainer})) << "the trainer reset its clocks itself";
  EXPECT_FALSE(watchdog_running(trainer)) << "disarmed and gone, though the child lives";
  for (const auto& f : std::filesystem::directory_iterator(dir_.file("locks")))
    EXPECT_EQ(read_file(f.path().string()), "") << f.path();
  ASSERT_EQ(::kill(child, SIGTERM), 0);
  EXPECT_TRUE(wait_for([&] { return !alive(child); }, 20)) << "the child died of its SIGTERM";
  if (alive(child)) ::kill(child, SIGKILL);
}

// Session 25's trial: with the watchdog gone (killed by hand), close()'s disarm wrote into a pipe
// nobody reads, and SIGPIPE killed a trainer that does not ignore it (C programs, this one).
TEST_F(Watchdog, ADeadWatchdogDoesNotKillTheTrainerAtClose) {
  const pid_t trainer = start_trainer(false, {}, {"--iterations", "3", "--pause-at", "1", "--gate", dir_.file(""), "--sigpipe-default"});
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(dir_.file("paused_0_1")); }, 20)) << output();
  const pid_t wd = watchdog_of(trainer);
  ASSERT_GT(wd, 0);
  ASSERT_EQ(::kill(wd, SIGKILL), 0);
  ASSERT_TRUE(wait_for([&] { return !watchdog_running(trainer); }, 20));
  std::ofstream(dir_.file("resume_1")) << "go";
  const int status = wait_exit(trainer);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << " " << output();
  EXPECT_TRUE(resetters().count(trainer) == 1) << read_file(log());
  for (const auto& f : std::filesystem::directory_iterator(dir_.file("locks")))
    EXPECT_EQ(read_file(f.path().string()), "") << f.path() << ": released, the next client finds nothing stale";
}

// Code review (session 14): when the client's final reset failed at close, it was only logged;
// then the watchdog was disarmed and the lock record emptied, so the GPU stayed locked at the
// plan's last clock with both safety nets gone. Now the watchdog resets it (its own session).
TEST_F(Watchdog, AFailedFinalResetIsHandedToTheWatchdog) {
  const pid_t trainer = run_trainer_with("reset_fails_after_set on\n");
  const std::string state = state_dir();
  const auto pids = resetters();
  EXPECT_EQ(pids.count(trainer), 1u) << read_file(log());  // it tried, and failed
  EXPECT_EQ(pids.size(), 2u) << read_file(log());          // the watchdog reset, before the trainer exited
  EXPECT_FALSE(std::filesystem::exists(state + "/locked_0")) << "clocks left locked\n" << output();
  EXPECT_NE(output().find("the final clock reset failed"), std::string::npos) << output();
  for (const auto& f : std::filesystem::directory_iterator(dir_.file("locks")))
    EXPECT_EQ(read_file(f.path().string()), "") << f.path();  // released: nothing stale
}

// ... and when nobody can reset them, the lock record keeps its text, so the next client on the
// GPU resets them at start (as after a container teardown).
TEST_F(Watchdog, ClocksNobodyCouldResetAreResetByTheNextClient) {
  const pid_t trainer = run_trainer_with("not_supported nvmlDeviceResetGpuLockedClocks\n");
  const std::string state = state_dir();
  EXPECT_TRUE(std::filesystem::exists(state + "/locked_0")) << output();
  EXPECT_NE(output().find("could not be reset and may stay locked"), std::string::npos) << output();
  int records = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir_.file("locks"))) {
    ++records;
    EXPECT_NE(read_file(f.path().string()).find("pid " + std::to_string(trainer)), std::string::npos) << f.path();
  }
  EXPECT_EQ(records, 1);
  const pid_t next = start_trainer(false, {{"FAKE_NVML_STATE_DIR", state}});
  ASSERT_EQ(wait_exit(next), 0) << output();
  EXPECT_NE(output().find("reset the clock lock left by a client that died"), std::string::npos) << output();
  EXPECT_FALSE(std::filesystem::exists(state + "/locked_0")) << output();
}

}  // namespace
}  // namespace perseus::runtime
