// The client's guards (issue 16): supported clocks, registration conflicts, request
// deadlines, plan size, per-item reports, telemetry anomalies, stale clock locks. The GPU is
// the fake libnvidia-ml.so.1 playing a scenario file; the server is the in-test stub or a
// raw socket that drips its answer. Every wait is on an event.
#include <sys/wait.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>

#include "perseus/client.h"
#include "perseus/runtime/client.hpp"
#include "perseus/runtime/gpu_lock_record.hpp"
#include "stub_server.hpp"
#include "test_util.hpp"

namespace perseus::runtime {
namespace {

using namespace perseus::testing;

// Sets the fake NVML's environment for one test and restores it.
class FakeNvmlEnv {
 public:
  FakeNvmlEnv(const TempDir& dir, const std::string& scenario) {
    ::setenv("FAKE_NVML_LOG", dir.file("nvml.log").c_str(), 1);
    ::setenv("FAKE_NVML_STATE_DIR", dir.file("").c_str(), 1);
    std::ofstream(dir.file("scenario")) << scenario;
    ::setenv("FAKE_NVML_SCENARIO", dir.file("scenario").c_str(), 1);
  }
  ~FakeNvmlEnv() {
    for (const char* v : {"FAKE_NVML_LOG", "FAKE_NVML_STATE_DIR", "FAKE_NVML_SCENARIO"}) ::unsetenv(v);
  }
};

class Guards : public ::testing::Test {
 protected:
  void SetUp() override { server_.start(); }
  ClientOptions options() const {
    ClientOptions o = perseus::testing::stub_client_options(server_.url());
    o.lock_dir = dir_.file("locks");
    return o;
  }
  std::shared_ptr<GpuControl> nvml() { return make_nvml_gpu(0, FAKE_NVML_PATH); }
  /// A C ABI configuration for the stub server's job1, dry-run backend, no watchdog or signal
  /// guard. `url_` keeps the URL string the configuration points to.
  perseus_client_config c_config() {
    url_ = server_.url();
    perseus_client_config cfg;
    perseus_client_config_init(&cfg);
    cfg.server_url = url_.c_str();
    cfg.token = "secret";
    cfg.job_id = "job1";
    cfg.backend = "dry-run";
    cfg.enable_watchdog = 0;
    cfg.handle_signals = 0;
    return cfg;
  }
  std::string nvml_log() const { return read_file(dir_.file("nvml.log")); }
  static void run_step(Client& c, const std::vector<std::string>& seq) {
    c.on_step_begin();
    for (const auto& name : seq) {
      c.on_instruction_begin(name);
      c.on_instruction_end(name);
    }
    c.on_step_end();
  }
  TempDir dir_;
  StubServer server_;
  std::string url_;
};

// Row 2: 1400/1000 MHz on a 15 MHz grid are snapped; 1, 99999, 2^31-1 MHz never reach NVML.
TEST_F(Guards, PlanClocksAreCheckedAgainstTheGpusList) {
  FakeNvmlEnv env(dir_, "clocks * 1410 1395 1380 1365 1350 1200 1005 990 210\n");
  server_.set_plan(0, make_plan(1, {{"forward", 1400}, {"backward", 1000}}));
  auto c = Client::create(options(), nvml());
  EXPECT_EQ(server_.registered_freqs(0), (std::vector<int>{1410, 1395, 1380, 1365, 1350, 1200, 1005, 990, 210}));
  ASSERT_EQ(c->plan().version, 1);
  EXPECT_EQ(c->plan().instructions[0].freq_mhz, 1395);
  EXPECT_EQ(c->plan().instructions[0].planned_freq_mhz, 1400);
  run_step(*c, {"forward", "backward"});
  c->controller().flush();
  ASSERT_TRUE(c->flush_reports(10.0));
  const auto m = server_.measurements(0).at(0);
  EXPECT_EQ(m["instructions"][0]["planned_freq_mhz"], 1400);  // labelled with what was applied
  EXPECT_EQ(c->stats().clocks_snapped, 2);

  // A clock the GPU lacks, and one no GPU has (refused by the plan check before the clock check).
  server_.set_plan(0, make_plan(2, {{"forward", 1}, {"backward", 99999}, {"forward", 2147483647}}));
  ASSERT_TRUE(wait_for([&] { return c->stats().plans_refused >= 1; }));
  EXPECT_NE(c->stats().last_plan_error.find("2147483647"), std::string::npos) << c->stats().last_plan_error;
  server_.set_plan(0, make_plan(3, {{"forward", 1}, {"backward", 99999}}));  // well-formed, not this GPU's
  ASSERT_TRUE(wait_for([&] { return c->stats().plans_refused >= 2; }));
  EXPECT_NE(c->stats().last_plan_error.find("not a supported clock"), std::string::npos) << c->stats().last_plan_error;
  run_step(*c, {"forward", "backward"});  // the previous plan stays in use
  EXPECT_EQ(c->stats().plan_version, 1);
  c->close();
  const std::string log = nvml_log();
  EXPECT_NE(log.find("nvmlDeviceSetGpuLockedClocks 0 1395 1395"), std::string::npos) << log;
  EXPECT_NE(log.find("nvmlDeviceSetGpuLockedClocks 0 1005 1005"), std::string::npos) << log;
  for (const char* bad : {"Clocks 0 1400 ", "Clocks 0 1000 ", "Clocks 0 1 ", "99999", "2147483647"}) {
    EXPECT_EQ(log.find(bad), std::string::npos) << bad;
  }
}

// The controller refuses a clock that is not in the GPU's list even when asked directly.
TEST_F(Guards, ControllerNeverSendsAnUnsupportedClock) {
  FakeNvmlEnv env(dir_, "");
  auto gpu = nvml();
  FrequencyController::Options o;
  o.supported_mhz = gpu->supported_graphics_clocks_mhz();
  o.coalesce = false;
  FrequencyController c(gpu, o);
  c.request(99999);
  c.request(1200);
  c.flush();
  const auto log = c.log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].outcome, FreqOutcome::kRefused);
  EXPECT_EQ(log[1].outcome, FreqOutcome::kApplied);
  c.stop(false);
  EXPECT_EQ(nvml_log().find("99999"), std::string::npos);
}

