// The real `perseus gpud` on the fake NVML: permission matrix, malformed requests, flood,
// busy GPUs, socket mode, and the clock reset when a client dies (kill -9, a forked child
// still holding the socket), when the helper stops, and when it restarts after kill -9.
// Every wait is for an event (a log line, a lock file of the fake library, a reply).
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>

#include "gpud_test_util.hpp"
#include "perseus/client.h"
#include "perseus/gpud/protocol.hpp"
#include "perseus/runtime/frequency_controller.hpp"
#include "perseus/runtime/gpu_control.hpp"
#include "perseus/runtime/gpu_identity.hpp"

namespace {

using namespace perseus::testing;
using perseus::runtime::GpuError;
using perseus::runtime::GpuSelector;
using perseus::runtime::make_gpud_gpu;

GpuSelector gpu(int i) {
  GpuSelector s;
  s.nvml_index = i;
  return s;
}

std::string me() { return "uid:" + std::to_string(::getuid()); }
std::string someone_else() { return "uid:" + std::to_string(::getuid() + 4242); }

class Gpud : public ::testing::Test {
 protected:
  TempDir dir_;
  GpudProcess gpud_{dir_};
};

TEST_F(Gpud, AllowedUserLocksReadsAndUnlocksAndEveryChangeIsLogged) {
  ASSERT_TRUE(gpud_.start("allow 0 " + me() + "\n")) << gpud_.log();
  struct stat st {};
  ASSERT_EQ(::stat(gpud_.socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u) << "default socket mode";

  auto g = make_gpud_gpu(gpu(0), gpud_.socket());
  EXPECT_EQ(g->name(), "gpud");
  EXPECT_EQ(g->uuid(), "GPU-00000000-0000-0000-0000-000000000000");
  const auto clocks = g->supported_graphics_clocks_mhz();
  ASSERT_EQ(clocks.size(), 81u);  // the fake A100: 1410..210 MHz in 15 MHz steps
  EXPECT_EQ(clocks.front(), 1410);
  EXPECT_EQ(clocks.back(), 210);
  g->set_locked_clocks(1005);
  EXPECT_EQ(gpud_.gpu_state(0), "1005\n");
  const auto e = g->total_energy_j();
  ASSERT_TRUE(e.has_value());
  EXPECT_GT(*e, 0);
  EXPECT_EQ(g->power_w(), 100.0);
  g->reset_locked_clocks();
  EXPECT_FALSE(gpud_.gpu_locked(0));
  const std::string who = "uid=" + std::to_string(::getuid());
  EXPECT_NE(gpud_.log().find("GPU 0: locked at 1005 MHz by " + who), std::string::npos) << gpud_.log();
  EXPECT_NE(gpud_.log().find("GPU 0: unlocked by " + who), std::string::npos) << gpud_.log();
  EXPECT_TRUE(g->watchdog_args().empty()) << "the helper resets on disconnect: no watchdog process";
}

TEST_F(Gpud, ASupplementaryOrPrimaryGroupGrantsAccess) {
  ASSERT_TRUE(gpud_.start("allow 0 gid:" + std::to_string(::getgid()) + "\n")) << gpud_.log();
  auto g = make_gpud_gpu(gpu(0), gpud_.socket());
  g->set_locked_clocks(1410);
  EXPECT_EQ(gpud_.gpu_state(0), "1410\n");
}

TEST_F(Gpud, OtherUserIsRefusedAndNothingReachesTheDriver) {
  // The only allowed uid is not ours: as a second user would be refused.
  ASSERT_TRUE(gpud_.start("allow * " + someone_else() + "\n")) << gpud_.log();
  try {
    make_gpud_gpu(gpu(0), gpud_.socket());
    ADD_FAILURE() << "a user without an allow rule opened GPU 0";
  } catch (const GpuError& e) {
    EXPECT_NE(std::string(e.what()).find("refused the connection: forbidden: no allow rule in"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("matches uid " + std::to_string(::getuid())), std::string::npos) << e.what();
  }
  // A user no rule allows any GPU is answered and hung up on at once: it holds no connection
  // slot (idle connections of such a user filled max_clients and locked every trainer out).
  for (int i = 0; i < 3; ++i) {
    RawGpudClient c(gpud_.socket());
    const auto r = c.reply();
    EXPECT_EQ(r.value("error", ""), "forbidden") << r.dump();
    EXPECT_TRUE(c.reply().is_null()) << "hung up on";
  }
  EXPECT_FALSE(gpud_.gpu_locked(0));
  EXPECT_EQ(gpud_.gpu_log().find("SetGpuLockedClocks"), std::string::npos);
  EXPECT_NE(gpud_.log().find("refused uid=" + std::to_string(::getuid())), std::string::npos);
  EXPECT_NE(gpud_.log().find("no allow rule matches it for any GPU"), std::string::npos) << gpud_.log();
}

TEST_F(Gpud, OtherGpuIsRefusedAndUnknownGpuIsNamed) {
  ASSERT_TRUE(gpud_.start("allow 0 " + me() + "\n")) << gpud_.log();
  RawGpudClient c(gpud_.socket());
  const auto hello = c.call(R"({"op":"hello"})");
  ASSERT_TRUE(hello.value("ok", false)) << hello.dump();
  EXPECT_EQ(hello["uid"], ::getuid());
  ASSERT_EQ(hello["gpus"].size(), 2u);
  EXPECT_TRUE(hello["gpus"][0]["allowed"]);
  EXPECT_FALSE(hello["gpus"][1]["allowed"]);
  EXPECT_EQ(c.call(R"({"op":"lock","gpu":1,"mhz":1005})").value("error", ""), "forbidden");
  EXPECT_EQ(c.call(R"({"op":"lock","gpu":7,"mhz":1005})").value("error", ""), "unknown_gpu");
  EXPECT_THROW(make_gpud_gpu(gpu(1), gpud_.socket()), GpuError);
  EXPECT_FALSE(gpud_.gpu_locked(1));
}

TEST_F(Gpud, MalformedRequestsAreAnsweredAndAnOversizedOneHangsUp) {
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  RawGpudClient c(gpud_.socket());
  EXPECT_EQ(c.call("hello").value("error", ""), "bad_request");
  EXPECT_EQ(c.call("{}").value("error", ""), "bad_request");
  EXPECT_EQ(c.call(R"({"op":"lock","gpu":0})").value("error", ""), "bad_request");
  EXPECT_EQ(c.call(R"({"op":"lock","gpu":0,"mhz":1005,"min":1})").value("error", ""), "bad_request");
  EXPECT_EQ(c.call(R"({"op":"set_power_limit","gpu":0,"mhz":1})").value("error", ""), "bad_request");
  const auto off_grid = c.call(R"({"op":"lock","gpu":0,"mhz":1006})");
  EXPECT_EQ(off_grid.value("error", ""), "unsupported_clock") << off_grid.dump();
  EXPECT_NE(off_grid.value("message", "").find("1006 MHz is not a supported clock"), std::string::npos);
  EXPECT_FALSE(gpud_.gpu_locked(0));
  // 64 KiB without a newline: refused after the first 512 bytes, then the helper hangs up.
  c.send_raw(std::string(64 * 1024, 'x'));
  EXPECT_EQ(c.reply().value("error", ""), "bad_request");
  EXPECT_TRUE(c.reply().is_null()) << "connection should be closed";
  // The helper still serves others.
  RawGpudClient d(gpud_.socket());
  EXPECT_TRUE(d.call(R"({"op":"hello"})").value("ok", false));
}

TEST_F(Gpud, AFloodIsRateLimited) {
  ASSERT_TRUE(gpud_.start("rate_limit 2 5\nallow * " + me() + "\n")) << gpud_.log();
  RawGpudClient c(gpud_.socket());
  constexpr int kRequests = 200;
  std::string flood;
  for (int i = 0; i < kRequests; ++i) flood += R"({"op":"energy","gpu":0})" "\n";
  const auto t0 = std::chrono::steady_clock::now();
  c.send_raw(flood);
  int ok = 0, limited = 0;
  for (int i = 0; i < kRequests; ++i) {
    const auto r = c.reply();
    ASSERT_FALSE(r.is_null()) << "reply " << i;
    if (r.value("ok", false)) ++ok;
    if (r.value("error", "") == "rate_limited") ++limited;
  }
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ok, 5);  // the burst
  EXPECT_LE(ok, 5 + static_cast<int>(2 * elapsed_s) + 1) << "bucket refills at 2/s; elapsed " << elapsed_s << " s";
  EXPECT_EQ(ok + limited, kRequests);
}

TEST_F(Gpud, ConnectionsBeyondMaxClientsAreRefused) {
  ASSERT_TRUE(gpud_.start("max_clients 1\nallow * " + me() + "\n")) << gpud_.log();
  RawGpudClient first(gpud_.socket());
  ASSERT_TRUE(first.call(R"({"op":"hello"})").value("ok", false));  // accepted and counted
  RawGpudClient second(gpud_.socket());
  const auto r = second.reply();  // answered without asking, then hung up on
  EXPECT_EQ(r.value("error", ""), "too_many_clients") << r.dump();
  EXPECT_NE(gpud_.log().find("1 clients connected already (uid " + std::to_string(::getuid()) + " holds 1)"),
            std::string::npos)
      << "the log names who holds the slots: " << gpud_.log();
  EXPECT_TRUE(second.reply().is_null());
  EXPECT_TRUE(first.call(R"({"op":"hello"})").value("ok", false));
}

TEST_F(Gpud, AGpuLockedByOneClientIsBusyForAnother) {
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  auto a = make_gpud_gpu(gpu(0), gpud_.socket());
  auto b = make_gpud_gpu(gpu(0), gpud_.socket());
  a->set_locked_clocks(1005);
  try {
    b->set_locked_clocks(1410);
    ADD_FAILURE() << "a second client changed a GPU locked by the first";
  } catch (const GpuError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU 0 is locked by uid="), std::string::npos) << e.what();
  }
  EXPECT_THROW(b->reset_locked_clocks(), GpuError);
  EXPECT_EQ(gpud_.gpu_state(0), "1005\n");
  a->reset_locked_clocks();
  b->set_locked_clocks(1410);
  EXPECT_EQ(gpud_.gpu_state(0), "1410\n");
}

// A client process that locks GPU `index` at `mhz` through the helper, writes `ready`, and
// waits to be killed. With `fork_child`, it first forks a child that inherits the socket and
// outlives it (a data-loader worker), writing that child's pid into `ready`.
pid_t locking_client(const std::string& sock, int index, int mhz, const std::string& ready, bool fork_child = false) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  try {
    auto g = make_gpud_gpu(gpu(index), sock);
    g->set_locked_clocks(mhz);
    pid_t worker = 0;
    if (fork_child && (worker = ::fork()) == 0) {
      for (;;) ::pause();
    }
    std::ofstream(ready + ".tmp") << worker << "\n";
    std::filesystem::rename(ready + ".tmp", ready);
    for (;;) ::pause();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "client: %s\n", e.what());
    ::_exit(3);
  }
}

