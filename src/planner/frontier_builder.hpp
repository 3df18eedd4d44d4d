// The frontier solve of solve_frontier() (private to the library): validates the options,
// runs the graph-cut walk (graph_cut_walk.hpp) recording a point per plan, then in
// PlannerMode::kCertified the LP stage (certify.cpp: lower bound, LP-rounded plans), then
// the final Pareto filter (frontier_filter.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <utility>
#include <vector>

#include "cost_model.hpp"
#include "critical_path.hpp"
#include "graph_cut_walk.hpp"
#include "lower_bound.hpp"
#include "perseus/frontier.hpp"
#include "plan_evaluator.hpp"
#include "plan_improve.hpp"

namespace perseus {

/// Builds a Frontier: owns the solver state of solve_frontier(). All per-step work uses
/// storage allocated once (sized by the DAG), so a step allocates nothing once warmed up.
class FrontierBuilder {
 public:
  /// Throws InputError when `opt` is out of range (PlannerOptions documents each range) or
  /// the profile lacks a (stage, kind) the DAG uses.
  /// `dag` (non-null) is shared with the Frontier it builds.
  FrontierBuilder(std::shared_ptr<const Dag> dag, const Profile& profile, const PlannerOptions& opt);
  Frontier run();

 private:
  /// Throws InputError naming the first option out of its range; returns `opt`.
  static const PlannerOptions& validated(const PlannerOptions& opt);
  void record_point(std::int64_t step, const std::vector<std::uint16_t>& choice, double tighten_to_s = 0);
  using TimelineScratch = detail::TimelineScratch;
  /// T (longest path) and E of the plan `choice` (PlanEvaluator::timeline_and_energy()).
  double timeline_and_energy(const std::vector<std::uint16_t>& choice, double& energy_j, TimelineScratch& tl) const {
    return evaluator_.timeline_and_energy(choice, energy_j, tl);
  }

  /// Polls PlannerOptions::cancelled where it is declared among the members: each member's
  /// construction takes up to ~1 s on a DAG of a million computations (SIGTERM of the server).
  struct CancelPoint {
    explicit CancelPoint(const PlannerOptions& opt) {
      if (opt.cancelled && opt.cancelled()) throw PlanningCancelled("planning cancelled");
    }
  };

