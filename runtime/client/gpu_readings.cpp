// read_counter() / read_power(): GpuControl reads as telemetry values, never throwing.
#include <algorithm>
#include <exception>

#include "perseus/runtime/gpu_control.hpp"

namespace perseus::runtime {

CounterReading read_counter(GpuControl& gpu) {
  CounterReading r;
  const double before_s = gpu.now_s();
  try {
    r.energy_j = gpu.total_energy_j();
  } catch (const std::exception& e) {
    r.failed = true;
    r.error = e.what();
  }
  r.t_s = gpu.now_s();
  r.read_s = std::max(0.0, r.t_s - before_s);
  return r;
}

std::optional<PowerSample> read_power(GpuControl& gpu) {
  try {
    if (const auto p = gpu.power_w()) return PowerSample{gpu.now_s(), *p};
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace perseus::runtime
