// Honest plan evaluation: profile times and energies, longest path, blocking energy.
#include "perseus/plan.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus {

FrequencyPlan evaluate_durations(const Dag& dag, std::vector<int> freq_mhz, std::vector<double> time_s,
                                 std::vector<double> energy_j, double p_block_w) {
  const auto n = static_cast<std::size_t>(dag.num_ops());
  if (freq_mhz.size() != n || time_s.size() != n || energy_j.size() != n) {
    throw std::invalid_argument(fmt::format("evaluate_durations: sizes {}/{}/{} for {} ops", freq_mhz.size(),
                                            time_s.size(), energy_j.size(), n));
  }
  FrequencyPlan plan;
  plan.timeline = compute_timeline(dag, time_s);
  double busy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    plan.compute_energy_j += energy_j[i];
    busy += time_s[i];
  }
  plan.blocking_energy_j = p_block_w * (dag.num_ranks() * plan.timeline.time_s - busy);
  plan.freq_mhz = std::move(freq_mhz);
  plan.time_s = std::move(time_s);
  plan.energy_j = std::move(energy_j);
  return plan;
}

FrequencyPlan evaluate_plan(const Dag& dag, const Profile& profile, std::vector<int> freq_mhz, double p_block_w) {
  const auto n = static_cast<std::size_t>(dag.num_ops());
  if (freq_mhz.size() != n) {
    throw InputError(fmt::format("plan has {} frequencies, the schedule has {} computations", freq_mhz.size(), n));
  }
  std::vector<double> time(n), energy(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Computation& c = dag.op(static_cast<int>(i));
    const OperatingPoint* it = profile.find(c.stage, c.kind, freq_mhz[i]);
    if (it == nullptr) {
      throw InputError(fmt::format("plan: {} MHz is not in the profile for stage {} {}", freq_mhz[i], c.stage,
                                   to_string(c.kind)));
    }
    time[i] = it->time_s;
    energy[i] = it->energy_j;
  }
  return evaluate_durations(dag, std::move(freq_mhz), std::move(time), std::move(energy), p_block_w);
}

FrequencyPlan all_max_plan(const Dag& dag, const Profile& profile, double p_block_w) {
  std::vector<int> freq(dag.num_ops());
  for (int i = 0; i < dag.num_ops(); ++i) {
    const Computation& c = dag.op(i);
    freq[i] = profile.max_freq_mhz(c.stage, c.kind);
    if (freq[i] == 0) {
      throw InputError(fmt::format("profile {}: no rows for stage {} {}", profile.source, c.stage, to_string(c.kind)));
    }
  }
  return evaluate_plan(dag, profile, std::move(freq), p_block_w);
}

std::string quantity_text(double v, int decimals) {
  if (v == 0) return "0";
  if (!std::isfinite(v) || std::abs(v) >= std::pow(10.0, 3 - decimals)) return fmt::format("{:.{}f}", v, decimals);
  return fmt::format("{:#.4g}", v);  // trailing zeros kept: 0.08000
}

double energy_until(const TimeEnergy& p, double pipe_block_w, double deadline_s) {
  return p.energy_j + pipe_block_w * std::max(0.0, deadline_s - p.time_s);
}

std::size_t lowest_energy_within(std::span<const TimeEnergy> points, double pipe_block_w, double deadline_s) {
  if (points.empty()) throw std::invalid_argument("lowest_energy_within: no plans");
  constexpr double kDeadlineTolerance = 1e-9;  // relative: a plan planned for T' meets T'
  std::size_t best = points.size(), fastest = 0;
  double best_e = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const TimeEnergy& p = points[i];
    const TimeEnergy& f = points[fastest];
    if (p.time_s < f.time_s || (p.time_s == f.time_s && p.energy_j < f.energy_j)) fastest = i;
    if (!(p.time_s <= deadline_s * (1 + kDeadlineTolerance))) continue;
    const double e = energy_until(p, pipe_block_w, deadline_s);
    if (best == points.size() || e < best_e || (e == best_e && p.time_s < points[best].time_s)) {
      best = i;
      best_e = e;
    }
  }
  return best == points.size() ? fastest : best;
}

}  // namespace perseus
