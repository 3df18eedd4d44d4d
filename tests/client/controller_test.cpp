// FrequencyController: applies, skips redundant sets, coalesces, logs, survives failures.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>

#include <nlohmann/json.hpp>

#include "perseus/runtime/frequency_controller.hpp"
#include "test_util.hpp"

namespace perseus::runtime {
namespace {

using perseus::testing::read_file;
using perseus::testing::TempDir;

// A GPU whose set_locked_clocks can be held until released, and can be told to fail.
class ScriptedGpu : public GpuControl {
 public:
  std::string name() const override { return "scripted"; }
  int device_index() const override { return 0; }
  std::vector<int> supported_graphics_clocks_mhz() override { return {1410, 1200, 1000}; }
  void set_locked_clocks(int f) override {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return !hold; });
    if (fail) throw GpuError("scripted failure");
    sets.push_back(f);
  }
  void reset_locked_clocks() override {
    std::lock_guard lock(mu);
    ++resets;
  }
  std::optional<double> total_energy_j() override { return std::nullopt; }
  std::optional<double> power_w() override { return std::nullopt; }
  /// Waits until the controller is inside a held set_locked_clocks() call (an event).
  void wait_entered() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  /// Lets the held call (and every later one) through.
  void release() {
    {
      std::lock_guard lock(mu);
      hold = false;
    }
    cv.notify_all();
  }

  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  bool entered = false;
  bool fail = false;
  std::vector<int> sets;
  int resets = 0;
};

// Code review (session 14): perseus_client_flush(timeout_s) first waited for the clock
// controller without a bound, so a backend call that hangs (a gpud helper not answering) blocked
// it far beyond timeout_s. flush_for() is bounded.
TEST(FrequencyController, FlushForIsBoundedWhileABackendCallHangs) {
  auto gpu = std::make_shared<ScriptedGpu>();
  gpu->hold = true;
  FrequencyController c(gpu);
  c.request(1200);
  gpu->wait_entered();  // the controller is inside the call
  EXPECT_FALSE(c.flush_for(0.05));  // the call cannot end before it is released
  EXPECT_FALSE(c.flush_for(0.0));
  gpu->release();
  EXPECT_TRUE(c.flush_for(600));  // returns as soon as the call ended
  EXPECT_EQ(c.applied_mhz(), 1200);
  // Session 25's review: 1e308 s and infinity overflowed wait_for's tick conversion (undefined);
  // they are clamped, NaN and negatives are 0. Idle, each returns true at once.
  for (double t : {1e308, std::numeric_limits<double>::infinity(), std::nan(""), -1.0}) EXPECT_TRUE(c.flush_for(t)) << t;
}

TEST(FrequencyController, AppliesSkipsRedundantAndResetsOnStop) {
  TempDir dir;
  auto gpu = std::shared_ptr<GpuControl>(make_dry_run_gpu(0, dir.file("calls.log")));
  FrequencyController c(gpu);
  c.request(1200, 0, 0);
  c.flush();
  c.request(1200, 0, 1);
  c.flush();
  c.request(1000, 0, 2);
  c.flush();
  EXPECT_EQ(c.applied_mhz(), 1000);
  c.stop();
  const auto log = c.log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].outcome, FreqOutcome::kApplied);
  EXPECT_EQ(log[1].outcome, FreqOutcome::kRedundant);
  EXPECT_EQ(log[2].outcome, FreqOutcome::kApplied);
  EXPECT_EQ(log[2].applied_mhz, 1000);
  EXPECT_EQ(log[2].index, 2);
  EXPECT_EQ(log[3].outcome, FreqOutcome::kReset);
  const std::string calls = read_file(dir.file("calls.log"));
  EXPECT_NE(calls.find("set_locked_clocks 1200 1200"), std::string::npos);
  EXPECT_NE(calls.find("set_locked_clocks 1000 1000"), std::string::npos);
  EXPECT_NE(calls.find("reset_locked_clocks"), std::string::npos);
  // The redundant request made no driver call: exactly two sets.
  std::size_t sets = 0;
  for (std::size_t p = calls.find(" set_locked_clocks "); p != std::string::npos;
       p = calls.find(" set_locked_clocks ", p + 1)) {
    ++sets;
  }
  EXPECT_EQ(sets, 2u);
}

TEST(FrequencyController, CoalescesPendingRequests) {
  auto gpu = std::make_shared<ScriptedGpu>();
  gpu->hold = true;
  FrequencyController c(gpu);
  c.request(1410);
  gpu->wait_entered();
  c.request(1200);
  c.request(1000);
  c.request(1200);
  gpu->release();
  c.flush();
  const auto log = c.log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[1].outcome, FreqOutcome::kSuperseded);
  EXPECT_EQ(log[2].outcome, FreqOutcome::kSuperseded);
  EXPECT_EQ(log[3].outcome, FreqOutcome::kApplied);
  EXPECT_EQ(gpu->sets, (std::vector<int>{1410, 1200}));
  c.stop();
  EXPECT_EQ(gpu->resets, 1);
}

TEST(FrequencyController, FailureIsLoggedAndNextRequestRetries) {
  auto gpu = std::make_shared<ScriptedGpu>();
  gpu->fail = true;
  FrequencyController c(gpu);
  EXPECT_FALSE(c.clock_failed());
  c.request(1200);
  c.flush();
  EXPECT_TRUE(c.clock_failed()) << "the clock in force is unknown";
  EXPECT_EQ(c.applied_mhz(), 0);
  gpu->fail = false;
  c.request(1200);  // state unknown after a failure: applied, not skipped
  c.flush();
  EXPECT_FALSE(c.clock_failed());
  const auto log = c.log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].outcome, FreqOutcome::kFailed);
  EXPECT_EQ(log[0].error, "scripted failure");
  EXPECT_EQ(log[1].outcome, FreqOutcome::kApplied);
  EXPECT_EQ(c.failures(), 1);
  EXPECT_EQ(c.last_error(), "scripted failure");
}

TEST(FrequencyController, WritesCsvAndJson) {
  TempDir dir;
  FrequencyController c(std::shared_ptr<GpuControl>(make_dry_run_gpu(0, dir.file("calls.log"))));
  c.request(1200, 3, 0);
  c.request(1000, 3, 1);
  c.flush();
  c.write_log(dir.file("log.csv"));
  c.write_log(dir.file("log.json"));
  const std::string csv = read_file(dir.file("log.csv"));
  EXPECT_EQ(csv.rfind("request_time_s,done_time_s,iteration,index,requested_mhz,applied_mhz,outcome,error\n", 0), 0u);
  EXPECT_NE(csv.find(",3,1,1000,1000,applied,"), std::string::npos);
  const auto j = nlohmann::json::parse(read_file(dir.file("log.json")));
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.back()["requested_mhz"], 1000);
  EXPECT_EQ(j.back()["outcome"], "applied");
  EXPECT_THROW(c.write_log("/nonexistent-dir/x.csv"), std::runtime_error);
}

TEST(FrequencyController, RequestsAfterStopAreIgnored) {
  auto gpu = std::make_shared<ScriptedGpu>();
  FrequencyController c(gpu);
  c.stop(false);
  c.request(1200);
  c.flush();
  EXPECT_TRUE(gpu->sets.empty());
  EXPECT_EQ(gpu->resets, 0);
}

}  // namespace
}  // namespace perseus::runtime
