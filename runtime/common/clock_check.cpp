// check_clock(): nearest supported clock within a tolerance, or a refusal.
#include "perseus/runtime/clock_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include <fmt/core.h>

namespace perseus::runtime {

std::string describe_clocks(const std::vector<int>& supported_mhz) {
  if (supported_mhz.empty()) return "none";
  const auto [lo, hi] = std::minmax_element(supported_mhz.begin(), supported_mhz.end());
  const std::size_t distinct = std::set<int>(supported_mhz.begin(), supported_mhz.end()).size();
  return fmt::format("{}..{} MHz ({} clock{})", *lo, *hi, distinct, distinct == 1 ? "" : "s");
}

ClockCheck check_clock(int requested_mhz, const std::vector<int>& supported_mhz, double tolerance_mhz) {
  ClockCheck c;
  c.requested_mhz = requested_mhz;
  if (supported_mhz.empty()) {
    c.reason = fmt::format("{} MHz cannot be checked: the GPU's supported clocks are unknown", requested_mhz);
    return c;
  }
  long best_diff = -1;
  for (int f : supported_mhz) {
    const long diff = std::labs(static_cast<long>(f) - requested_mhz);
    if (best_diff < 0 || diff < best_diff || (diff == best_diff && f > c.nearest_mhz)) {
      best_diff = diff;
      c.nearest_mhz = f;
    }
  }
  if (requested_mhz > 0 && static_cast<double>(best_diff) <= tolerance_mhz) {
    c.ok = true;
    c.applied_mhz = c.nearest_mhz;
    if (best_diff != 0) c.reason = fmt::format("{} MHz snapped to the supported {} MHz", requested_mhz, c.applied_mhz);
    return c;
  }
  c.reason = fmt::format("{} MHz is not a supported clock of this GPU ({}; nearest {} MHz is {} MHz away, tolerance "
                         "{} MHz)",
                         requested_mhz, describe_clocks(supported_mhz), c.nearest_mhz, best_diff, tolerance_mhz);
  return c;
}

}  // namespace perseus::runtime