// Row 3: the rank's slot is registered with other coordinates: create() fails (C++ and C).
TEST_F(Guards, ConflictingRegistrationIsAnErrorTheTrainerSees) {
  server_.set_plan(0, make_plan(1, {{"forward", 1200}}));
  server_.preregister(0, /*dp=*/1, /*pp=*/0, /*tp=*/0);
  try {
    Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log")));
    FAIL() << "a conflicting registration was taken as success";
  } catch (const ClientError& e) {
    EXPECT_EQ(e.code(), ClientErrc::kServer);
    EXPECT_NE(std::string(e.what()).find("409"), std::string::npos) << e.what();
  }
  perseus_client_config cfg = c_config();
  perseus_client* h = nullptr;
  EXPECT_EQ(perseus_client_create(&cfg, &h), PERSEUS_ERR_SERVER);
  EXPECT_NE(std::string(perseus_last_error()).find("409"), std::string::npos) << perseus_last_error();
  EXPECT_EQ(h, nullptr);
}

// perseus_client_flush(timeout_s) takes what every client duration takes, [0, 1e6] s: 1e308 s
// overflowed the deadline and flush returned at once, "still pending after 1e+308 s".
TEST_F(Guards, FlushTimeoutsBeyondTheDurationRangeAreRefused) {
  server_.set_plan(0, make_plan(1, {{"forward", 1200}}));
  perseus_client_config cfg = c_config();
  perseus_client* h = nullptr;
  ASSERT_EQ(perseus_client_create(&cfg, &h), PERSEUS_OK) << perseus_last_error();
  for (const double bad : {1e308, 1e6 * (1 + 1e-9), std::numeric_limits<double>::infinity(), -1.0, std::nan("")}) {
    EXPECT_EQ(perseus_client_flush(h, bad), PERSEUS_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(perseus_last_error()).find("timeout_s must be in [0, 1000000] s"), std::string::npos)
        << perseus_last_error();
  }
  EXPECT_EQ(perseus_client_flush(h, 1e6), PERSEUS_OK) << perseus_last_error();  // nothing pending: at once
  perseus_client_destroy(h);
}

// Ctrl-C during create() waited out startup_timeout_s (10 s by default): the Python binding could
// not stop it. Now config.startup_cancelled is polled while create() waits; here the third poll
// cancels a wait of 1e6 s for a server that is down.
TEST_F(Guards, StartupCancelledEndsCreateWhileTheServerIsDown) {
  server_.stop();
  perseus_client_config cfg = c_config();
  cfg.startup_timeout_s = 1e6;
  int polls = 0;
  cfg.startup_cancelled = [](void* user) { return ++*static_cast<int*>(user) >= 3 ? 1 : 0; };
  cfg.startup_cancelled_user = &polls;
  perseus_client* h = nullptr;
  EXPECT_EQ(perseus_client_create(&cfg, &h), PERSEUS_ERR_CANCELLED);
  EXPECT_NE(std::string(perseus_last_error()).find("cancelled while waiting for the server"), std::string::npos)
      << perseus_last_error();
  EXPECT_EQ(polls, 3);
  EXPECT_EQ(h, nullptr);
  EXPECT_STREQ(perseus_status_string(PERSEUS_ERR_CANCELLED), "PERSEUS_ERR_CANCELLED");
  // A hook that never cancels changes nothing once the server answers.
  server_.start();
  server_.set_plan(0, make_plan(1, {{"forward", 1200}}));
  cfg.startup_cancelled = [](void*) { return 0; };
  ASSERT_EQ(perseus_client_create(&cfg, &h), PERSEUS_OK) << perseus_last_error();
  perseus_client_destroy(h);
}