TEST_F(Gpud, ClocksAreResetWhenTheClientIsKilled) {
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  const pid_t client = locking_client(gpud_.socket(), 1, 1005, dir_.file("ready"));
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(dir_.file("ready")); }, 60));
  EXPECT_EQ(gpud_.gpu_state(1), "1005\n");
  ::kill(client, SIGKILL);
  ASSERT_NE(wait_exit(client, 30), -1);
  // The event: the helper logs the reset right after the driver call that unlocks the GPU.
  ASSERT_TRUE(wait_for([&] { return gpud_.log().find("GPU 1: clocks reset") != std::string::npos; }, 60)) << gpud_.log();
  EXPECT_FALSE(gpud_.gpu_locked(1));
  EXPECT_NE(gpud_.log().find("GPU 1: clocks reset (uid=" + std::to_string(::getuid())), std::string::npos);
  EXPECT_NE(gpud_.log().find("pid=" + std::to_string(client)), std::string::npos) << gpud_.log();
}

TEST_F(Gpud, ClocksAreResetWhenTheClientDiesEvenIfAForkedChildKeepsItsSocket) {
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  const pid_t client = locking_client(gpud_.socket(), 0, 1110, dir_.file("ready"), true);
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(dir_.file("ready")); }, 60));
  const pid_t worker = std::stoi(read_file(dir_.file("ready")));
  ASSERT_GT(worker, 0);
  EXPECT_EQ(gpud_.gpu_state(0), "1110\n");
  ::kill(client, SIGKILL);
  ASSERT_NE(wait_exit(client, 30), -1);
  // The worker still holds the connection open; the helper watches the process (pidfd).
  ASSERT_TRUE(wait_for([&] { return gpud_.log().find("GPU 0: clocks reset") != std::string::npos; }, 60)) << gpud_.log();
  EXPECT_FALSE(gpud_.gpu_locked(0));
  EXPECT_NE(gpud_.log().find(" exited;"), std::string::npos) << gpud_.log();
  ::kill(worker, SIGKILL);
  // The worker was the killed client's child: init reaps it; nothing to wait for here.
}

