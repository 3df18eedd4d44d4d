// Lock-step profiling sweep.
#include "perseus/server/sweep.hpp"

#include <algorithm>
#include <functional>

#include "perseus/error.hpp"

namespace perseus::server {

Sweep::Sweep(SweepOptions options, std::vector<SweepKey> keys) : opt_(std::move(options)) {
  auto& g = opt_.freqs_mhz;
  std::sort(g.begin(), g.end(), std::greater<>());
  g.erase(std::unique(g.begin(), g.end()), g.end());
  if (g.empty()) throw InputError("profiling sweep: no frequencies to sweep");
  if (keys.empty()) throw InputError("profiling sweep: nothing to profile");
  opt_.samples_per_step = std::max(1, opt_.samples_per_step);
  opt_.max_energy_rises = std::max(1, opt_.max_energy_rises);
  for (const auto& k : keys) keys_[k];
}

int Sweep::freq_mhz(const SweepKey& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.done) return opt_.freqs_mhz.front();
  return opt_.freqs_mhz[it->second.idx];
}

bool Sweep::add_sample(const SweepKey& key, int freq_mhz, double time_s, double energy_j) {
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.done || opt_.freqs_mhz[it->second.idx] != freq_mhz) return false;
  State& st = it->second;
  ++st.count;
  st.sum_time_s += time_s;
  st.sum_energy_j += energy_j;
  for (const auto& [k, s] : keys_)
    if (!s.done && s.count < opt_.samples_per_step) return false;
  advance();
  return true;
}

void Sweep::advance() {
  for (auto& [k, s] : keys_) {
    if (s.done) continue;
    const double t = s.sum_time_s / s.count, e = s.sum_energy_j / s.count;
    s.rows.push_back({k, opt_.freqs_mhz[s.idx], t, e, s.count});
    s.rises = (s.has_prev && e > s.prev_energy_j) ? s.rises + 1 : 0;
    s.has_prev = true;
    s.prev_energy_j = e;
    s.count = 0;
    s.sum_time_s = s.sum_energy_j = 0;
    if (s.rises >= opt_.max_energy_rises || s.idx + 1 >= opt_.freqs_mhz.size()) s.done = true;
    else ++s.idx;
  }
  ++step_;
}

bool Sweep::done() const {
  return std::all_of(keys_.begin(), keys_.end(), [](const auto& kv) { return kv.second.done; });
}

std::vector<Sweep::Row> Sweep::rows() const {
  std::vector<Row> out;
  for (const auto& [k, s] : keys_) out.insert(out.end(), s.rows.begin(), s.rows.end());
  return out;
}

nlohmann::json Sweep::progress_json() const {
  int active = 0, done = 0;
  for (const auto& [k, s] : keys_) (s.done ? done : active)++;
  return {{"step", step_}, {"keys_active", active}, {"keys_done", done}, {"grid_mhz", opt_.freqs_mhz}};
}

}  // namespace perseus::server
