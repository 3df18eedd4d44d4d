// One planning problem (schedule, DAG, fitted profile, P_block), assembled from one spec.
// Every front end (CLI optimize/emulate/report/validate, the server's jobs, Python) builds
// its problem here, so they accept the same schedules and fit profiles the same way.
#pragma once

#include <string>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"
#include "perseus/timeline_overheads.hpp"

namespace perseus {

/// What defines a planning problem, in the library's vocabulary (InputError fields use
/// these member names; front ends phrase them as their flags, keywords or JSON fields).
struct ProblemSpec {
  /// Schedule name (schedule_names()) or the path of a schedule CSV (load_schedule_csv()).
  std::string schedule = "1f1b";
  int num_ranks = 0;       ///< GPUs (pipeline ranks) per pipeline; 0 = from a schedule file.
  int microbatches = 0;    ///< Microbatches per iteration; 0 = from a schedule file.
  int chunks = 1;          ///< Stages (model chunks) per GPU, interleaved schedules (>= 1).
  /// True when the user gave `chunks` (a flag, keyword or field): a schedule file must then
  /// have exactly that many stages per rank, 1 included. False: 1 for a schedule name, the
  /// file's own for a schedule file (a value > 1 is checked against the file either way).
  bool chunks_given = false;
  /// Share of a full backward's time/energy given to I when a split-backward schedule runs
  /// on a profile without backward_input/backward_weight rows (split_backward_profile()).
  /// In (0, 1): InputError otherwise, when the split is applied (unused otherwise).
  double backward_input_fraction = 0.5;
  double p_block_w = 0;    ///< P2P blocking power P_block of one GPU, W (finite, >= 0).
  /// Blocking P2P sends and per-computation overheads added to the computations' durations
  /// (add_timeline_overheads()); all 0 (the default) = the computation-only model.
  TimelineOverheads overheads;
};

/// A problem ready to plan: the schedule, its DAG and a profile with one stage per
/// schedule stage (fitted, see make_problem()).
struct Problem {
  Schedule schedule;
  Dag dag;
  Profile profile;
  double p_block_w = 0;  ///< W.
  /// Profile approximations applied by fit_profile_to_schedule() (chunk split, backward
  /// split), one sentence each, for the user to see.
  std::vector<std::string> approximations;
  /// profile_unit_warnings() of the profile as given (before fitting) with spec.p_block_w:
  /// implausible units, for the user to see (empty when plausible).
  std::vector<std::string> unit_warnings;
};

/// True when `schedule` is not a schedule name but an existing regular file (a schedule CSV)
/// or a stream keep_stream_input() kept (the CLI's `--schedule /dev/stdin`).
bool schedule_is_file(const std::string& schedule);

/// The schedule of `spec`: the named generator (num_ranks, microbatches >= 1 required), or
/// the CSV file (num_ranks and microbatches when > 0, chunks when > 1 or chunks_given, must
/// match the file: the message names the given value and the file's).
/// Throws InputError with field "schedule", "num_ranks", "microbatches" or "chunks".
Schedule resolve_schedule(const ProblemSpec& spec);

/// Builds the problem: resolve_schedule(), the DAG, and `profile` fitted to the schedule
/// (fit_profile_to_schedule(): a per-GPU profile of a chunked schedule is split over the
/// chunks, a split-backward schedule without I/W rows gets its backward split — both
/// listed in Problem::approximations), then spec.overheads added (add_timeline_overheads();
/// nothing changes when they are 0). Throws InputError on bad sizes, a bad P_block (field
/// "p_block_w"), bad overheads (field "p2p_latency_s"/"op_overhead_s") or a profile that fits
/// neither the stages nor the ranks.
Problem make_problem(const ProblemSpec& spec, Profile profile);

/// make_problem() for a schedule the caller resolved already (e.g. `perseus report`, which
/// looks for a schedule CSV next to the output folder too): `schedule` replaces
/// spec.schedule/num_ranks/microbatches/chunks. Throws InputError like make_problem().
Problem make_problem(const ProblemSpec& spec, Schedule schedule, Profile profile);

/// make_problem() with the profile read from a CSV file (load_profile_csv()).
Problem load_problem(const ProblemSpec& spec, const std::string& profile_path);

}  // namespace perseus
