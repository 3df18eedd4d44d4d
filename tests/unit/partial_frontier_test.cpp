// Bounded solves (issue 20): PlannerOptions::time_budget_s / max_points return the frontier
// found so far, marked partial; PlannerOptions::threads does not change the frontier.
// Count- and event-based: no test depends on how fast the machine is.
#include <gtest/gtest.h>

#include <fmt/core.h>

#include <thread>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <chrono>
#include <nlohmann/json.hpp>

#include "../../src/planner/lower_bound.hpp"
#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/optimize.hpp"
#include "perseus/plan.hpp"
#include "perseus/profile.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

constexpr double kPBlock = 83.64;

struct Case {
  Profile profile = load_profile_csv(testing::example("stage_profile_gpt3-175b_a100_sxm.csv"));
  Dag dag = Dag::build(make_1f1b(8, 4));
  PlannerOptions options(PlannerMode mode) const {
    PlannerOptions o;
    o.p_block_w = kPBlock;
    o.unit_time_s = 0.002;
    o.mode = mode;
    return o;
  }
};

/// A valid frontier: slowest first, time strictly falling, effective energy rising, every
/// point reproduced by its replayed plan.
void expect_valid(const Frontier& f, const Dag& dag, PlannerMode mode) {
  ASSERT_GE(f.size(), 1u);
  const double pipe_w = mode == PlannerMode::kCertified ? kPBlock * dag.num_ranks() : 0.0;
  for (std::size_t i = 1; i < f.size(); ++i) {
    EXPECT_LT(f.points()[i].time_s, f.points()[i - 1].time_s) << i;
    EXPECT_GT(f.points()[i].energy_j - pipe_w * f.points()[i].time_s,
              f.points()[i - 1].energy_j - pipe_w * f.points()[i - 1].time_s)
        << i;
  }
  std::vector<std::size_t> all(f.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  f.for_each_plan(all, [&](std::size_t i, const FrequencyPlan& plan) {
    EXPECT_DOUBLE_EQ(plan.timeline.time_s, f.points()[i].time_s) << i;
    EXPECT_NEAR(plan.total_energy_j(), f.points()[i].energy_j, 1e-9) << i;
  });
}

class PartialFrontier : public ::testing::TestWithParam<PlannerMode> {};

TEST_P(PartialFrontier, TimeBudgetZeroGivesValidPartialResult) {
  const Case c;
  PlannerOptions o = c.options(GetParam());
  o.time_budget_s = 0;
  const Frontier f = solve_frontier(c.dag, c.profile, o);
  EXPECT_TRUE(f.partial());
  EXPECT_EQ(f.stop_reason, Frontier::StopReason::kTimeBudget);
  EXPECT_STREQ(to_string(f.stop_reason), "time_budget");
  EXPECT_NE(f.partial_detail.find("time budget of 0 s"), std::string::npos) << f.partial_detail;
  EXPECT_EQ(f.num_steps, 0);        // stopped before the first graph-cut step
  EXPECT_EQ(f.num_lp_solves, 0);    // and the LP stage was skipped
  EXPECT_GE(f.size(), 2u);          // the slowest plan and the all-max plan at least
  expect_valid(f, c.dag, GetParam());
  // The fastest point is as fast as the all-max plan: stragglers can still be matched.
  const FrequencyPlan allmax = all_max_plan(c.dag, c.profile, kPBlock);
  EXPECT_LE(f.points().back().time_s, allmax.timeline.time_s);
}

TEST_P(PartialFrontier, MaxPointsGivesExactlyThatManyPoints) {
  const Case c;
  const Frontier full = solve_frontier(c.dag, c.profile, c.options(GetParam()));
  EXPECT_FALSE(full.partial());
  EXPECT_TRUE(full.partial_detail.empty());
  ASSERT_GT(full.size(), 20u);
  for (std::int64_t k : {std::int64_t{1}, std::int64_t{2}, std::int64_t{5}, std::int64_t{17},
                         static_cast<std::int64_t>(full.size()) - 1, static_cast<std::int64_t>(full.size())}) {
    PlannerOptions o = c.options(GetParam());
    o.max_points = k;
    const Frontier f = solve_frontier(c.dag, c.profile, o);
    ASSERT_EQ(f.size(), static_cast<std::size_t>(k)) << "max_points " << k;
    expect_valid(f, c.dag, GetParam());
    if (static_cast<std::size_t>(k) == full.size() && !f.partial()) {
      // The walk never held k points: the solve ran to the end, so it is the full frontier.
      for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f.points()[i].energy_j, full.points()[i].energy_j) << i;
      continue;
    }
    EXPECT_TRUE(f.partial()) << k;
    EXPECT_EQ(f.stop_reason, Frontier::StopReason::kMaxPoints) << k;
    EXPECT_FALSE(f.partial_detail.empty());
    // K = 1 keeps one plan at the all-max time (the all-max plan, or a cheaper one at its time):
    // the detail must not name a point the frontier lacks, nor call it the all-max plan.
    if (k == 1) {
      EXPECT_NE(f.partial_detail.find("the frontier is one plan, at the all-max plan's time"), std::string::npos)
          << f.partial_detail;
      EXPECT_EQ(f.partial_detail.find("all-max plan alone"), std::string::npos) << f.partial_detail;
    }
    // A bounded solve finds nothing the full solve misses: every graph-cut point it kept is
    // matched or beaten by the full frontier at its time.
    for (const auto& p : f.points()) {
      if (p.step < 0 || p.tightened_to_s > 0 || p.stored_plan >= 0) continue;
      EXPECT_GE(p.energy_j, full.points()[full.lowest_energy_within(p.time_s)].energy_j - 1e-9) << k;
    }
  }
}

