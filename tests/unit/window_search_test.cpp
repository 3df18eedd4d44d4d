// The polish stage's window search (src/planner/window_search.hpp, PlannerOptions::polish_time_s)
// against exact answers: exhaustive enumeration of every discrete plan on tiny 1F1B pipelines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include <fmt/core.h>

#include "../../src/planner/plan_improve.hpp"
#include "../../src/planner/window_search.hpp"
#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/optimize.hpp"
#include "perseus/plan.hpp"
#include "perseus/schedule.hpp"
#include "planner_oracle.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

using testing::enumerate;
using testing::Oracle;
using testing::random_profile;

struct Shape {
  int stages, microbatches, clocks;
};
constexpr Shape kShapes[] = {{2, 2, 4}, {2, 3, 3}, {3, 2, 3}, {1, 3, 4}};

/// One tiny problem with its per-op candidate tables (the (time, effective energy) Pareto
/// points, as the planner keeps them) and its exhaustive oracle.
struct Tiny {
  Profile profile;
  double p_block = 0;
  Dag dag;
  std::vector<Candidates> tables;        // per op (owned)
  std::vector<const Candidates*> cands;  // per op
  Oracle oracle;
  std::string name;
};
Tiny make_tiny(const Shape& s, int trial, std::mt19937& rng) {
  Tiny t{random_profile(s.stages, s.clocks, rng), 0, Dag::build(make_1f1b(s.stages, s.microbatches)), {}, {}, {}, ""};
  t.p_block = std::uniform_real_distribution<double>(0.0, 110.0)(rng);
  const int n = t.dag.num_ops();
  t.tables.resize(n);
  for (int i = 0; i < n; ++i)
    t.tables[i].points = pareto_points(t.profile.points(t.dag.op(i).stage, t.dag.op(i).kind), t.p_block);
  for (int i = 0; i < n; ++i) t.cands.push_back(&t.tables[i]);
  t.oracle = enumerate(t.dag, t.profile, t.p_block);
  t.name = fmt::format("{} x {} x {} clocks, trial {}, P_block {:.1f} W", s.stages, s.microbatches, s.clocks, trial,
                       t.p_block);
  return t;
}

/// Energy at deadline_s of `choice` through the public evaluator (evaluate_plan()), the GPUs
/// blocking at P_block until the deadline; +inf when slower than the deadline.
double profile_energy_at(const Tiny& t, const std::vector<std::uint16_t>& choice, double deadline_s) {
  std::vector<int> freq(choice.size());
  for (std::size_t i = 0; i < choice.size(); ++i) freq[i] = t.cands[i]->points[choice[i]].freq_mhz;
  const FrequencyPlan plan = evaluate_plan(t.dag, t.profile, freq, t.p_block);
  if (plan.timeline.time_s > deadline_s) return std::numeric_limits<double>::infinity();
  return plan.total_energy_j() + t.p_block * t.dag.num_ranks() * (deadline_s - plan.timeline.time_s);
}

/// Deadlines from the fastest plan's time to twice it.
std::vector<double> deadlines(const Tiny& t) {
  std::vector<double> fastest(t.dag.num_ops());
  for (int i = 0; i < t.dag.num_ops(); ++i) fastest[i] = t.cands[i]->points[0].time_s;
  const double t0 = compute_timeline(t.dag, fastest).time_s;
  std::vector<double> out;
  for (int k = 0; k <= 8; ++k) out.push_back(t0 * (1 + k / 8.0));
  return out;
}

