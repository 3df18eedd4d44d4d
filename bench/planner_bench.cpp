// Planner benchmark: whole-frontier solve time, frontier size and peak RSS per case.
//   perseus_planner_bench paper  DATA_DIR UNIT_S   -> the paper's 8 GPT-3 175B cases (one row each)
//   perseus_planner_bench case   DATA_DIR DEVICE MICROBATCHES UNIT_S -> one paper case
//   perseus_planner_bench synth  STAGES MICROBATCHES [UNIT_S]  -> a synthetic pipeline, 40 freqs/op
// "solve CPU s" is the user+system CPU time of the solve (getrusage), which a loaded machine
// inflates much less than wall time; "solve s" is wall time.
// Prints markdown table rows; bench/run_benchmarks.sh runs each case in its own process so
// the peak RSS (getrusage) is per case.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <random>
#include <string>

#include <fmt/core.h>

#include "../src/eval/paper_reference.hpp"
#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/plan.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"

namespace {

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// PERSEUS_BENCH_DUMP=FILE: writes every frontier point (hex floats, exact) for diffing
/// two planner builds. PERSEUS_BENCH_STATS=1: prints the max-flow work (see below).
void maybe_dump(const perseus::Frontier& f) {
  // PERSEUS_BENCH_STATS=1: the warm max-flow's work, per max-flow, on stderr.
  if (const char* stats = std::getenv("PERSEUS_BENCH_STATS"); stats != nullptr && std::string(stats) == "1") {
    const auto& w = f.max_flow_work;
    const double mf = static_cast<double>(std::max<std::int64_t>(1, f.num_max_flows));
    std::fprintf(stderr,
                 "max-flows %lld: per max-flow %.2f Dinic phases (BFS nodes %.0f each), %.2f augmenting paths "
                 "(%.1f arcs each), %.2f cancelled flow paths\n",
                 static_cast<long long>(f.num_max_flows), w.dinic_phases / mf,
                 w.dinic_phases ? static_cast<double>(w.bfs_nodes) / static_cast<double>(w.dinic_phases) : 0.0,
                 w.augmenting_paths / mf,
                 w.augmenting_paths ? static_cast<double>(w.augmenting_arcs) / static_cast<double>(w.augmenting_paths)
                                    : 0.0,
                 w.cancelled_paths / mf);
    if (w.grown_nodes > 0)
      std::fprintf(stderr, "dynamic engine, per max-flow: %.1f grown nodes, %.1f orphans, %.3f fresh cut searches\n",
                   w.grown_nodes / mf, w.orphans / mf, w.cut_searches / mf);
    if (f.num_hull_walk_steps > 0) {
      const auto& h = f.hull_walk_max_flow_work;
      std::fprintf(stderr,
                   "hull walk: %lld steps, %lld max-flows in %.2f s; %lld Dinic phases visiting %lld nodes, %lld "
                   "augmenting paths (%lld arcs), %lld cancelled flow paths\n",
                   static_cast<long long>(f.num_hull_walk_steps), static_cast<long long>(f.num_hull_walk_max_flows),
                   f.hull_walk_time_s, static_cast<long long>(h.dinic_phases), static_cast<long long>(h.bfs_nodes),
                   static_cast<long long>(h.augmenting_paths), static_cast<long long>(h.augmenting_arcs),
                   static_cast<long long>(h.cancelled_paths));
    }
  }
  const char* path = std::getenv("PERSEUS_BENCH_DUMP");
  if (path == nullptr || *path == '\0') return;
  std::FILE* out = std::fopen(path, "w");
  if (out == nullptr) throw std::runtime_error(fmt::format("PERSEUS_BENCH_DUMP={}: cannot open for writing", path));
  for (const auto& p : f.points())
    std::fprintf(out, "%a %a %a %lld %a\n", p.time_s, p.energy_j, p.energy_before_reclaim_j,
                 static_cast<long long>(p.step), p.tightened_to_s);
  std::fclose(out);
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

/// Synthetic heterogeneous profile: stage base times vary +-20% (fixed seed 42); 40
/// frequencies 1410..825 MHz; time ~ 1/f^0.85, power = 80 W + 320 W x (f/1410)^2.4.
perseus::Profile synthetic_profile(int stages) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(0.8, 1.2);
  perseus::Profile p;
  p.source = "synthetic";
  for (int s = 0; s < stages; ++s) {
    const double base = 0.02 * u(rng);
    for (auto [kind, mult] : {std::pair{perseus::InstructionKind::kForward, 1.0},
                              std::pair{perseus::InstructionKind::kBackward, 2.0}}) {
      for (int i = 0; i < 40; ++i) {
        const int f = 1410 - 15 * i;
        const double x = f / 1410.0;
        const double t = base * mult * std::pow(1.0 / x, 0.85);
        const double power = 80.0 + 320.0 * std::pow(x, 2.4);
        p.add(s, kind, {f, t, power * t});
      }
    }
  }
  return p;
}


/// Bad arguments (exit status 2).
struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A whole-string number, or a usage error naming the argument.
double number(const char* text, const char* what) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v)) throw Usage(fmt::format("{}: expected a number, got '{}'", what, text));
  return v;
}
int count(const char* text, const char* what) {
  const double v = number(text, what);
  if (v != std::floor(v) || v < 1 || v > 1e6) throw Usage(fmt::format("{}: expected an integer >= 1, got '{}'", what, text));
  return static_cast<int>(v);
}

