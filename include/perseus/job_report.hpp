// A job's straggler decisions as pictures: the export of `GET /v1/jobs/{id}` (docs/http-api.md)
// read back, validated, and drawn as a timeline (SVG) inside a self-contained HTML page.
// Drawing code only: it never talks to a server and never plans.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "perseus/render.hpp"

namespace perseus {

/// One pipeline's verdict in a verification decision (docs/stragglers.md, "Verification").
struct JobVerdict {
  int pipeline = 0;
  std::string verdict;             ///< verified, verified_frontier_limit, retargeted or reverted.
  double predicted_time_s = 0;     ///< Iteration time of the plan it runs, s.
  double measured_time_s = 0;      ///< Median measured iteration time on that plan, s.
  double straggler_time_s = 0;     ///< The straggler's measured iteration time, s.
  double predicted_saving_j = 0;   ///< Predicted saving of this pipeline, J per iteration.
  std::optional<double> measured_saving_j;  ///< Measured saving of this pipeline, J per iteration (null: unknown energy).
};

/// One straggler decision of a job, as the server recorded it.
struct JobDecision {
  std::int64_t id = 0;
  double time_s = 0;               ///< Seconds since the job was created (decision time_s − created_s).
  std::string action;              ///< straggler_set, straggler_cleared, replanned or verification.
  std::string origin;              ///< declared, detected or verification.
  std::optional<int> pipeline;     ///< The pipeline set or cleared (none for replanned/verification).
  std::optional<double> target_time_s;  ///< T' the others were planned for, s (none: no straggler left).
  std::optional<double> slowdown;  ///< Slowdown factor of a straggler_set.
  std::vector<int> stragglers;     ///< Stragglers in force after the decision.
  /// Frontier plan index of every pipeline after the decision (size = pipelines), or empty for a
  /// verification (plans unchanged).
  std::vector<int> pipeline_plans;
  std::optional<std::int64_t> verifies;  ///< Verification: the decision id it checks.
  std::vector<JobVerdict> verdicts;      ///< Verification: one per checked pipeline.
  std::optional<double> predicted_saving_j;  ///< J per iteration, all pipelines.
  std::optional<double> measured_saving_j;   ///< J per iteration (verification only).
};

/// What the job report needs from an export of `GET /v1/jobs/{id}`.
struct JobExport {
  std::string job_id, name, status;
  int pipelines = 0;  ///< Data-parallel pipelines (spec.dp).
  /// spec.pp: the pipeline-parallel degree, i.e. pp ranks (GPUs before TP) per pipeline. It
  /// equals the number of stages only when spec.chunks is 1 (interleaved schedules run
  /// pp × chunks stages); the report labels it "stage(s)".
  int stages = 0;
  /// Frontier points (time_s, energy_j of one pipeline) by plan index; label = "plan N".
  std::vector<PlotPoint> frontier;
  int fastest_index = -1;              ///< Plan index of T_min.
  std::vector<int> current_plans;      ///< Plan index per listed pipeline at export time (a page since session 32).
  std::vector<JobDecision> decisions;  ///< Oldest first, as exported.
  std::int64_t decisions_total = 0;    ///< Decisions ever taken (older ones may have been dropped).
  double last_activity_s = 0;          ///< Seconds since creation of the last rank activity (0: unknown).
};

/// Reads and validates an export of `GET /v1/jobs/{id}` (the JSON body, saved to a file).
/// Needs job_id, created_s, spec.dp, spec.pp, frontier.points (one [time_s, energy_j] per plan
/// index; exported up to 20,000 plans), frontier.fastest_index, pipelines[].plan_index and
/// decisions[]; every plan index must name a frontier point and every pipeline be in [0, dp).
/// Limits: file ≤ 256 MiB, dp ≤ 65,536. Throws InputError naming the file and the field
/// (e.g. "job.json: field 'decisions[3].time_s': expected a finite number, got \"x\"").
JobExport load_job_export(const std::string& path);

/// Layout of render_decisions_svg() (SVG px).
struct DecisionsPlotOptions {
  std::string title;
  double width_px = 1100;
  double row_height_px = 30;  ///< One pipeline's row.
};

/// Timeline of the job's straggler decisions as a standalone SVG document: x = seconds since
/// the job was created, one row per pipeline. Each row is a band coloured by the iteration
/// time of the frontier plan the pipeline runs (viridis; before the first decision every
/// pipeline runs the T_min plan), hatched red while it is a straggler; markers at each
/// decision: ▲ straggler set (filled: detected, hollow: declared), ▼ cleared, ◆ re-planned,
/// ● verification verdict (green verified, grey frontier limit, orange re-targeted, red
/// reverted). Every band and marker has a <title> tooltip. If older decisions were dropped,
/// the initial plans are unknown and the note says so.
std::string render_decisions_svg(const JobExport& job, const DecisionsPlotOptions& options = {});

/// Writes a self-contained HTML5 page (inline SVG and CSS, no scripts) for a job export:
/// job summary, the decisions timeline, the frontier with the plans each pipeline ran, and a
/// table of every decision with predicted vs measured saving. Written atomically to out_path
/// (empty: the export's path with extension .html). An existing out_path is replaced only when
/// it is a page this function wrote (an earlier run's); the export itself, a folder or any
/// other file is refused. Returns the page's path. Throws InputError for a bad export (see
/// load_job_export), an out_path it must not replace, or when the page cannot be written.
std::string write_job_report(const std::string& job_export_path, const std::string& out_path = "");

}  // namespace perseus