TEST(WindowSearch, WholeDagWindowFindsTheExactOptimum) {
  // One window holding every op with every candidate is the whole discrete problem: CBC's
  // answer must be the enumerated optimum.
  std::mt19937 rng(17);
  for (const Shape& s : kShapes) {
    for (int trial = 0; trial < 3; ++trial) {
      const Tiny t = make_tiny(s, trial, rng);
      SCOPED_TRACE(t.name);
      detail::WindowSearch search(t.dag, t.cands, t.p_block, {t.dag.num_ops(), -1, 3600.0});
      for (double d : deadlines(t)) {
        std::vector<std::uint16_t> choice(t.dag.num_ops(), 0);  // the fastest plan
        detail::WindowSearchStats stats;
        search.improve(choice, d, {}, stats);
        const double opt = t.oracle.opt(d);
        EXPECT_NEAR(search.energy_at(choice, d), opt, 1e-9 * opt) << "deadline " << d;
        EXPECT_FALSE(stats.stopped);
      }
    }
  }
}

TEST(WindowSearch, SmallWindowsNeverWorseNeverSlowerAndHonest) {
  std::mt19937 rng(23);
  for (const Shape& s : kShapes) {
    for (int trial = 0; trial < 3; ++trial) {
      const Tiny t = make_tiny(s, trial, rng);
      SCOPED_TRACE(t.name);
      detail::WindowSearch search(t.dag, t.cands, t.p_block, {3, 1, 3600.0});
      for (double d : deadlines(t)) {
        std::vector<std::uint16_t> choice(t.dag.num_ops(), 0);
        const double before = profile_energy_at(t, choice, d);
        detail::WindowSearchStats stats;
        const bool changed = search.improve(choice, d, {}, stats);
        const double after = profile_energy_at(t, choice, d);  // +inf if slower than d
        ASSERT_TRUE(std::isfinite(after)) << "slower than deadline " << d;
        EXPECT_NEAR(search.energy_at(choice, d), after, 1e-9 * after);  // reported = profile-evaluated
        if (changed) {
          EXPECT_LT(after, before);
        } else {
          EXPECT_EQ(after, before);
        }
        EXPECT_GE(after, t.oracle.opt(d) * (1 - 1e-9));
        EXPECT_GT(stats.windows, 0);
      }
    }
  }
}

TEST(WindowSearch, StopEndsTheSearchWithAValidPlan) {
  std::mt19937 rng(5);
  const Tiny t = make_tiny({3, 2, 3}, 0, rng);
  detail::WindowSearch search(t.dag, t.cands, t.p_block, {2, -1, 3600.0});
  const double d = deadlines(t)[2];
  std::vector<std::uint16_t> choice(t.dag.num_ops(), 0);
  const double before = search.energy_at(choice, d);
  detail::WindowSearchStats stats;
  int polls = 0;
  EXPECT_FALSE(search.improve(
      choice, d, [&] { return ++polls > 0; }, stats));
  EXPECT_TRUE(stats.stopped);
  EXPECT_EQ(stats.windows, 0);
  EXPECT_EQ(search.energy_at(choice, d), before);
  // Stopped after a few polls (between windows or inside CBC): still a plan meeting d.
  polls = 0;
  stats = {};
  search.improve(
      choice, d, [&] { return ++polls > 3; }, stats);
  EXPECT_TRUE(stats.stopped);
  EXPECT_LE(search.energy_at(choice, d), before);
  // A plan slower than the deadline or of the wrong size is refused.
  EXPECT_THROW(search.improve(choice, 0.5 * d, {}, stats), std::invalid_argument);
  std::vector<std::uint16_t> short_plan(1, 0);
  EXPECT_THROW(search.improve(short_plan, d, {}, stats), std::invalid_argument);
}

