// Options of straggler detection and switch verification (a job option).
#pragma once

#include <nlohmann/json.hpp>

namespace perseus::server {

/// The largest slowdown a straggler may have, T' / T_min: the range of "slowdown" in POST
/// .../stragglers, and the bound of a detected one (a detection above it is ignored and
/// recorded, docs/stragglers.md).
inline constexpr double kMaxStragglerSlowdown = 1000.0;

/// Tuning of detection and verification; a job option ("straggler_detection" object of
/// POST /v1/jobs, docs/stragglers.md). Defaults were chosen so that 1 % per-computation jitter
/// never flaps (tests/server/straggler_detector_test.cpp: 0 false detections in 1000 iterations)
/// while a 1.1x slowdown is detected within 5 iterations.
struct StragglerOptions {
  bool enabled = true;          ///< Detect from measurements (manual declarations always work).
  int window = 5;               ///< Iterations in a pipeline's running median, [1, 100].
  double threshold = 0.05;      ///< Slower than the healthy median by more than this fraction, (0, 10].
  int consecutive = 2;          ///< ... for this many consecutive iterations: declared, [1, 100].
  double clear_threshold = 0.025;  ///< Cleared when no longer slower by this fraction, [0, threshold).
  int clear_consecutive = 2;    ///< ... for this many consecutive iterations, [1, 100].
  bool verify = true;           ///< Verify every switch (declared or detected) from measurements.
  int verify_iterations = 3;    ///< Iterations on a new plan before verifying it, [1, 100].
  double verify_tolerance = 0.03;  ///< |switched − straggler| / straggler above this: re-target, (0, 1].
  int max_replans = 2;          ///< Re-targets per decision before reverting, [0, 10].

  /// Parses the optional "straggler_detection" object of a job body (absent: defaults).
  /// Throws ApiError 422 naming the field on a wrong type, an unknown key or a value out of range.
  static StragglerOptions from_json(const nlohmann::json& body);
  nlohmann::json to_json() const;

 private:
  /// The numeric fields of the object `s` into `o` (from_json() names them in errors).
  static void read_numbers(const nlohmann::json& s, StragglerOptions& o);
};

}  // namespace perseus::server
