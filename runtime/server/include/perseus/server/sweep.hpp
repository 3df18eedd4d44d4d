// The online profiling sweep of profiling-mode jobs ("mode": "profile").
#pragma once

#include <compare>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

namespace perseus::server {

/// A (stage, instruction kind) being profiled; kind is perseus::InstructionKind as an int.
struct SweepKey {
  int stage = 0;  ///< Pipeline stage.
  int kind = 0;   ///< Instruction kind (static_cast<int>(InstructionKind), e.g. forward, backward).
  friend auto operator<=>(const SweepKey&, const SweepKey&) = default;
};

/// Sweep settings.
struct SweepOptions {
  std::vector<int> freqs_mhz;  ///< Grid to sweep, MHz; sorted descending and deduplicated by Sweep.
  /// Samples each active key needs at its frequency before the step ends; a sample is one
  /// rank-iteration's mean over the key's computations (not one computation). Values < 1 are
  /// taken as 1 by the Sweep constructor.
  int samples_per_step = 3;
  /// A key stops after its mean energy per computation rose this many steps in a row. Values < 1
  /// are taken as 1 by the Sweep constructor.
  int max_energy_rises = 5;
};

/// Lock-step frequency sweep from the highest frequency down. Every active key runs at the
/// step's frequency; when each active key has `samples_per_step` samples at its current
/// frequency, all of them move one grid step down together (one new plan version per step).
/// A key stops when its mean energy rose `max_energy_rises` times in a row or the grid ends.
/// Samples are labelled with the frequency actually applied; samples at any other frequency
/// than the key's current one are ignored (they belong to an older step). Deterministic:
/// replaying the same samples gives the same state. Not thread-safe (the job lock guards it).
/// Source: the profiling step of Perseus (SOSP'24) §4.1 (the Profile it builds, as in
/// perseus/profile.hpp), done online; protocol in docs/http-api.md, "Profiling mode".
class Sweep {
 public:
  /// Throws perseus::InputError if the grid or the key list is empty.
  Sweep(SweepOptions options, std::vector<SweepKey> keys);

  /// Frequency the key runs at now, MHz (a stopped key runs at the grid's maximum).
  int freq_mhz(const SweepKey& key) const;
  /// Adds one sample (mean time_s, s, / energy_j, J, of the key's computations in one
  /// rank-iteration at freq_mhz, MHz). Returns true when it completed the step, i.e. the
  /// frequencies changed. A sample of an unknown or stopped key, or at another frequency than
  /// the key's current one, is ignored (false).
  bool add_sample(const SweepKey& key, int freq_mhz, double time_s, double energy_j);
  /// True when every key has stopped.
  bool done() const;
  /// Steps completed so far.
  int step() const { return step_; }

  /// One profiled operating point (means over the samples).
  struct Row {
    SweepKey key;
    int freq_mhz = 0;                 ///< Clock, MHz.
    double time_s = 0, energy_j = 0;  ///< Mean time (s) and energy (J) of one computation.
    int samples = 0;                  ///< Samples averaged.
  };
  /// All points measured so far, key by key, frequency descending.
  std::vector<Row> rows() const;
  /// {"step", "keys_active", "keys_done", "grid_mhz"} for job status responses.
  nlohmann::json progress_json() const;

 private:
  struct State {
    std::size_t idx = 0;
    int rises = 0;
    bool done = false;
    bool has_prev = false;
    double prev_energy_j = 0;
    int count = 0;
    double sum_time_s = 0, sum_energy_j = 0;
    std::vector<Row> rows;
  };
  SweepOptions opt_;
  std::map<SweepKey, State> keys_;
  int step_ = 0;
  void advance();
};

}  // namespace perseus::server
