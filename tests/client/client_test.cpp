// Client against the in-test stub server: plan, order check, refresh, reports, outage.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <tuple>

#include "perseus/runtime/client.hpp"
#include "stub_server.hpp"
#include "test_util.hpp"

namespace perseus::runtime {
namespace {

using perseus::testing::make_plan;
using perseus::testing::StubServer;
using perseus::testing::TempDir;
using perseus::testing::wait_for;

const std::vector<std::pair<std::string, int>> kSeq = {
    {"forward", 1200}, {"forward", 1110}, {"backward", 1005}, {"backward", 1005}};

/// A GPU that passes every call to `inner` (a dry-run GPU); tests override the calls they script.
struct WrappedGpu : GpuControl {
  std::shared_ptr<GpuControl> inner;
  explicit WrappedGpu(std::shared_ptr<GpuControl> g) : inner(std::move(g)) {}
  std::string name() const override { return "wrapped"; }
  int device_index() const override { return 0; }
  std::vector<int> supported_graphics_clocks_mhz() override { return inner->supported_graphics_clocks_mhz(); }
  void set_locked_clocks(int f) override { inner->set_locked_clocks(f); }
  void reset_locked_clocks() override { inner->reset_locked_clocks(); }
  std::optional<double> total_energy_j() override { return inner->total_energy_j(); }
  std::optional<double> power_w() override { return inner->power_w(); }
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.set_plan(0, make_plan(1, kSeq));
    server_.start();
  }
  ClientOptions options() const { return perseus::testing::stub_client_options(server_.url()); }
  std::shared_ptr<GpuControl> gpu() { return make_dry_run_gpu(0, dir_.file("gpu.log")); }
  static void run_step(Client& c, const std::vector<std::pair<std::string, int>>& seq) {
    c.on_step_begin();
    for (const auto& [name, f] : seq) {
      c.on_instruction_begin(name);
      c.on_instruction_end(name);
    }
    c.on_step_end();
  }
  // Requested clocks of one iteration, from the controller log.
  static std::vector<int> requested(Client& c, std::int64_t iteration) {
    c.controller().flush();
    std::vector<int> out;
    for (const auto& e : c.controller().log()) {
      if (e.iteration == iteration) {
        EXPECT_TRUE(e.outcome == FreqOutcome::kApplied || e.outcome == FreqOutcome::kRedundant);
        EXPECT_EQ(e.applied_mhz, e.requested_mhz);
        out.push_back(e.requested_mhz);
      }
    }
    return out;
  }
  TempDir dir_;
  StubServer server_;
};

TEST_F(ClientTest, AppliesThePlanAndReportsEveryIteration) {
  auto c = Client::create(options(), gpu());
  EXPECT_EQ(server_.registered_freqs(0).size(), 81u);
  EXPECT_EQ(c->plan().version, 1);
  for (int i = 0; i < 3; ++i) run_step(*c, kSeq);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(requested(*c, i), (std::vector<int>{1200, 1110, 1005, 1005}));
  ASSERT_TRUE(c->flush_reports(5.0));
  const auto m = server_.measurements(0);
  ASSERT_EQ(m.size(), 3u);
  const auto& it2 = m.at(2);
  EXPECT_EQ(it2["plan_version"], 1);
  ASSERT_EQ(it2["instructions"].size(), 4u);
  EXPECT_EQ(it2["instructions"][1]["instruction"], "forward");
  EXPECT_EQ(it2["instructions"][1]["microbatch"], 1);
  EXPECT_GE(it2["time_s"].get<double>(), 0.0);
  const auto s = c->stats();
  EXPECT_EQ(s.iterations, 3);
  EXPECT_EQ(s.reports_sent, 3);
  EXPECT_EQ(s.reports_pending, 0);
  c->close();
  EXPECT_EQ(c->controller().log().back().outcome, FreqOutcome::kReset);
}

TEST_F(ClientTest, WrongInstructionOrderIsAClearError) {
  auto c = Client::create(options(), gpu());
  c->on_step_begin();
  try {
    c->on_instruction_begin("backward");
    FAIL() << "expected a plan mismatch";
  } catch (const ClientError& e) {
    EXPECT_EQ(e.code(), ClientErrc::kPlanMismatch);
    const std::string m = e.what();
    EXPECT_NE(m.find("computation #0 is 'backward' but the plan expects 'forward'"), std::string::npos) << m;
  }
  c->on_instruction_end("backward");
  c->on_instruction_begin("forward");  // desynced: no more errors this step
  c->on_instruction_end("forward");
  EXPECT_NO_THROW(c->on_step_end());
  run_step(*c, kSeq);  // back in sync at the next step
  EXPECT_EQ(requested(*c, 1).size(), 4u);
}

TEST_F(ClientTest, FewerOrMoreComputationsThanPlanned) {
  auto c = Client::create(options(), gpu());
  c->on_step_begin();
  c->on_instruction_begin("forward");
  c->on_instruction_end("forward");
  try {
    c->on_step_end();
    FAIL() << "expected a plan mismatch";
  } catch (const ClientError& e) {
    EXPECT_EQ(e.code(), ClientErrc::kPlanMismatch);
    EXPECT_NE(std::string(e.what()).find("ended after 1 computations but the plan (version 1) has 4"), std::string::npos);
  }
  auto longer = kSeq;
  longer.emplace_back("forward", 0);
  EXPECT_THROW(run_step(*c, longer), ClientError);
}

TEST_F(ClientTest, HooksOutOfOrderAreStateErrors) {
  auto c = Client::create(options(), gpu());
  auto code = [](auto fn) {
    try {
      fn();
    } catch (const ClientError& e) {
      return e.code();
    }
    return ClientErrc::kInvalidArgument;
  };
  EXPECT_EQ(code([&] { c->on_instruction_begin("forward"); }), ClientErrc::kState);
  EXPECT_EQ(code([&] { c->on_step_end(); }), ClientErrc::kState);
  c->on_step_begin();
  EXPECT_EQ(code([&] { c->on_step_begin(); }), ClientErrc::kState);
  EXPECT_EQ(code([&] { c->on_instruction_end("forward"); }), ClientErrc::kState);
  c->on_instruction_begin("forward");
  EXPECT_EQ(code([&] { c->on_instruction_end("backward"); }), ClientErrc::kState);
  EXPECT_EQ(code([&] { c->on_step_end(); }), ClientErrc::kState);
}

TEST_F(ClientTest, StateErrorsQuoteTheCallersNameSafely) {
  // A name with a terminal escape and a newline, 1 MB long: the message escapes and cuts it.
  auto c = Client::create(options(), gpu());
  const std::string name = "fwd\x1b[2J\n" + std::string(1 << 20, 'x');
  try {
    c->on_instruction_begin(name);
    FAIL() << "expected a state error";
  } catch (const ClientError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ClientErrc::kState);
    EXPECT_NE(what.find("'fwd\\x1B[2J\\n"), std::string::npos) << what.substr(0, 200);
    EXPECT_EQ(what.find('\x1b'), std::string::npos);
    EXPECT_EQ(what.find('\n'), std::string::npos);
    EXPECT_LT(what.size(), 400u);
  }
}