// A server that accepts the connection but never answers: a cancellation was seen only between
// requests, so Ctrl-C waited out request_timeout_s (28 s of 30 in session 23's trial). Now the
// request in flight is cut off. Event-based: the cancellation is asked once the connection is
// queued on the silent listener; create() must return long before the 600 s request timeout.
TEST_F(Guards, StartupCancelledCutsOffARequestInFlight) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);  // never accept(): the kernel completes the handshake, nobody answers
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  perseus_client_config cfg = c_config();
  cfg.server_url = url.c_str();
  cfg.request_timeout_s = 600;
  cfg.startup_timeout_s = 600;
  struct Poll {
    int listener;
    bool connected = false;
  } poll_state{listener};
  cfg.startup_cancelled = [](void* user) {
    auto* st = static_cast<Poll*>(user);
    pollfd p{st->listener, POLLIN, 0};
    st->connected = st->connected || (::poll(&p, 1, 0) == 1 && (p.revents & POLLIN));  // a connection is queued
    return st->connected ? 1 : 0;
  };
  cfg.startup_cancelled_user = &poll_state;
  perseus_client* h = nullptr;
  auto create = std::async(std::launch::async, [&] { return perseus_client_create(&cfg, &h); });
  ASSERT_EQ(create.wait_for(std::chrono::seconds(300)), std::future_status::ready)
      << "create() waited for the request timeout";
  EXPECT_EQ(create.get(), PERSEUS_ERR_CANCELLED) << perseus_last_error();
  EXPECT_TRUE(poll_state.connected);
  EXPECT_EQ(h, nullptr);
  ::close(listener);
}

// Row 3, late: the server was down at create(); when it answers 409 later, the next step says so.
TEST_F(Guards, LateRegistrationConflictSurfacesAtTheNextStep) {
  server_.stop();
  auto o = options();
  o.startup_timeout_s = 0;
  auto c = Client::create(o, make_dry_run_gpu(0, dir_.file("gpu.log")));
  server_.preregister(0, 0, 1, 0);
  server_.start();
  ASSERT_TRUE(wait_for([&] {
    try {
      run_step(*c, {});
      return false;
    } catch (const ClientError& e) {
      return e.code() == ClientErrc::kServer && std::string(e.what()).find("409") != std::string::npos;
    }
  }));
}

// A restarted trainer (same coordinates and clocks) registers again without error.
TEST_F(Guards, RestartWithTheSameCoordinatesIsFine) {
  server_.set_plan(0, make_plan(1, {{"forward", 1200}}));
  { auto c = Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log"))); }
  auto c = Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log")));
  EXPECT_EQ(server_.registrations(), 2);
  EXPECT_EQ(c->plan().version, 1);
}

// A server that drips its answer one byte every 0.5 s; records whether each client hung up
// before the answer was complete.
class DripServer {
 public:
  DripServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;  // closed by the destructor
        std::lock_guard lock(mu_);
        conns_.emplace_back([this, c] { drip(c); });
      }
    });
  }
  ~DripServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    accept_.join();
    std::lock_guard lock(mu_);
    for (auto& t : conns_) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return accepted_.load(); }
  int hung_up() const { return hung_up_.load(); }
  int completed() const { return completed_.load(); }

 private:
  void drip(int c) {
    ++accepted_;
    char buf[4096];
    (void)::recv(c, buf, sizeof buf, 0);  // the request (its first segment is enough)
    const std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n"
        "{\"version\":1,\"job_status\":\"running\",\"instructions\":[]}    ";
    for (char ch : answer) {
      if (stop_) break;
      if (::send(c, &ch, 1, MSG_NOSIGNAL) != 1) {
        ++hung_up_;
        ::close(c);
        return;
      }
      for (int i = 0; i < 50 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      // The client hung up if the socket reads EOF.
      char probe;
      if (::recv(c, &probe, 1, MSG_DONTWAIT | MSG_PEEK) == 0) {
        ++hung_up_;
        ::close(c);
        return;
      }
    }
    if (!stop_) ++completed_;
    ::close(c);
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0}, hung_up_{0}, completed_{0};
  std::mutex mu_;
  std::vector<std::thread> conns_;
  std::thread accept_;
};

