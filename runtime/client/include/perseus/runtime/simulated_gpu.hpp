// A simulated GPU whose computation time and energy come from a Perseus profile.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "perseus/profile.hpp"
#include "perseus/runtime/gpu_control.hpp"

namespace perseus::runtime {

/// Range of a simulated GPU's time scale (real s per simulated s): beyond it a sleep of a
/// computation's time × scale underflows to nothing or overflows the clock.
inline constexpr double kMinSimTimeScale = 1e-6;
inline constexpr double kMaxSimTimeScale = 1e6;

/// Simulates the GPU of one pipeline stage for CPU-only machines, tests and demos.
/// Supported clocks are the profile's frequencies for the stage. compute() "runs" one
/// computation at the current clock: it sleeps profile time × time_scale of real time and
/// adds the profile energy to the energy counter. The simulated clock (now_s()) advances at
/// 1 / time_scale of real time, and while no computation runs the GPU draws
/// blocking_power_w, so that iteration time and energy read through this object are in the
/// profile's units.
class SimulatedGpu : public GpuControl {
 public:
  /// stage: profile stage this GPU runs (0-based). time_scale: real seconds slept per
  /// simulated second (in [kMinSimTimeScale, kMaxSimTimeScale]; e.g. 0.01 makes a 50 ms
  /// computation sleep 0.5 ms).
  /// blocking_power_w: power while idle/blocked, W (>= 0).
  /// Throws std::invalid_argument when the stage is not in the profile or the scales are
  /// out of range.
  SimulatedGpu(perseus::Profile profile, int stage, double time_scale, double blocking_power_w = 0.0,
               int device_index = 0);

  std::string name() const override { return "simulated"; }
  int device_index() const override { return device_index_; }
  std::vector<int> supported_graphics_clocks_mhz() override { return clocks_mhz_; }
  /// Throws GpuError when freq_mhz is not one of supported_graphics_clocks_mhz().
  void set_locked_clocks(int freq_mhz) override;
  /// Back to the highest supported clock.
  void reset_locked_clocks() override;
  std::optional<double> total_energy_j() override;
  std::optional<double> power_w() override;
  double now_s() const override;

  /// Runs one computation of `kind` at the current clock: sleeps time × time_scale, adds
  /// its energy. Returns the simulated duration, s. When the profile has no point at the
  /// current clock for this kind, the nearest profiled frequency is used. Throws
  /// GpuError when the stage has no point for `kind` at all.
  double compute(perseus::InstructionKind kind);
  /// Current SM clock, MHz (highest supported when unlocked).
  int current_clock_mhz() const;
  /// Number of set_locked_clocks() calls that changed nothing or something (diagnostics).
  int set_calls() const;

  // --- Fault and noise injection (tests of straggler detection, docs/stragglers.md) ---
  /// Every later computation takes factor × its profile time and energy (thermal throttling;
  /// the energy convention of `perseus emulate`). factor > 0, finite; 1 = healthy.
  /// Throws std::invalid_argument otherwise.
  void set_slowdown(double factor);
  /// Every later computation's time and energy are multiplied by (1 + fraction × N(0, 1)),
  /// clamped to [0.5, 1.5], from a std::mt19937_64 seeded with `seed` (reproducible).
  /// fraction in [0, 0.1]; throws std::invalid_argument otherwise.
  void set_jitter(double fraction, std::uint64_t seed);
  /// When true, set_locked_clocks() is accepted (and validated) but the GPU keeps running at
  /// its highest clock: a GPU that ignores requested clocks.
  void set_ignore_clocks(bool ignore);
  /// Virtual time: compute() no longer sleeps and now_s() advances only by computations and
  /// block(); results are then independent of the machine's load.
  void use_virtual_clock();
  /// The GPU waits (P2P / collective blocking) for `seconds` simulated s at blocking power:
  /// advances the virtual clock, or sleeps seconds × time_scale in real time. Throws
  /// std::invalid_argument when seconds is negative, NaN or infinite.
  void block(double seconds);

 private:
  double sim_now_locked() const;

  perseus::Profile profile_;
  int stage_;
  double time_scale_;
  double blocking_power_w_;
  int device_index_;
  std::vector<int> clocks_mhz_;
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  int clock_mhz_ = 0;
  int set_calls_ = 0;
  double compute_energy_j_ = 0.0;  // Σ energy of computations so far
  double compute_time_s_ = 0.0;    // Σ simulated time of computations so far
  double slowdown_ = 1.0;
  double jitter_ = 0.0;
  std::mt19937_64 rng_;
  bool ignore_clocks_ = false;
  bool virtual_clock_ = false;
  double virtual_now_s_ = 0.0;
};

}  // namespace perseus::runtime
