// Frequency plans and their honest evaluation with profile values.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/profile.hpp"

namespace perseus {

/// An iteration's time and energy (one pipeline): the one point type of plans, the
/// emulation and the server's frontiers.
struct TimeEnergy {
  double time_s = 0;    ///< Iteration time T, s.
  double energy_j = 0;  ///< Iteration energy E, J.
};

/// A time (s) or energy (J) as text, for people (the CLI's summary, reports, tooltips):
/// `decimals` decimals while they keep 4 significant digits, else 4 significant digits
/// ("0.0003525", "3.525e-05"); 0 as "0". Fixed decimals printed "T = 0.0004 s, E = 0.4 J" for
/// every plan of a µs-scale profile (session 24's trial). Non-finite values as fmt writes them.
std::string quantity_text(double v, int decimals);
/// quantity_text() of a time, s (4 decimals from 0.1 s on: "2.8365").
inline std::string seconds_text(double v) { return quantity_text(v, 4); }
/// quantity_text() of an energy, J (1 decimal from 100 J on: "7339.0").
inline std::string joules_text(double v) { return quantity_text(v, 1); }

/// Energy (J) one pipeline draws until deadline_s (s) running a plan of `p.time_s`: the plan's
/// energy, then blocking at pipe_block_w (P_block × the pipeline's ranks, W) until the deadline,
/// E + pipe_block_w × max(0, deadline_s − T).
double energy_until(const TimeEnergy& p, double pipe_block_w, double deadline_s);

/// The Perseus straggler rule (SOSP'24 §3.2) over any set of plans: the index of the point with
/// T <= deadline_s (relative tolerance 1e-9, for rounding) that draws the least energy until the
/// deadline (energy_until()); ties go to the faster point, then to the lower index. When none
/// meets the deadline, the fastest point (the lowest energy among the fastest). The one rule of
/// the server's straggler switch, the emulation and the baselines; Frontier::lowest_energy_within()
/// gives the same index on a frontier's points, in O(index). Throws std::invalid_argument when
/// `points` is empty.
std::size_t lowest_energy_within(std::span<const TimeEnergy> points, double pipe_block_w, double deadline_s);

/// A frequency plan: the GPU SM frequency of every computation of one iteration, with the
/// time and energy it has according to the profile.
/// Energy accounting (one GPU per rank, one pipeline; Perseus SOSP'24 §3.1, Eq. for E):
///   E = Σ_ops energy_j[op] + P_block × Σ_ranks (T − Σ_{ops of rank} time_s[op])
/// i.e. computation energy plus the P2P blocking power drawn while a GPU waits.
struct FrequencyPlan {
  std::vector<int> freq_mhz;     ///< Per op id: frequency, MHz.
  std::vector<double> time_s;    ///< Per op id: duration from the profile, s.
  std::vector<double> energy_j;  ///< Per op id: energy from the profile, J.
  Timeline timeline;             ///< Earliest-start times; timeline.time_s is T (s).
  double compute_energy_j = 0;   ///< Σ energy_j.
  double blocking_energy_j = 0;  ///< P_block × Σ_ranks idle time, J.
  /// Iteration energy E = compute + blocking, J.
  double total_energy_j() const { return compute_energy_j + blocking_energy_j; }
};

/// Looks up the profile's (time, energy) for each op at freq_mhz[op] and evaluates the
/// plan (longest path T and energy E as above). p_block_w: P2P blocking power, W.
/// Throws InputError if an op's frequency is not in the profile for its (stage, kind),
/// or if freq_mhz.size() != dag.num_ops().
FrequencyPlan evaluate_plan(const Dag& dag, const Profile& profile, std::vector<int> freq_mhz,
                            double p_block_w);

/// Evaluates a plan from per-op durations (s) and energies (J) already known; p_block_w:
/// P2P blocking power, W. Throws std::invalid_argument on size mismatch.
FrequencyPlan evaluate_durations(const Dag& dag, std::vector<int> freq_mhz, std::vector<double> time_s,
                                 std::vector<double> energy_j, double p_block_w);

/// The baseline: every computation at the highest frequency profiled for its (stage, kind);
/// p_block_w: P2P blocking power, W. Throws InputError if the profile lacks an op's (stage, kind).
FrequencyPlan all_max_plan(const Dag& dag, const Profile& profile, double p_block_w);

}  // namespace perseus
