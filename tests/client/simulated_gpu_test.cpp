// SimulatedGpu: time and energy from a profile, scaled sleeps, clock validation.
#include <gtest/gtest.h>

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
  EXPECT_TRUE(gpu.watchdog_args().empty());
}

}  // namespace
}  // namespace perseus::runtime
