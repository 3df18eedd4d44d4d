// The iteration time–energy Pareto frontier (Perseus planner).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/plan.hpp"
#include "perseus/profile.hpp"

namespace perseus {

/// Planner algorithm (a validated option of the planner, not an environment variable).
enum class PlannerMode : std::uint8_t {
  /// Today's planner as published (Perseus §4.2): graph-cut frontier over the (time, energy)
  /// Pareto clocks, slack reclamation among them; no lower bound.
  kGraphCut = 0,
  /// Planner 2.0 (default): the graph-cut frontier as a first stage, clocks below the
  /// energy-minimal one where effective energy drops (slack filling), plans rounded from the
  /// LP relaxation at sampled deadlines up to 2 × T_min (straggler regime), and a certified
  /// lower bound LB(T) for every point. See docs/planner2.md (Planner 2.0, issue 17).
  kCertified = 1,
};
/// "graph-cut" or "certified" (the CLI's --planner and Python's planner= names).
const char* to_string(PlannerMode mode);
/// Inverse of to_string(PlannerMode); nullopt for any other name.
std::optional<PlannerMode> parse_planner_mode(std::string_view name);

/// Max-flow engine of the graph-cut steps (a validated option of the planner, not an
/// environment variable). Every engine computes the same minimal source-side min cut, so the
/// frontier does not depend on it (tests/golden/engines_agree.sh); they differ in speed only.
enum class MinCutEngine : std::uint8_t {
  kWarm = 0,              ///< One network over all ops, warm-started Dinic between steps (default before session 7).
  kDinic = 1,             ///< Dinic's algorithm on a network rebuilt every step (cold).
  kLemon = 2,             ///< LEMON's Preflow (Goldberg–Tarjan push-relabel), cold.
  kBoykovKolmogorov = 3,  ///< Boost.Graph's Boykov–Kolmogorov (2004), cold.
  /// Default: our Boykov–Kolmogorov on the warm engine's network, search trees kept between
  /// steps and lowered capacities absorbed by t-link reparametrization (Kohli & Torr 2007,
  /// dynamic graph cuts); same frontiers as kWarm, faster on deep pipelines
  /// (docs/performance.md, "Session 7").
  kDynamic = 4,
};

/// "warm", "dinic", "lemon", "boost-bk" or "dynamic".
const char* to_string(MinCutEngine engine);
/// Inverse of to_string(MinCutEngine); nullopt for any other name.
std::optional<MinCutEngine> parse_min_cut_engine(std::string_view name);

/// How the certified planner (PlannerMode::kCertified) gets its lower bound LB(T) and the plans
/// beyond the graph-cut frontier (a validated option of the planner). Both bounds are certified
/// by lagrangian_bound() from the profile's own numbers (docs/planner2.md).
enum class BoundMethod : std::uint8_t {
  kAuto = 0,      ///< Default: kLp below kHullWalkMinOps computations, then the hull walk as well (and
                  ///< more LP refinement) where the LP stage leaves a point more than kAutoHullWalkGapPct
                  ///< above the bound; kHullWalk from kHullWalkMinOps on (docs/planner2.md, session 26).
  kLp = 1,        ///< CLP solves of the LP relaxation at sampled and refined deadlines, LP-rounded plans.
  kHullWalk = 2,  ///< A second Phillips–Dessouky walk over every op's whole (time, effective energy)
                  ///< hull at half the time unit: its max-flows are the LP's dual flows (Fulkerson
                  ///< 1961), its schedules are rounded like LP schedules; it scales like the graph cut
                  ///< (docs/performance.md). On DAGs of up to 2,048 computations, LP solves (the LP
                  ///< stage's budget) then refine where its plans are furthest from the bound.
};
/// kAuto's switch from kLp to kHullWalk, computations: from here on the hull walk plus LP
/// refinement gives smaller gaps than the LP stage alone in about the same time (GPT-3 8 x 24
/// and up); below it the LP stage is faster (GPT-3 A100 8 x 12: 0.047 s against 0.08 s).
inline constexpr int kHullWalkMinOps = 256;
/// kAuto below kHullWalkMinOps: the hull walk is added when the LP stage's largest gap to the
/// bound (points and deadlines up to the LP stage's end) is above this, percent (issue 17's target).
inline constexpr double kAutoHullWalkGapPct = 0.5;
/// "auto", "lp" or "hull-walk".
const char* to_string(BoundMethod method);
/// Inverse of to_string(BoundMethod); nullopt for any other name.
std::optional<BoundMethod> parse_bound_method(std::string_view name);
/// The method kAuto stands for on a DAG of `num_ops` computations (others: themselves).
BoundMethod resolve_bound_method(BoundMethod method, int num_ops);

/// The parts of a solve, in the order they run, for progress reports (PlannerOptions::progress).
enum class SolveStage {
  kGraphCutWalk,  ///< Phillips–Dessouky steps from T_max down to T_min (both planners)
  kHullWalk,      ///< PlannerMode::kCertified with BoundMethod::kHullWalk: the bound's own walk
  kLpSolves,      ///< PlannerMode::kCertified with BoundMethod::kLp: LP solves (sampling, refinement)
  kPolish,        ///< PlannerOptions::polish_time_s > 0: window search (fraction of its seconds)
};
/// "graph-cut walk", "lower bound: hull walk", "lower bound: LP solves", "window search".
const char* to_string(SolveStage stage);

/// Range of the planner's time quantum PlannerOptions::unit_time_s, s.
inline constexpr double kMinUnitTimeS = 1e-7, kMaxUnitTimeS = 10;
/// Range of PlannerOptions::polish_solves (0: none).
inline constexpr int kMaxPolishSolves = 1'000'000;
/// Throws InputError (field "polish_solves") unless 0 <= n <= kMaxPolishSolves: the one check of
/// the polish's solve budget behind PlannerOptions, OptimizeConfig and the Python keyword.
void check_polish_solves(int n);

/// Planner settings.
struct PlannerOptions {
  double p_block_w = 0.0;      ///< P2P blocking power P_block, W (0..100000).
  double unit_time_s = 1e-3;   ///< Time quantum u of the graph-cut steps, s (1e-7..10; at most
                               ///< 1e6 quanta between an op's fastest and slowest time).
  bool reclaim_slack = true;   ///< After each step, lower frequencies of ops with slack (Perseus §4.2).
  PlannerMode mode = PlannerMode::kCertified;  ///< Algorithm (see PlannerMode).
  MinCutEngine min_cut_engine = MinCutEngine::kDynamic;  ///< Max-flow engine (see MinCutEngine).
  BoundMethod bound_method = BoundMethod::kAuto;       ///< kCertified: bound and extra plans (see BoundMethod).
  /// kCertified: LP solves at most (sampling plus refinement where the gap exceeds
  /// refine_gap_pct); the planner also caps them at max(40, 320000 / computations). 1..100000.
  int max_lp_solves = 400;
  /// kCertified: a frontier point whose energy is more than this % above the bound at its
  /// time gets an exact LP solve (a tighter bound and a rounded plan at that time). >= 0.
  /// 0.45 keeps issue 17's 0.5 % target with few solves (GPT-3 A100 8 x 12: 72 solves, 0.05 s);
  /// 0.25 finds slightly better plans for ~3x the LP time (docs/planner2.md "Session 19").
  double refine_gap_pct = 0.45;
  /// kCertified: local-search moves (speed one op up, refill the slack) per LP-rounded plan on
  /// DAGs of more than 16 ops (smaller ones also try pair moves, up to 4 × ops). 0..1000000.
  int local_search_moves = 0;
  /// Bound on the solve's wall-clock time, s (< 0: none; 0..1e9). Checked before every
  /// graph-cut step and every LP solve: once reached, the solve stops and returns the
  /// frontier found so far, marked Frontier::partial (never an exception). 0 gives the
  /// slowest plan, the all-max plan and the last plan sped up to the all-max time.
  double time_budget_s = -1;
  /// Bound on the number of frontier points (0: none; else 1..1e9). The graph-cut walk stops
  /// once the frontier found so far (with the all-max plan) has this many points; a finished
  /// solve with more (LP-stage points) keeps this many spread evenly by index, both ends kept.
  /// Either way the frontier is marked Frontier::partial.
  std::int64_t max_points = 0;
  /// kCertified: seconds of polish on the finished frontier's plans, 0..86400 (0, the default:
  /// none), with COIN-OR CBC (src/planner/window_search.hpp, window_polish.cpp): the plan at the
  /// all-max time by window search (windows of computations re-solved exactly, every other op's
  /// clock held); then, on DAGs of up to 512 computations, whole-DAG MILPs restricted to hull
  /// clocks at every point and deadline still more than refine_gap_pct above the lower bound,
  /// worst first; then window search at each of them. A better plan is kept only when the
  /// profile evaluates it better at its deadline and not slower. Wall clock, within
  /// time_budget_s; cancellation (`cancelled`) is polled per CBC node. Outside 0..86400 (or NaN):
  /// InputError (field "polish_time_s"). docs/planner2.md (sessions 7 and 28) has what S seconds
  /// buy; the method is ours (large-neighbourhood search and MILP with CBC), not the paper's.
  double polish_time_s = 0;
  /// kCertified: the polish stage's budget as a count of CBC solves (window subproblems and
  /// whole-DAG solves), 0..1,000,000 (0, the default: no count). With it each window solve is
  /// limited by branch-and-bound nodes instead of seconds, so the polish does the same work and
  /// gives the same plans on any machine and under any load (bit-identical frontiers), unless
  /// polish_time_s or time_budget_s, wall-clock limits that still apply, runs out first. The
  /// polish runs when either polish_time_s or polish_solves is > 0. Outside 0..1,000,000:
  /// InputError (field "polish_solves"). docs/planner2.md ("Session 30") has what N solves buy.
  int polish_solves = 0;
  /// Threads of the solve itself (1..1024): with >= 2, PlannerMode::kCertified runs the first
  /// part of its bound stage (the LP stage's sampled solves, or the whole hull walk) beside the
  /// graph-cut walk. The frontier does not depend on it.
  int threads = 1;
  /// Optional progress callback, always on the thread that called solve_frontier():
  /// (stage, fraction of that stage done in [0, 1]). Called as a stage starts, about every 1 %
  /// of it, and with 1 as it ends (unless the solve stops early); stages come in SolveStage
  /// order. With threads >= 2 a stage running beside the graph-cut walk is reported (and
  /// `cancelled` polled, about every 0.1 s) while the solve waits for it.
  std::function<void(SolveStage stage, double fraction)> progress;
  /// Optional cancellation check, called once per graph-cut step, hull-walk step and LP solve (and
  /// per simplex iteration inside one), always on the thread that called solve_frontier(): when it
  /// returns true the solve stops and throws PlanningCancelled (the server: job deleted,
  /// shutdown, time budget).
  std::function<bool()> cancelled;
};

/// Thrown by solve_frontier() when PlannerOptions::cancelled returned true.
struct PlanningCancelled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One point of the frontier, evaluated with the profile's real times and energies.
struct FrontierPoint {
  double time_s = 0;                 ///< Iteration time T (longest path), s.
  double energy_j = 0;               ///< Iteration energy E (one pipeline), J.
  double energy_before_reclaim_j = 0;///< E of the graph-cut plan before slack reclamation, J.
  std::int64_t step = 0;             ///< Graph-cut step that produced it (-1: the all-max plan, or a
                                     ///< plan of the LP, hull-walk or polish stage: stored_plan >= 0).
  double tightened_to_s = 0;         ///< > 0: that step's plan was sped up to this T (s).
  /// Certified lower bound (J) on the energy of any plan (same profile clocks, DAG and
  /// accounting) with iteration time <= time_s; 0 when not computed (PlannerMode::kGraphCut).
  double lower_bound_j = 0;
  std::int32_t stored_plan = -1;     ///< >= 0: plan from the LP stage (not a graph-cut step).
};

/// Candidate operating points of one (stage, kind): the time–energy Pareto-optimal
/// frequencies, fastest first, with quantized durations (units of u, rounded up).
struct Candidates {
  std::vector<OperatingPoint> points;  ///< Pareto-optimal, time ascending.
  std::vector<std::int64_t> units;     ///< ceil(time_s / u) per point (ascending).
};

/// Pareto filter: keeps points not strictly dominated in (time_s, effective energy
/// energy_j − p_block_w × time_s); among equal times keeps the lowest. p_block_w = 0 (W) gives
/// the plain (time, energy) filter; the planner uses P_block, because with the iteration time
/// fixed only effective energy matters (a GPU that is not computing draws P_block anyway).
/// Result sorted by time ascending. Source: Perseus §4.1 (Pareto-optimal frequencies, with
/// the effective-energy cost of §4.2 applied to the filter itself).
std::vector<OperatingPoint> pareto_points(const std::vector<OperatingPoint>& points, double p_block_w = 0.0);

/// The whole frontier, from the slowest sensible plan (every op at its slowest Pareto
/// frequency) down to T_min (every critical op at its fastest), time strictly decreasing
/// (the order of energy: see points()). Plans are not stored in full: plan(i) replays the
/// graph-cut steps, so memory is O(ops + total frequency changes).
class Frontier {
 public:
  /// The frontier, slowest first: time_s strictly decreasing; energy_j − p_block_w × R × time_s
  /// strictly increasing (R = GPUs per pipeline; every point is the cheapest plan for a deadline
  /// of its own time with the GPUs blocking at P_block until it). With PlannerMode::kGraphCut
  /// energy_j itself strictly increases; with kCertified, plans slower than the energy minimum
  /// (the straggler regime) can draw more energy_j than a faster one.
  const std::vector<FrontierPoint>& points() const { return points_; }
  /// Number of frontier points (frequency plans).
  std::size_t size() const { return points_.size(); }
  /// Frequency plan of points()[i], evaluated with the profile. Throws std::out_of_range.
  FrequencyPlan plan(std::size_t i) const;
  /// Calls fn(i, plan) once for each index i in `indices`, replaying the graph-cut steps
  /// once (in step order). threads > 1: up to `threads` plans are evaluated (slack
  /// reclamation, timeline) and passed to fn concurrently, each call with its own index, in
  /// no fixed order, so fn must be thread-safe; the plans themselves do not depend on
  /// `threads`. Memory: O(threads × ops) beyond the frontier. The first exception thrown
  /// by fn (or std::out_of_range for a bad index) is rethrown after the running calls end.
  void for_each_plan(const std::vector<std::size_t>& indices,
                     const std::function<void(std::size_t, const FrequencyPlan&)>& fn, int threads = 1) const;
  /// Index of the point that draws the least energy until deadline_s (s): the first (slowest)
  /// point with time_s <= deadline_s, whose energy_j + p_block_w × R × (deadline_s − time_s)
  /// is the lowest of all that meet it, since that quantity rises along points(). This is the
  /// Perseus straggler rule (§3.2) with the GPUs blocking at P_block until the deadline; its
  /// own energy_j need not be the lowest with kCertified (see points()). The fastest point
  /// (last) if none meets the deadline; 0 on an empty frontier. The same index as the general
  /// rule perseus::lowest_energy_within() (perseus/plan.hpp) over points(), found in O(index)
  /// (test `FrontierProperties.MonotoneConsistentAndRespectsDag`).
  std::size_t lowest_energy_within(double deadline_s) const;
  /// Certified lower bound (J) on the energy of any plan with iteration time <= deadline_s:
  /// the best of the LP tangents LB(τ_k) + g_k (deadline − τ_k) and LB(τ_k) for τ_k >= deadline,
  /// and of 0 (no energy is negative). 0 when no bound was computed (PlannerMode::kGraphCut).
  /// Source: LP duality (see lower_bound.hpp); LB is convex and non-increasing in the deadline.
  double lower_bound_at(double deadline_s) const;
  /// Whether a lower bound was computed (PlannerMode::kCertified and the bound stage ran; a
  /// graph-cut planner or a solve stopped before that stage has none).
  bool has_lower_bound() const { return !tangents_.empty(); }
  /// The slowest deadline the bound stage solved at, s (2 × T_min at most): beyond it LB is
  /// extrapolated from the lines (valid, but weak: a profile with a 7 × T_min frontier showed
  /// gaps of 150,000 % there). 0 without a bound.
  double bound_end_s() const;
  /// Largest 100 × (E − LB) / LB over the frontier points (their own time) up to bound_end_s(),
  /// %; 0 without a bound (has_lower_bound()).
  double max_optimality_gap_pct() const;
  /// Largest gap a deadline can see: for any T' in [T_min, time of the slowest point), the
  /// chosen point (lowest_energy_within(T')) against LB(T'), %; bounded by comparing each
  /// point with the bound just below the next slower point's time; deadlines up to
  /// bound_end_s(). 0 without a bound.
  double max_deadline_gap_pct() const;