/// The planner of the paper, case and synth modes: PERSEUS_BENCH_PLANNER=graph-cut (default:
/// the README's speed and paper tables were measured with it) or certified (Planner 2.0).
perseus::PlannerMode bench_planner() {
  const char* env = std::getenv("PERSEUS_BENCH_PLANNER");
  const std::string name = env ? env : "graph-cut";
  if (name == "graph-cut") return perseus::PlannerMode::kGraphCut;
  if (name == "certified") return perseus::PlannerMode::kCertified;
  throw Usage(fmt::format("PERSEUS_BENCH_PLANNER: expected graph-cut or certified, got '{}'", name));
}

/// Bound method of the certified planner in the synth and quality modes:
/// PERSEUS_BENCH_BOUND=auto (default), lp or hull-walk (PlannerOptions::bound_method;
/// perseus optimize has --bound).
perseus::BoundMethod bench_bound_method() {
  const char* env = std::getenv("PERSEUS_BENCH_BOUND");
  const std::string name = env && *env ? env : "auto";
  if (const auto m = perseus::parse_bound_method(name)) return *m;
  throw Usage(fmt::format("PERSEUS_BENCH_BOUND: expected auto, lp or hull-walk, got '{}'", name));
}

/// Max-flow engine of the case, paper, synth and quality modes: PERSEUS_BENCH_MIN_CUT_ENGINE=dynamic (the
/// planner's default), warm, dinic, lemon or boost-bk, like the bench's other PERSEUS_BENCH_* switches. It only sets
/// PlannerOptions::min_cut_engine here; the planner itself reads no environment variable
/// (perseus optimize has --min-cut-engine).
perseus::MinCutEngine bench_min_cut_engine() {
  const char* env = std::getenv("PERSEUS_BENCH_MIN_CUT_ENGINE");
  if (env == nullptr || *env == '\0') return perseus::PlannerOptions{}.min_cut_engine;
  if (const auto e = perseus::parse_min_cut_engine(env)) return *e;
  throw Usage(fmt::format("PERSEUS_BENCH_MIN_CUT_ENGINE: expected warm, dinic, lemon, boost-bk or dynamic, got '{}'", env));
}

