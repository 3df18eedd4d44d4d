#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/optimize.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/plan.hpp"
#include "perseus/problem.hpp"
#include "perseus/profile.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

using testing::uniform_profile;

TEST(Plan, EnergyAccountingChargesBlockingPower) {
  // 2 stages x 1 microbatch: F0 -> F1 -> B1 -> B0, each 1 s and 1 J. T = 4 s; each GPU is
  // busy 2 s and blocked 2 s: E = 4 J + P_block * (2 * 4 - 4) s.
  const Profile p = uniform_profile(2, {{1000, 1.0, 1.0}}, {{1000, 1.0, 1.0}});
  const Dag dag = Dag::build(make_1f1b(2, 1));
  const FrequencyPlan plan = all_max_plan(dag, p, 50.0);
  EXPECT_DOUBLE_EQ(plan.timeline.time_s, 4.0);
  EXPECT_DOUBLE_EQ(plan.compute_energy_j, 4.0);
  EXPECT_DOUBLE_EQ(plan.blocking_energy_j, 200.0);
}

TEST(Plan, UnknownFrequencyIsAnError) {
  const Profile p = uniform_profile(1, {{1000, 1.0, 1.0}}, {{1000, 1.0, 1.0}});
  const Dag dag = Dag::build(make_1f1b(1, 1));
  try {
    evaluate_plan(dag, p, {1000, 900}, 0);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("900 MHz is not in the profile for stage 0 backward"), std::string::npos);
  }
}

TEST(Pareto, DropsDominatedPoints) {
  const auto f = pareto_points({{1410, 1.0, 10}, {1300, 1.1, 9}, {1200, 1.2, 9.5}, {1100, 1.3, 8}, {1000, 1.3, 8.5}});
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].freq_mhz, 1410);
  EXPECT_EQ(f[1].freq_mhz, 1300);
  EXPECT_EQ(f[2].freq_mhz, 1100);
}

TEST(Pareto, EffectiveEnergyKeepsSlowerClocksThatBeatBlocking) {
  // 900 MHz uses 0.5 J more than 1000 MHz and takes 0.01 s longer. Effective energy at
  // P_block = 10 W: 8.5 - 1.3 = 7.2 J vs 8 - 1.2 = 6.8 J (dominated); at 100 W:
  // 8.5 - 13 = -4.5 J vs 8 - 12 = -4 J (kept: computing slower beats blocking).
  const std::vector<OperatingPoint> pts = {{1000, 0.12, 8.0}, {900, 0.13, 8.5}};
  EXPECT_EQ(pareto_points(pts).size(), 1u);
  EXPECT_EQ(pareto_points(pts, 10.0).size(), 1u);
  EXPECT_EQ(pareto_points(pts, 100.0).size(), 2u);
}

TEST(Frontier, HandCheckedSingleGpu) {
  // One GPU, F then B; each has (1 s, 10 J) and (2 s, 6 J). No blocking on one GPU.
  // The frontier is (4 s, 12 J), (3 s, 16 J), (2 s, 20 J).
  const Profile p = uniform_profile(1, {{1400, 1.0, 10}, {1000, 2.0, 6}}, {{1400, 1.0, 10}, {1000, 2.0, 6}});
  const Dag dag = Dag::build(make_1f1b(1, 1));
  PlannerOptions opt;
  opt.unit_time_s = 0.5;
  const Frontier f = solve_frontier(dag, p, opt);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_DOUBLE_EQ(f.points()[0].time_s, 4.0);
  EXPECT_DOUBLE_EQ(f.points()[0].energy_j, 12.0);
  EXPECT_DOUBLE_EQ(f.points()[1].time_s, 3.0);
  EXPECT_DOUBLE_EQ(f.points()[1].energy_j, 16.0);
  EXPECT_DOUBLE_EQ(f.points()[2].time_s, 2.0);
  EXPECT_DOUBLE_EQ(f.points()[2].energy_j, 20.0);
  EXPECT_EQ(f.plan(2).freq_mhz, (std::vector<int>{1400, 1400}));
}