TEST(WindowSearch, WholeDagOnHullIsTheHullRestrictedOptimum) {
  // With enough nodes the whole-DAG solve on hull vertices is exact for the problem restricted
  // to each op's hull vertices (enumerated here on a profile holding only those clocks); the
  // slack fill after it can only lower the energy further, never below the true optimum.
  std::mt19937 rng(29);
  int improved = 0;
  for (const Shape& s : {Shape{2, 2, 4}, Shape{1, 3, 4}, Shape{3, 2, 3}}) {
    for (int trial = 0; trial < 3; ++trial) {
      const Tiny t = make_tiny(s, trial, rng);
      SCOPED_TRACE(t.name);
      Profile hull_only;
      for (int i = 0; i < t.dag.num_ops(); ++i) {
        const auto& op = t.dag.op(i);
        if (op.microbatch != 0) continue;  // one table per (stage, kind)
        for (std::uint16_t k : detail::hull_vertex_indices(*t.cands[i], t.p_block))
          hull_only.add(op.stage, op.kind, t.cands[i]->points[k]);
      }
      const testing::Oracle on_hull = enumerate(t.dag, hull_only, t.p_block);
      detail::WindowSearch search(t.dag, t.cands, t.p_block);
      for (double d : deadlines(t)) {
        std::vector<std::uint16_t> choice(t.dag.num_ops(), 0);  // the fastest plan
        const double before = profile_energy_at(t, choice, d);
        const bool changed = search.improve_whole_dag_on_hull(choice, d, 1000000, {});
        const double after = profile_energy_at(t, choice, d);
        ASSERT_TRUE(std::isfinite(after)) << "slower than deadline " << d;
        EXPECT_NEAR(search.energy_at(choice, d), after, 1e-9 * after);
        EXPECT_LE(after, on_hull.opt(d) * (1 + 1e-9)) << "deadline " << d;
        EXPECT_GE(after, t.oracle.opt(d) * (1 - 1e-9)) << "deadline " << d;
        if (changed) {
          EXPECT_LT(after, before);
          ++improved;
        } else {
          EXPECT_EQ(after, before);
        }
      }
    }
  }
  EXPECT_GT(improved, 0);
}

TEST(WindowSearch, WholeDagOnHullRefusesBadArguments) {
  std::mt19937 rng(3);
  const Tiny t = make_tiny({2, 2, 3}, 0, rng);
  detail::WindowSearch search(t.dag, t.cands, t.p_block);
  const double d = deadlines(t)[1];
  std::vector<std::uint16_t> choice(t.dag.num_ops(), 0);
  EXPECT_THROW(search.improve_whole_dag_on_hull(choice, d, -1, {}), std::invalid_argument);
  EXPECT_THROW(search.improve_whole_dag_on_hull(choice, 0.5 * d, 10, {}), std::invalid_argument);
  std::vector<std::uint16_t> short_plan(1, 0);
  EXPECT_THROW(search.improve_whole_dag_on_hull(short_plan, d, 10, {}), std::invalid_argument);
  std::vector<std::uint16_t> out_of_range = choice;
  out_of_range[0] = static_cast<std::uint16_t>(t.cands[0]->points.size());
  EXPECT_THROW(search.improve_whole_dag_on_hull(out_of_range, d, 10, {}), std::invalid_argument);
  // Stopped at the first poll (CBC's root heuristics may already have a plan): still a plan
  // meeting d and not worse.
  const double before = search.energy_at(choice, d);
  search.improve_whole_dag_on_hull(choice, d, 10, [] { return true; });
  EXPECT_LE(search.energy_at(choice, d), before);
}

/// Lowest energy at deadline d (GPUs blocking until d) of a frontier plan with T <= d.
double frontier_at(const Frontier& f, double pipe_w, double d) {
  const FrontierPoint& p = f.points()[f.lowest_energy_within(d)];
  return p.time_s <= d ? p.energy_j + pipe_w * (d - p.time_s) : std::numeric_limits<double>::infinity();
}

