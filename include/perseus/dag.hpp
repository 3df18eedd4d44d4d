// The computation DAG of one training iteration (activity-on-node), in CSR form.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "perseus/schedule.hpp"

namespace perseus {

/// Activity-on-node DAG of a schedule: one node ("op") per computation, dense ids
/// 0..num_ops()-1. Topology only; durations, energies and frequencies live in arrays
/// indexed by op id, so one DAG can be re-costed for many plans.
/// Edges: F(s,m) -> F(s+1,m); backward(s+1,m) -> backward (or I) (s,m);
/// F(s,m) -> backward/I(s,m); I(s,m) -> W(s,m); consecutive computations of one rank.
/// Source: Perseus (SOSP'24) §3 / §4.2 (iteration DAG); artifact `lowtime.perseus`.
class Dag {
 public:
  /// Builds the DAG of `schedule`. Throws InputError if a computation is missing, duplicated,
  /// on the wrong rank, or if the per-rank orders deadlock (the graph has a cycle); the
  /// message names the computation(s) involved.
  static Dag build(const Schedule& schedule);

  /// Computations (ops); ids are dense, 0..num_ops()-1.
  int num_ops() const { return static_cast<int>(ops_.size()); }
  /// GPUs (pipeline ranks) of the schedule.
  int num_ranks() const { return num_ranks_; }
  /// Pipeline stages (num_ranks() × chunks for interleaved schedules).
  int num_stages() const { return num_stages_; }
  /// Microbatches per iteration.
  int num_microbatches() const { return num_microbatches_; }
  /// Dependency edges (data dependencies plus each rank's execution order).
  std::size_t num_edges() const { return succ_.size(); }
  /// The computation with id `id` (0 <= id < num_ops(); unchecked).
  const Computation& op(int id) const { return ops_[id]; }
  /// The rank (GPU) that runs op `id` (unchecked).
  int rank_of(int id) const { return rank_[id]; }
  /// Ops that depend on op `id` (CSR slice; valid while the Dag lives).
  std::span<const int> successors(int id) const;
  /// Ops that op `id` depends on (CSR slice; valid while the Dag lives).
  std::span<const int> predecessors(int id) const;
  /// All op ids in one topological order.
  const std::vector<int>& topological_order() const { return topo_; }
  /// Op ids of rank r in execution order.
  const std::vector<int>& rank_ops(int r) const { return rank_ops_[r]; }
  /// Op id of a computation, or -1 if the schedule has none.
  int find(const Computation& c) const;

 private:
  int num_ranks_ = 0, num_stages_ = 0, num_microbatches_ = 0;
  std::vector<Computation> ops_;
  std::vector<int> rank_;
  std::vector<std::vector<int>> rank_ops_;
  std::vector<int> succ_offset_, succ_, pred_offset_, pred_;
  std::vector<int> topo_;
  std::vector<int> index_;  // (stage, kind, microbatch) -> op id
};

/// Per-op timing of one plan: the earliest-start schedule of the DAG.
struct Timeline {
  double time_s = 0.0;        ///< Iteration time T = longest path, seconds.
  std::vector<double> start_s;  ///< Earliest start of each op, seconds.
  std::vector<double> end_s;    ///< start_s + duration.
};

/// Longest-path (critical path method) forward sweep. durations_s: one entry per op (s).
/// Throws std::invalid_argument on a size mismatch.
Timeline compute_timeline(const Dag& dag, std::span<const double> durations_s);

}  // namespace perseus
