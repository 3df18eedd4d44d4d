// Exact answers for planner tests on tiny pipelines: random profiles and the exhaustive
// enumeration of every discrete plan (planner_oracle_test.cpp, window_search_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/profile.hpp"

namespace perseus::testing {

/// A random profile: `clocks` frequencies per (stage, kind); time falls with the clock, the
/// energy is a noisy convex-ish curve, so some points are dominated and hulls have kinks.
inline Profile random_profile(int stages, int clocks, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Profile p;
  p.source = "random";
  for (int s = 0; s < stages; ++s) {
    for (auto kind : {InstructionKind::kForward, InstructionKind::kBackward}) {
      const double base = (kind == InstructionKind::kForward ? 0.010 : 0.020) * (0.7 + 0.6 * u(rng));
      for (int c = 0; c < clocks; ++c) {
        const int f = 1400 - 150 * c;
        const double t = base * (1.0 + 0.25 * c + 0.05 * u(rng));
        const double power = 120 + 250 * std::pow(f / 1400.0, 2.0) * (0.9 + 0.2 * u(rng));
        p.add(s, kind, {f, t, power * t});
      }
    }
  }
  return p;
}

/// Every plan's (T, E − pipe_w T), sorted by T, with the running minimum: opt(d) = the least
/// energy at deadline d of any plan with T <= d, the GPUs blocking at P_block from T to d
/// (E + pipe_w (d − T), pipe_w = P_block × ranks); for a plan with T = d that is its own E.
struct Oracle {
  std::vector<double> time, best_effective;
  double pipe_w = 0;
  double opt(double deadline) const {
    const auto it = std::upper_bound(time.begin(), time.end(), deadline * (1 + 1e-12));
    if (it == time.begin()) return std::numeric_limits<double>::infinity();
    return best_effective[it - time.begin() - 1] + pipe_w * deadline;
  }
};

inline Oracle enumerate(const Dag& dag, const Profile& profile, double p_block) {
  const int n = dag.num_ops();
  std::vector<const std::vector<OperatingPoint>*> pts(n);
  std::size_t total = 1;
  for (int i = 0; i < n; ++i) {
    pts[i] = &profile.points(dag.op(i).stage, dag.op(i).kind);
    total *= pts[i]->size();
  }
  std::vector<std::pair<double, double>> all;
  all.reserve(total);
  std::vector<std::size_t> idx(n, 0);
  std::vector<double> time(n);
  for (std::size_t k = 0; k < total; ++k) {
    double energy = 0, busy = 0;
    for (int i = 0; i < n; ++i) {
      const OperatingPoint& p = (*pts[i])[idx[i]];
      time[i] = p.time_s;
      energy += p.energy_j;
      busy += p.time_s;
    }
    const double T = compute_timeline(dag, time).time_s;
    all.emplace_back(T, energy - p_block * busy);                          // E − pipe_w T
    for (int i = 0; i < n && ++idx[i] == pts[i]->size(); ++i) idx[i] = 0;  // odometer
  }
  std::sort(all.begin(), all.end());
  Oracle o;
  o.pipe_w = p_block * dag.num_ranks();
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [t, e] : all) {
    best = std::min(best, e);
    o.time.push_back(t);
    o.best_effective.push_back(best);
  }
  return o;
}

}  // namespace perseus::testing
