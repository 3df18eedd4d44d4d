// Interval energy from counter readings and power samples, with anomaly detection.
#include "perseus/runtime/telemetry.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>
#include <fmt/ranges.h>

namespace perseus::runtime {

const char* to_string(Anomaly a) {
  switch (a) {
    case Anomaly::kCounterBackwards: return "counter_backwards";
    case Anomaly::kCounterWrapped: return "counter_wrapped";
    case Anomaly::kCounterJump: return "counter_jump";
    case Anomaly::kNoCounter: return "no_counter";
    case Anomaly::kNoPower: return "no_power";
    case Anomaly::kImplausiblePower: return "implausible_power";
    case Anomaly::kGpuLost: return "gpu_lost";
    case Anomaly::kSlowRead: return "slow_read";
  }
  return "?";
}

const char* to_string(EnergySource s) {
  switch (s) {
    case EnergySource::kCounter: return "energy counter";
    case EnergySource::kPowerSamples: return "power samples";
    case EnergySource::kUnknown: return "unknown";
  }
  return "?";
}

std::optional<double> integrate_power(std::vector<PowerSample> s, double t0, double t1) {
  if (s.empty() || !(t1 >= t0)) return std::nullopt;
  std::sort(s.begin(), s.end(), [](const PowerSample& a, const PowerSample& b) { return a.t_s < b.t_s; });
  // Power at time t: linear between neighbouring samples, held beyond the ends.
  auto at = [&](double t) {
    if (t <= s.front().t_s) return s.front().power_w;
    if (t >= s.back().t_s) return s.back().power_w;
    const auto hi = std::upper_bound(s.begin(), s.end(), t, [](double v, const PowerSample& p) { return v < p.t_s; });
    const auto lo = hi - 1;
    const double span = hi->t_s - lo->t_s;
    if (span <= 0) return hi->power_w;
    return lo->power_w + (hi->power_w - lo->power_w) * (t - lo->t_s) / span;
  };
  // Breakpoints: t0, every sample time strictly inside, t1; trapezoids between them.
  std::vector<double> ts{t0};
  for (const auto& p : s)
    if (p.t_s > t0 && p.t_s < t1) ts.push_back(p.t_s);
  ts.push_back(t1);
  double e = 0;
  for (std::size_t i = 1; i < ts.size(); ++i) e += 0.5 * (at(ts[i - 1]) + at(ts[i])) * (ts[i] - ts[i - 1]);
  return e;
}

bool plausible_energy(double energy_j, double time_s, const TelemetryLimits& limits) {
  if (!std::isfinite(energy_j) || !std::isfinite(time_s) || energy_j < 0 || time_s < 0) return false;
  return energy_j <= limits.max_power_w * (time_s + limits.counter_update_s);
}

namespace {

/// The plausible power samples (finite, in [0, max_power_w]); *dropped set when any was not.
std::vector<PowerSample> plausible_samples(const std::vector<PowerSample>& power, const TelemetryLimits& limits,
                                           bool* dropped) {
  std::vector<PowerSample> ok;
  *dropped = false;
  for (const auto& p : power) {
    if (std::isfinite(p.power_w) && p.power_w >= 0 && p.power_w <= limits.max_power_w) ok.push_back(p);
    else *dropped = true;
  }
  return ok;
}

/// A counter that fell is read as a wrap only when the wrapped energy could have been drawn: at
/// most max_power_w over the interval, and, when power samples cover it, within a factor 2 of
/// their integral (plus one counter update at max_power_w). Without the second test a GPU reset
/// during a run of more than ~24 minutes (2^32 mJ at 3000 W) passed as a 2^32 wrap: a reset to 0
/// of a 50 kJ counter read as 4.2 MJ "measured", 21 x the 100 W the samples showed (session 21).
bool plausible_wrap(double wrapped_j, double dt, const std::optional<double>& sampled_j,
                    const TelemetryLimits& limits) {
  if (!plausible_energy(wrapped_j, dt, limits)) return false;
  if (!sampled_j) return true;
  const double slack_j = limits.max_power_w * limits.counter_update_s;
  return wrapped_j <= 2 * *sampled_j + slack_j && wrapped_j >= 0.5 * *sampled_j - slack_j;
}

}  // namespace

IntervalEnergy interval_energy(const CounterReading& start, const CounterReading& end,
                               const std::vector<PowerSample>& power, const TelemetryLimits& limits) {
  IntervalEnergy out;
  std::vector<std::string> notes;
  const double dt = end.t_s - start.t_s;
  // The power samples' integral, only where it is needed (a counter that fell, or the fallback):
  // a clean counter, the common case on every computation of the client, skips it.
  bool dropped = false;
  std::vector<PowerSample> ok;  // the plausible samples, once sampled_j() ran
  std::optional<std::optional<double>> sampled;
  const auto sampled_j = [&]() -> const std::optional<double>& {
    if (!sampled) {
      ok = plausible_samples(power, limits, &dropped);
      sampled = integrate_power(ok, start.t_s, end.t_s);
    }
    return *sampled;
  };
  if (start.failed || end.failed) {
    out.anomalies.push_back(Anomaly::kGpuLost);
    // No fallback: power samples cannot be trusted past the failure either.
    out.detail = fmt::format("energy counter read failed ({}): energy unknown", start.failed ? start.error : end.error);
    return out;
  } else if (!start.energy_j || !end.energy_j) {
    out.anomalies.push_back(Anomaly::kNoCounter);
    notes.push_back("the GPU has no energy counter");
  } else if (const double unsure_s = start.read_s + end.read_s;
             unsure_s > std::max(limits.counter_update_s, 0.01 * std::max(dt, 0.0))) {
    // The counter was sampled somewhere within each read: the difference may hold up to
    // unsure_s of energy outside the interval (or miss it).
    out.anomalies.push_back(Anomaly::kSlowRead);
    notes.push_back(fmt::format("the energy counter reads took {:.3f} s in all, too long for a {:.3f} s interval "
                                "(the counter difference may hold energy from outside it)",
                                unsure_s, dt));
  } else {
    const double e0 = *start.energy_j, e1 = *end.energy_j;
    const double d = e1 - e0;
    if (d >= 0 && plausible_energy(d, dt, limits)) {
      out.energy_j = d;
      out.source = EnergySource::kCounter;
      return out;
    }
    if (d < 0) {
      for (const double width_j : {4294967296.0 / 1000.0, 18446744073709551616.0 / 1000.0}) {
        const double wrapped = width_j - e0 + e1;
        if (e0 <= width_j && wrapped >= 0 && plausible_wrap(wrapped, dt, sampled_j(), limits)) {
          out.energy_j = wrapped;
          out.source = EnergySource::kCounter;
          out.anomalies.push_back(Anomaly::kCounterWrapped);
          out.detail = fmt::format("energy counter wrapped at {:.0f} J ({:.3f} -> {:.3f} J); energy {:.3f} J",
                                   width_j, e0, e1, wrapped);
          return out;
        }
      }
      out.anomalies.push_back(Anomaly::kCounterBackwards);
      notes.push_back(fmt::format("energy counter went back by {:.3f} J ({:.3f} -> {:.3f} J; driver reload or GPU "
                                  "reset?)",
                                  -d, e0, e1));
    } else {
      out.anomalies.push_back(Anomaly::kCounterJump);
      notes.push_back(fmt::format("energy counter rose by {:.3f} J in {:.3f} s ({:.0f} W > the {:.0f} W bound)", d, dt,
                                  dt > 0 ? d / dt : INFINITY, limits.max_power_w));
    }
  }
  // Fall back to power samples (plausible ones only).
  const std::optional<double>& fallback_j = sampled_j();
  if (dropped) {
    out.anomalies.push_back(Anomaly::kImplausiblePower);
    notes.push_back(fmt::format("power samples outside [0, {:.0f}] W dropped", limits.max_power_w));
  }
  if (fallback_j) {
    out.energy_j = *fallback_j;
    out.source = EnergySource::kPowerSamples;
    notes.push_back(fmt::format("this interval uses {} power sample(s) instead", ok.size()));
  } else {
    out.anomalies.push_back(Anomaly::kNoPower);
    notes.push_back("no power reading either: energy unknown");
  }
  out.detail = fmt::format("{}", fmt::join(notes, "; "));
  return out;
}

std::vector<Anomaly> TelemetryWarnings::first_time(const IntervalEnergy& e) {
  std::vector<Anomaly> out;
  for (Anomaly a : e.anomalies) {
    const unsigned bit = 1u << static_cast<unsigned>(a);
    if ((warned_ & bit) == 0) {
      warned_ |= bit;
      out.push_back(a);
    }
  }
  return out;
}

}  // namespace perseus::runtime
