// profile_plausibility(): implied power per row, P_block vs computation power.
#include "profile_plausibility.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

#include <fmt/core.h>

#include "perseus/input_file.hpp"

namespace perseus::cli {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    const auto b = cell.find_first_not_of(" \t\r");
    const auto e = cell.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace

std::vector<std::string> profile_plausibility(const std::string& path, double p_block_w) {
  std::vector<std::string> out;
  std::istringstream in(read_input_file(path, "profile"));  // the text load_profile_csv() read (streams too)
  std::string line;
  if (!std::getline(in, line)) return out;
  const auto header = split(line);
  int time_col = -1, energy_col = -1;
  for (int i = 0; i < static_cast<int>(header.size()); ++i) {
    if (header[i] == "time") time_col = i;
    if (header[i] == "energy") energy_col = i;
  }
  if (time_col < 0 || energy_col < 0) return out;
  double min_power = std::numeric_limits<double>::infinity();
  int min_line = 0;
  for (int n = 2; std::getline(in, line); ++n) {
    const auto cells = split(line);
    if (static_cast<int>(cells.size()) <= std::max(time_col, energy_col)) continue;
    const double t = std::strtod(cells[time_col].c_str(), nullptr);
    const double e = std::strtod(cells[energy_col].c_str(), nullptr);
    if (!(t > 0)) continue;
    const double p = e / t;
    if (p < kMinComputePowerW || p > kMaxComputePowerW) {
      out.push_back(fmt::format("{}:{}: energy {} J over time {} s implies {:.4g} W per GPU, outside the plausible "
                                "{}..{} W (time in ms? energy in kJ? power in the energy column?)",
                                path, n, e, t, p, kMinComputePowerW, kMaxComputePowerW));  // numbers, never the raw text
    }
    if (p < min_power) {
      min_power = p;
      min_line = n;
    }
  }
  if (min_line > 0 && p_block_w > min_power) {
    out.push_back(fmt::format("{}:{}: P_block (--p2p-power) {} W is above the power of this computation ({:.4g} W); a "
                              "GPU blocked on communication draws less than one computing (is --p2p-power in W?)",
                              path, min_line, p_block_w, min_power));
  }
  return out;
}

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
