// SimulatedGpu: time and energy from a profile, scaled sleeps, clock validation.
#include <gtest/gtest.h>

#include <cmath>

#include "perseus/runtime/simulated_gpu.hpp"

namespace perseus::runtime {
namespace {

perseus::Profile tiny_profile() {
  perseus::Profile p;
  p.add(0, InstructionKind::kForward, {1410, 0.010, 3.0});
  p.add(0, InstructionKind::kForward, {1000, 0.014, 2.0});
  p.add(0, InstructionKind::kBackward, {1410, 0.020, 6.0});
  p.add(0, InstructionKind::kBackward, {1000, 0.028, 4.0});
  return p;
}

TEST(SimulatedGpu, TimeAndEnergyFollowTheProfileAtTheCurrentClock) {
  SimulatedGpu gpu(tiny_profile(), 0, /*time_scale=*/0.1, /*blocking_power_w=*/0.0);
  EXPECT_EQ(gpu.supported_graphics_clocks_mhz(), (std::vector<int>{1410, 1000}));
  EXPECT_EQ(gpu.current_clock_mhz(), 1410);
  const double e0 = *gpu.total_energy_j();
  EXPECT_DOUBLE_EQ(gpu.compute(InstructionKind::kForward), 0.010);
  gpu.set_locked_clocks(1000);
  EXPECT_DOUBLE_EQ(gpu.compute(InstructionKind::kBackward), 0.028);
  EXPECT_NEAR(*gpu.total_energy_j() - e0, 3.0 + 4.0, 1e-9);
  gpu.reset_locked_clocks();
  EXPECT_EQ(gpu.current_clock_mhz(), 1410);
}

TEST(SimulatedGpu, SimulatedClockRunsFasterThanRealTime) {
  SimulatedGpu gpu(tiny_profile(), 0, 0.01, 100.0);
  const double t0 = gpu.now_s();
  gpu.compute(InstructionKind::kBackward);  // sleeps 0.2 ms real, 20 ms simulated
  EXPECT_GE(gpu.now_s() - t0, 0.020 - 1e-9);
  // Blocking power accrues over simulated idle time.
  EXPECT_GT(*gpu.total_energy_j(), 6.0);
}

TEST(SimulatedGpu, RejectsUnsupportedClocksAndBadSettings) {
  SimulatedGpu gpu(tiny_profile(), 0, 1.0);
  EXPECT_THROW(gpu.set_locked_clocks(1200), GpuError);
  EXPECT_THROW(gpu.compute(InstructionKind::kBackwardInput), GpuError);
  EXPECT_THROW(SimulatedGpu(tiny_profile(), 1, 1.0), std::invalid_argument);
  EXPECT_THROW(SimulatedGpu(tiny_profile(), 0, 0.0), std::invalid_argument);
  // Blocking power past any GPU's (1e308 W overflowed the energy counter to infinity) or NaN.
  for (const double bad : {-1.0, 1e308, perseus::kMaxBlockingPowerW * 1.01, std::nan("")}) {
    EXPECT_THROW(SimulatedGpu(tiny_profile(), 0, 1.0, bad), std::invalid_argument) << bad;
  }
  EXPECT_NO_THROW(SimulatedGpu(tiny_profile(), 0, 1.0, perseus::kMaxBlockingPowerW));
  EXPECT_TRUE(gpu.watchdog_args().empty());
}


// --- Straggler emulation (issue 18): virtual clock, slowdown, jitter, ignored clocks ---

TEST(SimulatedGpu, VirtualClockSlowdownAndBlockingAreExact) {
  SimulatedGpu gpu(tiny_profile(), 0, /*time_scale=*/1000.0, /*blocking_power_w=*/50.0);  // would sleep 10 s
  gpu.use_virtual_clock();
  const double t0 = gpu.now_s(), e0 = *gpu.total_energy_j();
  EXPECT_DOUBLE_EQ(gpu.compute(InstructionKind::kForward), 0.010);  // no sleep in virtual time
  gpu.set_slowdown(1.2);
  EXPECT_DOUBLE_EQ(gpu.compute(InstructionKind::kBackward), 0.020 * 1.2);
  gpu.block(0.1);
  EXPECT_NEAR(gpu.now_s() - t0, 0.010 + 0.024 + 0.1, 1e-12);
  EXPECT_NEAR(*gpu.total_energy_j() - e0, 3.0 + 6.0 * 1.2 + 50.0 * 0.1, 1e-9);
}

TEST(SimulatedGpu, SeededJitterIsReproducibleAndBounded) {
  auto run = [](std::uint64_t seed) {
    SimulatedGpu gpu(tiny_profile(), 0, 1.0);
    gpu.use_virtual_clock();
    gpu.set_jitter(0.01, seed);
    std::vector<double> t;
    for (int i = 0; i < 50; ++i) t.push_back(gpu.compute(InstructionKind::kForward));
    return t;
  };
  const auto a = run(3), b = run(3), c = run(4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (double t : a) EXPECT_NEAR(t, 0.010, 0.010 * 0.05);
}

TEST(SimulatedGpu, IgnoringClocksKeepsTheHighestClock) {
  SimulatedGpu gpu(tiny_profile(), 0, 1.0);
  gpu.use_virtual_clock();
  gpu.set_ignore_clocks(true);
  gpu.set_locked_clocks(1000);  // accepted ...
  EXPECT_EQ(gpu.current_clock_mhz(), 1410);  // ... and ignored
  EXPECT_DOUBLE_EQ(gpu.compute(InstructionKind::kForward), 0.010);
  EXPECT_THROW(gpu.set_locked_clocks(1234), GpuError);  // still validated
}

TEST(SimulatedGpu, RejectsBadEmulationSettings) {
  SimulatedGpu gpu(tiny_profile(), 0, 1.0);
  EXPECT_THROW(gpu.set_slowdown(0), std::invalid_argument);
  EXPECT_THROW(gpu.set_slowdown(std::nan("")), std::invalid_argument);
  EXPECT_THROW(gpu.set_jitter(-0.01, 1), std::invalid_argument);
  EXPECT_THROW(gpu.set_jitter(0.5, 1), std::invalid_argument);
  EXPECT_THROW(gpu.block(-1), std::invalid_argument);
}

}  // namespace
}  // namespace perseus::runtime