  std::int64_t num_steps = 0;        ///< Graph-cut steps taken.
  std::int64_t num_max_flows = 0;    ///< Max-flow solves (a step reuses the previous cut
                                     ///< when the critical network is unchanged).
  double solve_time_s = 0;           ///< Wall-clock seconds of solve_frontier().
  double reclaimed_energy_j = 0;     ///< Energy removed by slack reclamation at T_min, J.
  int num_lp_solves = 0;             ///< LP relaxation solves (kCertified, BoundMethod::kLp).
  std::int64_t num_hull_walk_steps = 0;  ///< Hull-walk steps (kCertified, BoundMethod::kHullWalk).
  /// kCertified: the bound method used (kAuto resolved); kAuto for kGraphCut.
  BoundMethod bound_method = BoundMethod::kAuto;
  double bound_time_s = 0;           ///< Wall-clock seconds of the bound stage, within solve_time_s.
  int num_polished_points = 0;       ///< Plans the polish stage improved (PlannerOptions::polish_time_s).
  int num_polish_windows = 0;        ///< Window subproblems the polish stage solved.
  double polish_time_s = 0;          ///< Wall-clock seconds of the polish stage, within solve_time_s.
  /// Work of the graph-cut walk's max-flow engine (warm or dynamic), all 0 with the cold engines. For
  /// benchmarks: `PERSEUS_BENCH_STATS=1 perseus_planner_bench ...` prints them.
  struct MaxFlowWork {
    std::int64_t dinic_phases = 0;      ///< Dinic level BFSs (0 when the warm flow was maximum)
    std::int64_t bfs_nodes = 0;         ///< nodes those BFSs visited
    std::int64_t augmenting_paths = 0;  ///< augmenting paths in those phases
    std::int64_t augmenting_arcs = 0;   ///< their total length, arcs
    std::int64_t cancelled_paths = 0;   ///< flow paths cancelled after capacities were lowered
    std::int64_t grown_nodes = 0;       ///< dynamic engine: active nodes scanned to grow a search tree
    std::int64_t orphans = 0;           ///< dynamic engine: orphans adopted or freed
    std::int64_t cut_searches = 0;      ///< dynamic engine: cuts searched afresh (tolerance band)
  } max_flow_work;
  /// The same for the hull walk's own max-flows (kCertified, BoundMethod::kHullWalk; the warm
  /// engine), and that walk's wall-clock seconds (within bound_time_s).
  MaxFlowWork hull_walk_max_flow_work;
  std::int64_t num_hull_walk_max_flows = 0;
  double hull_walk_time_s = 0;
  double p_block_w = 0;              ///< P_block used, W.
  double unit_time_s = 0;            ///< u used, s.
  /// Why a frontier is partial (PlannerOptions::time_budget_s / max_points).
  enum class StopReason : std::uint8_t { kComplete = 0, kTimeBudget, kMaxPoints };
  StopReason stop_reason = StopReason::kComplete;  ///< kComplete: the whole solve ran.
  /// True when the solve was bounded by the user and stopped early (stop_reason says why).
  bool partial() const { return stop_reason != StopReason::kComplete; }
  /// Human-readable account of a partial solve (empty when complete): what stopped it,
  /// how far the graph-cut walk got (share of T_max -> T_min) and what was skipped.
  std::string partial_detail;

