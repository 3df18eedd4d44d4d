// Straggler detection and switch verification on synthetic, seeded sequences (no wall clock):
// detection delay at 1.1x / 1.2x, false detections under 1 % jitter, clearing after recovery,
// option validation, and the verifier's verdicts and measured saving.
#include <algorithm>
#include <map>
#include <gtest/gtest.h>

#include <iostream>
#include <random>

#include "perseus/server/api_error.hpp"
#include "straggler_detector.hpp"
#include "switch_verifier.hpp"

namespace perseus::server {
namespace {

constexpr int kPipelines = 4, kRanks = 4, kComputations = 16;  // 4 x 4, 8 microbatches (F + B)

/// A synthetic cluster: every computation takes 1/kComputations s × slowdown × (1 + 1 % N(0,1));
/// a rank's iteration time is the sum of its computations, a pipeline's the max over its ranks.
class Cluster {
 public:
  explicit Cluster(unsigned seed, double jitter = 0.01) : rng_(seed), jitter_(jitter) {}
  /// Feeds one iteration of every pipeline through an aggregator into the detector.
  std::vector<StragglerEvent> step(std::int64_t it, const std::vector<double>& slowdown, StragglerDetector& det) {
    std::vector<StragglerEvent> out;
    for (int p = 0; p < kPipelines; ++p) {
      for (int r = 0; r < kRanks; ++r) {
        double t = 0;
        for (int c = 0; c < kComputations; ++c) t += slowdown[p] / kComputations * (1.0 + jitter_ * noise_(rng_));
        if (auto s = agg_.add(p, p * kRanks + r, it, t, 100.0 * t, 1.0))
          if (auto e = det.observe(*s)) out.push_back(*e);
      }
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<double> noise_{0.0, 1.0};
  double jitter_;
  IterationAggregator agg_{kRanks};
};

/// Runs `iterations` with pipeline 2 slowed by `factor` in [slow_from, slow_until); returns events.
std::vector<StragglerEvent> run(unsigned seed, double factor, int slow_from, int slow_until, int iterations,
                                StragglerOptions opt = {}, double jitter = 0.01) {
  Cluster cl(seed, jitter);
  StragglerDetector det(opt, kPipelines);
  std::vector<StragglerEvent> events;
  for (int it = 0; it < iterations; ++it) {
    std::vector<double> s(kPipelines, 1.0);
    if (it >= slow_from && it < slow_until) s[2] = factor;
    for (const auto& e : cl.step(it, s, det)) events.push_back(e);
  }
  return events;
}

class DetectionDelay : public ::testing::TestWithParam<double> {};

TEST_P(DetectionDelay, DetectedWithinFiveIterationsForEverySeed) {
  const double factor = GetParam();
  std::int64_t worst = 0;
  for (unsigned seed = 1; seed <= 50; ++seed) {
    const auto ev = run(seed, factor, 20, 1000, 40);
    if (!ev.empty()) worst = std::max(worst, ev[0].iteration - 20 + 1);
    ASSERT_EQ(ev.size(), 1u) << "seed " << seed;
    EXPECT_EQ(ev[0].kind, StragglerEvent::Kind::kDetected);
    EXPECT_EQ(ev[0].pipeline, 2);
    EXPECT_LE(ev[0].iteration, 20 + 4) << "seed " << seed << ": slowed at 20, detected at " << ev[0].iteration;
    EXPECT_NEAR(ev[0].slowdown, factor, 0.02) << "seed " << seed;
  }
  std::cout << "[detector] " << factor << "x: detected at slow iteration <= " << worst << " over 50 seeds\n";
}
INSTANTIATE_TEST_SUITE_P(Slowdowns, DetectionDelay, ::testing::Values(1.1, 1.2));

TEST(StragglerDetector, NoFalseDetectionIn1000IterationsOfOnePercentJitter) {
  for (unsigned seed = 1; seed <= 20; ++seed) EXPECT_TRUE(run(seed, 1.0, 0, 0, 1000).empty()) << "seed " << seed;
  // Harsher: 1 % jitter on each rank's whole iteration (no averaging over computations).
  for (unsigned seed = 1; seed <= 20; ++seed)
    EXPECT_TRUE(run(seed, 1.0, 0, 0, 1000, {}, 0.01 * 4.0).empty()) << "seed " << seed;
}

TEST(StragglerDetector, ClearedWithinTenIterationsAfterRecovery) {
  for (double factor : {1.1, 1.2}) {
    std::int64_t worst = 0;
    for (unsigned seed = 1; seed <= 50; ++seed) {
      const auto ev = run(seed, factor, 20, 60, 100);
      ASSERT_EQ(ev.size(), 2u) << "seed " << seed;
      worst = std::max(worst, ev[1].iteration - 60 + 1);
      EXPECT_EQ(ev[1].kind, StragglerEvent::Kind::kCleared);
      EXPECT_EQ(ev[1].pipeline, 2);
      EXPECT_LE(ev[1].iteration, 60 + 9) << "seed " << seed << ": recovered at 60, cleared at " << ev[1].iteration;
    }
    std::cout << "[detector] " << factor << "x: cleared at recovered iteration <= " << worst << " over 50 seeds\n";
  }
}

TEST(StragglerDetector, ExactSequenceWithoutNoise) {
  // window 3, K 2: the median turns at the 2nd slow sample, K=2 more samples -> 3rd slow iteration.
  StragglerOptions o;
  o.window = 3;
  o.consecutive = 2;
  o.clear_consecutive = 2;
  StragglerDetector det(o, 2);
  std::vector<StragglerEvent> ev;
  for (int it = 0; it < 20; ++it) {
    const double t1 = it >= 5 && it < 12 ? 1.2 : 1.0;
    if (auto e = det.observe({0, it, 1.0, 0, 1.0})) ev.push_back(*e);
    if (auto e = det.observe({1, it, t1, 0, 1.0})) ev.push_back(*e);
  }
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, StragglerEvent::Kind::kDetected);
  EXPECT_EQ(ev[0].iteration, 7);  // medians slow at 6 and 7
  EXPECT_DOUBLE_EQ(ev[0].slowdown, 1.2);
  EXPECT_DOUBLE_EQ(ev[0].measured_time_s, 1.2);
  EXPECT_EQ(ev[1].kind, StragglerEvent::Kind::kCleared);
  EXPECT_EQ(ev[1].iteration, 14);  // recovered at 12; medians fast at 13 and 14
}

TEST(StragglerDetector, NormalizesByThePlanSoSwitchedPipelinesStayHealthy) {
  // Pipeline 1 runs a plan predicted at 1.2 s and takes 1.2 s: not a straggler.
  StragglerDetector det({}, 3);
  for (int it = 0; it < 30; ++it) {
    EXPECT_FALSE(det.observe({0, it, 1.2, 0, 1.0}).has_value() && it < 5);
    EXPECT_FALSE(det.observe({1, it, 1.2, 0, 1.2}).has_value());
    EXPECT_FALSE(det.observe({2, it, 1.2, 0, 1.2}).has_value());
  }
  EXPECT_TRUE(det.is_straggler(0));  // measured 1.2 s on a 1.0 s plan
  EXPECT_FALSE(det.is_straggler(1));
}

TEST(StragglerDetector, APipelineFasterThanItsPlanDoesNotMakeTheOthersLookSlow) {
  // Pipeline 1 ignores its clocks (17 % faster than planned), pipeline 2 is a declared straggler.
  StragglerDetector det({}, 4);
  det.set_state(2, true);
  for (int it = 0; it < 50; ++it) {
    EXPECT_FALSE(det.observe({0, it, 1.2, 0, 1.2}));
    EXPECT_FALSE(det.observe({1, it, 1.0, 0, 1.2}));
    det.observe({2, it, 1.2, 0, 1.0});
    EXPECT_FALSE(det.observe({3, it, 1.21, 0, 1.2}));
  }
}

TEST(StragglerDetector, ManualStateRestartsTheCount) {
  StragglerDetector det({}, 2);
  det.set_state(1, true);
  EXPECT_TRUE(det.is_straggler(1));
  std::vector<StragglerEvent> ev;
  for (int it = 0; it < 20; ++it) {
    det.observe({0, it, 1.0, 0, 1.0});
    if (auto e = det.observe({1, it, 1.0, 0, 1.0})) ev.push_back(*e);
  }
  ASSERT_EQ(ev.size(), 1u);  // it is healthy: the detector clears it (the server keeps a declared one)
  EXPECT_EQ(ev[0].kind, StragglerEvent::Kind::kCleared);
}

TEST(StragglerDetector, OnePipelineOrDisabledNeverDetects) {
  StragglerDetector one({}, 1);
  StragglerOptions off;
  off.enabled = false;
  StragglerDetector disabled(off, 2);
  for (int it = 0; it < 50; ++it) {
    EXPECT_FALSE(one.observe({0, it, 1.0 + it, 0, 1.0}));
    disabled.observe({0, it, 1.0, 0, 1.0});
    EXPECT_FALSE(disabled.observe({1, it, 2.0, 0, 1.0}));
  }
  EXPECT_FALSE(one.observe({5, 0, 1.0, 0, 1.0}));  // unknown pipeline: ignored
}

TEST(IterationAggregator, MaxTimeSumEnergyOncePerRank) {
  IterationAggregator agg(3);
  EXPECT_FALSE(agg.add(0, 0, 7, 1.0, 10, 2.0));
  EXPECT_FALSE(agg.add(0, 0, 7, 9.0, 10, 2.0));  // duplicate rank: ignored
  EXPECT_FALSE(agg.add(0, 1, 7, 1.5, 20, 2.0));
  EXPECT_FALSE(agg.add(1, 3, 7, 5.0, 20, 2.0));  // another pipeline
  const auto s = agg.add(0, 2, 7, 1.2, 30, 2.0);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pipeline, 0);
  EXPECT_EQ(s->iteration, 7);
  EXPECT_DOUBLE_EQ(s->time_s, 1.5);
  ASSERT_TRUE(s->energy_j);
  EXPECT_DOUBLE_EQ(*s->energy_j, 60);
  EXPECT_DOUBLE_EQ(s->expected_time_s, 2.0);
  // Iterations far from the pipeline's current one (the lower median of its ranks' last
  // reports) are not aggregated: rank 0 alone at 1000 (current 7), then rank 2 at 8 once
  // ranks 0 and 1 are at 1000.
  EXPECT_FALSE(agg.add(0, 0, 1000, 1.0, 1, 1.0));
  EXPECT_EQ(agg.ignored(0).count, 1u);
  EXPECT_EQ(agg.ignored(0).pipeline_iteration, 7);
  EXPECT_FALSE(agg.add(0, 1, 1000, 1.0, 1, 1.0));
  EXPECT_FALSE(agg.add(0, 2, 8, 1.0, 1, 1.0));
  EXPECT_EQ(agg.ignored(0).count, 2u);
  EXPECT_EQ(agg.ignored(0).iteration, 8);
  EXPECT_EQ(agg.ignored(0).pipeline_iteration, 1000);
  EXPECT_EQ(agg.ignored(1).count, 0u);
}

// The lower median kept by two halves equals the sorted list's element (n-1)/2 after every
// update, with repeated values and ranks moving back and forth.
TEST(IterationAggregator, LastIterationsKeepTheLowerMedian) {
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    IterationAggregator::LastIterations last;
    std::map<int, std::int64_t> brute;
    std::uniform_int_distribution<int> rank(0, 1 + round % 7);
    std::uniform_int_distribution<std::int64_t> it(0, 2 + round % 5);
    for (int k = 0; k < 400; ++k) {
      const int r = rank(rng);
      const std::int64_t i = it(rng);
      brute[r] = i;
      std::vector<std::int64_t> v;
      for (const auto& [q, x] : brute) v.push_back(x);
      std::sort(v.begin(), v.end());
      ASSERT_EQ(last.update(r, i), v[(v.size() - 1) / 2]) << "round " << round << " step " << k;
    }
  }
}

// The trial's case: one rank reporting a far-future iteration (a counter that is off) made
// every later report of its pipeline "too old", so the pipeline never completed an iteration
// again and a straggler there was never detected. Now that report is ignored and counted.
TEST(IterationAggregator, OneRankFarAheadDoesNotBlindItsPipeline) {
  IterationAggregator agg(3);
  auto iteration = [&](std::int64_t it) {
    std::optional<PipelineSample> s;
    for (int r = 0; r < 3; ++r) s = agg.add(0, r, it, 1.0 + r, 1, 1.0);
    return s;
  };
  ASSERT_TRUE(iteration(0));
  EXPECT_FALSE(agg.add(0, 1, 1000000, 9.0, 1, 1.0));
  const auto ig = agg.ignored(0);
  EXPECT_EQ(ig.count, 1u);
  EXPECT_EQ(ig.rank, 1);
  EXPECT_EQ(ig.iteration, 1000000);
  EXPECT_EQ(ig.pipeline_iteration, 0);
  for (std::int64_t it = 1; it < 200; ++it) {
    const auto s = iteration(it);
    ASSERT_TRUE(s) << "iteration " << it;
    EXPECT_DOUBLE_EQ(s->time_s, 3.0);
  }
  EXPECT_EQ(agg.ignored(0).count, 1u);
  // All ranks moving on together (a resumed job with another step counter) moves the window
  // with them: the first rank's report is ignored while it is alone, the second moves the
  // median, and from the next iteration on they complete again.
  EXPECT_FALSE(agg.add(0, 0, 500000, 1.0, 1, 1.0));
  EXPECT_EQ(agg.ignored(0).count, 2u);
  EXPECT_FALSE(agg.add(0, 1, 500000, 1.0, 1, 1.0));
  EXPECT_FALSE(agg.add(0, 2, 500000, 1.0, 1, 1.0));
  EXPECT_EQ(agg.ignored(0).count, 2u);
  EXPECT_TRUE(iteration(500001));
}

TEST(StragglerOptions, DefaultsAndValidation) {
  using nlohmann::json;
  const auto d = StragglerOptions::from_json(json::object());
  EXPECT_TRUE(d.enabled);
  EXPECT_LT(d.clear_threshold, d.threshold);
  const auto o = StragglerOptions::from_json({{"straggler_detection", {{"window", 7}, {"threshold", 0.1}}}});
  EXPECT_EQ(o.window, 7);
  EXPECT_DOUBLE_EQ(o.clear_threshold, 0.025);
  EXPECT_EQ(StragglerOptions::from_json({{"straggler_detection", o.to_json()}}).to_json(), o.to_json());
  auto expect_422 = [](const json& body, const std::string& needle) {
    try {
      StragglerOptions::from_json(body);
      ADD_FAILURE() << "accepted " << body.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 422);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_422({{"straggler_detection", 3}}, "straggler_detection");
  expect_422({{"straggler_detection", {{"window", 0}}}}, "field \"straggler_detection.window\" must be an integer");
  expect_422({{"straggler_detection", {{"threshold", -1}}}}, "straggler_detection.threshold\" must be a finite number in [0.0001, 10], got -1");
  expect_422({{"straggler_detection", {{"threshold", 0.05}, {"clear_threshold", 0.05}}}}, "clear_threshold");
  expect_422({{"straggler_detection", {{"enabled", "yes"}}}}, "enabled");
  expect_422({{"straggler_detection", {{"verify", 1}}}}, "verify");
  expect_422({{"straggler_detection", {{"windw", 3}}}}, "straggler_detection.windw");
  expect_422({{"straggler_detection", {{"max_replans", 11}}}}, "max_replans");
}

// --- SwitchVerifier ---

StragglerOptions verify_opts() {
  StragglerOptions o;
  o.window = 3;
  o.verify_iterations = 3;
  o.verify_tolerance = 0.03;
  o.max_replans = 1;
  return o;
}

/// Feeds `n` iterations: pipeline 0 the straggler at t_s, pipeline 1 at t1 with energy e1.
std::optional<VerificationRound> feed(SwitchVerifier& v, int from, int n, double t_s, double t1, double e1) {
  std::optional<VerificationRound> out;
  for (int it = from; it < from + n; ++it) {
    if (auto r = v.observe({0, it, t_s, 400, 1.0})) out = r;
    if (auto r = v.observe({1, it, t1, e1, 1.0})) out = r;
  }
  return out;
}

TEST(SwitchVerifier, VerifiedWithExactMeasuredSaving) {
  // 4 GPUs per pipeline at 10 W blocking. Before: 1.0 s, 400 J; straggler 1.2 s.
  SwitchVerifier v(verify_opts(), 2, 10.0, 4);
  EXPECT_FALSE(feed(v, 0, 3, 1.2, 1.0, 400));
  v.start(1, {{1, 1.2}}, {{1, 1.2}}, {0}, true);
  EXPECT_FALSE(feed(v, 3, 2, 1.2, 1.19, 350));
  const auto r = feed(v, 5, 1, 1.2, 1.19, 350);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->verdicts.size(), 1u);
  const auto& p = r->verdicts[0];
  EXPECT_EQ(p.kind, PipelineVerdict::Kind::kVerified);
  EXPECT_DOUBLE_EQ(p.measured_time_s, 1.19);
  EXPECT_DOUBLE_EQ(p.straggler_time_s, 1.2);
  // (400 + 40·0.2) − (350 + 40·0.01) = 408 − 350.4
  ASSERT_TRUE(p.measured_saving_j);
  EXPECT_NEAR(*p.measured_saving_j, 57.6, 1e-9);
  EXPECT_FALSE(v.active());
}

TEST(SwitchVerifier, ClocksIgnoredRetargetsThenReverts) {
  SwitchVerifier v(verify_opts(), 2, 10.0, 4);
  feed(v, 0, 3, 1.2, 1.0, 400);
  v.start(1, {{1, 1.2}}, {{1, 1.2}}, {0}, true);
  auto r = feed(v, 3, 3, 1.2, 1.0, 400);  // the GPU stayed at max clocks: still 1.0 s
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdicts[0].kind, PipelineVerdict::Kind::kRetarget);
  EXPECT_NEAR(r->verdicts[0].new_target_time_s, 1.2 * 1.2 / 1.0, 1e-12);
  EXPECT_NEAR(r->verdicts[0].measured_saving_j.value_or(-1), 0.0, 1e-9);  // nothing saved
  v.start(2, {{1, 1.4}}, {{1, 1.44}}, {0}, false);  // re-plan of the same decision
  r = feed(v, 6, 3, 1.2, 1.0, 400);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->replans, 1);
  EXPECT_EQ(r->verdicts[0].kind, PipelineVerdict::Kind::kRevert);
}

TEST(SwitchVerifier, FinishingLaterThanTheStragglerRetargetsFaster) {
  SwitchVerifier v(verify_opts(), 2, 10.0, 4);
  feed(v, 0, 3, 1.2, 1.0, 400);
  v.start(1, {{1, 1.2}}, {{1, 1.2}}, {0}, true);
  const auto r = feed(v, 3, 3, 1.2, 1.32, 300);  // the profile was optimistic: 10 % late
  ASSERT_TRUE(r);
  EXPECT_EQ(r->verdicts[0].kind, PipelineVerdict::Kind::kRetarget);
  EXPECT_LT(r->verdicts[0].new_target_time_s, 1.2);
}

TEST(SwitchVerifier, StopAndMissingStragglerSamplesGiveNoRound) {
  SwitchVerifier v(verify_opts(), 2, 10.0, 4);
  v.start(1, {{1, 1.2}}, {{1, 1.2}}, {0}, true);
  for (int it = 0; it < 10; ++it) EXPECT_FALSE(v.observe({1, it, 1.2, 1, 1.0}));  // no straggler sample yet
  v.stop();
  EXPECT_FALSE(feed(v, 10, 5, 1.2, 1.2, 1));
}

}  // namespace
}  // namespace perseus::server
