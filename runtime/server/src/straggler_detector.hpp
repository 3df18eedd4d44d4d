// Straggler detection from measured iteration times (extrinsic bloat, Perseus §3.2 closed loop).
// Pure logic: no clock, no locks, no I/O. Fed with per-rank measurements, it says when a
// data-parallel pipeline became a straggler and when it recovered. Private to the server.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/server/straggler_options.hpp"

namespace perseus::server {

/// One complete iteration of one pipeline.
struct PipelineSample {
  int pipeline = 0;
  std::int64_t iteration = 0;
  double time_s = 0;           ///< max over the pipeline's ranks of their iteration time, s.
  /// Σ over the pipeline's ranks of their iteration energy, J; unknown (nullopt) when any
  /// rank's energy is unknown (its report had no energy_j: an impossible counter reading).
  std::optional<double> energy_j = 0.0;
  double expected_time_s = 0;  ///< The plan's predicted iteration time, s (0: unknown, use 1).
};

/// Groups per-rank measurements into pipeline iterations. A pipeline iteration is complete
/// when `ranks_per_pipeline` ranks reported it; its time is the max of their times (the
/// pipeline finishes with its slowest stage) and its energy their sum (unknown when one of them
/// is unknown: a partial sum would read as a saving).
///
/// The window: a pipeline's *current iteration* is the lower median over its ranks of the
/// iteration each last reported, so one rank whose counter is off (a typo, a resumed rank with
/// another step counter) cannot move it. Reports more than `kKeep` iterations from it are not
/// aggregated (counted in ignored()), and iterations more than `kKeep` behind it are dropped
/// unfinished (a lost report): at most 2 kKeep + 1 open iterations per pipeline.
class IterationAggregator {
 public:
  static constexpr std::int64_t kKeep = 64;
  explicit IterationAggregator(int ranks_per_pipeline) : ranks_(ranks_per_pipeline) {}
  /// Adds one rank's measurement; returns the pipeline's sample when this completed it.
  /// A rank reporting the same iteration twice is counted once (the store drops duplicates).
  std::optional<PipelineSample> add(int pipeline, int rank, std::int64_t iteration, double time_s,
                                    std::optional<double> energy_j, double expected_time_s);
  /// The ranks' last iterations split at their lower median (O(log ranks) per report: a
  /// pipeline may have a million ranks): `lo` the smaller ceil(n/2), `hi` the rest.
  struct LastIterations {
    std::map<int, std::int64_t> of_rank;  ///< rank -> the iteration it reported last
    std::multiset<std::int64_t> lo, hi;
    /// Sets `rank`'s last iteration; returns the lower median of all ranks' last iterations.
    std::int64_t update(int rank, std::int64_t iteration);
  };
  /// Reports of one pipeline not aggregated because their iteration was more than kKeep from
  /// the pipeline's current iteration: how many, and the last of them.
  struct Ignored {
    std::uint64_t count = 0;
    int rank = 0;
    std::int64_t iteration = 0;           ///< the report's iteration
    std::int64_t pipeline_iteration = 0;  ///< the pipeline's current iteration then
  };
  /// Ignored reports of `pipeline` so far (count 0: none).
  Ignored ignored(int pipeline) const {
    const auto it = pipelines_.find(pipeline);
    return it == pipelines_.end() ? Ignored{} : it->second.ignored;
  }

 private:
  struct Partial {
    std::map<int, bool> ranks;
    PipelineSample s;
  };
  struct Pipeline {
    std::map<std::int64_t, Partial> open;  // iteration -> ranks reported so far
    LastIterations last;
    Ignored ignored;
  };
  int ranks_;
  std::map<int, Pipeline> pipelines_;
};

/// What the detector decided for one pipeline.
struct StragglerEvent {
  enum class Kind { kDetected, kCleared } kind = Kind::kDetected;
  int pipeline = 0;
  std::int64_t iteration = 0;   ///< The iteration whose sample triggered the event.
  double slowdown = 1;          ///< Pipeline's running ratio / healthy median ratio (>= 1 when detected).
  double measured_time_s = 0;   ///< Pipeline's running median time, s.
};

/// Per pipeline, a running median over `window` iterations of measured/expected time (the
/// "ratio"; 1 = as planned). A pipeline is detected when its ratio exceeds the (upper) median
/// ratio of the other healthy pipelines by more than `threshold` in `consecutive` successive samples,
/// and cleared when it is within `clear_threshold` for `clear_consecutive` samples (hysteresis).
/// Normalizing by the plan's prediction keeps the healthy reference stable after a switch:
/// switched pipelines run slower plans on purpose. Needs >= 2 pipelines with full windows.
class StragglerDetector {
 public:
  StragglerDetector(StragglerOptions options, int num_pipelines);
  /// Feeds one complete pipeline iteration; returns an event when the state changed.
  std::optional<StragglerEvent> observe(const PipelineSample& s);
  /// Forces the state of a pipeline (a manual declaration or clearance) and restarts its count.
  void set_state(int pipeline, bool straggler);
  bool is_straggler(int pipeline) const { return state_.at(pipeline).straggler; }
  /// Running median ratio and time of a pipeline (nullopt before its first sample).
  std::optional<double> ratio(int pipeline) const;
  /// Whether every sample in the pipeline's window had a planned time (else ratio() divides
  /// those samples by 1 s: comparable across the job's pipelines, but no measured/planned ratio).
  bool ratio_is_planned(int pipeline) const { return state_.at(pipeline).unplanned == 0; }
  std::optional<double> time_s(int pipeline) const;

 private:
  struct State {
    std::deque<double> ratios, times;
    std::deque<bool> planned;  // per sample: its expected time was known
    int unplanned = 0;         // samples in the window without an expected time
    bool straggler = false;
    int count = 0;  // consecutive samples beyond the active threshold
  };
  std::optional<double> healthy_reference(int except) const;
  StragglerOptions opt_;
  std::vector<State> state_;
};

/// Median of a non-empty vector (mean of the two middle values for even sizes).
double median_of(std::vector<double> v);

}  // namespace perseus::server