TEST(WindowPolish, PolishedFrontierNeverWorseAndHonest) {
  std::mt19937 rng(31);
  int polished = 0;
  double worst_plain = 0, worst_polished = 0;  // largest % above the optimum over the points' times
  for (const Shape& s : kShapes) {
    for (int trial = 0; trial < 3; ++trial) {
      const Tiny t = make_tiny(s, trial, rng);
      SCOPED_TRACE(t.name);
      PlannerOptions opt;
      opt.p_block_w = t.p_block;
      const Frontier plain = solve_frontier(t.dag, t.profile, opt);
      opt.polish_time_s = 600;  // converges long before: tiny windows
      const Frontier f = solve_frontier(t.dag, t.profile, opt);
      polished += f.num_polished_points;
      const double pipe_w = t.p_block * t.dag.num_ranks();
      for (double d : t.oracle.time) EXPECT_LE(frontier_at(f, pipe_w, d), frontier_at(plain, pipe_w, d) * (1 + 1e-9));
      for (std::size_t i = 0; i < f.size(); ++i) {
        const FrontierPoint& p = f.points()[i];
        const FrequencyPlan plan = f.plan(i);
        EXPECT_DOUBLE_EQ(plan.timeline.time_s, p.time_s);
        EXPECT_NEAR(plan.total_energy_j(), p.energy_j, 1e-9 * p.energy_j);
        const double opt_here = t.oracle.opt(p.time_s);
        EXPECT_GE(p.energy_j, opt_here * (1 - 1e-9));
        EXPECT_LE(p.lower_bound_j, opt_here * (1 + 1e-9));
        worst_polished = std::max(worst_polished, 100 * (p.energy_j - opt_here) / opt_here);
      }
      for (const FrontierPoint& p : plain.points())
        worst_plain = std::max(worst_plain, 100 * (p.energy_j - t.oracle.opt(p.time_s)) / t.oracle.opt(p.time_s));
    }
  }
  // The planner is within 0.25 % of the optimum here (pair moves on DAGs of <= 16 ops), so the
  // polish may find nothing; it must never make a point worse.
  EXPECT_LE(worst_polished, worst_plain + 1e-7);
  std::printf("points above the optimum: worst %.4f %% plain, %.4f %% polished; %d plans polished\n", worst_plain,
              worst_polished, polished);
}

TEST(WindowSearch, ImprovesThePlannersPlanOnGpt3A40) {
  // GPT-3 A40, 8 stages x 2 microbatches: the certified planner's plan at the all-max time is
  // not a local optimum of 12-op windows; the search must find a better
  // plan, not slower, and its energy is the profile's.
  const Profile profile = load_profile_csv(testing::test_data("emulation/stage_profile_gpt3-175b_a40.csv"));
  const Dag dag = Dag::build(make_1f1b(8, 2));
  const double p_block = 70.38;
  PlannerOptions opt;
  opt.p_block_w = p_block;
  const Frontier f = solve_frontier(dag, profile, opt);
  const double t_allmax = all_max_plan(dag, profile, p_block).timeline.time_s;
  const FrequencyPlan plan = f.plan(f.lowest_energy_within(t_allmax));
  std::vector<Candidates> tables(dag.num_ops());
  std::vector<const Candidates*> cands;
  std::vector<std::uint16_t> choice(dag.num_ops());
  for (int i = 0; i < dag.num_ops(); ++i) {
    tables[i].points = pareto_points(profile.points(dag.op(i).stage, dag.op(i).kind), p_block);
    cands.push_back(&tables[i]);
    const auto& pts = tables[i].points;
    const auto it =
        std::find_if(pts.begin(), pts.end(), [&](const OperatingPoint& p) { return p.freq_mhz == plan.freq_mhz[i]; });
    ASSERT_NE(it, pts.end());
    choice[i] = static_cast<std::uint16_t>(it - pts.begin());
  }
  detail::WindowSearch search(dag, cands, p_block, {12, -1, 3600.0});  // 12-op windows, no CBC time limit
  const double before = search.energy_at(choice, t_allmax);
  ASSERT_NEAR(before, plan.total_energy_j() + p_block * 8 * (t_allmax - plan.timeline.time_s), 1e-9 * before);
  detail::WindowSearchStats stats;
  EXPECT_TRUE(search.improve(choice, t_allmax, {}, stats));
  std::vector<int> freq(dag.num_ops());
  for (int i = 0; i < dag.num_ops(); ++i) freq[i] = cands[i]->points[choice[i]].freq_mhz;
  const FrequencyPlan better = evaluate_plan(dag, profile, freq, p_block);
  ASSERT_LE(better.timeline.time_s, t_allmax);
  const double after = better.total_energy_j() + p_block * 8 * (t_allmax - better.timeline.time_s);
  EXPECT_NEAR(search.energy_at(choice, t_allmax), after, 1e-9 * after);
  EXPECT_LT(after, before);
  EXPECT_GT(stats.improved, 0);
  std::printf("A40 8 x 2 at the all-max time: %.3f -> %.3f J (%.3f %%), %d windows\n", before, after,
              100 * (before - after) / before, stats.windows);
}