TEST_P(PartialFrontier, BoundsThatAreNotReachedChangeNothing) {
  const Case c;
  const Frontier full = solve_frontier(c.dag, c.profile, c.options(GetParam()));
  PlannerOptions o = c.options(GetParam());
  // Far above the frontier's size (the walk's running frontier can hold a few more points
  // than the final one: later points dominate earlier ones).
  o.max_points = 100 * static_cast<std::int64_t>(full.size());
  o.time_budget_s = 1e9;
  const Frontier f = solve_frontier(c.dag, c.profile, o);
  EXPECT_FALSE(f.partial());
  ASSERT_EQ(f.size(), full.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(f.points()[i].time_s, full.points()[i].time_s) << i;
    EXPECT_EQ(f.points()[i].energy_j, full.points()[i].energy_j) << i;
    EXPECT_EQ(f.points()[i].lower_bound_j, full.points()[i].lower_bound_j) << i;
  }
}

TEST_P(PartialFrontier, ThreadsDoNotChangeTheFrontier) {
  const Case c;
  // Certified: with 2 threads the bound stage's first part (LP sampling, or the whole hull
  // walk) runs beside the graph-cut walk; the frontier must be bit-identical either way.
  for (const BoundMethod bound : {BoundMethod::kLp, BoundMethod::kHullWalk}) {
    SCOPED_TRACE(to_string(bound));
    PlannerOptions o = c.options(GetParam());
    o.bound_method = bound;
    const Frontier one = solve_frontier(c.dag, c.profile, o);
    o.threads = 2;
    const Frontier two = solve_frontier(c.dag, c.profile, o);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_EQ(one.num_lp_solves, two.num_lp_solves);
    EXPECT_EQ(one.num_hull_walk_steps, two.num_hull_walk_steps);
    if (GetParam() == PlannerMode::kCertified && bound == BoundMethod::kHullWalk) {
      EXPECT_GT(two.num_hull_walk_steps, 0);
    }
    for (std::size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(one.points()[i].time_s, two.points()[i].time_s) << i;
      EXPECT_EQ(one.points()[i].energy_j, two.points()[i].energy_j) << i;
      EXPECT_EQ(one.points()[i].lower_bound_j, two.points()[i].lower_bound_j) << i;
      EXPECT_EQ(one.plan(i).freq_mhz, two.plan(i).freq_mhz) << i;
    }
  }
}

TEST_P(PartialFrontier, ProgressReportsEveryStageInOrderOnTheCallingThread) {
  const Case c;
  for (const BoundMethod bound : {BoundMethod::kLp, BoundMethod::kHullWalk}) {
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} threads {}", to_string(bound), threads));
      PlannerOptions o = c.options(GetParam());
      o.bound_method = bound;
      o.threads = threads;
      const auto caller = std::this_thread::get_id();
      std::vector<std::pair<SolveStage, double>> seen;
      o.progress = [&](SolveStage stage, double f) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        seen.emplace_back(stage, f);
      };
      solve_frontier(c.dag, c.profile, o);
      ASSERT_FALSE(seen.empty());
      EXPECT_EQ(seen.front(), std::make_pair(SolveStage::kGraphCutWalk, 0.0));
      std::vector<SolveStage> ended;
      for (std::size_t i = 0; i < seen.size(); ++i) {
        EXPECT_GE(seen[i].second, 0.0);
        EXPECT_LE(seen[i].second, 1.0);
        if (i > 0) {
          EXPECT_GE(static_cast<int>(seen[i].first), static_cast<int>(seen[i - 1].first)) << i;  // stage order
          if (seen[i].first == seen[i - 1].first) {
            EXPECT_GT(seen[i].second, seen[i - 1].second) << i;
          }
        }
        if (seen[i].second == 1.0) ended.push_back(seen[i].first);
      }
      std::vector<SolveStage> expected{SolveStage::kGraphCutWalk};
      if (GetParam() == PlannerMode::kCertified && bound == BoundMethod::kHullWalk) {
        expected.push_back(SolveStage::kHullWalk);  // then LP refinement solves (a small DAG)
      }
      if (GetParam() == PlannerMode::kCertified) expected.push_back(SolveStage::kLpSolves);
      EXPECT_EQ(ended, expected);
      EXPECT_LE(seen.size(), 2 * 102u);  // about every 1 %, not every step
    }
  }
}