// Row 4: every request has a deadline; create() respects its startup timeout and close() is
// bounded, whatever the server does. Events: the server sees the client hang up before its
// ~70 s answer is complete, for every connection, and never completes one.
TEST_F(Guards, ADrippingServerIsCutOffAndCloseIsBounded) {
  DripServer drip;
  auto o = options();
  o.server_url = drip.url();
  o.request_timeout_s = 0.5;
  o.startup_timeout_s = 1.0;
  auto c = Client::create(o, make_dry_run_gpu(0, dir_.file("gpu.log")));  // returns: no plan
  EXPECT_EQ(c->plan().version, -1);
  EXPECT_GE(drip.connections(), 1);
  run_step(*c, {});
  c->close();
  // Cut off by the whole-request deadline, or, when the drip's next byte is late (a loaded
  // machine), by the socket read timeout (the same request_timeout_s) first: both end the request.
  const std::string& err = c->stats().last_server_error;
  EXPECT_TRUE(err.find("request deadline") != std::string::npos || err.find("no response (Read)") != std::string::npos)
      << err;
  ASSERT_TRUE(wait_for([&] { return drip.hung_up() == drip.connections(); }, 30));
  EXPECT_EQ(drip.completed(), 0);
}

// Row 5: a plan response larger than the job's shape allows is refused while it streams in.
TEST_F(Guards, OversizedPlansAreRefused) {
  server_.set_registration_reply(R"({"microbatches":2,"chunks":1})");  // at most 6 computations
  std::string huge = R"({"version":1,"instructions":[)";
  for (int i = 0; i < 20000; ++i) huge += std::string(i ? "," : "") + R"({"instruction":"forward","microbatch":0,"freq_mhz":1410})";
  huge += "]}";
  server_.set_raw_plan(0, huge);
  auto o = options();
  o.startup_timeout_s = 0.2;
  // The client keeps fetching in the background; wait for the refusal (under load the startup
  // fetch may time out first: the test waits on the event, not on the startup window).
  auto c = Client::create(o, make_dry_run_gpu(0, dir_.file("gpu.log")));
  EXPECT_TRUE(wait_for([&] { return c->stats().last_plan_error.find("larger than") != std::string::npos; }, 60))
      << c->stats().last_plan_error;
  EXPECT_GE(c->stats().plans_refused, 1);
  EXPECT_EQ(c->plan().version, -1);
  c->close();
  // Small but with more computations than 3 x microbatches x chunks.
  std::string many = R"({"version":1,"instructions":[)";
  for (int i = 0; i < 10; ++i) many += std::string(i ? "," : "") + R"({"instruction":"forward","freq_mhz":1410})";
  server_.set_raw_plan(0, many + "]}");
  auto d = Client::create(o, make_dry_run_gpu(0, dir_.file("gpu.log")));
  EXPECT_TRUE(
      wait_for([&] { return d->stats().last_plan_error.find("holds 10 computations") != std::string::npos; }, 60))
      << d->stats().last_plan_error;
  EXPECT_EQ(d->plan().version, -1);
}

// A plan update fetched in the background is checked against the job's shape too (the
// poller's connection learns it from start-up's registration): a wrong-shape update is
// refused and the plan in use stays.
TEST_F(Guards, PlanUpdatesAreCheckedAgainstTheShape) {
  server_.set_registration_reply(R"({"pp":1,"microbatches":1,"chunks":1})");
  server_.set_plan(0, make_plan(1, {{"forward", 1410}, {"backward", 1410}}));
  auto c = Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log")));
  ASSERT_EQ(c->plan().version, 1);
  server_.set_plan(0, make_plan(2, {{"forward", 1410}, {"backward", 1410}, {"forward", 1410}}));  // microbatch 1
  ASSERT_TRUE(wait_for([&] { return c->stats().plans_refused >= 1; }));
  EXPECT_NE(c->stats().last_plan_error.find("microbatch 1 is beyond the job's 1 microbatches"), std::string::npos)
      << c->stats().last_plan_error;
  run_step(*c, {"forward", "backward"});
  EXPECT_EQ(c->stats().plan_version, 1);
}