// Every signal whose default ends the process: a SIGHUP (a closed terminal), SIGQUIT or SIGUSR1
// left the GPU locked (session 22's trial).
TEST_F(Gpud, ClocksAreResetWhenTheHelperStopsAndTheSocketIsRemoved) {
  for (const int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) {
    SCOPED_TRACE(::strsignal(sig));
    ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
    auto g = make_gpud_gpu(gpu(0), gpud_.socket());
    g->set_locked_clocks(1005);
    const int status = gpud_.kill(sig);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_FALSE(gpud_.gpu_locked(0));
    EXPECT_FALSE(std::filesystem::exists(gpud_.socket()));
    EXPECT_NE(gpud_.log().find("the helper is stopping"), std::string::npos) << gpud_.log();
  }
}

TEST_F(Gpud, ARestartedHelperResetsWhatItsKilledPredecessorLeftLockedAndClientsReconnect) {
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  auto g = make_gpud_gpu(gpu(1), gpud_.socket());
  g->set_locked_clocks(1200);
  gpud_.kill(SIGKILL);
  EXPECT_EQ(gpud_.gpu_state(1), "1200\n") << "nobody reset it: the helper died with it locked";
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();  // the stale socket is replaced
  EXPECT_FALSE(gpud_.gpu_locked(1)) << gpud_.log();
  EXPECT_NE(gpud_.log().find("GPU 1: clocks reset (left locked when the previous helper ended; was locked by uid="),
            std::string::npos)
      << gpud_.log();
  g->set_locked_clocks(1005);  // the client reconnects on its own
  EXPECT_EQ(gpud_.gpu_state(1), "1005\n");
}