int run(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if ((mode == "paper" && argc >= 4) || (mode == "case" && argc >= 6)) {
    const double unit = number(argv[mode == "case" ? 5 : 3], "UNIT_S");
    const int mbs = mode == "case" ? count(argv[4], "MICROBATCHES") : 0;
    int matched = 0;
    for (const auto& c : perseus::reference::load_paper_cases(argv[2])) {
      if (mode == "case" && (c.device != argv[3] || c.microbatches != mbs)) continue;
      ++matched;
      const double c0 = cpu_s();
      const auto r = perseus::reference::run_case(c, argv[2], unit, maybe_dump, bench_planner(), bench_min_cut_engine());
      const double cpu = cpu_s() - c0;
      fmt::print("| {} | {} | {} | {} | {} | {} | {} | {:.3f} | {:.3f} | {:.2f} | {:.2f} | {:.0f} |\n", c.device,
                 c.microbatches, unit, r.num_ops, r.steps, r.max_flows, r.num_plans, cpu, r.solve_time_s, r.saving_pct, c.paper_saving_pct,
                 peak_rss_mib());
      std::string rel;
      for (std::size_t i = 0; i < r.ours_pct.size(); ++i) rel += fmt::format(" {:.2f} / {:.2f} |", r.ours_pct[i], r.paper_pct[i]);
      std::fprintf(stderr, "| %s mb%d |%s\n", c.device.c_str(), c.microbatches, rel.c_str());
    }
    if (matched == 0) {
      throw Usage(fmt::format("no paper case {}in DATA_DIR {} (DATA_DIR is the reference data folder, tests/data, that holds "
                              "emulation/; devices a100_sxm, a40; microbatches 12, 24, 48, 96)",
                              mode == "case" ? fmt::format("{} mb{} ", argv[3], mbs) : "", argv[2]));
    }
    return 0;
  }
  if (mode == "quality" && argc >= 6) {
    // quality PROFILE STAGES MICROBATCHES P_BLOCK [UNIT_S [MAX_LP_SOLVES [LOCAL_SEARCH_MOVES]]]: today's planner
    // (graph cut) vs Planner 2.0 (certified) on one profile, 1F1B.
    const perseus::Profile p = perseus::load_profile_csv(argv[2]);
    const int stages = count(argv[3], "STAGES"), mbs = count(argv[4], "MICROBATCHES");
    const double p_block = number(argv[5], "P_BLOCK");
    const perseus::Dag dag = perseus::Dag::build(perseus::make_1f1b(stages, mbs));
    const perseus::FrequencyPlan allmax = perseus::all_max_plan(dag, p, p_block);
    const double e_max = allmax.total_energy_j(), t_max = allmax.timeline.time_s;
    for (const auto mode2 : {perseus::PlannerMode::kGraphCut, perseus::PlannerMode::kCertified}) {
      perseus::PlannerOptions opt;
      opt.p_block_w = p_block;
      opt.unit_time_s = argc > 6 ? number(argv[6], "UNIT_S") : 1e-3;
      if (argc > 7) opt.max_lp_solves = count(argv[7], "MAX_LP_SOLVES");
      if (argc > 8) opt.local_search_moves = static_cast<int>(number(argv[8], "LOCAL_SEARCH_MOVES"));
      opt.mode = mode2;
      opt.min_cut_engine = bench_min_cut_engine();
      opt.bound_method = bench_bound_method();
      // PERSEUS_BENCH_POLISH_S=S: PlannerOptions::polish_time_s of the certified planner (window search).
      if (const char* s = std::getenv("PERSEUS_BENCH_POLISH_S"); s != nullptr && *s && mode2 == perseus::PlannerMode::kCertified)
        opt.polish_time_s = number(s, "PERSEUS_BENCH_POLISH_S");
      // PERSEUS_BENCH_REFINE_GAP=PCT: PlannerOptions::refine_gap_pct (where the LP stage refines).
      if (const char* s = std::getenv("PERSEUS_BENCH_REFINE_GAP"); s != nullptr && *s && mode2 == perseus::PlannerMode::kCertified)
        opt.refine_gap_pct = number(s, "PERSEUS_BENCH_REFINE_GAP");
      const double c0 = cpu_s();
      const perseus::Frontier f = perseus::solve_frontier(dag, p, opt);
      const double cpu = cpu_s() - c0;
      std::string row = fmt::format("| {} | {} x {} | {} |", mode2 == perseus::PlannerMode::kGraphCut ? "today" : "2.0",
                                    stages, mbs, f.size());
      // The metric at 1, 1.02, 1.05 x all-max T: the lowest own-time energy of a
      // frontier plan with T <= the deadline, vs the all-max plan's energy.
      for (double rel : {1.0, 1.02, 1.05}) {
        double e = std::numeric_limits<double>::infinity();
        for (const auto& pt : f.points())
          if (pt.time_s <= rel * t_max * (1 + 1e-12)) e = std::min(e, pt.energy_j);
        row += fmt::format(" {:.2f} |", 100 * (e_max - e) / e_max);
      }
      for (double rel : {1.2, 1.5}) {
        // Energy at the deadline: the chosen plan, then blocking at P_block until the deadline
        // (the all-max plan blocks likewise).
        const double d = rel * t_max;
        const auto& pt = f.points()[f.lowest_energy_within(d * (1 + 1e-12))];
        const double pipe_w = p_block * stages;
        const double e = pt.energy_j + pipe_w * (d - pt.time_s), base = e_max + pipe_w * (d - t_max);
        row += fmt::format(" {:.2f} |", 100 * (base - e) / base);
      }
      const double lb = f.lower_bound_at(t_max);
      row += lb > 0 ? fmt::format(" {:.2f} | {:.3f} | {:.3f} |", 100 * (e_max - lb) / e_max, f.max_optimality_gap_pct(),
                                  f.max_deadline_gap_pct())
                    : " — | — | — |";
      row += fmt::format(" {} | {:.3f} |", f.num_lp_solves, cpu);
      if (opt.polish_time_s > 0)
        row += fmt::format(" polished {} plans, {} windows, {:.2f} s |", f.num_polished_points, f.num_polish_windows, f.polish_time_s);
      fmt::print("{}\n", row);
    }
    return 0;
  }
  if (mode == "milp" && argc >= 8) {
    // milp PROFILE STAGES MICROBATCHES P_BLOCK DEADLINE_X SECONDS: the exact discrete problem at
    // deadline DEADLINE_X x the all-max time as a MILP, solved by Debian's `cbc` binary within
    // SECONDS (its best plan and its own lower bound), beside Planner 2.0's plan and certified
    // bound at the same deadline: how far our plans are from the optimum, and how far the
    // optimum is from our bound (the LP relaxation's integrality gap).
    const int stages = count(argv[3], "STAGES"), mbs = count(argv[4], "MICROBATCHES");
    const double p_block = number(argv[5], "P_BLOCK"), rel = number(argv[6], "DEADLINE_X"),
                 seconds = number(argv[7], "SECONDS");
    if (!(rel >= 1 && rel <= 100)) throw Usage(fmt::format("DEADLINE_X: expected a factor in [1, 100] of the all-max time, got {}", rel));
    if (!(seconds > 0 && seconds <= 86400)) throw Usage(fmt::format("SECONDS: expected 0 < SECONDS <= 86400, got {}", seconds));
    const perseus::Profile p = perseus::load_profile_csv(argv[2]);
    const perseus::Dag dag = perseus::Dag::build(perseus::make_1f1b(stages, mbs));
    const perseus::FrequencyPlan allmax = perseus::all_max_plan(dag, p, p_block);
    const double tau = rel * allmax.timeline.time_s, pipe_w = p_block * dag.num_ranks();
    perseus::PlannerOptions opt;
    opt.p_block_w = p_block;
    const perseus::Frontier f = perseus::solve_frontier(dag, p, opt);
    const auto& pt = f.points()[f.lowest_energy_within(tau * (1 + 1e-12))];
    const double ours = pt.energy_j + pipe_w * (tau - pt.time_s), lb = f.lower_bound_at(tau);
    // MILP: x_ik = 1 when op i runs at profile point k; energy at tau = Σ (E − P_block t) x + P_block R tau.
    std::ostringstream lp;
    lp << "Minimize\n obj:";
    std::ostringstream cons, bin;
    for (int i = 0; i < dag.num_ops(); ++i) {
      const auto& pts = p.points(dag.op(i).stage, dag.op(i).kind);
      cons << " pick" << i << ":";
      for (std::size_t k = 0; k < pts.size(); ++k) {
        lp << fmt::format(" + {:.12g} x{}_{}", pts[k].energy_j - p_block * pts[k].time_s, i, k);
        cons << fmt::format(" + x{}_{}", i, k);
        bin << fmt::format(" x{}_{}\n", i, k);
      }
      cons << " = 1\n dur" << i << ": d" << i;
      for (std::size_t k = 0; k < pts.size(); ++k) cons << fmt::format(" - {:.12g} x{}_{}", pts[k].time_s, i, k);
      cons << " = 0\n";
      for (int j : dag.successors(i)) cons << fmt::format(" e{}_{}: s{} - s{} - d{} >= 0\n", i, j, j, i, i);
      cons << fmt::format(" end{}: s{} + d{} <= {:.12g}\n", i, i, i, tau);
    }
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("perseus_milp_{}", static_cast<long>(getpid()));
    std::filesystem::create_directories(dir);
    const auto lp_path = dir / "milp.lp", log_path = dir / "cbc.log";
    std::ofstream(lp_path) << lp.str() << "\nSubject To\n" << cons.str() << "Binaries\n" << bin.str() << "End\n";
    const std::string cmd = fmt::format("cbc {} sec {} ratio 0 allowableGap 0 solve > {} 2>&1", lp_path.string(), seconds,
                                        log_path.string());
    const auto w0 = std::chrono::steady_clock::now();
    const int rc = std::system(cmd.c_str());
    const double cbc_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    std::ifstream log(log_path);
    double best = std::nan(""), bound = std::nan("");
    bool optimal = false;
    for (std::string line; std::getline(log, line);) {
      if (line.find("Optimal solution found") != std::string::npos) optimal = true;
      if (line.rfind("Objective value:", 0) == 0) best = std::stod(line.substr(16));
      if (line.rfind("Lower bound:", 0) == 0) bound = std::stod(line.substr(12));
    }
    std::filesystem::remove_all(dir);
    if (rc != 0 || std::isnan(best)) {
      // std::system's status: 127 from the shell when `cbc` is not on PATH.
      const int code = rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
      throw std::runtime_error(code == 127 ? std::string("cbc not found on PATH (Debian package coinor-cbc; scripts/install-deps.sh)")
                                           : fmt::format("cbc failed (exit status {}, no solution in its log)", code));
    }
    if (optimal || std::isnan(bound)) bound = best;
    const double c = pipe_w * tau;  // the MILP's objective leaves out the constant P_block R tau
    best += c, bound += c;
    fmt::print("| {} x {} | {:.3f} x T_allmax = {:.4f} s | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.3f} | {:.3f} | {:.3f} | {}{} s |\n",
               stages, mbs, rel, tau, ours, best, bound, lb, 100 * (ours - bound) / bound, 100 * (best - lb) / lb,
               100 * (bound - lb) / lb, optimal ? "optimal after " : "stopped after ", fmt::format("{:.0f}", cbc_s));
    return 0;
  }
  if (mode == "synth" && argc >= 4) {
    const int stages = count(argv[2], "STAGES"), mbs = count(argv[3], "MICROBATCHES");
    const double unit = argc > 4 ? number(argv[4], "UNIT_S") : 1e-3;
    const perseus::Profile p = synthetic_profile(stages);
    const perseus::Dag dag = perseus::Dag::build(perseus::make_1f1b(stages, mbs));
    perseus::PlannerOptions opt;
    opt.p_block_w = 80.0;
    opt.unit_time_s = unit;
    opt.mode = bench_planner();
    opt.min_cut_engine = bench_min_cut_engine();
    opt.bound_method = bench_bound_method();
    // PERSEUS_BENCH_THREADS=N: PlannerOptions::threads (the solve's threads; default 1).
    if (const char* t = std::getenv("PERSEUS_BENCH_THREADS"); t != nullptr && *t) {
      opt.threads = count(t, "PERSEUS_BENCH_THREADS");
    }
    // PERSEUS_BENCH_TIME_BUDGET_S=S: PlannerOptions::time_budget_s (wall s): the solve stops and
    // returns a partial frontier (the row says so), unlike PERSEUS_BENCH_BUDGET_S below.
    if (const char* t = std::getenv("PERSEUS_BENCH_TIME_BUDGET_S"); t != nullptr && *t) {
      opt.time_budget_s = number(t, "PERSEUS_BENCH_TIME_BUDGET_S");
    }
    const double c0 = cpu_s();
    // PERSEUS_BENCH_BUDGET_S=S: stop after S s of solve CPU and report how far the solve got
    // (share of the T_max -> T_min range, checked at each 1 % progress report) and its RSS.
    const char* budget_env = std::getenv("PERSEUS_BENCH_BUDGET_S");
    const double budget = budget_env != nullptr && *budget_env ? number(budget_env, "PERSEUS_BENCH_BUDGET_S") : 0.0;
    if (budget < 0) throw Usage("PERSEUS_BENCH_BUDGET_S: expected seconds >= 0 (0 = no budget)");
    struct OverBudget {
      double done;  // share of the stage done
      perseus::SolveStage stage;
    };
    if (budget > 0) {
      opt.progress = [&](perseus::SolveStage stage, double done) {
        if (cpu_s() - c0 > budget) throw OverBudget{done, stage};
      };
    }
    std::optional<perseus::Frontier> solved;
    try {
      solved.emplace(perseus::solve_frontier(dag, p, opt));
    } catch (const OverBudget& b) {
      const double cpu = cpu_s() - c0;
      // No time estimate: later steps are slower (the critical network grows toward T_min).
      fmt::print("| {} x {} | {} | — | — | — | > {:.1f} (stopped in the {} with {:.1f} % of it done) | | {:.0f} | | |\n",
                 stages, mbs, dag.num_ops(), cpu, perseus::to_string(b.stage), 100 * b.done, peak_rss_mib());
      return 0;
    }
    const perseus::Frontier& f = *solved;
    const double cpu = cpu_s() - c0;
    maybe_dump(f);
    // Certified: the bound method used and the largest gap to the bound (after the row's columns).
    const std::string bound = f.bound_method == perseus::BoundMethod::kAuto
                                  ? ""
                                  : fmt::format(" {} | {:.3f} |", perseus::to_string(f.bound_method),
                                                f.max_optimality_gap_pct());
    fmt::print("| {} x {} | {} | {} | {} | {} | {:.3f} | {:.3f} | {:.0f} | {} | {} |{}\n", stages, mbs, dag.num_ops(),
               f.num_steps, f.num_max_flows, f.size(), cpu, f.solve_time_s, peak_rss_mib(), f.num_lp_solves,
               f.partial() ? fmt::format("partial: {}", f.partial_detail) : "complete", bound);
    return 0;
  }
  std::fprintf(stderr,
               "usage: %s paper DATA_DIR UNIT_S | case DATA_DIR DEVICE MICROBATCHES UNIT_S | synth STAGES MICROBATCHES "
               "[UNIT_S] | quality PROFILE STAGES MICROBATCHES P_BLOCK [UNIT_S [MAX_LP_SOLVES [LOCAL_SEARCH_MOVES]]] | milp "
               "PROFILE STAGES MICROBATCHES P_BLOCK DEADLINE_X SECONDS\n",
               argv[0]);
  return mode == "--help" || mode == "-h" ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Usage& e) {
    std::fprintf(stderr, "perseus_planner_bench: %s\n", e.what());
    return 2;
  } catch (const perseus::InputError& e) {
    std::fprintf(stderr, "perseus_planner_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "perseus_planner_bench: error: %s\n", e.what());
    return 1;
  }
}
