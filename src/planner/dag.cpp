// DAG construction from a schedule (CSR), and the longest-path sweep.
#include "perseus/dag.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus {

namespace {

std::string describe(const Computation& c) {
  return fmt::format("{}{}{}", c.stage, to_letter(c.kind), c.microbatch);
}

}  // namespace

int Dag::find(const Computation& c) const {
  if (c.stage < 0 || c.stage >= num_stages_ || c.microbatch < 0 || c.microbatch >= num_microbatches_) return -1;
  return index_[(static_cast<std::size_t>(c.stage) * kNumInstructionKinds + static_cast<int>(c.kind)) *
                    num_microbatches_ +
                c.microbatch];
}

std::span<const int> Dag::successors(int id) const {
  return {succ_.data() + succ_offset_[id], static_cast<std::size_t>(succ_offset_[id + 1] - succ_offset_[id])};
}

std::span<const int> Dag::predecessors(int id) const {
  return {pred_.data() + pred_offset_[id], static_cast<std::size_t>(pred_offset_[id + 1] - pred_offset_[id])};
}

Dag Dag::build(const Schedule& schedule) {
  const int S = schedule.num_stages, M = schedule.num_microbatches, R = schedule.num_ranks();
  if (S < 1 || M < 1 || R < 1) {
    throw InputError(fmt::format("schedule '{}': needs >= 1 stage, microbatch and rank (got {}, {}, {})",
                                 schedule.name, S, M, R));
  }
  if (static_cast<int>(schedule.stage_rank.size()) != S) {
    throw InputError(fmt::format("schedule '{}': stage_rank has {} entries for {} stages", schedule.name,
                                 schedule.stage_rank.size(), S));
  }
  Dag dag;
  dag.num_ranks_ = R;
  dag.num_stages_ = S;
  dag.num_microbatches_ = M;
  dag.index_.assign(static_cast<std::size_t>(S) * kNumInstructionKinds * M, -1);
  dag.rank_ops_.resize(R);
  for (int r = 0; r < R; ++r) {
    for (const Computation& c : schedule.order[r]) {
      if (c.stage < 0 || c.stage >= S || c.microbatch < 0 || c.microbatch >= M) {
        throw InputError(fmt::format("schedule '{}': rank {} has {} outside {} stages x {} microbatches",
                                     schedule.name, r, describe(c), S, M));
      }
      if (schedule.stage_rank[c.stage] != r) {
        throw InputError(fmt::format("schedule '{}': {} is on rank {}, but stage {} belongs to rank {}", schedule.name,
                                     describe(c), r, c.stage, schedule.stage_rank[c.stage]));
      }
      const bool split_kind = c.kind == InstructionKind::kBackwardInput || c.kind == InstructionKind::kBackwardWeight;
      if (split_kind != schedule.split_backward && c.kind != InstructionKind::kForward) {
        throw InputError(fmt::format("schedule '{}': {} mixes {} backward with a {} schedule", schedule.name,
                                     describe(c), split_kind ? "split (I/W)" : "full (B)",
                                     schedule.split_backward ? "split-backward" : "full-backward"));
      }
      int& slot = dag.index_[(static_cast<std::size_t>(c.stage) * kNumInstructionKinds + static_cast<int>(c.kind)) * M +
                             c.microbatch];
      if (slot >= 0) {
        throw InputError(fmt::format("schedule '{}': {} appears more than once", schedule.name, describe(c)));
      }
      slot = static_cast<int>(dag.ops_.size());
      dag.ops_.push_back(c);
      dag.rank_.push_back(r);
      dag.rank_ops_[r].push_back(slot);
    }
  }
  const InstructionKind bwd = schedule.split_backward ? InstructionKind::kBackwardInput : InstructionKind::kBackward;
  std::vector<InstructionKind> needed = {InstructionKind::kForward, bwd};
  if (schedule.split_backward) needed.push_back(InstructionKind::kBackwardWeight);
  for (int s = 0; s < S; ++s)
    for (InstructionKind k : needed)
      for (int m = 0; m < M; ++m)
        if (dag.find({s, m, k}) < 0) {
          throw InputError(fmt::format("schedule '{}': computation {} is missing", schedule.name,
                                       describe({s, m, k})));
        }

  // Edge list, then CSR.
  std::vector<std::pair<int, int>> edges;
  edges.reserve(dag.ops_.size() * 3);
  for (int r = 0; r < R; ++r)
    for (std::size_t i = 1; i < dag.rank_ops_[r].size(); ++i) edges.emplace_back(dag.rank_ops_[r][i - 1], dag.rank_ops_[r][i]);
  for (int s = 0; s < S; ++s) {
    for (int m = 0; m < M; ++m) {
      const int f = dag.find({s, m, InstructionKind::kForward});
      const int b = dag.find({s, m, bwd});
      if (s + 1 < S) {
        edges.emplace_back(f, dag.find({s + 1, m, InstructionKind::kForward}));
        edges.emplace_back(dag.find({s + 1, m, bwd}), b);
      }
      edges.emplace_back(f, b);
      if (schedule.split_backward) edges.emplace_back(b, dag.find({s, m, InstructionKind::kBackwardWeight}));
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  const int n = dag.num_ops();
  dag.succ_offset_.assign(n + 1, 0);
  dag.pred_offset_.assign(n + 1, 0);
  for (auto [u, v] : edges) {
    ++dag.succ_offset_[u + 1];
    ++dag.pred_offset_[v + 1];
  }
  for (int i = 0; i < n; ++i) {
    dag.succ_offset_[i + 1] += dag.succ_offset_[i];
    dag.pred_offset_[i + 1] += dag.pred_offset_[i];
  }
  dag.succ_.resize(edges.size());
  dag.pred_.resize(edges.size());
  {
    std::vector<int> sp(dag.succ_offset_.begin(), dag.succ_offset_.end() - 1);
    std::vector<int> pp(dag.pred_offset_.begin(), dag.pred_offset_.end() - 1);
    for (auto [u, v] : edges) {
      dag.succ_[sp[u]++] = v;
      dag.pred_[pp[v]++] = u;
    }
  }
  // Kahn's algorithm; ties broken by op id for a deterministic order.
  std::vector<int> indeg(n);
  for (int v = 0; v < n; ++v) indeg[v] = dag.pred_offset_[v + 1] - dag.pred_offset_[v];
  dag.topo_.reserve(n);
  for (int v = 0; v < n; ++v)
    if (indeg[v] == 0) dag.topo_.push_back(v);
  for (std::size_t head = 0; head < dag.topo_.size(); ++head) {
    for (int w : dag.successors(dag.topo_[head]))
      if (--indeg[w] == 0) dag.topo_.push_back(w);
  }
  if (static_cast<int>(dag.topo_.size()) != n) {
    // A deadlock: report the first blocked computation of each rank.
    std::string blocked;
    for (int r = 0; r < R; ++r) {
      for (int id : dag.rank_ops_[r]) {
        if (indeg[id] > 0) {
          blocked += fmt::format("{}rank {} waits at {}", blocked.empty() ? "" : "; ", r, describe(dag.ops_[id]));
          break;
        }
      }
    }
    throw InputError(fmt::format("schedule '{}': the per-rank orders deadlock (dependency cycle): {}", schedule.name,
                                 blocked));
  }
  return dag;
}

Timeline compute_timeline(const Dag& dag, std::span<const double> durations_s) {
  const int n = dag.num_ops();
  if (static_cast<int>(durations_s.size()) != n) {
    throw std::invalid_argument(fmt::format("compute_timeline: {} durations for {} ops", durations_s.size(), n));
  }
  Timeline t;
  t.start_s.assign(n, 0.0);
  t.end_s.assign(n, 0.0);
  for (int v : dag.topological_order()) {
    double start = 0.0;
    for (int u : dag.predecessors(v)) start = std::max(start, t.end_s[u]);
    t.start_s[v] = start;
    t.end_s[v] = start + durations_s[v];
    t.time_s = std::max(t.time_s, t.end_s[v]);
  }
  return t;
}

}  // namespace perseus
