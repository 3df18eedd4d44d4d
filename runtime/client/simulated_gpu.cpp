// Simulated GPU: time and energy of computations from a Perseus profile.
#include "perseus/runtime/simulated_gpu.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>

namespace perseus::runtime {

SimulatedGpu::SimulatedGpu(perseus::Profile profile, int stage, double time_scale, double blocking_power_w,
                           int device_index)
    : profile_(std::move(profile)),
      stage_(stage),
      time_scale_(time_scale),
      blocking_power_w_(blocking_power_w),
      device_index_(device_index),
      origin_(std::chrono::steady_clock::now()) {
  if (stage < 0 || stage >= profile_.num_stages()) {
    throw std::invalid_argument(
        fmt::format("simulated GPU: stage {} is not in the profile ({} stages)", stage, profile_.num_stages()));
  }
  if (!(time_scale > 0) || !std::isfinite(time_scale)) {
    throw std::invalid_argument(fmt::format("simulated GPU: time scale must be > 0, got {}", time_scale));
  }
  if (!(blocking_power_w >= 0) || !std::isfinite(blocking_power_w)) {
    throw std::invalid_argument(fmt::format("simulated GPU: blocking power must be >= 0 W, got {}", blocking_power_w));
  }
  std::set<int, std::greater<>> clocks;
  for (int k = 0; k < perseus::kNumInstructionKinds; ++k) {
    for (const auto& p : profile_.points(stage, static_cast<perseus::InstructionKind>(k))) clocks.insert(p.freq_mhz);
  }
  if (clocks.empty()) throw std::invalid_argument(fmt::format("simulated GPU: stage {} has no profile points", stage));
  clocks_mhz_.assign(clocks.begin(), clocks.end());
  clock_mhz_ = clocks_mhz_.front();
}

void SimulatedGpu::set_locked_clocks(int freq_mhz) {
  std::lock_guard lock(mutex_);
  ++set_calls_;
  if (!std::binary_search(clocks_mhz_.begin(), clocks_mhz_.end(), freq_mhz, std::greater<>())) {
    throw GpuError(fmt::format("simulated GPU {} (stage {}): {} MHz is not a supported clock ({}..{} MHz)",
                               device_index_, stage_, freq_mhz, clocks_mhz_.back(), clocks_mhz_.front()));
  }
  clock_mhz_ = freq_mhz;
}

void SimulatedGpu::reset_locked_clocks() {
  std::lock_guard lock(mutex_);
  clock_mhz_ = clocks_mhz_.front();
}

double SimulatedGpu::sim_now_locked() const {
  const double real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
  return real_s / time_scale_;
}

std::optional<double> SimulatedGpu::total_energy_j() {
  std::lock_guard lock(mutex_);
  const double idle_s = std::max(0.0, sim_now_locked() - compute_time_s_);
  return compute_energy_j_ + blocking_power_w_ * idle_s;
}

std::optional<double> SimulatedGpu::power_w() { return blocking_power_w_; }

double SimulatedGpu::now_s() const {
  std::lock_guard lock(mutex_);
  return sim_now_locked();
}

int SimulatedGpu::current_clock_mhz() const {
  std::lock_guard lock(mutex_);
  return clock_mhz_;
}

int SimulatedGpu::set_calls() const {
  std::lock_guard lock(mutex_);
  return set_calls_;
}

double SimulatedGpu::compute(perseus::InstructionKind kind) {
  perseus::OperatingPoint point;
  {
    std::lock_guard lock(mutex_);
    const auto& points = profile_.points(stage_, kind);
    if (points.empty()) {
      throw GpuError(fmt::format("simulated GPU: stage {} has no '{}' profile points", stage_, perseus::to_string(kind)));
    }
    // Nearest profiled frequency (exact in the normal case).
    point = *std::min_element(points.begin(), points.end(), [&](const auto& a, const auto& b) {
      return std::abs(a.freq_mhz - clock_mhz_) < std::abs(b.freq_mhz - clock_mhz_);
    });
    compute_energy_j_ += point.energy_j;
    compute_time_s_ += point.time_s;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(point.time_s * time_scale_));
  return point.time_s;
}

}  // namespace perseus::runtime
