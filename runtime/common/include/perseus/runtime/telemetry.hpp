// GPU energy telemetry: every interval's energy is either measured or explicitly unknown.
// One place for the anomalies seen in the field (NVML energy counter going back after a
// driver reload or GPU reset, wrapping, impossible jumps; a missing counter or power
// reading; a lost GPU), used by `perseus monitor`, the client and the server's online
// profiler (plausibility of reported energies).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace perseus::runtime {

/// Plausibility bounds. Per GPU.
struct TelemetryLimits {
  /// Highest plausible average power of one GPU, W (an H100 SXM is 700 W, a B200 1 kW).
  double max_power_w = 3000.0;
  /// Slack added to an interval's duration when bounding a counter difference, s: NVML
  /// updates the counter every few to ~100 ms, so a short interval may see one update worth
  /// more than its own duration.
  double counter_update_s = 0.1;
};

/// Anomalies (each warned once per consumer; see TelemetryWarnings).
enum class Anomaly {
  kCounterBackwards,   ///< The energy counter decreased (driver reload, GPU reset).
  kCounterWrapped,     ///< The counter wrapped at 2^32 or 2^64 mJ (energy still measured).
  kCounterJump,        ///< The counter rose faster than max_power_w.
  kNoCounter,          ///< The GPU has no energy counter (pre-Volta, or the call is missing).
  kNoPower,            ///< No power reading either.
  kImplausiblePower,   ///< A power sample outside [0, max_power_w] (dropped).
  kGpuLost,            ///< NVML_ERROR_GPU_IS_LOST or another read failure.
  kSlowRead,           ///< A counter read took so long that the interval it bounds is uncertain.
};
/// Short name: "counter_backwards", "counter_wrapped", "counter_jump", "no_counter",
/// "no_power", "implausible_power", "gpu_lost", "slow_read".
const char* to_string(Anomaly a);

/// One energy-counter reading. energy_j empty when the counter is unsupported (!failed) or
/// the read failed (failed, with error).
struct CounterReading {
  double t_s = 0;                  ///< When it was taken, s (monotonic): as the read returned.
  std::optional<double> energy_j;  ///< Counter value, J.
  bool failed = false;             ///< The read failed (GPU lost, driver error).
  std::string error;               ///< The failure's message.
  /// How long the read took, s: the counter was sampled somewhere in [t_s - read_s, t_s].
  double read_s = 0;
};

/// One power sample.
struct PowerSample {
  double t_s = 0;      ///< s (monotonic, same clock as CounterReading::t_s).
  double power_w = 0;  ///< W.
};

/// How an interval's energy was obtained.
enum class EnergySource { kCounter, kPowerSamples, kUnknown };
/// "energy counter", "power samples", "unknown".
const char* to_string(EnergySource s);

/// Energy of one interval.
struct IntervalEnergy {
  std::optional<double> energy_j;  ///< >= 0 and plausible, or empty = unknown. Never negative.
  EnergySource source = EnergySource::kUnknown;
  std::vector<Anomaly> anomalies;  ///< What was seen (empty when clean).
  std::string detail;              ///< Human-readable account of the anomalies ("" when clean).
};

/// Integral of power over [t0_s, t1_s], J, with the trapezoid rule between sample timestamps,
/// clipped exactly to [t0_s, t1_s]; before the first / after the last sample the nearest
/// sample's power is held. Samples need not be sorted. Empty when there is no sample or
/// t1_s < t0_s. Exact for piecewise-linear power through the samples.
std::optional<double> integrate_power(std::vector<PowerSample> samples, double t0_s, double t1_s);

/// Energy between two counter readings: their difference when it is plausible (0 <= E <=
/// max_power_w x (dt + counter_update_s)) and the two reads took together at most
/// max(counter_update_s, 1 % of the interval) (a driver read of 1 s added 1 s of energy to a
/// 2 s command: session 22's trial; kSlowRead), or the difference across a 2^32/2^64 mJ wrap
/// when that is plausible; otherwise (went back, impossible jump, slow read, missing counter)
/// the integral of the plausible power samples over [start.t_s, end.t_s]; otherwise unknown. A
/// failed read (GPU lost) is unknown: samples cannot be trusted past the failure.
IntervalEnergy interval_energy(const CounterReading& start, const CounterReading& end,
                               const std::vector<PowerSample>& power, const TelemetryLimits& limits = {});

/// True when energy_j over time_s implies an average power in [0, max_power_w] (with the
/// counter_update_s slack): the server's per-item check of reported measurements.
bool plausible_energy(double energy_j, double time_s, const TelemetryLimits& limits = {});

/// Remembers which anomalies were already warned about (one warning per kind).
class TelemetryWarnings {
 public:
  /// Anomalies of `e` not warned about before (marks them as warned).
  std::vector<Anomaly> first_time(const IntervalEnergy& e);

 private:
  unsigned warned_ = 0;
};

}  // namespace perseus::runtime