// The shared-DAG overload (the server's: no copy of a job's DAG per solve) gives the same
// frontier as the copying one, keeps the DAG alive after the caller drops it, and refuses null.
TEST(Frontier, ASharedDagGivesTheSameFrontierAndOutlivesItsOwner) {
  const Profile p = uniform_profile(2, {{1400, 1.0, 10}, {1000, 2.0, 6}}, {{1400, 1.0, 10}, {1000, 2.0, 6}});
  PlannerOptions opt;
  opt.unit_time_s = 0.5;
  opt.p_block_w = 3;
  auto dag = std::make_shared<const Dag>(Dag::build(make_1f1b(2, 3)));
  const Frontier copied = solve_frontier(*dag, p, opt);
  const Frontier shared = solve_frontier(dag, p, opt);
  dag.reset();
  ASSERT_EQ(shared.size(), copied.size());
  for (std::size_t i = 0; i < shared.size(); ++i) {
    EXPECT_EQ(shared.points()[i].time_s, copied.points()[i].time_s);
    EXPECT_EQ(shared.points()[i].energy_j, copied.points()[i].energy_j);
    EXPECT_EQ(shared.plan(i).freq_mhz, copied.plan(i).freq_mhz);  // replayed on the shared DAG
  }
  EXPECT_THROW(solve_frontier(std::shared_ptr<const Dag>{}, p, opt), std::invalid_argument);
}

TEST(Frontier, OneFrequencyGivesOnePlan) {
  const Profile p = uniform_profile(4, {{1410, 0.1, 20}}, {{1410, 0.2, 40}});
  const Dag dag = Dag::build(make_1f1b(4, 6));
  const Frontier f = solve_frontier(dag, p, {.p_block_w = 80});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(f.points()[0].energy_j, all_max_plan(dag, p, 80).total_energy_j());
}

class FrontierProperties : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(FrontierProperties, MonotoneConsistentAndRespectsDag) {
  const auto [schedule, stages, mbs] = GetParam();
  const Profile full = load_profile_csv(testing::example("stage_profile_gpt3-175b_a100_sxm.csv"));
  Profile p;
  p.source = "first stages";
  for (int s = 0; s < stages; ++s)
    for (auto k : {InstructionKind::kForward, InstructionKind::kBackward})
      for (const auto& o : full.points(full.num_stages() - stages + s, k)) p.add(s, k, o);
  const Dag dag = Dag::build(make_schedule(schedule, stages, mbs));
  const Frontier f = solve_frontier(dag, p, {.p_block_w = 83.64, .unit_time_s = 0.002});
  const FrequencyPlan allmax = all_max_plan(dag, p, 83.64);
  ASSERT_GE(f.size(), 2u);
  EXPECT_LE(f.points().back().time_s, allmax.timeline.time_s * 1.001);
  // With >= 2 stages there is slack to reclaim at T_min; one stage has none.
  if (stages > 1) EXPECT_LT(f.points().back().energy_j, allmax.total_energy_j());
  EXPECT_LE(f.points().back().energy_j, allmax.total_energy_j() + 1e-9);
  std::vector<std::size_t> all(f.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  f.for_each_plan(all, [&](std::size_t i, const FrequencyPlan& plan) {
    if (i > 0) {
      // Faster points cost more energy at any deadline both meet: effective energy
      // E − P_block × R × T rises strictly as T falls.
      const double pipe_w = 83.64 * dag.num_ranks();
      EXPECT_LT(f.points()[i].time_s, f.points()[i - 1].time_s);
      EXPECT_GT(f.points()[i].energy_j - pipe_w * f.points()[i].time_s,
                f.points()[i - 1].energy_j - pipe_w * f.points()[i - 1].time_s);
      // The bound is below every point.
      EXPECT_LE(f.points()[i].lower_bound_j, f.points()[i].energy_j);
    }
    // The replayed plan is the point, and its times respect every dependency.
    EXPECT_DOUBLE_EQ(plan.timeline.time_s, f.points()[i].time_s);
    EXPECT_NEAR(plan.total_energy_j(), f.points()[i].energy_j, 1e-9);
    for (int u = 0; u < dag.num_ops(); ++u) {
      EXPECT_NEAR(plan.timeline.end_s[u] - plan.timeline.start_s[u], plan.time_s[u], 1e-12);
      for (int v : dag.successors(u)) EXPECT_LE(plan.timeline.end_s[u], plan.timeline.start_s[v] + 1e-12);
    }
    // Every frequency is one the profile has for that computation.
    EXPECT_NO_THROW(evaluate_plan(dag, p, plan.freq_mhz, 83.64));
  });
  EXPECT_EQ(f.lowest_energy_within(1e9), 0u);
  EXPECT_EQ(f.lowest_energy_within(0), f.size() - 1);
  // The frontier's O(index) rule picks what the general straggler rule (the server's, the
  // emulation's) picks over its points: at every point's time, between points, beyond them.
  std::vector<TimeEnergy> te;
  for (const FrontierPoint& q : f.points()) te.push_back({q.time_s, q.energy_j});
  const double pipe_w = 83.64 * dag.num_ranks();
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double t = f.points()[i].time_s;
    const double below = i + 1 < f.size() ? 0.5 * (t + f.points()[i + 1].time_s) : 0.5 * t;
    for (double d : {t, below, 2 * f.points()[0].time_s})
      EXPECT_EQ(f.lowest_energy_within(d), lowest_energy_within(te, pipe_w, d)) << "deadline " << d;
  }
}