// A registration answer beyond the server's own job limits (microbatches 2^20, chunks 2^20)
// would lift the plan-size bound to ~10^15 bytes: it leaves the shape unknown instead, and
// the bound at its default (16 MiB).
TEST_F(Guards, ARegistrationShapeBeyondTheServersLimitsIsNotBelieved) {
  for (const char* reply : {R"({"pp":4,"microbatches":1048576,"chunks":1048576})", R"({"pp":4,"microbatches":4096,"chunks":65})",
                            R"({"pp":4,"microbatches":4097,"chunks":1})", R"({"pp":4,"microbatches":-3,"chunks":1})"}) {
    server_.set_registration_reply(reply);
    ServerConnection conn(server_.url(), "secret", "job1", RankInfo{0, 0, 0, 0}, 5.0);
    ASSERT_TRUE(conn.register_rank({1410}).ok()) << reply;
    EXPECT_LE(conn.max_plan_bytes(), std::max(kDefaultMaxPlanBytes, kPlanBytesSlack + kPlanBytesPerInstruction * 3 *
                                                                           kMaxJobMicrobatches * kMaxJobChunks))
        << reply;
    EXPECT_LE(conn.shape().chunks, kMaxJobChunks) << reply;
    EXPECT_LE(conn.shape().microbatches, kMaxJobMicrobatches) << reply;
  }
  server_.set_registration_reply(R"({"pp":4,"microbatches":1048576,"chunks":1048576})");
  ServerConnection big(server_.url(), "secret", "job1", RankInfo{0, 0, 0, 0}, 5.0);
  ASSERT_TRUE(big.register_rank({1410}).ok());
  EXPECT_EQ(big.shape().microbatches, 0);
  EXPECT_EQ(big.max_plan_bytes(), kDefaultMaxPlanBytes);
  server_.set_registration_reply(R"({"pp":4,"microbatches":4096,"chunks":64})");  // the server's largest job
  ServerConnection conn(server_.url(), "secret", "job1", RankInfo{0, 0, 0, 0}, 5.0);
  ASSERT_TRUE(conn.register_rank({1410}).ok());
  EXPECT_EQ(conn.shape().microbatches, 4096);
  EXPECT_EQ(conn.max_plan_bytes(), kPlanBytesSlack + kPlanBytesPerInstruction * 3 * 4096 * 64);
}