TEST(WindowPolish, ZeroBudgetChangesNothing) {
  std::mt19937 rng(41);
  const Tiny t = make_tiny({2, 3, 3}, 0, rng);
  PlannerOptions opt;
  opt.p_block_w = t.p_block;
  const Frontier a = solve_frontier(t.dag, t.profile, opt);
  opt.polish_time_s = 0;
  const Frontier b = solve_frontier(t.dag, t.profile, opt);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.points()[i].time_s, &b.points()[i].time_s, sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&a.points()[i].energy_j, &b.points()[i].energy_j, sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&a.points()[i].lower_bound_j, &b.points()[i].lower_bound_j, sizeof(double)), 0);
    EXPECT_EQ(a.plan(i).freq_mhz, b.plan(i).freq_mhz);
  }
  EXPECT_EQ(b.num_polished_points, 0);
  EXPECT_EQ(b.num_polish_windows, 0);
}

TEST(WindowPolish, CancellationStopsIt) {
  // PlannerOptions::cancelled is polled the same number of times up to the polish stage with and
  // without it (the solve is deterministic); cancelling on the first poll after that stops the
  // polish with PlanningCancelled.
  const Profile profile = load_profile_csv(testing::example("stage_profile_gpt3-175b_a100_sxm.csv"));
  const Dag dag = Dag::build(make_1f1b(4, 4));
  PlannerOptions opt;
  opt.p_block_w = 83.64;
  int calls = 0;
  opt.cancelled = [&] { return ++calls < 0; };  // counts, never cancels
  const Frontier plain = solve_frontier(dag, profile, opt);
  const int before_polish = calls;
  calls = 0;
  opt.polish_time_s = 3600;
  opt.cancelled = [&] { return ++calls > before_polish; };
  EXPECT_THROW(solve_frontier(dag, profile, opt), PlanningCancelled);
  EXPECT_EQ(calls, before_polish + 1);
}

TEST(WindowPolish, BadBudgetsAreInputErrorsNamingTheOption) {
  std::mt19937 rng(1);
  const Tiny t = make_tiny({2, 2, 3}, 0, rng);
  // `set` puts the bad value into PlannerOptions and OptimizeConfig; both must refuse it, naming
  // `planner_field` / `config_field`.
  auto expect_refused = [&](const std::string& what, const std::function<void(PlannerOptions&, OptimizeConfig&)>& set,
                            const char* planner_field, const char* config_field) {
    PlannerOptions opt;
    opt.p_block_w = t.p_block;
    OptimizeConfig cfg;
    cfg.profile_path = "/nonexistent.csv";  // the option is checked first
    set(opt, cfg);
    try {
      solve_frontier(t.dag, t.profile, opt);
      ADD_FAILURE() << what << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(planner_field), std::string::npos) << e.what();
    }
    try {
      optimize(cfg);
      ADD_FAILURE() << what << " accepted by optimize()";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(config_field), std::string::npos) << e.what();
    }
  };
  for (double bad : {-1.0, std::nan(""), 1e6, std::numeric_limits<double>::infinity()})
    expect_refused(fmt::format("polish_time_s {}", bad),
                   [&](PlannerOptions& o, OptimizeConfig& c) { o.polish_time_s = c.polish_s = bad; }, "polish",
                   "polish_s");
  for (int bad : {-1, 1'000'001, std::numeric_limits<int>::min()})
    expect_refused(fmt::format("polish_solves {}", bad),
                   [&](PlannerOptions& o, OptimizeConfig& c) { o.polish_solves = c.polish_solves = bad; },
                   "polish_solves", "polish_solves");
}