TEST(StragglerRule, LeastEnergyUntilTheDeadlineAmongPlansThatMeetIt) {
  // (T s, E J), blocking 10 W until the deadline.
  const std::vector<TimeEnergy> pts = {{2.0, 100}, {1.0, 115}, {1.5, 104}, {1.0, 112}, {3.0, 95}};
  EXPECT_DOUBLE_EQ(energy_until(pts[0], 10, 2.5), 105);
  EXPECT_DOUBLE_EQ(energy_until(pts[0], 10, 1.0), 100);  // no negative blocking
  EXPECT_EQ(lowest_energy_within(pts, 10, 3.0), 4u);        // 95 J
  EXPECT_EQ(lowest_energy_within(pts, 10, 2.0), 0u);        // 100 J vs 109 / 122 J
  EXPECT_EQ(lowest_energy_within(pts, 10, 1.5), 2u);        // 104 J vs 117 J
  EXPECT_EQ(lowest_energy_within(pts, 10, 1.5 * (1 - 1e-12)), 2u);  // rounding below a plan's T
  EXPECT_EQ(lowest_energy_within(pts, 10, 1.2), 3u);        // 114 J vs 117 J
  EXPECT_EQ(lowest_energy_within(pts, 10, 0.5), 3u);        // none meets it: the fastest, the lower energy
  // A tie at the deadline goes to the faster plan: 100 + 10 × 1 = 110 = 110 + 0.
  EXPECT_EQ(lowest_energy_within(std::vector<TimeEnergy>{{1.0, 100}, {2.0, 110}}, 10, 2.0), 0u);
  EXPECT_EQ(lowest_energy_within(std::vector<TimeEnergy>{{2.0, 110}, {1.0, 100}}, 10, 2.0), 1u);
  EXPECT_THROW(lowest_energy_within(std::vector<TimeEnergy>{}, 10, 1.0), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FrontierProperties,
                         ::testing::Values(std::make_tuple("1f1b", 4, 8), std::make_tuple("1f1b", 1, 3),
                                           std::make_tuple("1f1b", 4, 2), std::make_tuple("gpipe", 3, 4)));

TEST(FrontierErrors, BadOptionsAndMissingRows) {
  const Profile p = uniform_profile(2, {{1410, 0.1, 20}}, {{1410, 0.2, 40}});
  const Dag dag = Dag::build(make_1f1b(3, 2));
  EXPECT_THROW(solve_frontier(dag, p, {}), InputError);  // stage 2 missing
  const Dag dag2 = Dag::build(make_1f1b(2, 2));
  EXPECT_THROW(solve_frontier(dag2, p, {.p_block_w = -1}), InputError);
  EXPECT_THROW(solve_frontier(dag2, p, {.p_block_w = 1, .unit_time_s = 0}), InputError);
  EXPECT_THROW(solve_frontier(dag2, p, {.p_block_w = 1e308}), InputError);   // would overflow sums
  EXPECT_THROW(solve_frontier(dag2, p, {.p_block_w = 1, .unit_time_s = 1e-9}), InputError);  // huge tables
  // Each option error names its PlannerOptions field, for the front ends to phrase (it was free
  // text: "unit time must be ...", which a Python caller had to map to a keyword by hand).
  const auto field_of = [&](const PlannerOptions& o) {
    try {
      solve_frontier(dag2, p, o);
    } catch (const InputError& e) {
      return e.field();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(field_of({.p_block_w = -1}), "p_block_w");
  EXPECT_EQ(field_of({.p_block_w = 1, .unit_time_s = 0}), "unit_time_s");
  EXPECT_EQ(field_of({.p_block_w = 1, .max_lp_solves = 0}), "max_lp_solves");
  EXPECT_EQ(field_of({.p_block_w = 1, .threads = 0}), "threads");
  EXPECT_EQ(field_of({.p_block_w = 1, .time_budget_s = std::nan("")}), "time_budget_s");
}

class OptimizeJob : public ::testing::Test {
 protected:
  testing::TempDir dir;
  OptimizeConfig cfg() {
    OptimizeConfig c;
    c.profile_path = testing::example("stage_profile_gpt3-175b_a100_sxm.csv");
    c.problem.num_ranks = 8;
    c.problem.microbatches = 4;
    c.problem.p_block_w = 83.64;
    c.unit_time_s = 0.005;
    c.zeus_format = true;
    c.out_dir = (dir.path() / "out").string();
    return c;
  }
};

// A profile whose stage-0 forward is faster at 1200 MHz than at its maximum clock: T_min is
// below the all-max time. saving_at_allmax_time_pct is the lowest own-time energy of the plans
// that meet the all-max time; it took the first such plan's, 2.41 % where the T_min plan saves
// 2.50 % (session 23's trial, gpipe 2 x 2, P_block 60 W).
TEST(OptimizeSummary, SavingAtTheAllMaxTimeIsTheLowestEnergyThatMeetsIt) {
  const std::string csv =
      "stage,instruction,frequency,time,energy\n"
      "0,forward,1400,0.016,4.0612\n0,forward,1200,0.015,3.8255\n0,forward,1000,0.022,3.7284\n"
      "0,backward,1400,0.024,7.1613\n0,backward,1200,0.026,7.547\n0,backward,1000,0.029,6.4842\n"
      "1,forward,1400,0.012,2.7382\n1,forward,1200,0.013,2.7141\n1,forward,1000,0.015,2.8423\n"
      "1,backward,1400,0.018,3.8681\n1,backward,1200,0.022,3.7722\n1,backward,1000,0.026,4.2086\n";
  ProblemSpec spec;
  spec.schedule = "gpipe";
  spec.num_ranks = 2;
  spec.microbatches = 2;
  spec.p_block_w = 60;
  const OptimizeResult r = optimize(make_problem(spec, parse_profile_csv(csv, "fast_low_clock.csv")), OptimizeConfig{});
  const auto& pts = r.frontier.points();
  ASSERT_LT(r.summary.t_min_s, r.summary.allmax_time_s);  // the case this test is about
  double best = INFINITY;
  for (const auto& p : pts)
    if (p.time_s <= r.summary.allmax_time_s) best = std::min(best, p.energy_j);
  const double e = r.summary.allmax_energy_j;
  EXPECT_NEAR(r.summary.saving_at_allmax_time_pct, 100 * (e - best) / e, 1e-9);
  EXPECT_GE(r.summary.saving_at_allmax_time_pct, r.summary.intrinsic_saving_pct - 1e-9);
  EXPECT_EQ(saving_at_allmax_time_pct(r.frontier, r.all_max), r.summary.saving_at_allmax_time_pct);
}

// Computations of 0 J: no saving to speak of (0 %), not NaN ("-nan%" on the CLI, null in summary.json).
TEST(OptimizeSummary, ZeroEnergyProfileSavesZeroPercent) {
  ProblemSpec spec;
  spec.num_ranks = 1;
  spec.microbatches = 2;
  spec.p_block_w = 0;
  const std::string csv = "stage,instruction,frequency,time,energy\n0,forward,1410,0.01,0\n0,backward,1410,0.02,0\n";
  const OptimizeResult r = optimize(make_problem(spec, parse_profile_csv(csv, "zero.csv")), OptimizeConfig{});
  EXPECT_EQ(r.summary.allmax_energy_j, 0.0);
  EXPECT_EQ(r.summary.intrinsic_saving_pct, 0.0);
  EXPECT_EQ(r.summary.saving_at_allmax_time_pct, 0.0);
}

TEST_F(OptimizeJob, WritesCompleteFolder) {
  const auto s = run_optimize(cfg());
  const auto out = dir.path() / "out";
  ASSERT_TRUE(std::filesystem::exists(out / "summary.json"));
  const auto summary = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  EXPECT_DOUBLE_EQ(summary["t_min_s"].get<double>(), s.t_min_s);
  EXPECT_EQ(summary["inputs"]["microbatches"], 4);
  EXPECT_GT(summary["intrinsic_saving_pct"].get<double>(), 0.0);
  std::ifstream csv(out / "frontier.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "plan,time_s,energy_j,lower_bound_j");
  std::size_t rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, s.num_plans);
  const auto last = fmt::format("plan_{:05d}.json", s.num_plans - 1);
  const auto plan = nlohmann::json::parse(std::ifstream(out / "plans" / last));
  EXPECT_EQ(plan["ranks"].size(), 8u);
  EXPECT_EQ(plan["ranks"][0]["instructions"].size(), 8u);
  EXPECT_EQ(plan["ranks"][0]["instructions"][0]["instruction"], "forward");
  EXPECT_TRUE(std::filesystem::exists(out / "plans" / fmt::format("freqs_pipeline_{:05d}.py", s.num_plans - 1)));
  // No temporary folders left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) EXPECT_EQ(e.path().filename(), "out");
}

TEST_F(OptimizeJob, RemovesTemporariesOfKilledRuns) {
  // A run killed mid-write leaves .out.partial-PID; a later run removes it when PID is gone,
  // and leaves a live process's folder alone.
  const auto stale = dir.path() / ".out.partial-999999999";
  const auto live = dir.path() / fmt::format(".out.partial-{}", ::getppid());
  std::filesystem::create_directories(stale / "plans");
  std::filesystem::create_directories(live);
  run_optimize(cfg());
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "out" / "summary.json"));
}

// What before_commit adds (the CLI's --report) is part of the one atomic replacement: it is
// there after the commit, and when it throws the earlier output stays as it was (a Ctrl-C
// while the report rendered after the commit left a new folder without report.html, session 31).
TEST_F(OptimizeJob, BeforeCommitIsPartOfTheAtomicReplacement) {
  const auto out = dir.path() / "out";
  run_optimize(cfg(), {}, [](const std::filesystem::path& tmp) {
    EXPECT_TRUE(std::filesystem::exists(tmp / "summary.json"));  // everything else is written first
    std::ofstream(tmp / "report.html") << "first";
  });
  ASSERT_TRUE(std::filesystem::exists(out / "report.html"));
  std::ifstream summary(out / "summary.json");
  const std::string before((std::istreambuf_iterator<char>(summary)), std::istreambuf_iterator<char>());
  auto c = cfg();
  c.problem.microbatches = 5;  // another run, whose summary would differ
  EXPECT_THROW(run_optimize(c, {}, [](const std::filesystem::path&) { throw InputError("report failed"); }),
               InputError);
  std::ifstream again(out / "summary.json");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()), before);
  std::ifstream report(out / "report.html");
  std::string text;
  report >> text;
  EXPECT_EQ(text, "first");
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))  // no temporary left beside it
    EXPECT_EQ(e.path().filename().string().rfind(".out.", 0), std::string::npos) << e.path();
}

