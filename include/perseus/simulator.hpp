// Discrete-event simulation of one training iteration of a frequency plan.
#pragma once

#include <cstdint>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/plan.hpp"

namespace perseus {

/// Perturbations of the simulated iteration. The defaults reproduce the planner's model
/// exactly (simulate() then returns the plan's T and E bit for bit).
struct SimulationOptions {
  /// Per-computation time jitter: each duration is multiplied by 1 + jitter × U, U uniform in
  /// [−1, 1), drawn from std::mt19937_64(seed) in op-id order (reproducible across platforms).
  /// Energy scales by the same factor (constant power during the computation). 0 <= jitter < 1.
  double jitter = 0;
  std::uint64_t seed = 0;        ///< Seed of the jitter generator.
  /// Frequency-switch latency, s (>= 0): when a GPU's next computation runs at a different
  /// frequency than its previous one, the clock change starts when the previous computation
  /// ends and the next one cannot start before it completes. The GPU idles (P_block) meanwhile.
  double switch_latency_s = 0;
  int slow_rank = -1;            ///< A slowed GPU (rank id), or −1 for none; outside −1..ranks−1: InputError.
  double slow_factor = 1;        ///< Its durations and energies are multiplied by this (>= 1 slows it;
                                 ///< finite and > 0, else InputError).
};

/// A time interval on one GPU; op = op id for a computation, −1 for idle time.
struct Interval {
  double start_s = 0;
  double end_s = 0;
  int op = -1;
};

/// What one GPU did during the iteration: computations and the idle gaps between them
/// (from 0 to the first computation, between computations, and after the last one until T).
struct RankTimeline {
  std::vector<Interval> busy;  ///< Computations in execution order.
  std::vector<Interval> idle;  ///< Idle gaps of positive length, in time order.
  double busy_s = 0;           ///< Σ computation time, s.
  double idle_s = 0;           ///< T − busy_s, s.
};

/// Result of simulate().
struct SimulationResult {
  double time_s = 0;               ///< Iteration time T (last computation end), s.
  double compute_energy_j = 0;     ///< Σ computation energies, J.
  double blocking_energy_j = 0;    ///< P_block × Σ_ranks idle time, J.
  double energy_j() const { return compute_energy_j + blocking_energy_j; }
  std::vector<double> start_s;     ///< Per op id, s.
  std::vector<double> end_s;       ///< Per op id, s.
  std::vector<double> duration_s;  ///< Per op id, after jitter/slowdown, s.
  std::vector<RankTimeline> ranks; ///< Per rank.
  std::size_t events = 0;          ///< Completion events processed.
};

/// Simulates one iteration of `plan` (its per-op time_s/energy_j/freq_mhz, as built by
/// evaluate_plan() or evaluate_durations()) on `dag`. Each GPU runs its computations in
/// schedule order; a computation starts when the GPU is free (and its clock switched) and
/// all its DAG predecessors have finished; events are processed in time order. Energy is
/// accounted as the planner does (one GPU per rank, P_block = p_block_w, W, while idle).
/// Source: Perseus (SOSP'24) §3 iteration model. Throws std::invalid_argument on plan/DAG
/// size mismatch and InputError on options out of range.
SimulationResult simulate(const Dag& dag, const FrequencyPlan& plan, double p_block_w,
                          const SimulationOptions& options = {});

}  // namespace perseus
