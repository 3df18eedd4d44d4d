// faster_below_max_clock(): computations faster at a lower clock than at their highest.
#include "faster_clocks.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

#include <fmt/core.h>

#include "perseus/input_file.hpp"

namespace perseus::cli {
std::vector<std::string> faster_below_max_clock(const Profile& profile) {
  std::vector<std::pair<double, std::string>> found;  // (time at max / fastest time, text)
  for (int s = 0; s < profile.num_stages(); ++s) {
    for (int k = 0; k < kNumInstructionKinds; ++k) {
      const auto kind = static_cast<InstructionKind>(k);
      const auto& pts = profile.points(s, kind);
      if (pts.empty()) continue;
      const auto top = std::max_element(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
        return a.freq_mhz < b.freq_mhz;
      });
      const auto fastest = std::min_element(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
        return a.time_s < b.time_s;
      });
      if (fastest->time_s < top->time_s) {
        found.emplace_back(top->time_s / fastest->time_s,
                           fmt::format("stage {} {}: {} s at {} MHz, {} s at {} MHz", s, to_string(kind),
                                       fastest->time_s, fastest->freq_mhz, top->time_s, top->freq_mhz));
      }
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

}  // namespace perseus::cli