TEST_F(OptimizeJob, RefusesToReplaceForeignFolder) {
  auto c = cfg();
  std::filesystem::create_directories(c.out_dir);
  std::ofstream(c.out_dir + "/precious.txt") << "keep me";
  EXPECT_THROW(run_optimize(c), InputError);
  EXPECT_TRUE(std::filesystem::exists(c.out_dir + "/precious.txt"));
}

TEST_F(OptimizeJob, RefusesFolderWithForeignFileNextToSummary) {
  auto c = cfg();
  std::filesystem::create_directories(c.out_dir);
  std::ofstream(c.out_dir + "/summary.json") << "{}";
  std::ofstream(c.out_dir + "/my_profile.csv") << "keep me";
  try {
    run_optimize(c);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'my_profile.csv'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::exists(c.out_dir + "/my_profile.csv"));
}

TEST_F(OptimizeJob, RerunKeepsUserFilesUnderPlans) {
  // The check that an existing folder holds only Perseus outputs is recursive: a user's file
  // (or folder) inside plans/ makes a re-run refuse, and nothing is deleted.
  auto c = cfg();
  c.sample = 1000;  // few plan files
  run_optimize(c);
  const std::filesystem::path plans = std::filesystem::path(c.out_dir) / "plans";
  std::ofstream(plans / "notes.txt") << "keep me";
  try {
    run_optimize(c);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "out_dir");
    EXPECT_NE(std::string(e.what()).find("'plans/notes.txt'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::exists(plans / "notes.txt"));
  std::filesystem::remove(plans / "notes.txt");
  std::filesystem::create_directories(plans / "mine");
  std::ofstream(plans / "mine" / "plan_00000.json") << "{}";
  EXPECT_THROW(run_optimize(c), InputError);
  EXPECT_TRUE(std::filesystem::exists(plans / "mine" / "plan_00000.json"));
  std::filesystem::remove_all(plans / "mine");
  std::ofstream(std::filesystem::path(c.out_dir) / "emulation.csv") << "method\n";  // not an optimize output
  EXPECT_THROW(run_optimize(c), InputError);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(c.out_dir) / "emulation.csv"));
  std::filesystem::remove(std::filesystem::path(c.out_dir) / "emulation.csv");
  run_optimize(c);  // only Perseus outputs (plans, report files): replaced
  EXPECT_TRUE(std::filesystem::exists(plans / "plan_00000.json"));
}