  const PlannerOptions& opt_;
  const Profile& profile_;
  Frontier f_;
  const detail::DagCsr csr_;
  [[no_unique_address]] CancelPoint after_csr_{opt_};
  const detail::CostModels costs_;
  const std::vector<const std::vector<OperatingPoint>*>& op_raw_;  // profile points per op
  detail::PlanEvaluator evaluator_;
  [[no_unique_address]] CancelPoint after_evaluator_{opt_};
  detail::GraphCutWalk walk_;
  /// PlannerMode::kCertified, the LP stage: one warm-started LP and what its solves produced
  /// since they were last merged into the builder (lp_merge()). Owned by one thread at a time.
  struct LpStage {
    LpStage(const Dag& dag, const std::vector<const std::vector<OperatingPoint>*>& op_raw, const PlannerOptions& opt,
            double t_lo_s);
    detail::HullLowerBound lp;
    double t_lo = 0, t_end = 0;  // sampled deadlines: T_min .. end of the straggler regime, s
    int budget = 0;              // LP solves left
    int budget_at_start = 0;     // for progress: solves done / budget_at_start
    std::vector<double> solved;  // deadlines solved, s
    /// Whether deadline tau (s) was solved already (relative 1e-9).
    bool was_solved(double tau) const {
      return std::any_of(solved.begin(), solved.end(), [tau](double d) { return std::abs(d - tau) <= 1e-9 * tau; });
    }
    struct Tangent {
      double deadline_s, bound_j, slope_j_per_s;
    };
    std::vector<std::pair<FrontierPoint, bool>> points;  // LP-rounded plans (stored_plan: into `stored`)
    std::vector<std::vector<std::uint16_t>> stored;
    std::vector<Tangent> tangents;
    bool over_time_budget = false;
    std::stop_token stop;  // set when the sampling runs beside the graph-cut walk
    std::atomic<double>* fraction = nullptr;  // beside the walk: progress published here
    double reported = -1;                     // last fraction reported (report())
    double seconds = 0;    // wall time of the stage's construction and lp_sample() beside the walk
    std::vector<std::uint16_t> choice;
    std::vector<double> scratch, latest;
    TimelineScratch timeline;
    std::unique_ptr<detail::HullVertices> hull;  // built at the first solve
  };
  /// One LP solve at deadline tau (s): a tangent of LB and a rounded, slack-filled plan, into `st`.
  /// Touches no builder state but reads (const): safe beside the graph-cut walk.
  void lp_solve_at(LpStage& st, double tau) const;
  /// The LP stage's first part: the solve at st.t_end, then samples from st.t_lo up.
  void lp_sample(LpStage& st) const;
  /// Moves st's solves into raw_points_, stored_ and f_.tangents_ (sorted).
  void lp_merge(LpStage& st);
  /// Refinement rounds on raw_points_: LP solves where a point, or a deadline just below the
  /// next slower point, is more than refine_gap_pct above the bound, worst first, while
  /// st.budget lasts (at most 8 rounds); merged after each round.
  void lp_refine(LpStage& st);
  /// Largest gap to the bound, percent, over the kept points up to t_end_s (s) and the deadlines
  /// just below each next slower point (as Frontier::max_deadline_gap_pct, on raw_points_).
  double largest_gap_pct(double t_end_s) const;
  /// BoundMethod::kHullWalk: what the hull walk produced since it was merged into the builder
  /// (hull_walk_merge()). Owned by one thread at a time.
  struct HullWalkStage {
    double t_end = 0;  // deadlines recorded up to here, s (>= 2 x T_min: merge drops the rest)
    std::vector<std::pair<FrontierPoint, bool>> points;  // rounded plans (stored_plan: into `stored`)
    std::vector<double> point_deadline_s;                // the walk's iteration time at each point
    std::vector<std::vector<std::uint16_t>> stored;
    std::vector<LpStage::Tangent> tangents;
    std::int64_t steps = 0;
    bool over_time_budget = false;
    std::stop_token stop;  // set when the walk runs beside the graph-cut walk
    std::atomic<double>* fraction = nullptr;  // beside the walk: progress published here
    double reported = -1;                     // last fraction reported (report())
    double seconds = 0;    // wall time of the walk
    Frontier::MaxFlowWork work;     // its max-flows' work (Frontier::hull_walk_max_flow_work)
    std::int64_t max_flows = 0;     // and their number
  };
  /// BoundMethod::kHullWalk (hull_walk_stage.cpp): bound lines and rounded plans from a second
  /// graph-cut walk over the ops' whole effective-energy hulls, into `hw`. Touches no builder
  /// state but reads (const): safe beside the graph-cut walk.
  void hull_walk(HullWalkStage& hw) const;
  /// Moves hw's points and bound lines with deadlines up to t_end_s (s) into raw_points_,
  /// stored_ and f_.tangents_; a time budget reached inside the walk marks the frontier partial.
  void hull_walk_merge(HullWalkStage& hw, double t_end_s);
  /// Whatever ran beside the graph-cut walk (PlannerOptions::threads >= 2): at most one is set.
  struct Beside {
    std::unique_ptr<LpStage> lp;
    std::unique_ptr<HullWalkStage> hull;
  };
  /// The bound stage on raw_points_. BoundMethod::kLp: sampling (unless `beside.lp` already
  /// did it from the right T_min), then refinement where the gap is large. kHullWalk: the hull
  /// walk (unless `beside.hull` already ran it far enough), then on DAGs of up to
  /// kHullWalkLpMaxOps computations LP refinement solves (certify.cpp). kAuto below
  /// kHullWalkMinOps: kLp, then the hull walk and more refinement where the gap is above
  /// kAutoHullWalkGapPct.
  void certify(Beside beside);
  /// Certified planner, DAGs of up to kRuinRecreateMaxOps computations: ruin and recreate
  /// (plan_improve.hpp) at the deadlines where the frontier is furthest above the bound (a
  /// point's own time, or just below the next slower point) and at the all-max time, starting
  /// from the best plan within each; improved plans join raw_points_ / stored_.
  void ruin_and_recreate_worst();
  /// The candidate choice of raw point `p` as recorded: a stored plan, or the all-max plan or a
  /// graph-cut step replayed from the walk's changes, with slack reclamation and tightening
  /// as record_point() evaluated it. Throws std::logic_error if the plan's clock is not a
  /// candidate (an internal error).
  std::vector<std::uint16_t> choice_of(const FrontierPoint& p) const;
  /// PlannerOptions::progress of a stage at `fraction` (0..1), published to `beside` instead when
  /// the stage runs beside the walk (`stop` possible), else reported at most every 1 % (`last`).
  void report(SolveStage stage, double fraction, const std::stop_token& stop, std::atomic<double>* beside,
              double& last) const;
  /// PlannerOptions::polish_time_s (window_polish.cpp): window search at the all-max time, whole-DAG
  /// solves on hull vertices (DAGs up to 512 computations), then window search, at the
  /// polish_targets() furthest from the bound; improved plans join raw_points_ / stored_.
  void polish();
  /// A deadline to polish (s), the gap to the bound there (%) of the plan chosen for it now, and
  /// that plan's point.
  struct PolishTarget {
    double gap_pct, deadline_s;
    FrontierPoint point;
  };
  /// The polish targets of the frontier so far, largest gap first: the plan at the all-max time
  /// (gap +infinity), every point at its own time, and between two points the deadline where the
  /// faster one's gap crosses PlannerOptions::refine_gap_pct (window_polish.cpp).
  std::vector<PolishTarget> polish_targets() const;
  /// Throws PlanningCancelled when PlannerOptions::cancelled says so (on the solve's thread).
  void throw_if_cancelled() const {
    if (opt_.cancelled && opt_.cancelled()) throw PlanningCancelled("planning cancelled");
  }
  /// PlannerOptions::time_budget_s reached (wall clock since the solve started).
  bool over_time_budget() const {
    return opt_.time_budget_s >= 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() >= opt_.time_budget_s;
  }
  /// PlannerOptions::max_points: keeps that many of `kept` (fastest first), spread evenly by
  /// index with both ends kept, and marks the frontier partial if any was dropped.
  void keep_at_most_max_points(std::vector<FrontierPoint>& kept);
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::vector<std::pair<FrontierPoint, bool>> raw_points_;  // (point, is all-max)
  std::vector<std::vector<std::uint16_t>> stored_;         // LP-stage plans (raw_points_ refer)
};

}  // namespace perseus