// Session 22's trial: a root helper followed links planted in its state_dir, logging the text
// of a file it read through one and truncating another through the record's temporary name. A
// link is never read or written through, and a state_dir another user owns is refused.
TEST_F(Gpud, LinksInTheStateDirAreNeverFollowedAndAStateDirOfAnotherUserIsRefused) {
  std::filesystem::create_directories(dir_.file("state"));
  std::ofstream(dir_.file("victim")) << "secret\n";
  std::ofstream(dir_.file("victim2")) << "important\n";
  std::filesystem::create_symlink(dir_.file("victim"), dir_.file("state/locked-1"));
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  EXPECT_EQ(gpud_.log().find("secret"), std::string::npos) << gpud_.log();
  EXPECT_NE(gpud_.log().find("locked-1 is not a lock record (not a regular file); not read"), std::string::npos)
      << gpud_.log();
  // The record's temporary name is predictable (.locked-N.tmp-PID): a link planted there is
  // replaced, never written through.
  std::filesystem::create_symlink(dir_.file("victim2"),
                                  dir_.file("state/.locked-0.tmp-" + std::to_string(gpud_.pid())));
  auto g = make_gpud_gpu(gpu(0), gpud_.socket());
  g->set_locked_clocks(1200);
  EXPECT_EQ(gpud_.gpu_state(0), "1200\n");
  EXPECT_EQ(read_file(dir_.file("victim")), "secret\n");
  EXPECT_EQ(read_file(dir_.file("victim2")), "important\n");
  g.reset();
  gpud_.kill(SIGTERM);
  if (::getuid() != 0) GTEST_SKIP() << "needs root to give the state_dir to another user";
  ASSERT_EQ(::chown(dir_.file("state").c_str(), 65534, 65534), 0);
  EXPECT_FALSE(gpud_.start("allow * " + me() + "\n"));
  EXPECT_NE(gpud_.log().find("is owned by uid 65534, not by the helper's user (uid 0)"), std::string::npos)
      << gpud_.log();
}