// A server naming iterations the batch does not hold (or none) in its "rejected" list cannot
// push the counters below zero: only the batch's own iterations count, each once.
TEST_F(Guards, RejectionsOfIterationsNotSentAreNotCounted) {
  server_.set_plan(0, make_plan(1, {{"forward", 1410}, {"backward", 1410}}));
  for (int k = 0; k < 100; ++k) server_.add_foreign_rejection({{"iteration", 1000000 + k}, {"error", "not yours"}});
  server_.add_foreign_rejection({{"iteration", nullptr}, {"error", "measurements[0] is not an object"}});
  server_.add_foreign_rejection(nlohmann::json("not an object"));
  server_.reject_iteration(2);
  for (int k = 0; k < 100; ++k)
    server_.add_foreign_rejection({{"iteration", 2000000 + k}, {"error", "reason " + std::to_string(k)}});
  ::testing::internal::CaptureStderr();
  auto c = Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log")));
  for (int it = 0; it < 4; ++it) run_step(*c, {"forward", "backward"});
  ASSERT_TRUE(c->flush_reports(60));
  const auto st = c->stats();
  c.reset();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(st.reports_rejected, 1);
  EXPECT_EQ(st.reports_sent, 3);
  EXPECT_EQ(st.reports_dropped, 0);
  // The log is bounded (it printed one line per foreign item, every batch: a trial's fake
  // server flooded stderr): each reason once, at most 32 of them, then one last line.
  auto count = [&](const std::string& what) {
    std::size_t k = 0;
    for (auto at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++k;
    return k;
  };
  EXPECT_EQ(count("perseus client: rank 0: server rejected "), 32u) << log;
  EXPECT_EQ(count("not yours"), 1u) << log;
  EXPECT_EQ(count("server rejected an item this batch does not hold (no iteration): measurements[0] is not an "
                  "object"), 1u) << log;
  EXPECT_EQ(count("different refusal reasons; no more are printed"), 1u) << log;
}

// A report refused as invalid (422) counts as rejected whether it went alone or in a batch
// (alone it counted as dropped and as a server failure).
TEST_F(Guards, AReportRefusedAloneCountsAsRejected) {
  server_.set_plan(0, make_plan(1, {{"forward", 1410}, {"backward", 1410}}));
  server_.refuse_single_with_422(1);
  auto c = Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log")));
  for (int it = 0; it < 3; ++it) {
    run_step(*c, {"forward", "backward"});
    ASSERT_TRUE(c->flush_reports(60));  // one report per post
  }
  const auto st = c->stats();
  EXPECT_EQ(st.reports_rejected, 1);
  EXPECT_EQ(st.reports_sent, 2);
  EXPECT_EQ(st.reports_dropped, 0);
  EXPECT_EQ(st.server_failures, 0) << st.last_server_error;
}

// After a plan mismatch with the error caught (strict off), the step's report leaves out the
// computations the job does not have (a name that is no instruction kind, a microbatch beyond
// the job's): perseus serve refuses a report holding them, so the step's time was lost.
TEST_F(Guards, AMismatchedStepReportsOnlyTheJobsComputations) {
  server_.set_registration_reply(R"({"pp":1,"microbatches":1,"chunks":1})");
  server_.set_plan(0, make_plan(1, {{"forward", 1410}, {"backward", 1410}}));
  auto c = Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log")));
  c->on_step_begin();
  for (const char* name : {"forward", "backward", "optimizer", "forward"}) {
    try {
      c->on_instruction_begin(name);
    } catch (const ClientError&) {  // the mismatch, reported once
    }
    c->on_instruction_end(name);
  }
  try {
    c->on_step_end();
  } catch (const ClientError&) {  // more computations than planned
  }
  ASSERT_TRUE(c->flush_reports(60));
  const auto got = server_.measurements(0);
  ASSERT_EQ(got.count(0), 1u);
  const auto& list = got.at(0)["instructions"];
  ASSERT_EQ(list.size(), 2u) << got.at(0).dump();
  EXPECT_EQ(list[0]["instruction"], "forward");
  EXPECT_EQ(list[1]["instruction"], "backward");
  EXPECT_GT(got.at(0)["time_s"].get<double>(), 0.0);
}

// A server restored from an older database answers the client's since_version, which it
// never issued, with its plan in force: the client follows it (with a warning) instead of
// ignoring every plan below the version it had.
TEST_F(Guards, AServerWhosePlanVersionWentBackIsFollowed) {
  server_.set_plan(0, make_plan(50, {{"forward", 1410}, {"backward", 1410}}));
  auto c = Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log")));
  ASSERT_EQ(c->plan().version, 50);
  server_.restore_plan(0, make_plan(3, {{"forward", 1200}, {"backward", 1200}}));
  ASSERT_TRUE(wait_for([&] { return c->stats().latest_plan_version == 3; }, 60)) << c->stats().latest_plan_version;
  run_step(*c, {"forward", "backward"});
  EXPECT_EQ(c->stats().plan_version, 3);
  EXPECT_EQ(c->plan().instructions[0].freq_mhz, 1200);
  server_.set_plan(0, make_plan(4, {{"forward", 1300}, {"backward", 1300}}));  // and newer ones after it
  ASSERT_TRUE(wait_for([&] { return c->stats().latest_plan_version == 4; }, 60));
}

// A registration answered with something other than a JSON object is not a Perseus server:
// create() fails naming it, instead of counting the rank as registered.
TEST_F(Guards, ARegistrationAnswerThatIsNotJsonFailsCreate) {
  server_.set_registration_reply("<html>garbage</html>");
  try {
    Client::create(options(), make_dry_run_gpu(0, dir_.file("gpu.log")));
    ADD_FAILURE() << "create() accepted a non-JSON registration answer";
  } catch (const ClientError& e) {
    EXPECT_NE(std::string(e.what()).find("not a JSON object"), std::string::npos) << e.what();
  }
  auto o = options();
  o.first_iteration = -5;  // the server takes [0, 2^53]; a negative one would lose every report
  EXPECT_THROW(Client::create(o, make_dry_run_gpu(0, dir_.file("gpu.log"))), ClientError);
  o.first_iteration = (std::int64_t{1} << 53) + 1;
  EXPECT_THROW(Client::create(o, make_dry_run_gpu(0, dir_.file("gpu.log"))), ClientError);
}

// Session 32's trial: each computation's reading passes its own bound (one counter update at
// 3000 W: up to 300 J in any interval), yet the step holding them rose impossibly fast. Two
// 250 J jumps within iteration 1's two computations: the step's energy is unknown, and so are
// its computations' (they were reported as measured); other iterations keep theirs.
TEST_F(Guards, ComputationEnergiesOfAnImpossibleStepAreUnknownToo) {
  // Reads: 1 at create, then 6 per step; iteration 1 reads 8..13 (9/10 its forward, 11/12 its
  // backward): +250 J from read 10 on, +500 J from read 12 on.
  FakeNvmlEnv env(dir_, "energy_offset 0 10 250000\nenergy_offset 0 12 500000\n");
  server_.set_plan(0, make_plan(1, {{"forward", 1200}, {"backward", 1005}}));
  auto c = Client::create(options(), nvml());
  for (int i = 0; i < 3; ++i) run_step(*c, {"forward", "backward"});
  ASSERT_TRUE(c->flush_reports(10.0));
  const auto m = server_.measurements(0);
  ASSERT_EQ(m.size(), 3u);
  for (const auto& [it, j] : m) {
    const bool impossible = it == 1;
    EXPECT_EQ(j.contains("energy_j"), !impossible) << it << ": " << j.dump();
    for (const auto& ins : j["instructions"]) {
      EXPECT_EQ(ins.contains("energy_j"), !impossible) << it << ": " << j.dump();
      EXPECT_TRUE(ins.contains("time_s")) << it;
    }
  }
  EXPECT_EQ(c->stats().energy_unknown, 3);  // the step and its two computations
}

// Row 7: over 8 iterations the counter goes back once in iteration 3; that computation's and
// that step's energies are unknown (times kept); every report is delivered; a report the
// server rejects on its own costs no other.
TEST_F(Guards, ACounterGlitchCostsOnlyTheAffectedValues) {
  // Energy reads: 1 at create; then per step 6 (step begin, 2 x (begin, end), step end), so
  // iteration 2 reads 14..19 and read 16 (end of its first computation) goes back by 1 kJ.
  FakeNvmlEnv env(dir_, "energy_offset 0 16 -1000000\n");
  server_.set_plan(0, make_plan(1, {{"forward", 1200}, {"backward", 1005}}));
  server_.reject_iteration(5);
  auto c = Client::create(options(), nvml());
  for (int i = 0; i < 8; ++i) run_step(*c, {"forward", "backward"});
  ASSERT_TRUE(c->flush_reports(10.0));
  const auto m = server_.measurements(0);
  ASSERT_EQ(m.size(), 7u);  // 8 minus the one the server rejected
  for (const auto& [it, j] : m) {
    const bool glitch = it == 2;
    EXPECT_EQ(j.contains("energy_j"), !glitch) << it;
    EXPECT_EQ(j["instructions"][0].contains("energy_j"), !glitch) << it;
    EXPECT_TRUE(j["instructions"][1].contains("energy_j")) << it;
    EXPECT_TRUE(j["instructions"][0].contains("time_s")) << it;
    if (j.contains("energy_j")) {
      EXPECT_GE(j["energy_j"].get<double>(), 0.0);
    }
  }
  const auto st = c->stats();
  EXPECT_EQ(st.energy_unknown, 2);
  EXPECT_EQ(st.reports_rejected, 1);
  EXPECT_EQ(st.reports_sent, 7);
  EXPECT_EQ(st.reports_dropped, 0);
}

// Row 10: a second live client on the same GPU is refused; a lock left by a client killed
// together with its watchdog (container teardown) is reset at the next start.
TEST_F(Guards, LockRecordsRefuseALiveOwnerAndResetStaleLocks) {
  FakeNvmlEnv env(dir_, "");
  auto a = nvml();
  auto b = nvml();
  {
    GpuLockRecord first = GpuLockRecord::claim(*a, dir_.file("locks"));
    ASSERT_FALSE(first.path().empty());
    EXPECT_FALSE(first.reset_stale());
    try {
      GpuLockRecord::claim(*b, dir_.file("locks"));
      FAIL() << "two live clients on one GPU";
    } catch (const GpuError& e) {
      EXPECT_NE(std::string(e.what()).find("already driven"), std::string::npos) << e.what();
    }
  }
  GpuLockRecord again = GpuLockRecord::claim(*b, dir_.file("locks"));  // released cleanly: no reset
  EXPECT_FALSE(again.reset_stale());
}

// A fork()ed child (a DataLoader worker) that outlives its trainer does not keep the GPU's
// record locked: a restarted trainer was refused as "already driven by another live Perseus
// client" until the child exited (session 23's trial). Here the parent's abandon() plays the
// trainer's death (flock dropped, text kept) while the child is alive.
TEST_F(Guards, AForkedChildDoesNotKeepTheLockRecord) {
  FakeNvmlEnv env(dir_, "");
  auto a = nvml();
  auto b = nvml();
  GpuLockRecord first = GpuLockRecord::claim(*a, dir_.file("locks"));
  ASSERT_FALSE(first.path().empty());
  int go[2], ready[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the worker: says it runs (fork's handlers are done), waits, leaves without cleanup
    char c = 'r';
    ::close(go[1]);
    ::close(ready[0]);
    [[maybe_unused]] auto n = ::write(ready[1], &c, 1);
    n = ::read(go[0], &c, 1);
    ::_exit(0);
  }
  ::close(go[0]);
  ::close(ready[1]);
  char started = 0;
  ASSERT_EQ(::read(ready[0], &started, 1), 1);  // the child is past fork()
  ::close(ready[0]);
  first.abandon();  // the trainer "dies": its own descriptor is closed
  bool claimed = false;
  try {
    GpuLockRecord again = GpuLockRecord::claim(*b, dir_.file("locks"));
    claimed = true;
    EXPECT_TRUE(again.reset_stale());  // the dead trainer's text was left: its clocks are reset
  } catch (const GpuError& e) {
    ADD_FAILURE() << "the child kept the record: " << e.what();
  }
  ::close(go[1]);  // the child exits
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(claimed);
}

// Code review (session 14): in a lock directory every user can write (/tmp/perseus-gpu-locks), a
// planted symbolic or hard link named like a GPU's record made the client chmod 0666, truncate
// and overwrite the file it pointed to. Such a record is now left alone (no record, a warning).
TEST_F(Guards, ALockRecordThatIsALinkIsLeftAlone) {
  FakeNvmlEnv env(dir_, "");
  auto gpu = nvml();
  const std::string locks = dir_.file("locks");
  std::filesystem::create_directories(locks);
  const std::string victim = dir_.file("victim.txt");
  std::ofstream(victim) << "precious\n";
  std::filesystem::permissions(victim, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string record = locks + "/gpu-" + gpu->uuid() + ".lock";
  for (const bool symbolic : {true, false}) {
    std::filesystem::remove(record);
    if (symbolic) std::filesystem::create_symlink(victim, record);
    else std::filesystem::create_hard_link(victim, record);
    GpuLockRecord r = GpuLockRecord::claim(*gpu, locks);
    EXPECT_TRUE(r.path().empty()) << symbolic;
    r.release();
    EXPECT_EQ(read_file(victim), "precious\n") << symbolic;
    EXPECT_EQ(std::filesystem::status(victim).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
        << symbolic;
  }
  std::filesystem::remove(record);
  GpuLockRecord fine = GpuLockRecord::claim(*gpu, locks);  // a plain record is claimed as before
  EXPECT_EQ(fine.path(), record);
}

// Fresh-user trial (session 21): a trainer running as root made /run/perseus, `perseus gpud`'s
// 0755 runtime directory holding its socket, mode 1777. Only a directory the client creates is
// opened to every user now; an existing one keeps its mode, and the default is a folder of its own.
TEST_F(Guards, OnlyALockDirectoryTheClientCreatesIsOpenedToEveryUser) {
  namespace fs = std::filesystem;
  FakeNvmlEnv env(dir_, "");
  auto gpu = nvml();
  const std::string existing = dir_.file("gpud-runtime");
  fs::create_directories(existing);
  fs::permissions(existing, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  {
    GpuLockRecord r = GpuLockRecord::claim(*gpu, existing);
    EXPECT_FALSE(r.path().empty());
  }
  EXPECT_EQ(fs::status(existing).permissions(), fs::perms::owner_all | fs::perms::group_read |
                                                    fs::perms::group_exec | fs::perms::others_read |
                                                    fs::perms::others_exec);
  const std::string fresh = dir_.file("new/locks");
  {
    GpuLockRecord r = GpuLockRecord::claim(*gpu, fresh);
    EXPECT_FALSE(r.path().empty());
  }
  EXPECT_EQ(fs::status(fresh).permissions(), fs::perms::all | fs::perms::sticky_bit);
  EXPECT_EQ(std::string(kRunLockDir), "/run/perseus/locks");
}

TEST_F(Guards, ClocksLeftLockedByAKilledContainerAreResetAtTheNextStart) {
  server_.set_plan(0, make_plan(1, {{"forward", 1200}, {"backward", 1005}}));
  std::ofstream(dir_.file("scenario")) << "";
  const pid_t trainer = spawn(
      {TEST_TRAINER, "--url", server_.url(), "--token", "secret", "--job", "job1", "--backend", "nvml", "--stages",
       "1", "--microbatches", "1", "--iterations", "2", "--watchdog", "/nonexistent/perseus-watchdog", "--progress",
       dir_.file("progress"), "--no-coalesce", "--hang"},
      {{"LD_LIBRARY_PATH", FAKE_NVML_DIR}, {"FAKE_NVML_STATE_DIR", dir_.file("")}, {"PERSEUS_LOCK_DIR", dir_.file("locks")},
       {"FAKE_NVML_LOG", dir_.file("nvml.log")}},
      dir_.file("out.txt"));
  ASSERT_TRUE(wait_for([&] { return read_file(dir_.file("progress")).find("ready") != std::string::npos; }, 20))
      << read_file(dir_.file("out.txt"));
  ASSERT_EQ(::kill(trainer, SIGKILL), 0);  // trainer and (missing) watchdog gone together
  wait_exit(trainer);
  ASSERT_TRUE(std::filesystem::exists(dir_.file("locked_0")));  // the GPU stays locked
  EXPECT_EQ(read_file(dir_.file("locked_0")), "1005\n");
  FakeNvmlEnv env(dir_, "");
  auto c = Client::create(options(), nvml());
  EXPECT_FALSE(std::filesystem::exists(dir_.file("locked_0")));  // reset before anything else
  c->close();
}

}  // namespace
}  // namespace perseus::runtime
