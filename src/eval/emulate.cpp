// Straggler emulation: Perseus and the baselines over data-parallel pipelines with one straggler.
#include "perseus/emulate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/error.hpp"
#include "perseus/json_input.hpp"
#include "../formats/csv_fields.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/problem.hpp"
#include "perseus/profile.hpp"

namespace perseus {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOnePipelineWhy =
    "one pipeline is the straggler and the others adapt to it; for one pipeline use perseus optimize";

// emulate plans 1F1B (forward + backward per stage): a zero-bubble profile (backward split into
// I and W, no backward rows) gets a message that says so instead of "no rows for backward".
void require_1f1b_kinds(const Profile& profile) {
  for (int s = 0; s < profile.num_stages(); ++s) {
    if (!profile.has(s, InstructionKind::kBackward) && (profile.has(s, InstructionKind::kBackwardInput) ||
                                                        profile.has(s, InstructionKind::kBackwardWeight))) {
      throw InputError(fmt::format(
          "profile {}: stage {} has backward_input/backward_weight rows but no backward rows; perseus emulate "
          "plans the 1F1B schedule only (forward and backward per stage). Add backward rows (the measured full "
          "backward at each clock), or plan the zero-bubble schedule with `perseus optimize --schedule zb-h1`",
          profile.source, s));
    }
  }
}

double pct_saving(double reference, double value) { return reference > 0 ? 100.0 * (reference - value) / reference : 0.0; }

void check_shape(const ClusterShape& shape) {
  if (shape.num_pipelines < 2) {
    throw InputError("pipelines", fmt::format("must be >= 2, got {} ({})", shape.num_pipelines, kOnePipelineWhy));
  }
  if (shape.num_ranks < 1) throw InputError("num_ranks", fmt::format("must be >= 1, got {}", shape.num_ranks));
  if (shape.tp_degree < 1) throw InputError("tp_degree", fmt::format("must be >= 1, got {}", shape.tp_degree));
  if (!(shape.time_scale > 0 && shape.time_scale <= 1e6)) {
    throw InputError("time_scale", fmt::format("must be in (0, 1e6], got {}", shape.time_scale));
  }
  if (shape.tp_degree > 1'000'000 || shape.num_pipelines > 100'000'000) {
    throw InputError("tp_degree", fmt::format("({}) or {} ({}) is unrealistically large", shape.tp_degree,
                                              field_ref("pipelines"), shape.num_pipelines));
  }
  if (!(shape.p_block_w >= 0 && shape.p_block_w <= kMaxBlockingPowerW)) {
    throw InputError("p_block_w", fmt::format("must be a finite number in [0, {:g}] W, got {}", kMaxBlockingPowerW,
                                              shape.p_block_w));
  }
  if (!(shape.t_min_s > 0) || !std::isfinite(shape.t_min_s)) {
    throw InputError(fmt::format("emulation: T_min must be a finite time > 0 s, got {}", shape.t_min_s));
  }
}

void check_slowdowns(const std::vector<double>& slowdowns) {
  if (slowdowns.empty()) throw InputError("slowdowns", ": give at least one slowdown factor (e.g. 1.1,1.2)");
  for (std::size_t i = 0; i < slowdowns.size(); ++i) {
    const double s = slowdowns[i];
    if (!(s >= 1.0 && s <= 100.0)) {
      throw InputError("slowdowns",
                       fmt::format(": every slowdown factor must be in [1, 100] (1 = no straggler), got {}", s));
    }
    if (std::find(slowdowns.begin(), slowdowns.begin() + static_cast<std::ptrdiff_t>(i), s) !=
        slowdowns.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw InputError("slowdowns", fmt::format(": {} is given twice (each factor is one row per method)", s));
    }
  }
}

}  // namespace

