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
  if (!(time_scale >= kMinSimTimeScale && time_scale <= kMaxSimTimeScale)) {
    throw std::invalid_argument(fmt::format("simulated GPU: time scale must be in [{:g}, {:g}] (real s per simulated "
                                            "s), got {}",
                                            kMinSimTimeScale, kMaxSimTimeScale, time_scale));
  }
  if (!(blocking_power_w >= 0 && blocking_power_w <= perseus::kMaxBlockingPowerW)) {
    throw std::invalid_argument(fmt::format("simulated GPU: blocking power must be in [0, {:g}] W, got {}",
                                            perseus::kMaxBlockingPowerW, blocking_power_w));
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
  if (!ignore_clocks_) clock_mhz_ = freq_mhz;
}

void SimulatedGpu::reset_locked_clocks() {
  std::lock_guard lock(mutex_);
  clock_mhz_ = clocks_mhz_.front();
}

double SimulatedGpu::sim_now_locked() const {
  if (virtual_clock_) return virtual_now_s_;
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
    double factor = slowdown_;
    if (jitter_ > 0) factor *= std::clamp(1.0 + jitter_ * std::normal_distribution<double>(0.0, 1.0)(rng_), 0.5, 1.5);
    point.time_s *= factor;
    point.energy_j *= factor;
    compute_energy_j_ += point.energy_j;
    compute_time_s_ += point.time_s;
    if (virtual_clock_) {
      virtual_now_s_ += point.time_s;
      return point.time_s;
    }
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(point.time_s * time_scale_));
  return point.time_s;
}

void SimulatedGpu::set_slowdown(double factor) {
  if (!(factor > 0) || !std::isfinite(factor))
    throw std::invalid_argument(fmt::format("simulated GPU: slowdown must be > 0, got {}", factor));
  std::lock_guard lock(mutex_);
  slowdown_ = factor;
}

void SimulatedGpu::set_jitter(double fraction, std::uint64_t seed) {
  if (!(fraction >= 0 && fraction <= 0.1))
    throw std::invalid_argument(fmt::format("simulated GPU: jitter must be in [0, 0.1], got {}", fraction));
  std::lock_guard lock(mutex_);
  jitter_ = fraction;
  rng_.seed(seed);
}

void SimulatedGpu::set_ignore_clocks(bool ignore) {
  std::lock_guard lock(mutex_);
  ignore_clocks_ = ignore;
  if (ignore) clock_mhz_ = clocks_mhz_.front();
}

void SimulatedGpu::use_virtual_clock() {
  std::lock_guard lock(mutex_);
  if (!virtual_clock_) virtual_now_s_ = sim_now_locked();
  virtual_clock_ = true;
}

void SimulatedGpu::block(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    throw std::invalid_argument(fmt::format("simulated GPU: block time must be >= 0 s, got {}", seconds));
  {
    std::lock_guard lock(mutex_);
    if (virtual_clock_) {
      virtual_now_s_ += seconds;
      return;
    }
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds * time_scale_));
}

}  // namespace perseus::runtime