// Code review (session 14): a client reconnected silently after the helper restarted; the
// helper had unlocked the GPU, yet the client believed its clock still in force, so the frequency
// controller skipped the same clock as redundant and readings were taken (and labelled) at a
// clock the GPU no longer had.
TEST_F(Gpud, AfterTheHelperRestartsTheClientLocksItsClockAgain) {
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  std::shared_ptr<perseus::runtime::GpuControl> g = make_gpud_gpu(gpu(1), gpud_.socket());
  perseus::runtime::FrequencyController ctl(g);
  ctl.request(1200);
  ctl.flush();
  ASSERT_EQ(gpud_.gpu_state(1), "1200\n");
  EXPECT_FALSE(g->lock_may_be_lost());
  gpud_.kill(SIGKILL);
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();  // resets what was left locked
  ASSERT_FALSE(gpud_.gpu_locked(1));
  EXPECT_TRUE(g->lock_may_be_lost());
  ctl.request(1200);  // the clock the controller believes in force: applied again, not skipped
  ctl.flush();
  EXPECT_EQ(gpud_.gpu_state(1), "1200\n") << gpud_.log();
  EXPECT_EQ(ctl.log().back().outcome, perseus::runtime::FreqOutcome::kApplied);
  // A reading that reconnects locks the clock again too.
  gpud_.kill(SIGKILL);
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  ASSERT_FALSE(gpud_.gpu_locked(1));
  EXPECT_TRUE(g->total_energy_j().has_value());
  EXPECT_EQ(gpud_.gpu_state(1), "1200\n") << gpud_.log();
  EXPECT_FALSE(g->lock_may_be_lost());
  ctl.stop(true);
  EXPECT_FALSE(gpud_.gpu_locked(1));
}