TEST(PartialFrontierThreads, CancellingWhileTheHullWalkRunsBesideStopsTheSolve) {
  // Event-based: the hook cancels once the graph-cut walk has reported its end, i.e. while the
  // solve waits for the hull walk beside it (or, if that already finished, right after).
  const Case c;
  PlannerOptions o = c.options(PlannerMode::kCertified);
  o.bound_method = BoundMethod::kHullWalk;
  o.threads = 2;
  bool walk_done = false;
  o.progress = [&](SolveStage stage, double f) { walk_done |= stage == SolveStage::kGraphCutWalk && f == 1.0; };
  o.cancelled = [&] { return walk_done; };
  EXPECT_THROW(solve_frontier(c.dag, c.profile, o), PlanningCancelled);
  EXPECT_TRUE(walk_done);
}

INSTANTIATE_TEST_SUITE_P(Modes, PartialFrontier, ::testing::Values(PlannerMode::kGraphCut, PlannerMode::kCertified),
                         [](const auto& info) {
                           return std::string(info.param == PlannerMode::kGraphCut ? "GraphCut" : "Certified");
                         });

TEST(PartialFrontierLp, StopEndsASolveAtOnce) {
  // The LP stage polls the time budget (or a stop request) at every simplex iteration: one
  // solve of a large LP can take minutes. Event-based: the stop hook answers true.
  const Case c;
  std::vector<const std::vector<OperatingPoint>*> pts;
  for (int i = 0; i < c.dag.num_ops(); ++i) pts.push_back(&c.profile.points(c.dag.op(i).stage, c.dag.op(i).kind));
  detail::HullLowerBound lp(c.dag, pts, kPBlock);
  const double deadline = 1.2 * all_max_plan(c.dag, c.profile, kPBlock).timeline.time_s;
  int polls = 0;
  const auto stopped = lp.solve(deadline, [&] { return ++polls >= 1; });
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_FALSE(stopped.feasible);
  EXPECT_EQ(polls, 1);
  detail::HullLowerBound fresh(c.dag, pts, kPBlock);
  const auto solved = fresh.solve(deadline, [] { return false; });
  EXPECT_FALSE(solved.interrupted);
  EXPECT_TRUE(solved.feasible);
  detail::HullLowerBound plain(c.dag, pts, kPBlock);
  EXPECT_EQ(plain.solve(deadline).bound_j, solved.bound_j);  // the hook changes nothing else
}

TEST(PartialFrontierLp, ABudgetReachedInRuinAndRecreateMarksTheFrontierPartial) {
  // Ruin and recreate runs after the LP stage's last progress report (kLpSolves, 1) wherever a
  // plan is more than 0.5 % above the bound (GPT-3 A40 8 x 12 has such points). The hook waits
  // there until the budget has passed since its first call (which comes after the solve's
  // start): the search must stop and say so, not return a "complete" frontier that depends on
  // the budget (it did before session 26).
  const Profile profile = load_profile_csv(testing::test_data("emulation/stage_profile_gpt3-175b_a40.csv"));
  const Dag dag = Dag::build(make_1f1b(8, 12));
  PlannerOptions o;
  o.p_block_w = 70.38;
  o.bound_method = BoundMethod::kLp;
  o.time_budget_s = 3;
  std::optional<std::chrono::steady_clock::time_point> first_call;
  bool waited = false;
  o.progress = [&](SolveStage stage, double fraction) {
    if (!first_call) first_call = std::chrono::steady_clock::now();
    if (stage == SolveStage::kLpSolves && fraction == 1.0 && !waited) {
      waited = true;
      std::this_thread::sleep_until(*first_call + std::chrono::duration<double>(o.time_budget_s));
    }
  };
  const Frontier f = solve_frontier(dag, profile, o);
  EXPECT_TRUE(f.partial());
  EXPECT_EQ(f.stop_reason, Frontier::StopReason::kTimeBudget);
  // Under heavy load an earlier stage can use up the budget first; it says so itself.
  if (waited) EXPECT_NE(f.partial_detail.find("ruin and recreate"), std::string::npos) << f.partial_detail;
  EXPECT_GT(f.max_optimality_gap_pct(), 0.0);  // the bound is complete
  for (std::size_t i = 0; i < f.size(); i += 41)
    EXPECT_NEAR(f.plan(i).total_energy_j(), f.points()[i].energy_j, 1e-9 * f.points()[i].energy_j);
}

