// Validation of requested SM clocks against a GPU's supported list (client and server).
#pragma once

#include <string>
#include <vector>

namespace perseus::runtime {

/// Default snapping tolerance, MHz: a requested clock at most this far from a supported one
/// is snapped to it (A100/H100 grids are 15 MHz apart, so on-grid-ish plans always snap).
inline constexpr double kDefaultClockToleranceMhz = 15.0;

/// Outcome of checking one requested clock.
struct ClockCheck {
  bool ok = false;         ///< True when applied_mhz may be sent to the driver.
  int requested_mhz = 0;   ///< What the plan asked for, MHz.
  int applied_mhz = 0;     ///< The supported clock used (== requested when exact; 0 when !ok).
  int nearest_mhz = 0;     ///< Nearest supported clock (0 when the list is empty).
  std::string reason;      ///< Why !ok, or "snapped ..." when applied != requested; "" when exact.
};

/// Checks requested_mhz against supported_mhz (any order): exact -> ok; the nearest supported
/// clock within tolerance_mhz (ties: the higher clock, which never lengthens the critical
/// path) -> ok with applied_mhz = that clock; otherwise (including <= 0 MHz or an empty
/// list) -> !ok with a reason naming the value and the supported range.
ClockCheck check_clock(int requested_mhz, const std::vector<int>& supported_mhz,
                       double tolerance_mhz = kDefaultClockToleranceMhz);

/// "210..1410 MHz (81 clocks)" for messages (distinct clocks counted; "1 clock"); "none" when empty.
std::string describe_clocks(const std::vector<int>& supported_mhz);

}  // namespace perseus::runtime
