// The graph-cut walk: Phillips–Dessouky steps over the critical network (Perseus §4.2).
#include "graph_cut_walk.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace perseus::detail {

GraphCutWalk::GraphCutWalk(const DagCsr& dag, const CostModels& costs, MinCutEngine engine)
    : costs_(costs), cpm_(dag), engine_(engine) {
  const int n = dag.num_ops;
  std::vector<std::int64_t>& dur = cpm_.durations();
  choice_.resize(n);
  // T_min: every op at its fastest duration (for progress reporting).
  for (int v = 0; v < n; ++v) dur[v] = costs.of_op(v).q_min;
  cpm_.compute();
  fastest_units_ = cpm_.iteration_units();
  for (int v = 0; v < n; ++v) {
    dur[v] = costs.of_op(v).q_max;
    choice_[v] = costs.of_op(v).choice.back();
  }
  cpm_.compute();
}

CutSolver& GraphCutWalk::solver() const {
  prepare({});
  return *solver_;
}

bool GraphCutWalk::step() {
  const CutResult cut = solver().find_cut();
  if (cut.status != CutResult::Status::kReused) ++num_max_flows_;
  if (cut.status == CutResult::Status::kInfinite) return false;
  return apply_cut(*cut.faster, *cut.slower);
}

bool GraphCutWalk::apply_cut(const std::vector<int>& faster, const std::vector<int>& slower) {
  std::vector<std::int64_t>& dur = cpm_.durations();
  faster_ = &faster;
  lengthened_.clear();
  for (int v : slower)
    if (dur[v] < costs_.of_op(v).q_max) lengthened_.push_back(v);
  if (faster.empty()) return false;
  const std::int64_t old_T = cpm_.iteration_units();
  for (int v : faster) --dur[v];
  for (int v : lengthened_) ++dur[v];
  cpm_.compute();
  if (cpm_.iteration_units() >= old_T && !lengthened_.empty()) {
    // Lengthening made a non-critical path critical: keep only the speed-ups.
    for (int v : lengthened_) --dur[v];
    lengthened_.clear();
    cpm_.compute();
    solver().forget_cut();
  }
  if (cpm_.iteration_units() >= old_T) throw std::logic_error("planner: a min-cut step did not shorten the iteration");
  return true;
}

bool GraphCutWalk::update_choice(std::vector<std::pair<std::int32_t, std::uint16_t>>& changes) {
  // Only ops whose duration moved can change candidate; record them in op order.
  const std::vector<int>& faster = *faster_;
  touched_.clear();
  if (std::is_sorted(faster.begin(), faster.end()) && std::is_sorted(lengthened_.begin(), lengthened_.end())) {
    // Both lists come in op order (the solvers list cut ops by op id): merge them.
    std::merge(faster.begin(), faster.end(), lengthened_.begin(), lengthened_.end(), std::back_inserter(touched_));
  } else {
    for (int v : faster) touched_.push_back(v);
    for (int v : lengthened_) touched_.push_back(v);
    std::sort(touched_.begin(), touched_.end());
  }
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  const std::size_t before = changes.size();
  for (int v : touched_) {
    const std::uint16_t c = costs_.of_op(v).choice_at(cpm_.duration(v));
    if (c != choice_[v]) {
      choice_[v] = c;
      changes.emplace_back(v, c);
    }
  }
  return changes.size() != before;
}

}  // namespace perseus::detail
