// The critical network of one graph-cut step (private to the library): the one description
// of its nodes, arcs and capacities, shared by every cut solver (cut_solver.hpp).
//
// Phillips & Dessouky (1977), as used in Perseus §4.2: the ops and edges on a critical path
// form a network whose minimum s-t cut says which ops to shorten (cut forward) and which to
// lengthen (cut backward) by one time unit so that the iteration gets one unit faster at the
// least cost. Each op v is split into an arc start(v) -> end(v). Shortening v costs its
// speed-up cost ub; lengthening it saves its slow-down saving lb, which enters as the node
// weights +lb on start(v) and −lb on end(v) (arcs to the sink / from the source).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "cost_model.hpp"
#include "critical_path.hpp"

namespace perseus::detail {

/// What an arc of the critical network stands for. Per op v; capacity 0 means "absent".
enum class ArcRole : std::uint8_t {
  kSpeedUp = 0,               ///< start(v) -> end(v): max(0, ub − lb); +inf when v is at its fastest.
  kFromSource = 1,            ///< s -> start(v): +inf when v starts at time 0.
  kToSink = 2,                ///< end(v) -> t: +inf when v ends at T and has no successors.
  kSlowDownSavingStart = 3,   ///< start(v) -> t: lb when lb > 0 (node weight +lb on start(v)).
  kSlowDownSavingEnd = 4,     ///< s -> end(v): lb when lb > 0 (node weight −lb on end(v)).
  kSlowDownCostStart = 5,     ///< s -> start(v): −lb when lb < 0 (node weight +lb on start(v)).
  kSlowDownCostEnd = 6,       ///< end(v) -> t: −lb when lb < 0 (node weight −lb on end(v)).
};
/// Number of ArcRole values: arcs per op in the full network.
inline constexpr int kArcRolesPerOp = 7;
/// The node-weight roles in the order the cold solver lists them: start(v)'s, then end(v)'s.
inline constexpr ArcRole kNodeWeightRoles[] = {ArcRole::kSlowDownSavingStart, ArcRole::kSlowDownCostStart,
                                               ArcRole::kSlowDownSavingEnd, ArcRole::kSlowDownCostEnd};
// Besides the per-op arcs: one arc end(v) -> start(w) per DAG edge v -> w, +inf when the
// edge is critical (CriticalPath::edge_is_critical()), else 0.

/// Costs of a critical op at its current duration, and the capacities they give its arcs.
struct CriticalOp {
  double speed_up_cost = 0;     ///< ub: cost of one unit faster, J (0 when !can_speed_up).
  double slow_down_saving = 0;  ///< lb: saving of one unit slower, J (0 at the slowest duration).
  bool can_speed_up = false;    ///< Duration above the model's fastest (q_min).
  bool starts_first = false;    ///< Starts at time 0.
  bool ends_last = false;       ///< Ends at T and has no successors.

  /// Op v's costs from its model and the critical path (v must be critical).
  static CriticalOp of(const CriticalPath& cpm, const CostModel& model, int v) {
    CriticalOp op;
    op.set_costs(model, cpm.duration(v));
    op.set_position(cpm, v);
    return op;
  }
  /// The cost fields at duration d (units).
  void set_costs(const CostModel& model, std::int64_t d) {
    can_speed_up = d > model.q_min;
    speed_up_cost = can_speed_up ? model.speed_up_cost(d) : 0.0;
    slow_down_saving = model.slow_down_saving(d);
  }
  /// starts_first and ends_last of op v on the critical path.
  void set_position(const CriticalPath& cpm, int v) {
    starts_first = cpm.earliest_start(v) == 0;
    ends_last = cpm.earliest_finish(v) == cpm.iteration_units() && !cpm.dag().has_successors(v);
  }
  /// Capacity of this op's arc of role `role`; `inf` stands for an infinite capacity.
  double capacity(ArcRole role, double inf) const {
    const double lb = slow_down_saving;
    switch (role) {
      case ArcRole::kSpeedUp: return can_speed_up ? std::max(0.0, speed_up_cost - lb) : inf;
      case ArcRole::kFromSource: return starts_first ? inf : 0.0;
      case ArcRole::kToSink: return ends_last ? inf : 0.0;
      case ArcRole::kSlowDownSavingStart:
      case ArcRole::kSlowDownSavingEnd: return lb > 0 ? lb : 0.0;
      case ArcRole::kSlowDownCostStart:
      case ArcRole::kSlowDownCostEnd: return lb < 0 ? -lb : 0.0;
    }
    return 0.0;
  }
};

/// Nodes and arcs of the critical network over all ops of a DAG (the full network: every
/// op's kArcRolesPerOp arcs, then one arc per DAG edge; a step's critical network is the
/// full network with the capacities of that step, 0 off the critical ops and edges).
/// Nodes: start(v) = 2v, end(v) = 2v + 1, source 2n, sink 2n + 1.
class CriticalNetwork {
 public:
  explicit CriticalNetwork(const DagCsr& dag);
  int num_nodes() const { return 2 * num_ops_ + 2; }
  int source() const { return 2 * num_ops_; }
  int sink() const { return 2 * num_ops_ + 1; }
  static int start_node(int v) { return 2 * v; }
  static int end_node(int v) { return 2 * v + 1; }
  /// (tail, head) of op v's arc of role `role`.
  std::pair<int, int> ends(int v, ArcRole role) const;
  /// (tail, head) of the arc of DAG edge v -> w.
  static std::pair<int, int> edge_ends(int v, int w) { return {end_node(v), start_node(w)}; }

  /// Index in arcs() of op v's arc of role `role`.
  static int arc_index(int v, ArcRole role) { return kArcRolesPerOp * v + static_cast<int>(role); }
  /// Index in arcs() of the arc of op v's j-th out-edge (successor order of DagCsr).
  int edge_arc_index(int v, int j) const { return edge_first_[v] + j; }
  /// Indices [edge_arcs_begin(v), edge_arcs_end(v)) of op v's out-edge arcs.
  int edge_arcs_begin(int v) const { return edge_first_[v]; }
  int edge_arcs_end(int v) const { return edge_first_[v + 1]; }
  /// Every arc (tail, head), in index order.
  const std::vector<std::pair<int, int>>& arcs() const { return arcs_; }

 private:
  int num_ops_ = 0;
  std::vector<int> edge_first_;  // per op: index of its first out-edge arc
  std::vector<std::pair<int, int>> arcs_;
};

}  // namespace perseus::detail
