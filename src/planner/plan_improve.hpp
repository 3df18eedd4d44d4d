// Discrete plans from the LP relaxation (private to the library): rounding, then slack
// filling. Used by the planner's second stage (solve_frontier()).
#pragma once

#include <cstdint>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"

namespace perseus::detail {

/// Rounds a fractional LP schedule (start_s, duration_s per op, s) to one candidate per op:
/// in topological order each op starts when its predecessors (as rounded) end and takes the
/// slowest candidate that still ends by its LP finish time start_s + duration_s, so the
/// rounded plan is never slower than the LP schedule. cands[i]: op i's candidates, time
/// ascending with effective energy descending (pareto_points(points, P_block)).
/// Writes candidate indices into `choice` (resized to dag.num_ops()).
void round_lp_schedule(const Dag& dag, const std::vector<const Candidates*>& cands, const std::vector<double>& start_s,
                       const std::vector<double>& duration_s, std::vector<std::uint16_t>& choice);

/// Slack filling: lowers the clock of every op whose slack allows it without lengthening
/// the iteration (one reverse-topological pass: each op takes the slowest candidate that fits
/// between its earliest start and the latest start of its successors). With candidates
/// sorted by time ascending and effective energy descending this never raises the energy.
/// horizon_s > 0: the iteration may end as late as horizon_s (s) instead of at its current T
/// (a deadline). scratch vectors are resized as needed.
void fill_slack(const Dag& dag, const std::vector<const Candidates*>& cands, std::vector<std::uint16_t>& choice,
                std::vector<double>& scratch_time, std::vector<double>& latest_start, double horizon_s = 0);

/// Rounds of tighten()'s critical-path pass before its one-pass fallback: a complete walk's
/// last plan needs at most this many (the golden cases' plans are the same with 4 or 65,536); a
/// walk stopped early (planning_budget_s) leaves a plan far slower than the target, where each
/// round costs a timeline of the whole DAG (1024 stages x 512 microbatches, planning_budget_s 0:
/// over 12 min to `ready` before the fallback; bench/server_big_job.sh).
constexpr int kTightenRounds = 4;

/// Speeds up ops until the plan's iteration time is <= target_s (s; at least the time of the
/// all-fastest plan, candidate 0 of every op): each round moves every op on a critical path
/// one candidate faster; after kTightenRounds rounds one pass finishes the job: in topological
/// order each op keeps the slowest candidate, no slower than its current one, that ends by its
/// latest finish with every later op at its fastest. Ops only get faster; slack reclamation
/// afterwards undoes speed-ups that were not needed.
void tighten(const Dag& dag, const std::vector<const Candidates*>& cands, std::vector<std::uint16_t>& choice,
             double target_s);

/// Indices of `c`'s candidates that are vertices of the lower convex hull of (time, effective
/// energy E − p_block_w × t), time ascending; the fastest candidate is always one.
std::vector<std::uint16_t> hull_vertex_indices(const Candidates& c, double p_block_w);

/// hull_vertex_indices() of every op's candidates, computed once per distinct candidate list.
struct HullVertices {
  HullVertices(const std::vector<const Candidates*>& cands, double p_block_w);
  std::vector<std::vector<std::uint16_t>> lists;
  std::vector<const std::vector<std::uint16_t>*> of_op;  ///< op i -> its list in `lists`
};

/// Where vertex rounding (round_to_hull_vertices()) starts each op.
enum class VertexStart {
  kLowerVertex,       ///< the hull vertex just below (or at) its LP duration
  kUpperWhereItFits,  ///< the next vertex instead where the op still ends by its LP latest finish
};

/// Vertex rounding of a fractional schedule (duration_s per op, s; deadline horizon_s, s): an
/// LP duration between two hull vertices a < b is worth their convex combination, and a
/// Pareto candidate in between lies above it, so rounding to the nearest candidate
/// (round_lp_schedule()) pays that height on every such op. Here instead:
///  1. each op starts at a (start_at = kLowerVertex), or in topological order at b where it
///     still ends by its latest finish in the LP schedule (kUpperWhereItFits); either way the
///     plan meets horizon_s: an op's predecessors end by its LP latest start, and a is no
///     slower than its LP duration;
///  2. single ops move to their next hull vertex, the best effective energy (E − p_block_w t)
///     saved per second first, while their float (latest finish − earliest start) allows;
///  3. fill_slack() over all candidates.
/// Step 2 is what finds the plans LP rounding misses (a few ops jumping whole hull segments,
/// e.g. 1335 -> 960 MHz on A40, instead of every op stopping in between). Measured
/// (docs/planner2.md, session 9): GPT-3 A40 8 x 48's largest gap to the bound 2.30 -> 0.71 %,
/// its saving at 1.02 x the all-max time 14.07 -> 15.09 %. Cost O(ops + edges) for steps 1 and
/// 3, O(moves × log ops + ops touched by the moves) for step 2.
void round_to_hull_vertices(const Dag& dag, const std::vector<const Candidates*>& cands, const HullVertices& hull,
                            double p_block_w, const std::vector<double>& duration_s, double horizon_s,
                            VertexStart start_at, std::vector<std::uint16_t>& choice,
                            std::vector<double>& scratch_time, std::vector<double>& latest_start);

/// Ruin and recreate (Schrimpf et al. 2000) at deadline horizon_s (s): up to `rounds` times,
/// and until `patience` rounds in a row found nothing, a connected neighbourhood of 2..max_ruin
/// ops around a random op (deterministic: seeded by `seed`) goes to its fastest hull vertex,
/// then those ops move back toward slower hull vertices, best effective energy saved per
/// second first (vertex rounding's step 2, round_to_hull_vertices()), and fill_slack() spends
/// what is left; the result is kept when its effective energy Σ (E − p_block_w t) is lower
/// and it meets horizon_s. It escapes the local optima of single moves: time moves between
/// neighbouring ops as whole hull segments. Returns true when `choice` changed; `tries`
/// (optional) receives the rounds run. Cost per round O(ops + edges + moves × log ops).
bool ruin_and_recreate(const Dag& dag, const std::vector<const Candidates*>& cands, const HullVertices& hull,
                       double p_block_w, double horizon_s, std::vector<std::uint16_t>& choice, int rounds,
                       int patience, int max_ruin, unsigned seed, int* tries = nullptr);

/// Local search at a deadline: repeatedly (pairs = true) makes one op faster and another
/// slower, or makes one op faster and lets fill_slack() spend the freed time, where the
/// iteration still ends by deadline_s and the effective energy Σ (E − p_block_w × t) (hence
/// the energy at the deadline) drops; first improvement, at most max_rounds moves.
/// A move changes an op's clock by at most 8 candidates (kPairMoveClocks). Cost per round
/// O(ops² × 8² × (ops + edges)) with pairs, O(ops × 8 × (ops + edges)) without. Returns true
/// when `choice` changed.
bool improve_by_pairs(const Dag& dag, const std::vector<const Candidates*>& cands, double p_block_w,
                      double deadline_s, std::vector<std::uint16_t>& choice, int max_rounds, bool pairs = true);

}  // namespace perseus::detail
