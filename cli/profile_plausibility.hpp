// Plausibility of a profile's units: the power each row implies, and P_block against it.
#pragma once

#include <string>
#include <vector>

#include "perseus/profile.hpp"

namespace perseus::cli {

/// Bounds of one GPU's average power while computing, W. Outside them a row's units are
/// almost surely wrong: times in ms (0.3 W), energy in kJ, or power in the energy column
/// (10 kW). The upper bound is the telemetry bound of the runtime (docs/client.md).
inline constexpr double kMinComputePowerW = 1.0;
inline constexpr double kMaxComputePowerW = 3000.0;

/// Findings ("FILE:LINE: ..." each) for a profile CSV that load_profile_csv() accepted:
/// rows whose energy/time is outside [kMinComputePowerW, kMaxComputePowerW], and P_block
/// (p_block_w, W) above the lowest computation power of the profile (a GPU blocked on
/// communication draws less than one computing). Empty when plausible.
std::vector<std::string> profile_plausibility(const std::string& path, double p_block_w);

/// Computations of `profile` that run faster at some lower clock than at their highest
/// profiled clock (measurement noise, or a clock the GPU throttles at): one "stage S KIND:
/// T1 s at F1 MHz, T0 s at F0 MHz" each, the fastest lower clock, fastest-relative first.
/// With such rows the planner's T_min can be below the all-max iteration time.
std::vector<std::string> faster_below_max_clock(const Profile& profile);

}  // namespace perseus::cli