TEST(WindowPolish, SolveBudgetIsCountedAndReproducible) {
  // polish_solves: at most N CBC solves, each window limited by nodes, not seconds: two solves
  // give the same frontier, bit for bit, and spend the same solves.
  const Profile profile = load_profile_csv(testing::test_data("emulation/stage_profile_gpt3-175b_a40.csv"));
  const Dag dag = Dag::build(make_1f1b(4, 3));
  PlannerOptions opt;
  opt.p_block_w = 70.38;
  const Frontier plain = solve_frontier(dag, profile, opt);
  opt.polish_solves = 25;
  const Frontier a = solve_frontier(dag, profile, opt);
  const Frontier b = solve_frontier(dag, profile, opt);
  EXPECT_GT(a.num_polish_windows, 0);
  EXPECT_LE(a.num_polish_windows, 25);
  EXPECT_EQ(a.num_polish_windows, b.num_polish_windows);
  EXPECT_EQ(a.num_polished_points, b.num_polished_points);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.points()[i].time_s, &b.points()[i].time_s, sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&a.points()[i].energy_j, &b.points()[i].energy_j, sizeof(double)), 0);
    EXPECT_EQ(a.plan(i).freq_mhz, b.plan(i).freq_mhz);
  }
  // Never worse than the unpolished frontier at any of its points' times.
  const double pipe_w = opt.p_block_w * dag.num_ranks();
  for (const FrontierPoint& p : plain.points())
    EXPECT_LE(frontier_at(a, pipe_w, p.time_s), frontier_at(plain, pipe_w, p.time_s) * (1 + 1e-9));
  // A budget of one solve spends exactly one.
  opt.polish_solves = 1;
  EXPECT_EQ(solve_frontier(dag, profile, opt).num_polish_windows, 1);
}

TEST(WindowPolish, CliPolishOptionIsValidated) {
  const testing::TempDir dir;
  const std::string base = "optimize --profile " + testing::example("stage_profile_gpt3-175b_a100_sxm.csv") +
                           " --stages 8 --microbatches 2 --p2p-power 83.64 --quiet --out " +
                           (dir.path() / "o").string();
  // Each option: bad values are usage errors naming it; a good one is echoed in summary.json.
  auto check = [&](const std::string& flag, std::initializer_list<const char*> bad, const std::string& good,
                   const std::string& echoed, const std::string& counter) {
    for (const char* b : bad) {
      const auto r = testing::run(base + " " + flag + " '" + b + "'");
      EXPECT_EQ(r.status, 2) << flag << " " << b << ": " << r.output;
      EXPECT_NE(r.output.find(flag), std::string::npos) << r.output;
    }
    const auto ok = testing::run(base + " " + flag + " " + good);
    ASSERT_EQ(ok.status, 0) << ok.output;
    const std::string summary = testing::slurp(dir.path() / "o" / "summary.json");
    EXPECT_NE(summary.find(echoed), std::string::npos) << summary;
    EXPECT_NE(summary.find(counter), std::string::npos) << summary;
  };
  check("--polish", {"-1", "nan", "1e9", "x"}, "0.5", "\"polish_s\": 0.5", "\"num_polished_points\"");
  check("--polish-solves", {"-1", "1000001", "2.5", "x", ""}, "3", "\"polish_solves\": 3", "\"num_polish_windows\"");
}

}  // namespace
}  // namespace perseus
