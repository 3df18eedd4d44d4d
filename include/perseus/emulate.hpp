// Extrinsic energy bloat: data-parallel pipelines with one straggler (Perseus SOSP'24 §3.2, §6.3).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/baselines.hpp"
#include "perseus/frontier.hpp"
#include "perseus/profile.hpp"

namespace perseus {

/// Methods compared by the emulation, in output order.
inline constexpr const char* kEmulationMethods[] = {"perseus", "envpipe", "zeus_global", "zeus_per_stage", "all_max"};

/// One candidate plan of a method, reduced to what the emulation needs (one pipeline,
/// unscaled profile units): iteration time T (s) and energy E = computation + P_block × idle
/// (J, one GPU per rank).
using PlanPoint = TimeEnergy;

/// A method's plans as the emulation sees them.
/// The no-straggler plan is `points[intrinsic]`. With a straggler, the non-straggler
/// pipelines run `points[choose(deadline)]` when `adapts`, else the no-straggler plan.
struct MethodPlans {
  std::string method;               ///< One of kEmulationMethods.
  std::vector<PlanPoint> points;    ///< Candidate plans (>= 1).
  std::size_t intrinsic = 0;        ///< Index of the plan run without straggler.
  bool adapts = false;              ///< Picks a slower plan when a straggler gives it time.
  bool use_frontier_rule = false;   ///< perseus: choose by Frontier::lowest_energy_within() on `frontier`.
  const Frontier* frontier = nullptr;  ///< Required when use_frontier_rule.
};

/// Cluster shape and scaling of the emulation.
/// Scaling follows the Perseus artifact notebook (docs/baselines.md, "Straggler emulation"): the profile
/// covers 1/time_scale of a stage's layers on one of tp_degree tensor-parallel GPUs, so
/// times scale by time_scale, computation energy by time_scale × tp_degree, and blocking
/// power by tp_degree. Savings in % do not depend on either.
struct ClusterShape {
  int num_pipelines = 2;     ///< Data-parallel pipelines (>= 2), one of them the straggler.
  int num_ranks = 1;         ///< GPUs (stages) per pipeline, before TP.
  int tp_degree = 1;         ///< Tensor-parallel degree K (>= 1).
  double time_scale = 1;     ///< Time scale X, a dimensionless factor in (0, 1e6].
  double p_block_w = 0;      ///< P2P blocking power of one GPU, W.
  double t_min_s = 0;        ///< T_min of one pipeline (Perseus' fastest plan), unscaled s (> 0).
};

/// One method under one slowdown (all energies in scaled joules, times in scaled seconds).
struct EmulationRow {
  std::string method;                ///< One of kEmulationMethods.
  double slowdown = 1;               ///< s: the straggler pipeline is s times slower.
  double straggler_time_s = 0;       ///< T' = s × T_min (scaled), the same for every method.
  double iteration_time_s = 0;       ///< Cluster iteration time, max(T', chosen_time_s).
  double chosen_time_s = 0;          ///< T of the plan the non-straggler pipelines run.
  double pipeline_energy_j = 0;      ///< One non-straggler pipeline, blocking until iteration_time_s.
  double straggler_energy_j = 0;     ///< The straggler pipeline: s × its no-straggler energy (+ blocking if others are slower).
  double cluster_energy_j = 0;       ///< (P−1) × pipeline_energy_j + straggler_energy_j.
  double pipeline_saving_pct = 0;    ///< Non-straggler pipeline vs all-max's, %.
  double intrinsic_saving_pct = 0;   ///< No-straggler plan vs all-max's, one pipeline each at its own T, %.
  double extrinsic_saving_pct = 0;   ///< Cluster vs the same method without adapting to the straggler, %.
  double total_saving_pct = 0;       ///< Cluster vs all-max with the same straggler, %.
};

/// Runs the straggler emulation for every method and slowdown.
/// Model (docs/baselines.md): for slowdown s, the straggler pipeline finishes at
/// T' = s·T_min; its energy is s·E0, E0 the energy of the method's no-straggler plan (the
/// artifact notebook's convention). The other P−1 pipelines run, for adapting methods, the
/// plan with T <= T' that draws the least energy until T' (Perseus: Frontier::lowest_energy_within(T')), else the
/// no-straggler plan, then block at P_block until the cluster iteration time
/// max(T', T_chosen) (the straggler blocks too if it is not the last). Rows are ordered by
/// slowdown, then method.
/// `methods` must contain "all_max" (the reference of the savings).
/// Throws InputError when a slowdown is < 1 or not finite, shape values are out of range,
/// or all_max is missing.
std::vector<EmulationRow> emulate_stragglers(const std::vector<MethodPlans>& methods, const ClusterShape& shape,
                                             const std::vector<double>& slowdowns);

/// Inputs of `perseus emulate`.
struct EmulationConfig {
  std::string profile_path;        ///< Profile CSV (load_profile_csv()); with `profile` set, only its name in outputs.
  std::optional<Profile> profile;  ///< The profile itself (e.g. from Python), instead of reading profile_path.
  int num_ranks = 0;               ///< GPUs per pipeline (1F1B, one stage per GPU).
  int microbatches = 0;            ///< Microbatches per iteration M (>= 1, else InputError).
  int pipelines = 0;               ///< Data-parallel pipelines P (>= 2); 0: derive from global_batch.
  int global_batch = 0;            ///< Microbatches per global batch B; P = B / M (must divide).
  double p_block_w = 0;            ///< P_block of one GPU, W (>= 0).
  int tp_degree = 1;               ///< Tensor-parallel degree K (1..1e6, else InputError).
  double time_scale = 1;           ///< Time scale X, a dimensionless factor in (0, 1e6] (ClusterShape).
  double unit_time_s = 1e-3;       ///< Planner (and EnvPipe) time quantum u, s (1e-7..10, else InputError).
  /// Perseus planner algorithm; kGraphCut reproduces the artifact notebook's frontier.
  PlannerMode planner_mode = PlannerMode::kCertified;
  std::vector<double> slowdowns;   ///< Slowdown factors s in [1, 100], distinct (at least one; else InputError).
  /// Polled during the frontier solve (PlannerOptions::cancelled); true ends run_emulation()
  /// with PlanningCancelled. Empty: never cancelled.
  std::function<bool()> cancelled;
};

/// What run_emulation() computed.
struct EmulationResult {
  int num_pipelines = 0;           ///< Data-parallel pipelines P (emulation_pipelines()).
  double t_min_s = 0;              ///< Perseus T_min, scaled s.
  std::size_t frontier_size = 0;   ///< Perseus frontier points.
  double solve_time_s = 0;         ///< Frontier solve wall time, s.
  EnvPipeResult envpipe;           ///< EnvPipe's run (unscaled plan); status/message for warnings.
  std::vector<EmulationRow> rows;  ///< emulate_stragglers()'s rows: by slowdown (ascending, whatever
                                   ///< the order of EmulationConfig::slowdowns), then method.
  /// What the numbers must be read with, one sentence each: the profile's implausible units
  /// (profile_unit_warnings(), as `perseus optimize` warns), then EnvPipe's message when it did
  /// not converge. Written to emulation.json ("warnings") and emulation.html.
  std::vector<std::string> warnings;
};

/// The number of data-parallel pipelines P of `config`: `pipelines`, or global_batch /
/// microbatches when global_batch is set (both set: they must agree). At least 2: one is the
/// straggler, the others adapt to it (one pipeline has nothing to adapt; that is
/// `perseus optimize`). Throws InputError with field "pipelines", "global_batch" or
/// "microbatches" otherwise.
int emulation_pipelines(const EmulationConfig& config);

/// Assembles the problem (load_problem(), 1F1B with one stage per GPU), solves the Perseus frontier once (solve_frontier), builds the
/// baselines once (all-max, EnvPipe, ZeusGlobal and ZeusPerStage candidates) and runs
/// emulate_stragglers(). Throws InputError on bad inputs (emulation_pipelines(), slowdowns,
/// missing max-frequency rows, a zero-bubble profile without backward rows: emulate plans
/// 1F1B only, ...) and when EnvPipe hits its iteration cap (field "unit_time_s": a coarser unit time is the fix).
EmulationResult run_emulation(const EmulationConfig& config);

/// Header line of emulation.csv (without the newline): the method's name, the straggler's
/// slowdown factor, the chosen plan's iteration time (s), the cluster's energy (J) and the
/// intrinsic, extrinsic and total savings (%). `perseus report` refuses another header.
inline constexpr std::string_view kEmulationCsvHeader =
    "method,slowdown,chosen_time_s,cluster_energy_j,intrinsic_saving_pct,extrinsic_saving_pct,total_saving_pct";

/// The emulation CSV (one writer): kEmulationCsvHeader and one line per row.
std::string emulation_csv_text(const std::vector<EmulationRow>& rows);

/// The digest emulation.json records of its emulation.csv text: "fnv1a64:" and 16 hex digits
/// (FNV-1a, 64 bit). Not a security measure: it ties the two files of one run together, so
/// `perseus report` refuses a CSV copied in from another run (session 21).
std::string emulation_csv_digest(std::string_view csv_text);

/// The emulation's shape and scaling as JSON text (what a reader of emulation.csv needs to
/// interpret its scaled numbers): {"pipelines", "stages", "microbatches", "tp", "time_scale",
/// "p2p_power_w", "unit_time_s", "t_min_s" (Perseus T_min, scaled s), "t_min_unscaled_s",
/// "profile", "csv_digest" (emulation_csv_digest() of the emulation.csv written with it)}.
std::string emulation_json_text(const EmulationResult& result, const EmulationConfig& config);

/// Checks, before the (long) emulation runs, that write_emulation_outputs() may write
/// `out_dir`: check_output_folder_writable(), then that the folder holds nothing but
/// emulate's files (is_emulation_output()), or, in an optimize output folder (it has
/// summary.json), nothing but optimize's and emulate's files, and (when `same_pipeline` is
/// given) that optimize planned the pipeline emulated: summary.json's inputs are 1f1b with
/// the config's stages, microbatches, P_block and unit, and its profile.csv holds the config's
/// profile (`perseus report` shows the two as one run). Throws InputError (field "out_dir")
/// naming the path and the reason (a user's file inside, not a folder, no permission, another
/// pipeline's run). Changes nothing.
void check_emulation_folder(const std::string& out_dir, const EmulationConfig* same_pipeline = nullptr);

/// Writes the emulation's files: `emulation.json` (emulation_json_text()), `emulation.csv`
/// (emulation_csv_text()) and, when `report_html` is given, `emulation.html` (the page of
/// emulation_report_html()). A new or emulate-only `out_dir` is replaced atomically
/// (OutputFolder): no file of an earlier run survives (e.g. the emulation.html of a run with
/// --report). In an optimize output folder (it has summary.json; `perseus report` then shows
/// the emulation table) optimize's files stay, emulate's are written each atomically and an
/// earlier emulation.html is removed when `report_html` is not given; an optimize folder of
/// another pipeline is refused (check_emulation_folder()). Any other file inside
/// `out_dir` makes it throw InputError (field "out_dir") without touching anything, like
/// `perseus optimize`; also when the files cannot be written.
void write_emulation_outputs(const EmulationResult& result, const EmulationConfig& config, const std::string& out_dir,
                             const std::optional<std::string>& report_html = std::nullopt);

/// Writes `<out_dir>/emulation.csv` with the header
/// method,slowdown,chosen_time_s,cluster_energy_j,intrinsic_saving_pct,extrinsic_saving_pct,total_saving_pct
/// through a temporary file renamed into place (the folder is created if needed).
/// Throws InputError when it cannot be written.
void write_emulation_csv(const std::vector<EmulationRow>& rows, const std::string& out_dir);

}  // namespace perseus