 private:
  friend class FrontierBuilder;
  std::shared_ptr<const Dag> dag_;
  std::vector<const Candidates*> op_candidates_;       // per op
  std::shared_ptr<std::vector<Candidates>> candidates_;  // owned tables
  bool reclaim_ = true;
  std::vector<std::uint16_t> start_choice_;            // per op: index into candidates
  std::vector<std::pair<std::int32_t, std::uint16_t>> changes_;  // (op, new choice)
  std::vector<std::size_t> step_end_;                  // per step: end offset in changes_
  std::vector<FrontierPoint> points_;
  std::vector<std::vector<std::uint16_t>> stored_plans_;  // choices of LP-stage plans
  struct Tangent {
    double deadline_s, bound_j, slope_j_per_s;
  };
  std::vector<Tangent> tangents_;                      // deadline ascending
  FrequencyPlan make_plan(const std::vector<std::uint16_t>& choice, bool reclaim, double tighten_to_s) const;
};

/// "complete", "time_budget" or "max_points" (the summary.json spelling).
const char* to_string(Frontier::StopReason reason);

/// Relative tolerance of frontier dominance: a slower plan stays on the frontier only when
/// its energy (in the straggler regime: its energy at a common deadline, E − P_block·R·T) is
/// lower than every faster plan's by more than this fraction of its energy. Without it, two
/// plans whose energies differ by floating-point noise (1e-14 J) would be listed as distinct
/// plans, one much slower for nothing. 1e-9 is far above double rounding (~1e-16 relative per
/// operation) and far below any saving worth a slower plan (GPT-3 frontier steps: >= 1e-6).
inline constexpr double kFrontierDominanceRelTol = 1e-9;

/// Relative tolerance within which two iteration times differ only by floating-point noise of
/// their evaluation (sums of the same durations in another order): a plan evaluated 4e-16 s
/// slower than the all-max plan meets the all-max time (summary.json's
/// saving_at_allmax_time_pct; the frontier keeps such a plan instead of a costlier all-max plan).
inline constexpr double kTimeNoiseRelTol = 1e-12;

/// Computes the iteration time–energy Pareto frontier with the iterative min-cut
/// time–cost tradeoff algorithm (Phillips & Dessouky 1977) as in Perseus §4.2, with a
/// piecewise-linear convex cost per (stage, kind): the lower convex hull of the Pareto
/// candidates in (quantized time, effective energy = energy − P_block × time).
/// Every emitted plan is re-evaluated with the profile (and optionally slack-reclaimed);
/// dominated points are dropped (with kFrontierDominanceRelTol).
/// options.time_budget_s / max_points bound the solve: it then returns the frontier found so
/// far with Frontier::partial() true (a valid frontier: slowest first, at least the all-max plan).
/// Throws InputError if the profile lacks a (stage, kind) the DAG uses, or options are invalid;
/// PlanningCancelled when options.cancelled returned true.
/// The Frontier keeps a copy of `dag`.
Frontier solve_frontier(const Dag& dag, const Profile& profile, const PlannerOptions& options);

/// solve_frontier() sharing `dag` with the Frontier instead of copying it (a DAG of a million
/// computations takes ~0.6 s and ~100 MiB to copy; the server shares its job's). Same units,
/// result and errors as above; std::invalid_argument if `dag` is null.
Frontier solve_frontier(std::shared_ptr<const Dag> dag, const Profile& profile, const PlannerOptions& options);

}  // namespace perseus
