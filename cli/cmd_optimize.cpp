// `perseus optimize`: the iteration time–energy frontier of a profile.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/core.h>

#include "commands.hpp"
#include "option_checks.hpp"
#include "perseus/error.hpp"
#include "perseus/input_file.hpp"
#include "perseus/profile.hpp"
#include "faster_clocks.hpp"
#include "usage_hints.hpp"
#include "perseus/optimize.hpp"
#include "perseus/render.hpp"
#include "perseus/schedule.hpp"

namespace perseus::cli {

void register_optimize(CLI::App& app) {
  auto cfg = std::make_shared<OptimizeConfig>();
  auto zeus = std::make_shared<std::string>("perseus");
  auto quiet = std::make_shared<bool>(false);
  auto report = std::make_shared<bool>(false);
  auto strict = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("optimize", "Compute the iteration time-energy Pareto frontier of a profile");
  cmd->add_option("--profile", cfg->profile_path, "Profile CSV: stage,instruction,frequency,time,energy")
      ->required()
      ->check(non_empty_path("a profile CSV file"))
      ->check(CLI::ExistingFile);
  cmd->add_option("--stages", cfg->problem.num_ranks, "GPUs (pipeline stages) per pipeline (required unless --schedule is a file)")
      ->check(integer_in(1, 1 << 20));
  cmd->add_option("--microbatches", cfg->problem.microbatches, "Microbatches per iteration (required unless --schedule is a file)")
      ->check(integer_in(1, 1 << 20));
  cmd->add_option("--schedule", cfg->problem.schedule,
                  "Pipeline schedule: 1f1b, gpipe, interleaved-1f1b, zb-h1, or a per-rank action list CSV "
                  "(torch.distributed.pipelining notation, e.g. 2F0; see docs/schedules.md)")
      ->capture_default_str();
  auto* bif = cmd->add_option("--backward-input-fraction", cfg->problem.backward_input_fraction,
                  "For zb-h1 on a profile without backward_input/backward_weight rows: share of the backward's "
                  "time/energy given to I (approximation)")
      ->capture_default_str()
      ->check(number_strictly_between(0, 1));  // 0 or 1 would leave I or W with nothing
  auto* chunks = cmd->add_option("--chunks", cfg->problem.chunks,
                                 "Stages (model chunks) per GPU for interleaved schedules (with a schedule CSV: "
                                 "must match the file's, default the file's)")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 20));
  cmd->add_option("--p2p-power", cfg->problem.p_block_w, "P2P blocking power P_block of one GPU, W")
      ->required()
      ->check(number_in(0, 1e5, "W"));
  cmd->add_option("--p2p-latency", cfg->problem.overheads.p2p_latency_s,
                  "Blocking P2P send time, s: added to every computation that sends to another GPU (its GPU "
                  "waits at --p2p-power meanwhile); 0 = computation-only model (docs/validation.md)")
      ->capture_default_str()
      ->check(number_in(0, 3600, "s"));
  cmd->add_option("--op-overhead", cfg->problem.overheads.op_overhead_s,
                  "Per-computation overhead, s (host dispatch, clock setting): added to every computation; "
                  "calibrate it with `perseus validate` (docs/validation.md)")
      ->capture_default_str()
      ->check(number_in(0, 3600, "s"));
  cmd->add_option("--unit-time", cfg->unit_time_s, "Planner time quantum, s")
      ->capture_default_str()
      ->check(number_in(kMinUnitTimeS, kMaxUnitTimeS, "s"));
  cmd->add_option("--sample", cfg->sample, "Write every K-th plan (plus first and last); 0 = at most 100 plans, fewer on pipelines over ~7,400 computations (about 128 MiB of plan files)")
      ->capture_default_str()
      ->check(integer_in(0, 1'000'000'000));
  cmd->add_option("--format", *zeus, "Plan file format: perseus (JSON) or zeus (JSON + Zeus freqs_pipeline_*.py)")
      ->check(CLI::IsMember({"perseus", "zeus"}))
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--planner",
         [cfg](const std::string& v) {
           cfg->planner_mode = *perseus::parse_planner_mode(v);
         },
         "Planner: certified (graph cut + LP lower bound, LP-rounded plans into the straggler regime; default) or "
         "graph-cut (the paper's algorithm only)")
      ->check(CLI::IsMember({"certified", "graph-cut"}));
  cmd->add_option_function<std::string>(
         "--min-cut-engine",
         [cfg](const std::string& v) { cfg->min_cut_engine = *perseus::parse_min_cut_engine(v); },
         "Max-flow engine of the graph-cut steps: dynamic (default), warm, dinic, lemon or boost-bk; the frontier is the same "
         "with each (docs/performance.md compares their speed)")
      ->check(CLI::IsMember({"warm", "dinic", "lemon", "boost-bk", "dynamic"}));
  cmd->add_option_function<std::string>(
         "--bound",
         [cfg](const std::string& v) { cfg->bound_method = *perseus::parse_bound_method(v); },
         "Certified planner's lower bound and extra plans: lp (CLP solves of the LP relaxation), hull-walk (a second "
         "graph-cut walk over the whole effective-energy hulls; scales like the graph cut) or auto (default: "
         "hull-walk from 256 computations; below, lp, adding the hull walk where it leaves a gap above 0.5 %)")
      ->check(CLI::IsMember({"auto", "lp", "hull-walk"}));
  cmd->add_flag("--no-reclaim", [cfg](std::int64_t) { cfg->reclaim_slack = false; },
                "Do not reclaim slack after each graph-cut step");
  cmd->add_flag("--quiet", *quiet, "No progress on stderr (progress is shown only on a terminal)");
  cmd->add_flag("--report", *report, "Also write OUT/report.html (see `perseus report`)");
  cmd->add_flag("--strict", *strict,
                "Implausible profile units (a row's energy/time outside 1..3000 W, P_block above a computation's "
                "power) are errors (exit 1) instead of warnings");
  cmd->add_option("--threads", cfg->threads,
                  "Threads of the solve (the certified planner's LP stage or hull walk beside the graph cut) and of writing "
                  "plan files (0 = one per hardware thread); output is identical")
      ->capture_default_str()
      ->check(integer_in(0, 1024));
  cmd->add_option("--time-budget", cfg->time_budget_s,
                  "Stop the solve after S seconds and write the frontier found so far, marked \"partial\" in "
                  "summary.json (default: no budget)")
      ->check(number_in(0, 1e9, "s"));
  cmd->add_option("--max-points", cfg->max_points,
                  "Stop the solve once the frontier has K plans: the walk runs from the slowest plan down, so these "
                  "are the K slowest plans found, then the all-max plan (a finished solve with more keeps K, spread "
                  "evenly); marked \"partial\" in summary.json (default: no limit)")
      ->check(integer_in(1, 1'000'000'000));
  cmd->add_option("--polish", cfg->polish_s,
                  "Certified planner: spend up to S more seconds improving the plans furthest from the lower bound "
                  "and at the deadlines between them (and the plan at the all-max time) with COIN-OR CBC: whole-DAG MILPs "
                  "on pipelines of up to 512 computations, then window search (default 0: none; "
                  "docs/planner2.md)")
      ->check(number_in(0, 86400, "s"));
  cmd->add_option("--polish-solves", cfg->polish_solves,
                  "Certified planner: polish with a budget of N CBC solves instead of (or besides) --polish S: "
                  "each window solve is limited by branch-and-bound nodes, not seconds, so the plans do not depend "
                  "on the machine's speed or load (default 0: none; docs/planner2.md)")
      ->check(integer_in(0, kMaxPolishSolves));
  cmd->add_option("--max-lp-solves", cfg->max_lp_solves,
                  "Certified planner: LP solves at most (the LP bound's, or the refinement after the hull walk up to "
                  "2,048 computations; the planner also caps them at max(40, 320000 / computations)); fewer is "
                  "faster, the frontier and bound a little looser (docs/planner2.md)")
      ->capture_default_str()
      ->check(integer_in(1, 100000));
  cmd->add_option("--out", cfg->out_dir, "Output folder (replaced atomically; missing parent folders are created)")
      ->required()
      ->check(non_empty_path("an output folder"));
  cmd->callback([cfg, zeus, quiet, report, strict, chunks, bif] {
    cfg->problem.p_block_w += 0.0;  // "-0" is zero: never a negative zero in summary.json or the report
    // --stages/--microbatches are required unless the schedule comes from a file: a usage
    // error (exit status 2), like any other missing option.
    const auto names = schedule_names();
    const bool named = std::find(names.begin(), names.end(), cfg->problem.schedule) != names.end();
    std::error_code ec;
    if (!named && cfg->problem.schedule == cfg->profile_path &&
        !std::filesystem::is_regular_file(cfg->profile_path, ec))
      throw CLI::ValidationError("--schedule", "reads the same stream as --profile (" + cfg->problem.schedule +
                                                   "), which can be read once; give one of them as a file");
    const bool stream = !named && is_stream_path(cfg->problem.schedule);  // `--schedule /dev/stdin`, `<(cmd)`
    if (!named && !stream && !std::filesystem::is_regular_file(cfg->problem.schedule, ec))
      throw CLI::ValidationError("--schedule", unknown_schedule_message(cfg->problem.schedule, names));
    if (named) {
      if (cfg->problem.num_ranks == 0) throw CLI::ValidationError("--stages", "required unless --schedule is a schedule CSV file");
      if (cfg->problem.microbatches == 0) {
        throw CLI::ValidationError("--microbatches", "required unless --schedule is a schedule CSV file");
      }
    }
    cfg->problem.chunks_given = chunks->count() > 0;  // --chunks 1 with a 2-chunk schedule CSV is refused
    cfg->zeus_format = *zeus == "zeus";
    // The profile is read three times (here, for its units, to plan): a pipe or /dev/stdin is
    // read once, now, and its text kept for the other reads; so is a piped schedule CSV.
    keep_stream_input(cfg->profile_path, "profile");
    if (stream) keep_stream_input(cfg->problem.schedule, "schedule");
    // Units: a profile that parses may still be in ms, kJ or W (issue 16 row 9).
    const Profile profile = load_profile_csv(cfg->profile_path);  // bad rows: the usual file:line error first
    // Shown before the solve (optimize() lists them in summary.json too; --strict: it refuses them).
    const auto unit_warnings = profile_unit_warnings(profile, cfg->problem.p_block_w);
    cfg->strict = *strict;
    if (!*strict)
      for (const auto& w : unit_warnings) fmt::print(stderr, "warning: {}\n", w);
    // Options that cannot act on this solve are accepted (scripts share flags) but said so.
    const bool lp_solves_set = cfg->max_lp_solves != PlannerOptions{}.max_lp_solves;
    if (cfg->planner_mode == PlannerMode::kGraphCut) {
      for (const auto& [set, flag] : {std::pair{lp_solves_set, "--max-lp-solves"}, {cfg->polish_s > 0, "--polish"},
                                      {cfg->polish_solves > 0, "--polish-solves"},
                                      {cfg->bound_method != BoundMethod::kAuto, "--bound"}}) {
        if (set) fmt::print(stderr, "warning: {} has no effect with --planner graph-cut (it computes no bound)\n", flag);
      }
    }
    std::function<void(SolveStage, double)> progress;
    const bool show_progress = !*quiet && ::isatty(STDERR_FILENO) != 0;  // no \r floods in logs
    if (show_progress) {
      progress = [last = -1](SolveStage stage, double f) mutable {
        const int pct = static_cast<int>(f * 100) + 1000 * static_cast<int>(stage);
        if (pct != last) {
          fmt::print(stderr, "\rsolving frontier, {}: {:3d}%   ", to_string(stage), static_cast<int>(f * 100));
          std::fflush(stderr);
          last = pct;
        }
      };
    }
    // --report: report.html is rendered into the temporary folder, so it is part of the one
    // atomic replacement (a Ctrl-C while it renders left a new folder without it, session 31).
    std::function<void(const std::filesystem::path&)> write_report_into;
    if (*report) {
      write_report_into = [out = cfg->out_dir](const std::filesystem::path& tmp) {
        ReportOptions ro;
        ro.on_warning = [](const std::string& w) { fmt::print(stderr, "perseus report: warning: {}\n", w); };
        try {
          write_report(tmp.string(), ro);
        } catch (const InputError& e) {  // name the folder the user gave, not its temporary sibling
          std::string msg = e.what();
          for (auto at = msg.find(tmp.string()); at != std::string::npos; at = msg.find(tmp.string(), at + out.size()))
            msg.replace(at, tmp.string().size(), out);
          throw InputError(msg);
        }
      };
    }
    const OptimizeSummary s = run_optimize(*cfg, progress, write_report_into);
    if (show_progress) fmt::print(stderr, "\r{:50}\r", "");
    for (const auto& a : s.approximations) fmt::print(stderr, "note: approximation: {}\n", a);
    for (const auto& w : s.warnings)
      if (std::find(unit_warnings.begin(), unit_warnings.end(), w) == unit_warnings.end())
        fmt::print(stderr, "warning: {} (--unit-time)\n", w);
    if (bif->count() > 0 && std::none_of(s.approximations.begin(), s.approximations.end(), [](const std::string& a) {
          return a.find("backward split") != std::string::npos;
        })) {
      fmt::print(stderr, "warning: --backward-input-fraction had no effect: the schedule does not split the backward "
                         "into I and W, or the profile has backward_input/backward_weight rows\n");
    }
    if (lp_solves_set && s.bound_method == BoundMethod::kHullWalk && s.num_lp_solves == 0) {
      fmt::print(stderr, "note: --max-lp-solves had no effect: the bound came from the hull walk, not LP solves "
                         "(--bound lp to use them)\n");
    }
    // Times and energies keep 4 significant digits (a µs-scale profile printed "T = 0.0004 s").
    fmt::print("Perseus frontier: {} plan{} from T = {} s down to T_min = {} s ({} graph-cut step{}, {:.3f} s)\n",
               s.num_plans, s.num_plans == 1 ? "" : "s", seconds_text(s.t_max_s), seconds_text(s.t_min_s), s.num_steps,
               s.num_steps == 1 ? "" : "s", s.solve_time_s);
    fmt::print("  all-max baseline:  T = {} s, E = {} J\n", seconds_text(s.allmax_time_s), joules_text(s.allmax_energy_j));
    fmt::print("  Perseus at T_min:  T = {} s, E = {} J  -> intrinsic bloat removed: {:.2f}% energy\n",
               seconds_text(s.t_min_s), joules_text(s.energy_at_t_min_j), s.intrinsic_saving_pct);
    // T_min < all-max time happens when a lower clock is faster than the max one (noise): say so.
    if (s.t_min_s < s.allmax_time_s * (1 - 1e-9)) {
      const auto faster = faster_below_max_clock(profile);
      // One entry per (stage, instruction), not per computation (it said "4 computation(s)" where
      // all 16 were, session 31's trial).
      fmt::print("  T_min is {:.2f}% below the all-max time: the computations of {} (stage, instruction) pair(s) run "
                 "faster at a lower clock{}; at the all-max time Perseus removes {:.2f}%\n",
                 100 * (1 - s.t_min_s / s.allmax_time_s), faster.size(),
                 faster.empty() ? "" : " (" + faster.front() + ")", s.saving_at_allmax_time_pct);
    }
    if (s.lower_bound_at_t_min_j > 0) {
      // Certified planner: what no plan can beat, and how close the frontier gets to it.
      fmt::print("  lower bound:       E >= {} J at T_min (no plan removes more than {:.2f}%); largest gap to the "
                 "bound over the frontier: {:.2f}%\n",
                 joules_text(s.lower_bound_at_t_min_j), 100 * (s.allmax_energy_j - s.lower_bound_at_t_min_j) / s.allmax_energy_j,
                 s.max_optimality_gap_pct);
    }
    fmt::print("  slowest plan:      T = {} s, E = {} J  (for a straggler's deadline T: E includes waiting at "
               "P_block until T)\n", seconds_text(s.t_max_s), joules_text(s.energy_at_t_max_j));
    if (s.partial) fmt::print("  PARTIAL frontier ({}): {}\n", s.partial_reason, s.partial_detail);
    fmt::print("wrote {} ({} plan{}, summary.json, frontier.csv)\n", terminal_safe(cfg->out_dir), s.plans_written,
               cfg->zeus_format ? "s, each as JSON and as a Zeus .py file" : s.plans_written == 1 ? " file" : " files");
    if (cfg->sample == 0 && s.plan_files_bytes > kDefaultPlanFilesBytes) {
      // The two plans always written (the slowest and T_min's) exceed the default byte cap: say
      // so (1M computations wrote 771 MB of plans after "--sample: about 128 MiB", session 31's trial).
      fmt::print("  (the plan files take about {} MiB, more than the default {} MiB: on this pipeline each plan's "
                 "files take about {} MiB, and the slowest plan and T_min's are always written)\n",
                 s.plan_files_bytes >> 20, kDefaultPlanFilesBytes >> 20,
                 (s.plan_files_bytes / std::max<std::size_t>(1, s.plans_written)) >> 20);
    } else if (s.plan_files_capped) {
      fmt::print("  (fewer plan files than 100 on this large pipeline: about {} MiB of them at most by default; "
                 "--sample K writes every K-th of the {} plans)\n",
                 kDefaultPlanFilesBytes >> 20, s.num_plans);
    }
    if (*report) fmt::print("wrote {}\n", terminal_safe((std::filesystem::path(cfg->out_dir) / "report.html").string()));
  });
}

}  // namespace perseus::cli
