// Large-neighbourhood search on a plan at a deadline (private to the library): free a window
// of computations, hold every other op's clock, solve the window's exact discrete subproblem
// with COIN-OR CBC, keep the result when the profile says it is better. Used by the certified
// planner's polish stage (PlannerOptions::polish_time_s, window_polish.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"

namespace perseus::detail {

/// Shape of the windows the search frees.
struct WindowSearchConfig {
  /// Computations per window (>= 1; capped at the DAG's size).
  int window_ops = 24;
  /// Candidates a freed op may take: its incumbent's index ± radius in its table (< 0: all).
  int radius = -1;
  /// CBC wall-clock limit per window, s (> 0): a window not solved by then keeps the best
  /// improvement CBC found, if any. Not used when window_nodes > 0.
  double window_time_s = 0.5;
  /// CBC branch-and-bound node limit per window (>= 0; 0: window_time_s limits it instead). A
  /// count, so the search does the same work on any machine.
  int window_nodes = 0;
};

/// What a search did.
struct WindowSearchStats {
  int windows = 0;       ///< Window subproblems handed to CBC.
  int improved = 0;      ///< Windows whose result was kept (profile-evaluated, better).
  bool stopped = false;  ///< `stop` returned true before the search converged.
};

/// The search on one DAG. Each window subproblem at deadline τ (s):
///   minimise   Σ_{i free} Σ_k ê_ik x_ik        (ê = E − P_block t, J: the energy at τ up to constants)
///   subject to Σ_k x_ik = 1, x binary             (one candidate k per freed op i)
///              s_j ≥ s_i + d_i  (every DAG edge),  s_i + d_i ≤ τ  (every op without successors),
///              d_i = Σ_k t_ik x_ik (free),  d_i = the incumbent's time (held ops),  s ≥ 0,
/// the exact discrete problem restricted to the window (the MILP of `perseus_planner_bench milp`,
/// with the held ops' x fixed), solved in condensed form: the held ops fold into longest
/// held-only paths between freed ops (head, tail and link rows), so its size does not grow with
/// the DAG. Energy at τ = Σ_i ê_i + P_block × R × τ (Perseus §3.1's
/// accounting, GPUs blocking at P_block until τ), so a lower objective is a lower energy at τ.
/// Windows, in turn: slices of the incumbent's schedule by the middle of each op's run (consecutive
/// work across all ranks), blocks of consecutive microbatches across all stages, and pairs of adjacent stages.
/// Every result is rounded to one candidate per op, slack-filled up to τ and re-evaluated from the
/// candidates' profile times and energies (longest path, Σ energies); it replaces the incumbent
/// only when its time is ≤ τ and its energy at τ is lower. Stops when as many windows in a row as
/// a round has improved nothing (each is then optimal with the others held, up to CBC's time
/// limit), or when `stop` returns true. CBC's solver driver keeps global state, so window solves
/// are serialized process-wide (a mutex): searches on several threads are safe but do not run
/// their CBC solves in parallel.
class WindowSearch {
 public:
  /// `dag` and `cands` (per op: candidates time ascending with effective energy descending, as
  /// FrontierBuilder keeps them) must outlive the search. p_block_w: P_block, W.
  WindowSearch(const Dag& dag, const std::vector<const Candidates*>& cands, double p_block_w,
               WindowSearchConfig config = {});
  /// Improves `choice` (one candidate index per op, iteration time ≤ deadline_s) in place.
  /// `stop` (optional) is polled between windows and inside CBC (per node): true ends the search
  /// with the best plan so far. Returns true when `choice` changed (then it is strictly better at
  /// deadline_s and its time is ≤ deadline_s). Throws std::invalid_argument when `choice` does
  /// not fit the DAG or is slower than deadline_s. max_windows >= 0: at most that many windows
  /// are handed to CBC in this call (the search then ends with `stats.stopped`); < 0: no cap.
  bool improve(std::vector<std::uint16_t>& choice, double deadline_s, const std::function<bool()>& stop,
               WindowSearchStats& stats, int max_windows = -1);
  /// Energy at deadline_s (J) of `choice` with time T ≤ deadline_s (E + P_block R (τ − T));
  /// +infinity when T > deadline_s. Evaluated from the candidates' profile numbers.
  double energy_at(const std::vector<std::uint16_t>& choice, double deadline_s) const;

  /// One whole-DAG solve instead of windows: the exact discrete problem at deadline_s (the class
  /// comment's MILP with every op free, in the form `perseus_planner_bench milp` writes: columns
  /// x_ik, d_i and s_i, one precedence row per DAG edge), each op restricted to the vertices of
  /// the lower convex hull of its candidates' (time, effective energy) (hull_vertex_indices(),
  /// 8–11 of the 25–30 candidates on the GPT-3 A40/A100 profiles: where the LP relaxation's
  /// optimum lies; docs/planner2.md "Session 28"). CBC runs at most max_nodes branch-and-bound
  /// nodes (a count, not seconds, so the result does not depend on the machine's speed), without
  /// a cutoff (with the incumbent as cutoff its diving heuristics found nothing on these
  /// problems) and with the feasibility pump and RINS off (see solve_window()). Its best plan is
  /// slack-filled and judged from the profile as a window's is: `choice` is replaced, and true
  /// returned, only when it is not slower than deadline_s and has less energy at it. `stop` is
  /// polled between nodes. Same preconditions as improve().
  bool improve_whole_dag_on_hull(std::vector<std::uint16_t>& choice, double deadline_s, int max_nodes,
                                 const std::function<bool()>& stop);

 private:
  /// Throws std::invalid_argument when `choice` does not fit the DAG (size, candidate indices)
  /// or is slower than deadline_s (s).
  void check_plan(const std::vector<std::uint16_t>& choice, double deadline_s) const;
  /// Replaces `choice` by `next` or its slack-filled version (fill_slack() up to deadline_s),
  /// whichever has less energy at deadline_s, when that is lower than `choice`'s; true then.
  bool keep_if_better(std::vector<std::uint16_t> next, std::vector<std::uint16_t>& choice, double deadline_s) const;
  /// The windows (op lists) for incumbent `choice`.
  std::vector<std::vector<int>> windows(const std::vector<std::uint16_t>& choice) const;
  /// Solves one window; true when `choice` was replaced by a better plan.
  bool solve_window(const std::vector<int>& free_ops, std::vector<std::uint16_t>& choice, double deadline_s,
                    const std::function<bool()>& stop);

  const Dag& dag_;
  const std::vector<const Candidates*>& cands_;
  double p_block_w_ = 0;
  WindowSearchConfig config_;
};

}  // namespace perseus::detail