TEST(PartialFrontierErrors, BadBoundsAreInputErrors) {
  const Case c;
  PlannerOptions o = c.options(PlannerMode::kGraphCut);
  o.time_budget_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(solve_frontier(c.dag, c.profile, o), InputError);
  o.time_budget_s = 2e9;
  EXPECT_THROW(solve_frontier(c.dag, c.profile, o), InputError);
  o = c.options(PlannerMode::kGraphCut);
  o.max_points = -1;
  EXPECT_THROW(solve_frontier(c.dag, c.profile, o), InputError);
  o = c.options(PlannerMode::kGraphCut);
  o.threads = 0;
  EXPECT_THROW(solve_frontier(c.dag, c.profile, o), InputError);
}

TEST(PartialFrontierOutput, SummaryMarksPartialSolves) {
  testing::TempDir dir;
  OptimizeConfig cfg;
  cfg.profile_path = testing::example("stage_profile_gpt3-175b_a100_sxm.csv");
  cfg.problem.num_ranks = 8;
  cfg.problem.microbatches = 4;
  cfg.problem.p_block_w = kPBlock;
  cfg.unit_time_s = 0.002;
  cfg.max_points = 6;
  cfg.out_dir = (dir.path() / "out").string();
  const OptimizeSummary s = run_optimize(cfg);
  EXPECT_TRUE(s.partial);
  EXPECT_EQ(s.num_plans, 6u);
  const auto summary = nlohmann::json::parse(std::ifstream(dir.path() / "out" / "summary.json"));
  EXPECT_EQ(summary["partial"], true);
  EXPECT_EQ(summary["partial_reason"], "max_points");
  EXPECT_FALSE(summary["partial_detail"].get<std::string>().empty());
  EXPECT_EQ(summary["num_plans"], 6);
  EXPECT_EQ(summary["inputs"]["max_points"], 6);
  EXPECT_TRUE(summary["inputs"]["time_budget_s"].is_null());
  // A complete solve says so too.
  cfg.max_points = 0;
  EXPECT_FALSE(run_optimize(cfg).partial);
  const auto complete = nlohmann::json::parse(std::ifstream(dir.path() / "out" / "summary.json"));
  EXPECT_EQ(complete["partial"], false);
  EXPECT_EQ(complete["partial_reason"], "");
  // Bad bounds: an InputError naming the field, nothing written.
  cfg.max_points = -2;
  cfg.out_dir = (dir.path() / "bad").string();
  try {
    run_optimize(cfg);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("max_points"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "bad"));
}

TEST(PartialFrontierCli, TimeBudgetAndMaxPointsFlags) {
  testing::TempDir dir;
  const std::string base = "optimize --quiet --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                           " --stages 8 --microbatches 4 --p2p-power 83.64 --unit-time 0.005 --out " +
                           (dir.path() / "o").string();
  const auto zero = testing::run(base + " --time-budget 0");
  EXPECT_EQ(zero.status, 0) << zero.output;
  EXPECT_NE(zero.output.find("PARTIAL frontier (time_budget)"), std::string::npos) << zero.output;
  const auto summary = nlohmann::json::parse(std::ifstream(dir.path() / "o" / "summary.json"));
  EXPECT_EQ(summary["partial"], true);
  EXPECT_EQ(summary["partial_reason"], "time_budget");
  // -0 is a budget of 0, echoed and named as 0 (it was echoed as -0.0: session 26's trial).
  const auto minus_zero = testing::run(base + " --time-budget -0");
  EXPECT_NE(minus_zero.output.find("time budget of 0 s"), std::string::npos) << minus_zero.output;
  const auto echoed = nlohmann::json::parse(std::ifstream(dir.path() / "o" / "summary.json"));
  EXPECT_FALSE(std::signbit(echoed["inputs"]["time_budget_s"].get<double>()));
  const auto k = testing::run(base + " --max-points 3 --threads 2");
  EXPECT_EQ(k.status, 0) << k.output;
  EXPECT_NE(k.output.find("Perseus frontier: 3 plans"), std::string::npos) << k.output;
  for (const char* bad : {" --time-budget -1", " --time-budget nan", " --max-points 0", " --max-points x"}) {
    const auto r = testing::run(base + bad);
    EXPECT_EQ(r.status, 2) << bad << "\n" << r.output;
  }
}

}  // namespace
}  // namespace perseus
