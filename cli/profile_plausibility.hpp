// Plausibility of a profile's units: the power each row implies, and P_block against it.
#pragma once

#include <string>
#include <vector>

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

}  // namespace perseus::cli