TEST_F(ClientTest, NewPlanIsSwitchedInAtTheNextStepBoundary) {
  auto c = Client::create(options(), gpu());
  run_step(*c, kSeq);
  c->on_step_begin();  // iteration 1 runs plan v1 even if v2 arrives meanwhile
  server_.set_plan(0, make_plan(2, {{"forward", 900}, {"forward", 900}, {"backward", 795}, {"backward", 810}}));
  ASSERT_TRUE(wait_for([&] { return c->stats().latest_plan_version == 2; }));
  for (const auto& [name, f] : kSeq) {
    c->on_instruction_begin(name);
    c->on_instruction_end(name);
  }
  c->on_step_end();
  run_step(*c, kSeq);
  EXPECT_EQ(requested(*c, 1), (std::vector<int>{1200, 1110, 1005, 1005}));
  EXPECT_EQ(requested(*c, 2), (std::vector<int>{900, 900, 795, 810}));
  EXPECT_EQ(c->stats().plan_version, 2);
  EXPECT_EQ(c->stats().plan_updates, 1);
  ASSERT_TRUE(c->flush_reports(5.0));
  EXPECT_EQ(server_.measurements(0).at(2)["plan_version"], 2);
}

// - Client::flush_reports took any double: a NaN or 1e308 s timeout made the wait's conversion
//   to clock ticks undefined (the C ABI checked, the C++ API did not).
TEST_F(ClientTest, FlushReportsRefusesATimeoutOutsideItsRange) {
  auto c = Client::create(options(), gpu());
  run_step(*c, kSeq);
  for (double bad : {-1.0, std::nan(""), 1e308, std::numeric_limits<double>::infinity()}) {
    try {
      c->flush_reports(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const perseus::runtime::ClientError& e) {
      EXPECT_EQ(e.code(), perseus::runtime::ClientErrc::kInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("timeout_s must be in [0, 1000000] s"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(c->flush_reports(5.0)) << "the report is still delivered";
  EXPECT_TRUE(c->flush_reports(0.0)) << "nothing pending: no wait";
}

// Once the job is gone (here: its token no longer accepted), every report is refused the same
// way: training goes on, the reports count as dropped, and the refusal is printed once (it was
// one line per iteration).
TEST_F(ClientTest, AReportRefusedForGoodIsPrintedOncePerReason) {
  auto c = Client::create(options(), gpu());
  run_step(*c, kSeq);
  ASSERT_TRUE(c->flush_reports(5.0));
  server_.set_token("another-token-0123456789");
  ::testing::internal::CaptureStderr();
  for (int i = 1; i < 6; ++i) {
    run_step(*c, kSeq);
    c->flush_reports(5.0);
  }
  ASSERT_TRUE(wait_for([&] { return c->stats().reports_dropped == 5; })) << c->stats().reports_dropped;
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::size_t lines = 0;
  for (std::size_t at = err.find("server refused"); at != std::string::npos; at = err.find("server refused", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_NE(err.find("a deleted job's tokens are refused too"), std::string::npos) << err;
  EXPECT_EQ(requested(*c, 5), (std::vector<int>{1200, 1110, 1005, 1005}));  // the plan still runs
}

TEST_F(ClientTest, ServerOutageKeepsThePlanAndDeliversBufferedReportsLater) {
  auto c = Client::create(options(), gpu());
  for (int i = 0; i < 2; ++i) run_step(*c, kSeq);
  ASSERT_TRUE(c->flush_reports(5.0));
  server_.stop();
  for (int i = 2; i < 7; ++i) run_step(*c, kSeq);  // training goes on, no exception
  EXPECT_EQ(requested(*c, 6), (std::vector<int>{1200, 1110, 1005, 1005}));
  ASSERT_TRUE(wait_for([&] { return c->stats().server_failures > 0; }));
  EXPECT_EQ(c->stats().reports_pending, 5);
  EXPECT_EQ(server_.measurements(0).size(), 2u);
  server_.start();
  ASSERT_TRUE(c->flush_reports(10.0)) << c->stats().last_server_error;
  EXPECT_EQ(server_.measurements(0).size(), 7u);
  EXPECT_EQ(c->stats().reports_dropped, 0);
}

TEST_F(ClientTest, ReportBufferIsBounded) {
  server_.stop();
  auto o = options();
  o.startup_timeout_s = 0;
  o.max_buffered_reports = 3;
  o.request_timeout_s = 0.5;
  auto c = Client::create(o, gpu());  // server down: starts without a plan
  EXPECT_EQ(c->plan().version, -1);
  for (int i = 0; i < 6; ++i) run_step(*c, kSeq);
  const auto s = c->stats();
  EXPECT_EQ(s.reports_pending, 3);
  EXPECT_EQ(s.reports_dropped, 3);
  c->controller().flush();
  EXPECT_TRUE(c->controller().log().empty());  // no plan, no clock changes
}

TEST_F(ClientTest, StartsWithoutServerAndPicksUpThePlanLater) {
  server_.stop();
  auto o = options();
  o.startup_timeout_s = 0.05;
  auto c = Client::create(o, gpu());
  run_step(*c, kSeq);
  server_.start();
  ASSERT_TRUE(wait_for([&] { return c->stats().latest_plan_version == 1; }));
  run_step(*c, kSeq);
  EXPECT_EQ(requested(*c, 1), (std::vector<int>{1200, 1110, 1005, 1005}));
  ASSERT_TRUE(c->flush_reports(5.0));
  EXPECT_EQ(server_.measurements(0).size(), 2u);  // the report from before registration too
}

TEST_F(ClientTest, PermanentServerErrorsFailCreate) {
  auto o = options();
  o.token = "wrong";
  try {
    Client::create(o, gpu());
    FAIL() << "expected ClientError";
  } catch (const ClientError& e) {
    EXPECT_EQ(e.code(), ClientErrc::kServer);
    EXPECT_NE(std::string(e.what()).find("401"), std::string::npos) << e.what();
  }
  o = options();
  o.job_id = "nope";
  EXPECT_THROW(Client::create(o, gpu()), ClientError);
  o = options();
  o.server_url = "localhost:1";
  try {
    Client::create(o, gpu());
    FAIL();
  } catch (const ClientError& e) {
    EXPECT_EQ(e.code(), ClientErrc::kInvalidArgument);
  }
}

// A malformed URL or token is a configuration error at create(), never "server not reachable"
// for the whole run (training would go on without a plan) nor a header injected by CR/LF.
TEST_F(ClientTest, MalformedUrlOrTokenIsAnInvalidArgument) {
  const std::pair<std::string, std::string> urls[] = {
      {"http://", "has no host"},
      {"http://:7787", "has no host"},
      {"http://127.0.0.1:99999", "has a port outside 1..65535"},
      {"http://127.0.0.1:0", "has a port outside 1..65535"},
      {"http://127.0.0.1:", "has ':' without a port"},
      {"http://127.0.0.1:7x", "has a port that is not a number"},
      {"http://127.0.0.1:7787/v1", "has a path, query or fragment"},
      {"http://[::1", "has '[' without ']'"},
      {"http://[::1]x", "has text after the IPv6 address's ']'"},
      {"http://a b:1", "has characters not allowed in a host name"},
      {"http://user:pw@127.0.0.1:1", "has credentials (USER@ or USER:PASSWORD@)"},
      {"http://user@[::1]:1", "has credentials"},
  };
  for (const auto& [url, why] : urls) {
    auto o = options();
    o.server_url = url;
    try {
      Client::create(o, gpu());
      ADD_FAILURE() << url << " accepted";
    } catch (const ClientError& e) {
      EXPECT_EQ(e.code(), ClientErrc::kInvalidArgument) << url;
      EXPECT_NE(std::string(e.what()).find("server URL '" + url + "' " + why), std::string::npos) << e.what();
    }
  }
  // Token and job id (session 14's trial: a job id with CR/LF was sent, and came back inside the
  // server's error): each bad value is refused before anything is sent.
  using Field = std::string ClientOptions::*;
  const std::tuple<Field, std::vector<std::string>, std::string> cases[] = {
      {&ClientOptions::token,
       {"tok\r\nX-Evil: 1", std::string("a\0b", 3), "two words", "caf\xc3\xa9"},
       "token has a character not allowed in an HTTP header"},
      {&ClientOptions::job_id, {"job-x\r\n", "a/b", "tab\there", "caf\xc3\xa9", ""}, "has characters not allowed in a URL path"},
  };
  for (const auto& [field, values, message] : cases) {
    for (const std::string& value : values) {
      auto o = options();
      o.*field = value;
      try {
        Client::create(o, gpu());
        ADD_FAILURE() << message << ": accepted";
      } catch (const ClientError& e) {
        EXPECT_EQ(e.code(), ClientErrc::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      }
    }
  }
  // The server's own URL with a trailing '/' still works.
  auto o = options();
  o.server_url += "/";
  auto c = Client::create(o, gpu());
  run_step(*c, kSeq);
  EXPECT_TRUE(c->flush_reports(5.0));
}

// Trial (session 18): the frequency log is written at close(), after the whole run; a path in a
// missing folder was accepted and the log lost then (one stderr line, close() fine). Now create()
// refuses it, as it refuses a bad URL, and a writable path is still accepted.
TEST_F(ClientTest, AnUnwritableFrequencyLogIsRefusedAtCreate) {
  for (const std::string& path : {dir_.file("missing/freq.csv"), dir_.path()}) {
    auto o = options();
    o.freq_log_path = path;
    try {
      Client::create(o, gpu());
      ADD_FAILURE() << path << " accepted";
    } catch (const ClientError& e) {
      EXPECT_EQ(e.code(), ClientErrc::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("freq_log_path " + path), std::string::npos) << e.what();
    }
  }
  auto o = options();
  o.freq_log_path = dir_.file("freq.csv");
  auto c = Client::create(o, gpu());
  run_step(*c, kSeq);
  c->close();
  EXPECT_TRUE(std::filesystem::exists(dir_.file("freq.csv")));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("missing")));
}

// Code review (session 14): an infinite or huge timeout passed the "> 0" check, and the
// deadline now + timeout overflowed the clock (undefined behaviour; on x86 it lands in the past,
// so create() stopped waiting at once instead of "forever"). Each is refused by name.
TEST_F(ClientTest, InfiniteOrHugeDurationsAreRefusedByName) {
  const double inf = std::numeric_limits<double>::infinity();
  using Field = double ClientOptions::*;
  const std::pair<Field, const char*> fields[] = {{&ClientOptions::request_timeout_s, "request_timeout_s"},
                                                  {&ClientOptions::startup_timeout_s, "startup_timeout_s"},
                                                  {&ClientOptions::plan_poll_interval_s, "plan_poll_interval_s"},
                                                  {&ClientOptions::retry_max_s, "retry_max_s"}};
  for (const auto& [field, name] : fields) {
    for (const double bad : {inf, 1e300, 1e6 * (1 + 1e-9), std::nan("")}) {
      auto o = options();
      o.*field = bad;
      try {
        Client::create(o, gpu());
        ADD_FAILURE() << name << " = " << bad << " accepted";
      } catch (const ClientError& e) {
        EXPECT_EQ(e.code(), ClientErrc::kInvalidArgument) << name;
        EXPECT_NE(std::string(e.what()).find(std::string(name) + " must be a number of seconds in"), std::string::npos)
            << e.what();
      }
    }
  }
  // A period repeats a request: 5e-324 s polled the server as fast as the CPU allowed.
  for (const auto& [field, name] : {fields[2], std::pair<Field, const char*>{&ClientOptions::retry_initial_s, "retry_initial_s"}}) {
    for (const double tiny : {5e-324, kMinClientPeriodS * (1 - 1e-9)}) {
      auto o = options();
      o.*field = tiny;
      try {
        Client::create(o, gpu());
        ADD_FAILURE() << name << " = " << tiny << " accepted";
      } catch (const ClientError& e) {
        EXPECT_NE(std::string(e.what()).find(std::string(name) + " must be a number of seconds in [0.001, 1e+06]"),
                  std::string::npos)
            << e.what();
      }
    }
  }
  auto o = options();
  o.max_buffered_reports = kMaxBufferedReports + 1;
  EXPECT_THROW(Client::create(o, gpu()), ClientError);
  o = options();
  o.startup_timeout_s = 0;  // allowed: do not wait for an unreachable server
  o.request_timeout_s = o.retry_max_s = kMaxClientDurationS;
  o.plan_poll_interval_s = o.retry_initial_s = kMinClientPeriodS;  // the shortest periods are taken
  auto c = Client::create(o, gpu());
  run_step(*c, kSeq);
  EXPECT_TRUE(c->flush_reports(5.0));
}

// Trial (session 18): a host name that does not resolve said "no response (Connection)", as a
// refused connection does. `.invalid` never resolves (RFC 2606).
TEST_F(ClientTest, AnUnresolvableHostIsNamedInTheError) {
  auto o = options();
  o.server_url = "http://nonexistent.invalid:7787";
  o.startup_timeout_s = 0;  // one attempt, then training goes on without a plan
  auto c = Client::create(o, gpu());
  // The first attempt has only the start-up time left (10 ms): under load the lookup itself can
  // outlast it ("no complete answer within the 0.01 s request deadline"); the background retries
  // have the whole request timeout, so wait for one of them to name the host.
  std::string why;
  EXPECT_TRUE(wait_for(
      [&] {
        why = c->stats().last_server_error;
        return why.find("the host name 'nonexistent.invalid' does not resolve") != std::string::npos;
      },
      30))
      << why;
}

// Trial (session 18): when every clock change fails (no permission, gpud away), computations
// were reported with the planned clock, so an online profile was built from clocks never
// applied. Now a computation run at an unknown clock is left out; the iteration still goes.
TEST_F(ClientTest, ComputationsAtAClockThatFailedToApplyAreLeftOut) {
  struct FailingGpu : WrappedGpu {
    using WrappedGpu::WrappedGpu;
    void set_locked_clocks(int) override { throw GpuError("no permission (test)"); }
    void reset_locked_clocks() override {}
  };
  auto c = Client::create(options(), std::make_shared<FailingGpu>(gpu()));
  run_step(*c, kSeq);
  ASSERT_TRUE(c->controller().flush_for(5.0));  // the failures are handled: the clock is unknown now
  run_step(*c, kSeq);
  ASSERT_TRUE(c->flush_reports(5.0));
  const auto m = server_.measurements(0);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(m.at(1)["instructions"].empty()) << m.at(1).dump();
  EXPECT_GE(m.at(1)["time_s"].get<double>(), 0.0) << "the iteration itself is still reported";
}

// A backend whose helper resets the clocks when the client's connection closes (gpud): a failed
// final reset is said as such, not "may stay locked" (session 31's trial: gpud refused the reset
// as rate-limited and the client warned that the GPU might stay locked).
TEST_F(ClientTest, AFailedFinalResetOnAHelperThatResetsOnDisconnectIsNotAStuckGpu) {
  struct HelperGpu : WrappedGpu {
    using WrappedGpu::WrappedGpu;
    void reset_locked_clocks() override { throw GpuError("refused: rate_limited (test)"); }
    bool reset_on_disconnect() const override { return true; }
  };
  auto c = Client::create(options(), std::make_shared<HelperGpu>(gpu()));
  run_step(*c, kSeq);
  ::testing::internal::CaptureStderr();
  c->close();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the final clock reset failed (refused: rate_limited (test)); the perseus gpud helper resets the "
                     "clocks when this client's connection to it closes"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("may stay locked"), std::string::npos) << err;
  EXPECT_EQ(err.find("handing it to the watchdog"), std::string::npos) << err;
}

// Session 32's trial: a second trainer on a GPU whose gpud lock another client holds had every
// clock change refused ("busy"), and its close blamed it for the helper's lock. It never locked
// the clocks: said so, with nothing of its own to reset.
TEST_F(ClientTest, AFailedFinalResetOfAClientThatNeverLockedTheClocksSaysSo) {
  struct BusyHelperGpu : WrappedGpu {
    using WrappedGpu::WrappedGpu;
    void set_locked_clocks(int) override { throw GpuError("GPU 0 is locked by pid 1 (busy)"); }
    void reset_locked_clocks() override { throw GpuError("GPU 0 is locked by pid 1 (busy)"); }
    bool reset_on_disconnect() const override { return true; }
  };
  auto c = Client::create(options(), std::make_shared<BusyHelperGpu>(gpu()));
  ::testing::internal::CaptureStderr();
  run_step(*c, kSeq);
  c->close();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the final clock reset failed (GPU 0 is locked by pid 1 (busy)), but this client never locked the "
                     "GPU's clocks (each of its clock changes failed): nothing of its own to reset"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("the perseus gpud helper resets the clocks"), std::string::npos) << err;
  EXPECT_EQ(err.find("may stay locked"), std::string::npos) << err;
}

TEST_F(ClientTest, RegistrationConflictOnRestartIsAccepted) {
  { auto c = Client::create(options(), gpu()); }
  auto o = options();
  o.first_iteration = 100;
  auto c = Client::create(o, gpu());  // 409 from the stub: fine
  run_step(*c, kSeq);
  ASSERT_TRUE(c->flush_reports(5.0));
  EXPECT_EQ(server_.measurements(0).count(100), 1u);
}

}  // namespace
}  // namespace perseus::runtime