// Names alone do not make a folder perseus's: a folder of the user's own profile.csv (or
// summary.json) was replaced, and `--out .` renamed the working folder away (session 22's
// trial). A folder is replaced only when it holds perseus's marker, and never the current one.
TEST_F(OptimizeJob, AFolderOfTheUsersFilesWithOurNamesOrTheCurrentFolderIsNeverReplaced) {
  auto c = cfg();
  c.sample = 1000;
  const std::filesystem::path out(c.out_dir);
  std::filesystem::create_directories(out);
  std::ofstream(out / "profile.csv") << "stage,instruction,frequency,time,energy,note\n";
  try {
    run_optimize(c);
    FAIL() << "a folder perseus did not write was replaced";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "out_dir");
    EXPECT_NE(std::string(e.what()).find("folder was not written by perseus (it has no .perseus-output file"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(testing::slurp(out / "profile.csv"), "stage,instruction,frequency,time,energy,note\n");
  std::filesystem::remove(out / "profile.csv");
  run_optimize(c);  // an empty folder is fine, and then it is perseus's
  EXPECT_TRUE(std::filesystem::is_regular_file(out / kOutputFolderMarker));
  run_optimize(c);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(out / "plans");
  c.out_dir = "..";  // holds the current folder
  EXPECT_THROW(run_optimize(c), InputError);
  c.out_dir = std::filesystem::absolute(out).string();
  try {
    run_optimize(c);
    ADD_FAILURE() << "the folder holding the current one was replaced";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is the current folder or holds it; refusing to replace it"), std::string::npos)
        << e.what();
  }
  std::filesystem::current_path(cwd);
  EXPECT_TRUE(std::filesystem::exists(out / "plans"));
}

TEST(OutputFolderNames, OnlyWhatOptimizeAndReportWrite) {
  EXPECT_TRUE(is_optimize_output("summary.json", false));
  EXPECT_TRUE(is_optimize_output("report.html", false));
  EXPECT_TRUE(is_optimize_output("timeline_fastest.svg", false));
  EXPECT_TRUE(is_optimize_output("plans", true));
  EXPECT_TRUE(is_optimize_output("plans/plan_00012.json", false));
  EXPECT_TRUE(is_optimize_output("plans/freqs_pipeline_123456.py", false));
  EXPECT_FALSE(is_optimize_output("plans/plan_12.json", false));
  EXPECT_FALSE(is_optimize_output("plans/plan_00012.json", true));
  EXPECT_FALSE(is_optimize_output("plans/sub/plan_00012.json", false));
  EXPECT_FALSE(is_optimize_output("plans/notes.txt", false));
  EXPECT_FALSE(is_optimize_output("summary.json", true));
  EXPECT_FALSE(is_optimize_output("emulation.csv", false));
  EXPECT_FALSE(is_optimize_output("mine.svg", false));
}

TEST_F(OptimizeJob, BadInputLeavesNoFolder) {
  auto c = cfg();
  c.problem.num_ranks = 7;  // profile has 8 stages
  try {
    run_optimize(c);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("profile has 8 stages"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(c.out_dir));
}

namespace {
std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_F(OptimizeJob, ThreadsDoNotChangeTheOutput) {
  auto one = cfg();
  one.sample = 1;  // every plan
  one.out_dir = (dir.path() / "one").string();
  auto four = one;
  four.threads = 4;
  four.out_dir = (dir.path() / "four").string();
  const auto s1 = run_optimize(one);
  const auto s4 = run_optimize(four);
  ASSERT_EQ(s1.plans_written, s4.plans_written);
  ASSERT_GT(s1.plans_written, 10u);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(one.out_dir)) {
    if (!e.is_regular_file() || e.path().filename() == "summary.json") continue;  // holds the solve time
    const auto rel = std::filesystem::relative(e.path(), one.out_dir);
    EXPECT_EQ(read_all(e.path()), read_all(four.out_dir / rel)) << rel;
    ++files;
  }
  // JSON + Zeus per plan, frontier.csv, schedule.csv, profile.csv, .perseus-output
  EXPECT_EQ(files, 2 * s1.plans_written + 4);
  auto bad = one;
  bad.threads = -1;
  EXPECT_THROW(run_optimize(bad), InputError);
}

TEST(Frontier, ParallelPlansMatchSerialAndPropagateErrors) {
  const Profile p = load_profile_csv(testing::example("stage_profile_gpt3-175b_a100_sxm.csv"));
  const Dag dag = Dag::build(make_1f1b(8, 6));
  const Frontier f = solve_frontier(dag, p, {.p_block_w = 83.64, .unit_time_s = 0.004});
  std::vector<std::size_t> all(f.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<FrequencyPlan> serial(f.size()), parallel(f.size());
  f.for_each_plan(all, [&](std::size_t i, const FrequencyPlan& plan) { serial[i] = plan; });
  std::vector<int> calls(f.size(), 0);
  f.for_each_plan(all, [&](std::size_t i, const FrequencyPlan& plan) { parallel[i] = plan, ++calls[i]; }, 3);
  for (std::size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(calls[i], 1);
    EXPECT_EQ(serial[i].freq_mhz, parallel[i].freq_mhz) << i;
    EXPECT_EQ(serial[i].total_energy_j(), parallel[i].total_energy_j()) << i;
    EXPECT_EQ(serial[i].timeline.time_s, parallel[i].timeline.time_s) << i;
  }
  EXPECT_THROW(f.for_each_plan(all, [](std::size_t i, const FrequencyPlan&) {
    if (i == 5) throw InputError("disk full");
  }, 4), InputError);
  EXPECT_THROW(f.for_each_plan({f.size()}, [](std::size_t, const FrequencyPlan&) {}, 2), std::out_of_range);
}

TEST(Sampling, KeepsFirstAndLast) {
  EXPECT_EQ(sample_plan_indices(5, 2), (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(sample_plan_indices(6, 4), (std::vector<std::size_t>{0, 4, 5}));
  EXPECT_LE(sample_plan_indices(10000, 0).size(), 100u);
  for (std::size_t n : {1, 2, 3, 99, 100, 101, 641, 10000}) {
    const auto idx = sample_plan_indices(n, 0);
    EXPECT_LE(idx.size(), 100u) << n;
    EXPECT_EQ(idx.size(), std::min<std::size_t>(n, idx.size())) << n;
    EXPECT_EQ(idx.front(), 0u);
    EXPECT_EQ(idx.back(), n - 1);
  }
  EXPECT_EQ(sample_plan_indices(100, 0).size(), 100u) << "up to 100 plans: all of them";
}

TEST(Sampling, DefaultCapsThePlanFileBytesOfLargePipelines) {
  // 100 plans up to kDefaultPlanFilesBytes / (100 × kPlanFileBytesPerOp) ≈ 7,456 computations.
  EXPECT_EQ(default_max_plan_files(0), 100u);
  EXPECT_EQ(default_max_plan_files(7000), 100u);
  EXPECT_EQ(default_max_plan_files(20000), kDefaultPlanFilesBytes / (20000 * kPlanFileBytesPerOp));
  EXPECT_EQ(default_max_plan_files(100000000), 2u) << "the slowest plan and T_min's, whatever the size";
  for (std::size_t ops : {20000, 131072}) {
    const auto idx = sample_plan_indices(893, 0, ops);
    EXPECT_LE(idx.size(), default_max_plan_files(ops)) << ops;
    EXPECT_LE(idx.size() * ops * kPlanFileBytesPerOp, kDefaultPlanFilesBytes) << ops;
    EXPECT_EQ(idx.back(), 892u);
  }
  EXPECT_EQ(sample_plan_indices(893, 1, 20000).size(), 893u) << "an explicit --sample is not capped";
}

// Issue 22: dominance has a relative tolerance. On the user trial's llama profile (4 stages,
// 16 microbatches, P_block 75 W) the certified planner found a plan 0.011 % slower than
// another for the same energy-at-deadline up to float noise; it is not a distinct plan. Every
// slower point must save more than kFrontierDominanceRelTol of its energy (at a common
// deadline: E - P_block·R·T).
TEST(Frontier, SlowerPointsSaveMoreThanTheTolerance) {
  ProblemSpec spec;
  spec.num_ranks = 4;
  spec.microbatches = 16;
  spec.p_block_w = 75;
  const Problem pr = load_problem(spec, testing::test_data("cases/llama_a100_4st.csv"));
  PlannerOptions opt;
  opt.p_block_w = 75;
  opt.unit_time_s = 1e-3;
  const Frontier f = solve_frontier(pr.dag, pr.profile, opt);
  const auto& pts = f.points();  // slowest first
  ASSERT_GT(pts.size(), 100u);
  const double pipe_w = 75.0 * 4;
  for (std::size_t i = 0; i + 1 < pts.size(); ++i) {
    const double slow = pts[i].energy_j - pipe_w * pts[i].time_s;
    const double fast = pts[i + 1].energy_j - pipe_w * pts[i + 1].time_s;
    EXPECT_LT(slow, fast - kFrontierDominanceRelTol * pts[i].energy_j)
        << "plan " << i << " (" << pts[i].time_s << " s) is dominated by plan " << i + 1 << " up to noise";
  }
}

// A profile of 1,000 clocks per computation on a 16-computation pipeline: the pair moves of the
// LP stage (on DAGs of up to 16 computations) tried every pair of clocks of every pair of ops,
// ~10^8 timelines per round; 200 clocks took 15 s, 1,000 would take hours. Moves now reach 8
// clocks away; the frontier keeps its quality (every point within 0.5 % of the bound).
TEST(Frontier, HundredsOfClocksPerComputationOnATinyPipeline) {
  std::vector<OperatingPoint> fwd, bwd;
  for (int f = 1; f <= 1000; ++f) {
    const double x = (1001.0 - f) / 1000;  // 1 at the lowest clock, 0.001 at the highest
    fwd.push_back({f, 0.03 * (1 + x), 10.0 * (1 - 0.3 * x)});
    bwd.push_back({f, 0.06 * (1 + x), 20.0 * (1 - 0.3 * x)});
  }
  const Profile p = uniform_profile(2, fwd, bwd);
  const Dag dag = Dag::build(make_1f1b(2, 4));
  PlannerOptions opt;
  opt.p_block_w = 5;
  const Frontier f = solve_frontier(dag, p, opt);
  ASSERT_GT(f.size(), 100u);
  EXPECT_LE(f.max_optimality_gap_pct(), 0.5);
  for (std::size_t i = 0; i < f.size(); i += f.size() / 10) {
    const FrequencyPlan plan = f.plan(i);
    EXPECT_NEAR(plan.timeline.time_s, f.points()[i].time_s, 1e-12);
    EXPECT_NEAR(plan.total_energy_j(), f.points()[i].energy_j, 1e-9 * f.points()[i].energy_j);
  }
}

}  // namespace
}  // namespace perseus
