// Computations that run faster at a lower clock than at their highest (noisy profiles).
#pragma once

#include <string>
#include <vector>

#include "perseus/profile.hpp"

namespace perseus::cli {

/// Computations of `profile` that run faster at some lower clock than at their highest
/// profiled clock (measurement noise, or a clock the GPU throttles at): one "stage S KIND:
/// T1 s at F1 MHz, T0 s at F0 MHz" each, the fastest lower clock, fastest-relative first.
/// With such rows the planner's T_min can be below the all-max iteration time.
std::vector<std::string> faster_below_max_clock(const Profile& profile);

}  // namespace perseus::cli