std::vector<EmulationRow> emulate_stragglers(const std::vector<MethodPlans>& methods, const ClusterShape& shape,
                                             const std::vector<double>& slowdowns) {
  check_shape(shape);
  check_slowdowns(slowdowns);
  const auto am = std::find_if(methods.begin(), methods.end(), [](const MethodPlans& m) { return m.method == "all_max"; });
  if (am == methods.end()) throw InputError("emulation: the all_max baseline is required (savings are relative to it)");
  for (const MethodPlans& m : methods) {
    if (m.points.empty() || m.intrinsic >= m.points.size()) {
      throw InputError(fmt::format("emulation: method {} has no plan", m.method));
    }
    if (m.use_frontier_rule && (m.frontier == nullptr || m.frontier->size() != m.points.size())) {
      throw InputError(fmt::format("emulation: method {} needs its frontier", m.method));
    }
  }
  const double x = shape.time_scale;
  const double k = shape.tp_degree;
  const int ranks = shape.num_ranks;
  const double p_pipe_w = shape.p_block_w * k * ranks;  // blocking power of one whole pipeline
  const double others = shape.num_pipelines - 1;
  // Scaled energy of one pipeline running `p` and then blocking until iteration time t_iter (scaled s).
  auto scaled = [&](const PlanPoint& p, double t_iter) { return x * k * p.energy_j + p_pipe_w * (t_iter - x * p.time_s); };

  struct Outcome {
    EmulationRow row;
    double reference_cluster_j = 0;  // the same method without adapting
  };
  auto run = [&](const MethodPlans& m, double s) {
    Outcome o;
    EmulationRow& r = o.row;
    r.method = m.method;
    r.slowdown = s;
    const PlanPoint& p0 = m.points[m.intrinsic];
    const double deadline = s * shape.t_min_s;  // unscaled
    std::size_t chosen = m.intrinsic;
    if (m.adapts) {
      chosen = m.use_frontier_rule ? m.frontier->lowest_energy_within(deadline)
                                   : lowest_energy_within(m.points, shape.p_block_w * ranks, deadline);
    }
    const PlanPoint& pc = m.points[chosen];
    r.straggler_time_s = x * deadline;
    r.chosen_time_s = x * pc.time_s;
    r.iteration_time_s = std::max(r.straggler_time_s, r.chosen_time_s);
    r.pipeline_energy_j = scaled(pc, r.iteration_time_s);
    r.straggler_energy_j = s * x * k * p0.energy_j + p_pipe_w * (r.iteration_time_s - r.straggler_time_s);
    r.cluster_energy_j = others * r.pipeline_energy_j + r.straggler_energy_j;
    const double t_ref = std::max(r.straggler_time_s, x * p0.time_s);
    o.reference_cluster_j = others * scaled(p0, t_ref) + s * x * k * p0.energy_j + p_pipe_w * (t_ref - r.straggler_time_s);
    r.extrinsic_saving_pct = pct_saving(o.reference_cluster_j, r.cluster_energy_j);
    return o;
  };

  std::vector<EmulationRow> rows;
  for (double s : slowdowns) {
    const Outcome base = run(*am, s);
    const double base_e0 = am->points[am->intrinsic].energy_j;
    for (const MethodPlans& m : methods) {
      Outcome o = run(m, s);
      EmulationRow& r = o.row;
      r.intrinsic_saving_pct = pct_saving(base_e0, m.points[m.intrinsic].energy_j);
      r.pipeline_saving_pct = pct_saving(base.row.pipeline_energy_j, r.pipeline_energy_j);
      r.total_saving_pct = pct_saving(base.row.cluster_energy_j, r.cluster_energy_j);
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

int emulation_pipelines(const EmulationConfig& cfg) {
  if (cfg.microbatches < 1) throw InputError("microbatches", fmt::format("must be >= 1, got {}", cfg.microbatches));
  if (cfg.pipelines < 0) throw InputError("pipelines", fmt::format("must be >= 2, got {}", cfg.pipelines));
  if (cfg.global_batch < 0) throw InputError("global_batch", fmt::format("must be >= 1, got {}", cfg.global_batch));
  int pipelines = cfg.pipelines;
  if (cfg.global_batch > 0) {
    if (cfg.global_batch % cfg.microbatches != 0) {
      throw InputError("global_batch", fmt::format(
          "{} is not a multiple of {} {}: every pipeline runs the same number of "
          "microbatches, so the number of pipelines B / M must be whole",
          cfg.global_batch, field_ref("microbatches"), cfg.microbatches));
    }
    const int derived = cfg.global_batch / cfg.microbatches;
    if (pipelines > 0 && pipelines != derived) {
      throw InputError("pipelines", fmt::format("{} contradicts {} {} / {} {} = {}", pipelines, field_ref("global_batch"),
                                                cfg.global_batch, field_ref("microbatches"), cfg.microbatches, derived));
    }
    pipelines = derived;
  }
  if (pipelines < 1) throw InputError("pipelines", "must be >= 2 (or give " + field_ref("global_batch") + ", a multiple of " +
                                         field_ref("microbatches") + ")");
  if (pipelines < 2) {
    throw InputError("pipelines", fmt::format("must be >= 2, got {}{} ({})", pipelines,
                                              cfg.global_batch > 0 ? fmt::format(" = {} {} / {} {}",
                                                                                 field_ref("global_batch"), cfg.global_batch,
                                                                                 field_ref("microbatches"), cfg.microbatches)
                                                                   : "",
                                              kOnePipelineWhy));
  }
  return pipelines;
}

EmulationResult run_emulation(const EmulationConfig& cfg) {
  if (cfg.num_ranks < 1) throw InputError("num_ranks", fmt::format("must be >= 1, got {}", cfg.num_ranks));
  const int pipelines = emulation_pipelines(cfg);
  // The planner's range (PlannerOptions::unit_time_s), named here: its own error has no field.
  if (!(cfg.unit_time_s >= kMinUnitTimeS && cfg.unit_time_s <= kMaxUnitTimeS)) {
    throw InputError("unit_time_s", fmt::format("must be in [1e-7, 10] s, got {}", cfg.unit_time_s));
  }
  ClusterShape shape{pipelines, cfg.num_ranks, cfg.tp_degree, cfg.time_scale, cfg.p_block_w, 1.0};
  check_shape(shape);
  check_slowdowns(cfg.slowdowns);

  ProblemSpec spec;  // 1F1B, one stage per GPU
  spec.num_ranks = cfg.num_ranks;
  spec.microbatches = cfg.microbatches;
  spec.p_block_w = cfg.p_block_w;
  Profile loaded = cfg.profile ? *cfg.profile : load_profile_csv(cfg.profile_path);
  require_1f1b_kinds(loaded);
  const Problem problem = make_problem(spec, std::move(loaded));
  const Dag& dag = problem.dag;
  EmulationResult result;
  result.warnings = problem.unit_warnings;
  const Profile& profile = problem.profile;
  require_max_frequency(dag, profile);

  PlannerOptions popt;
  popt.p_block_w = cfg.p_block_w;
  popt.unit_time_s = cfg.unit_time_s;
  popt.mode = cfg.planner_mode;
  popt.cancelled = cfg.cancelled;
  const Frontier frontier = solve_frontier(dag, profile, popt);
  const FrequencyPlan all_max = all_max_plan(dag, profile, cfg.p_block_w);
  result.envpipe = envpipe_plan(dag, profile, cfg.p_block_w, EnvPipeOptions{cfg.unit_time_s, 10000});
  const std::vector<FrequencyPlan> zg = zeus_global_candidates(dag, profile, cfg.p_block_w);
  const std::vector<FrequencyPlan> zs = zeus_per_stage_candidates(dag, profile, cfg.p_block_w);

  auto to_point = [](const FrequencyPlan& p) { return PlanPoint{p.timeline.time_s, p.total_energy_j()}; };
  const double t_min = frontier.points().back().time_s;
  std::vector<MethodPlans> methods(5);
  methods[0].method = "perseus";
  for (const FrontierPoint& fp : frontier.points()) methods[0].points.push_back({fp.time_s, fp.energy_j});
  methods[0].intrinsic = frontier.size() - 1;
  methods[0].adapts = true;
  methods[0].use_frontier_rule = true;
  methods[0].frontier = &frontier;
  methods[1].method = "envpipe";
  methods[1].points = {to_point(result.envpipe.plan)};
  auto zeus = [&](MethodPlans& m, const char* name, const std::vector<FrequencyPlan>& cands) {
    m.method = name;
    for (const auto& p : cands) m.points.push_back(to_point(p));
    m.intrinsic = lowest_energy_within(cands, dag.num_ranks(), cfg.p_block_w, t_min);
    m.adapts = true;
  };
  zeus(methods[2], "zeus_global", zg);
  zeus(methods[3], "zeus_per_stage", zs);
  methods[4].method = "all_max";
  methods[4].points = {to_point(all_max)};

  result.num_pipelines = pipelines;
  result.t_min_s = cfg.time_scale * t_min;
  result.frontier_size = frontier.size();
  result.solve_time_s = frontier.solve_time_s;
  shape.t_min_s = t_min;
  if (result.envpipe.status != EnvPipeStatus::kConverged) result.warnings.push_back(result.envpipe.message);
  std::vector<double> ascending = cfg.slowdowns;  // rows, CSV and plot lines by slowdown
  std::sort(ascending.begin(), ascending.end());
  result.rows = emulate_stragglers(methods, shape, ascending);
  return result;
}

std::string emulation_csv_text(const std::vector<EmulationRow>& rows) {
  std::string csv = std::string(kEmulationCsvHeader) + "\n";
  for (const EmulationRow& r : rows) {
    // Times and energies with 9 significant digits: a --time-scale of 1e-9 must not print 0.000000.
    csv += fmt::format("{},{},{:.9g},{:.9g},{:.4f},{:.4f},{:.4f}\n", r.method, r.slowdown, r.chosen_time_s,
                       r.cluster_energy_j, r.intrinsic_saving_pct, r.extrinsic_saving_pct, r.total_saving_pct);
  }
  return csv;
}

namespace {

fs::path emulation_folder(const std::string& out_dir) {
  if (out_dir.empty()) throw InputError("out_dir", "is required: give an output folder");
  std::error_code ec;
  const fs::path dir = fs::absolute(out_dir).lexically_normal();
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw InputError("out_dir", fmt::format("{}: cannot create the output folder{}", out_dir, ec ? ": " + ec.message() : ""));
  }
  return dir;
}

}  // namespace

void write_emulation_csv(const std::vector<EmulationRow>& rows, const std::string& out_dir) {
  write_file_atomically(emulation_folder(out_dir) / "emulation.csv", emulation_csv_text(rows));
}

std::string emulation_csv_digest(std::string_view csv_text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : csv_text) h = (h ^ c) * 1099511628211ull;
  return fmt::format("fnv1a64:{:016x}", h);
}

std::string emulation_json_text(const EmulationResult& res, const EmulationConfig& cfg) {
  const nlohmann::ordered_json j = {
      {"csv_digest", emulation_csv_digest(emulation_csv_text(res.rows))},
      {"pipelines", res.num_pipelines},   {"stages", cfg.num_ranks},
      {"microbatches", cfg.microbatches}, {"tp", cfg.tp_degree},
      {"time_scale", cfg.time_scale},     {"p2p_power_w", cfg.p_block_w},
      {"unit_time_s", cfg.unit_time_s},   {"t_min_s", res.t_min_s},
      {"t_min_unscaled_s", res.t_min_s / cfg.time_scale}, {"profile", cfg.profile_path},
      {"warnings", res.warnings},
  };
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";  // paths need not be UTF-8
}

namespace {

/// `perseus optimize`'s output folder (it has summary.json): emulate may add its files there,
/// next to the frontier, for `perseus report` to show.
bool is_optimize_folder(const std::string& out_dir) {
  std::error_code ec;
  return !out_dir.empty() && fs::is_regular_file(fs::path(out_dir) / "summary.json", ec);
}

bool is_optimize_or_emulation_output(const fs::path& relative, bool is_directory) {
  return is_optimize_output(relative, is_directory) || is_emulation_output(relative, is_directory);
}

/// In an optimize folder, `perseus report` shows the emulation beside optimize's frontier as
/// one run: the emulated pipeline must be optimize's (summary.json "inputs": 1f1b, stages,
/// microbatches, P_block, unit; the same profile as its profile.csv).
void check_same_pipeline(const std::string& out_dir, const EmulationConfig& cfg) {
  const fs::path dir(out_dir);
  const std::string summary_path = (dir / "summary.json").string();
  nlohmann::json summary, in;
  try {
    summary = parse_json_text(csv::read_file(summary_path, "summary.json"), summary_path);
    in = summary.at("inputs");
  } catch (const std::exception&) {  // unreadable, not JSON (JsonTextError), no "inputs" (json::exception)
    throw InputError("out_dir", fmt::format("{}: has no readable \"inputs\" (not a perseus optimize summary); cannot "
                                            "tell whether it is the pipeline emulated here: choose another output folder",
                                            summary_path));
  }
  // Compared with the emulation's values as JSON text (non-ASCII escaped: it is quoted in the
  // message); an array, object or long string (never equal to them) as describe_json_value().
  auto field = [&](const char* key) {
    if (!in.contains(key)) return std::string("(missing)");
    if (in[key].is_structured()) return describe_json_value(in[key]);
    std::string text = in[key].dump(-1, ' ', /*ensure_ascii=*/true);
    return text.size() <= kMaxQuotedBytes ? text : describe_json_value(in[key]);
  };
  const std::string theirs = fmt::format("schedule {}, chunks {}, {} stages x {} microbatches, P_block {} W, unit {} s",
                                         field("schedule"), field("chunks"), field("stages"), field("microbatches"),
                                         field("p2p_power_w"), field("unit_time_s"));
  const std::string ours = fmt::format("schedule \"1f1b\", chunks 1, {} stages x {} microbatches, P_block {} W, unit {} s",
                                       cfg.num_ranks, cfg.microbatches, nlohmann::json(cfg.p_block_w).dump(),
                                       nlohmann::json(cfg.unit_time_s).dump());
  bool profile_differs = false;
  if (theirs == ours) {
    const std::string copy = (dir / "profile.csv").string();
    std::error_code ec;
    profile_differs = !fs::is_regular_file(copy, ec) ||
                      format_profile_csv(load_profile_csv(copy)) !=
                          format_profile_csv(cfg.profile ? *cfg.profile : load_profile_csv(cfg.profile_path));
  }
  // Timeline overheads are added to optimize's stored profile.csv, which then differs from
  // the profile given here: say so, or the two descriptions above read the same.
  std::string overheads;
  for (const auto& [key, flag] : {std::pair{"op_overhead_s", "--op-overhead"}, {"p2p_latency_s", "--p2p-latency"}}) {
    if (in.contains(key) && in[key].is_number() && in[key].get<double>() != 0)
      overheads += fmt::format("{}{} {} s", overheads.empty() ? "" : ", ", flag, describe_json_value(in[key]));
  }
  if (profile_differs && !overheads.empty()) {
    throw InputError("out_dir", fmt::format("{}: holds a perseus optimize run planned with {} (added to the profile "
                                            "it stored as profile.csv); emulate has no timeline overheads, so its "
                                            "pipeline would differ from the one `perseus report` shows there: choose "
                                            "another output folder",
                                            out_dir, overheads));
  }
  // The frontier too: emulate plans with its planner's defaults, so a frontier optimize planned
  // otherwise would be shown beside a different one (session 27's trial: a graph-cut folder's
  // Summary said 15.31 % where its Emulation table said 15.94 %).
  std::vector<std::string> planned;
  auto differs = [&](const char* key, const nlohmann::json& standard) {
    return in.contains(key) && in[key] != standard;
  };
  if (differs("planner", to_string(cfg.planner_mode))) planned.push_back("planner " + field("planner"));
  if (differs("bound", to_string(BoundMethod::kAuto))) planned.push_back("bound " + field("bound"));
  if (differs("reclaim_slack", true)) planned.push_back("--no-reclaim");
  if (differs("max_lp_solves", PlannerOptions{}.max_lp_solves))
    planned.push_back("max_lp_solves " + field("max_lp_solves"));
  if (differs("polish_s", 0)) planned.push_back("polish " + field("polish_s") + " s");
  if (summary.contains("partial") && summary["partial"] == true) {  // a hand-edited summary may hold anything
    const auto reason = summary.find("partial_reason");
    planned.push_back("a partial frontier" + (reason != summary.end() && reason->is_string()
                                                  ? " (" + quote_input(reason->get<std::string>(), 64) + ")"
                                                  : std::string()));
  }
  if (!planned.empty() && theirs == ours && !profile_differs) {
    throw InputError("out_dir", fmt::format("{}: holds a perseus optimize run of this pipeline planned with {}; emulate "
                                            "plans the whole frontier with the {} planner's defaults, and `perseus "
                                            "report` would show the two frontiers as one run: choose another output "
                                            "folder",
                                            out_dir, fmt::join(planned, ", "), to_string(cfg.planner_mode)));
  }
  if (theirs != ours || profile_differs) {
    throw InputError("out_dir",
                     fmt::format("{}: holds a perseus optimize run of another pipeline ({}{}); this emulation is {}{}. "
                                 "`perseus report` would show the two as one run: emulate into that folder only the "
                                 "pipeline it planned, or choose another output folder",
                                 out_dir, theirs, profile_differs ? ", its profile.csv" : "", ours,
                                 profile_differs ? fmt::format(", profile {}", quote_input(cfg.profile_path)) : ""));
  }
}

}  // namespace

void check_emulation_folder(const std::string& out_dir, const EmulationConfig* same_pipeline) {
  check_output_folder_writable(out_dir);
  const bool optimize_folder = is_optimize_folder(out_dir);
  check_folder_is_ours(out_dir, optimize_folder ? is_optimize_or_emulation_output : is_emulation_output);
  if (optimize_folder && same_pipeline != nullptr) check_same_pipeline(out_dir, *same_pipeline);
}

void write_emulation_outputs(const EmulationResult& res, const EmulationConfig& cfg, const std::string& out_dir,
                             const std::optional<std::string>& report_html) {
  const std::string json = emulation_json_text(res, cfg), csv = emulation_csv_text(res.rows);
  if (is_optimize_folder(out_dir)) {
    // An optimize folder keeps its files; emulate's are replaced one by one (each atomically),
    // and an emulation.html of an earlier run with --report goes first.
    check_folder_is_ours(out_dir, is_optimize_or_emulation_output);
    check_same_pipeline(out_dir, cfg);
    const fs::path dir(out_dir);
    std::error_code ec;
    if (!report_html && !fs::remove(dir / "emulation.html", ec) && ec) {
      throw InputError("out_dir", fmt::format("{}: cannot remove the earlier emulation.html: {}", out_dir, ec.message()));
    }
    write_file_atomically(dir / "emulation.json", json);
    write_file_atomically(dir / "emulation.csv", csv);
    if (report_html) write_file_atomically(dir / "emulation.html", *report_html);
    return;
  }
  OutputFolder folder(out_dir, is_emulation_output);  // refuses a folder with anything else inside
  write_file(folder.dir() / "emulation.json", json);
  write_file(folder.dir() / "emulation.csv", csv);
  if (report_html) write_file(folder.dir() / "emulation.html", *report_html);
  folder.commit();  // replaces an earlier run's folder whole: none of its files survive
}

}  // namespace perseus