// Code review (session 14): the helper wrote a GPU's lock record after locking the clock and
// ignored write errors, so with state_dir unwritable (full, read-only, replaced) a helper killed
// afterwards left the GPU locked. The record now comes first; without it nothing is locked.
TEST_F(Gpud, NoClockIsLockedWithoutItsLockRecord) {
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  const std::string state = dir_.file("state");
  std::filesystem::remove_all(state);
  std::ofstream(state) << "not a folder\n";  // even root cannot write below a regular file
  auto g = make_gpud_gpu(gpu(0), gpud_.socket());
  try {
    g->set_locked_clocks(1005);
    FAIL() << "locked without a lock record";
  } catch (const GpuError& e) {
    EXPECT_NE(std::string(e.what()).find("not locked: the helper cannot write the lock record"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(gpud_.gpu_locked(0));
  EXPECT_NE(gpud_.log().find("GPU 0: not locked for uid="), std::string::npos) << gpud_.log();
  std::filesystem::remove(state);
  std::filesystem::create_directories(state);
  g->set_locked_clocks(1005);  // with its record in place
  EXPECT_EQ(gpud_.gpu_state(0), "1005\n");
  EXPECT_TRUE(std::filesystem::exists(state + "/locked-0"));
}

TEST_F(Gpud, RefusesToStartOverALiveHelperOrANonSocketFileOrAWorldWritableMode) {
  ASSERT_TRUE(gpud_.start("allow * " + me() + "\n")) << gpud_.log();
  TempDir other;
  {
    std::ofstream(other.file("gpud.conf")) << "socket " << gpud_.socket() << "\nstate_dir " << other.file("state")
                                           << "\nlibrary " << FAKE_NVML_PATH << "\nallow * " << me() << "\n";
    const pid_t p = spawn({PERSEUS_BINARY, "gpud", "--config", other.file("gpud.conf")}, gpud_.env(2), other.file("log"));
    const int status = wait_exit(p, 60);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_NE(read_file(other.file("log")).find("another perseus gpud answers on"), std::string::npos);
  }
  {
    std::ofstream(other.file("not_a_socket")) << "data\n";
    std::ofstream(other.file("gpud.conf")) << "socket " << other.file("not_a_socket") << "\nstate_dir "
                                           << other.file("state") << "\nlibrary " << FAKE_NVML_PATH << "\nallow * "
                                           << me() << "\n";
    const pid_t p = spawn({PERSEUS_BINARY, "gpud", "--config", other.file("gpud.conf")}, gpud_.env(2), other.file("log2"));
    const int status = wait_exit(p, 60);
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_NE(read_file(other.file("log2")).find("exists and is not a socket"), std::string::npos);
    EXPECT_EQ(read_file(other.file("not_a_socket")), "data\n");
  }
  {
    std::ofstream(other.file("gpud.conf")) << "allow * " << me() << "\nsocket_mode 0666\n";
    const pid_t p = spawn({PERSEUS_BINARY, "gpud", "--config", other.file("gpud.conf")}, {}, other.file("log3"));
    const int status = wait_exit(p, 60);
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_NE(read_file(other.file("log3")).find("gpud.conf:2: field 'socket_mode': 0666 gives access to every user"),
              std::string::npos)
        << read_file(other.file("log3"));
  }
}

TEST_F(Gpud, MonitorMeasuresTheAllowedGpusThroughTheHelper) {
  ASSERT_TRUE(gpud_.start("allow 1 " + me() + "\n")) << gpud_.log();
  const pid_t p = spawn({PERSEUS_BINARY, "monitor", "--backend", "gpud", "--gpud-socket", gpud_.socket(), "--json",
                         dir_.file("m.json"), "--", "sleep", "0.1"},
                        {}, dir_.file("monitor.log"));
  const int status = wait_exit(p, 60);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir_.file("monitor.log"));
  const auto j = nlohmann::json::parse(read_file(dir_.file("m.json")));
  ASSERT_EQ(j["gpus"].size(), 1u) << "only GPU 1 is allowed";
  EXPECT_EQ(j["gpus"][0]["index"], 1);
  EXPECT_EQ(j["gpus"][0]["method"], "energy counter");
  EXPECT_GE(j["gpus"][0]["avg_power_w"].get<double>(), 99.0);  // the fake's steady 100 W
  // Session 14's trial: a GPU the helper does not let this user use exited 4 ("no GPU can be
  // measured"); docs/client.md: a -d N the machine does not have is an error, exit status 1.
  for (const char* d : {"5", "0"}) {
    const pid_t q = spawn({PERSEUS_BINARY, "monitor", "--backend", "gpud", "--gpud-socket", gpud_.socket(), "-d", d,
                           "--", "touch", dir_.file("ran")},
                          {}, dir_.file("monitor2.log"));
    const int st = wait_exit(q, 60);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << d << ": " << read_file(dir_.file("monitor2.log"));
    EXPECT_NE(read_file(dir_.file("monitor2.log"))
                  .find(std::string("monitor: -d ") + d + ": the gpud helper lets this user use GPU 1; command not run"),
              std::string::npos)
        << read_file(dir_.file("monitor2.log"));
    EXPECT_FALSE(std::filesystem::exists(dir_.file("ran")));
  }
}

TEST_F(Gpud, CAbiSelectsTheGpudBackendAndReportsWhyItCannotBeUsed) {
  ASSERT_TRUE(gpud_.start("allow 1 " + me() + "\n")) << gpud_.log();
  perseus_client_config cfg;
  perseus_client_config_init(&cfg);
  cfg.server_url = "http://127.0.0.1:1";
  cfg.job_id = "job";
  cfg.backend = "gpud";
  cfg.gpud_socket_path = "/nonexistent/gpud.sock";
  perseus_client* c = nullptr;
  EXPECT_EQ(perseus_client_create(&cfg, &c), PERSEUS_ERR_GPU);
  EXPECT_NE(std::string(perseus_last_error()).find("cannot connect to perseus gpud at /nonexistent/gpud.sock"),
            std::string::npos);
  const std::string sock = gpud_.socket();
  cfg.gpud_socket_path = sock.c_str();
  cfg.device_index = 0;  // not allowed: only GPU 1 is
  EXPECT_EQ(perseus_client_create(&cfg, &c), PERSEUS_ERR_GPU);
  EXPECT_NE(std::string(perseus_last_error()).find("does not allow uid"), std::string::npos) << perseus_last_error();
  EXPECT_EQ(c, nullptr);
}

// Only root can become another user; elsewhere the config-based test above covers the rule.
TEST_F(Gpud, AsRootAnotherRealUserIsStoppedByTheSocketModeAndThenByTheAllowRules) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid";
  const gid_t nogroup = 65534;
  ASSERT_TRUE(gpud_.start("socket_group " + std::to_string(nogroup) + "\nallow * " + me() + "\n")) << gpud_.log();
  ::chmod(dir_.file("").c_str(), 0755);
  auto as_nobody = [&](const std::string& line) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      const gid_t groups[] = {nogroup};
      if (::setgroups(1, groups) != 0 || ::setgid(nogroup) != 0 || ::setuid(65534) != 0) ::_exit(3);
      RawGpudClient c(gpud_.socket());
      std::string out = c.connected() ? c.call(line).dump() : "connect:" + std::to_string(c.connect_errno());
      const ssize_t n = ::write(fds[1], out.data(), out.size());
      ::_exit(n > 0 ? 0 : 4);
    }
    ::close(fds[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    wait_exit(pid, 30);
    return out;
  };
  // In the socket's group, but no allow rule: forbidden.
  EXPECT_NE(as_nobody(R"({"op":"lock","gpu":0,"mhz":1005})").find("forbidden"), std::string::npos);
  EXPECT_FALSE(gpud_.gpu_locked(0));
}

}  // namespace
