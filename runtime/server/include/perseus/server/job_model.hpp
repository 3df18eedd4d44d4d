// Bridge between a job request and the planner library: DAG, profile, frontier, rendered plans.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/frontier.hpp"
#include "perseus/plan.hpp"
#include "perseus/problem.hpp"
#include "perseus/profile.hpp"
#include "perseus/server/job_spec.hpp"

namespace perseus::server {

/// One point of a job's frontier: iteration time (s) and energy of one pipeline (one GPU per
/// stage, J). NaN when unknown (Zeus plans given without a profile).
using PlanPoint = perseus::TimeEnergy;

/// Special plan indices (frontier plans are 0..points-1).
inline constexpr int kAllMaxPlanIndex = -1;   ///< Every computation at its max profiled frequency.
inline constexpr int kSweepPlanIndex = -2;    ///< The current step of a profiling sweep.
/// The quick T_min plan (all-max with its slack filled, perseus::quick_fastest_plan()), served
/// from job creation until the frontier is solved (then the fastest frontier plan replaces it).
inline constexpr int kQuickPlanIndex = -3;

/// A plan ready to serve: per-op frequencies plus the JSON fragments handed to ranks.
struct ServedPlan {
  int plan_index = 0;
  PlanPoint point;                  ///< Time/energy (NaN when unknown).
  std::vector<int> freq_mhz;        ///< Per DAG op id, MHz.
  std::vector<std::string> rank_instructions_json;  ///< Per pp rank: `[{"instruction",...}, ...]`.
  std::vector<std::string> rank_zeus_json;          ///< Per pp rank: `[["forward", 1410], ...]`.
  std::string time_json, energy_json;               ///< Numbers as JSON text ("null" if unknown).
};

/// Renders a plan for serving: per pp rank, its computations' clocks (MHz) as /v1 plan JSON
/// and as Zeus frequency lists. `freq_mhz` holds one clock per computation, indexed by the
/// DAG's computation id; its size is not checked: the caller must pass dag.num_ops() entries
/// (fewer is undefined behaviour).
std::shared_ptr<const ServedPlan> render_plan(const Dag& dag, int plan_index, PlanPoint point,
                                              std::vector<int> freq_mhz);

/// What the server knows about a job's planning problem.
struct JobModel {
  std::shared_ptr<const Schedule> schedule;
  std::shared_ptr<const Dag> dag;
  std::shared_ptr<const Profile> profile;         ///< Null when the job has none.
  std::vector<PlanPoint> points;                  ///< Frontier points (empty until solved).
  /// Why the solved frontier is partial (Frontier::StopReason spelling, "time_budget": the
  /// solve reached the job's planning_budget_s) and how far it got (Frontier::partial_detail);
  /// both empty when the frontier is complete or not solved yet.
  std::string partial_reason, partial_detail;
  std::vector<std::vector<int>> explicit_plans;   ///< Per point: per-op MHz (sources plans/zeus_plans).
  double pipe_block_w = 0;  ///< P_block × pipeline ranks, W: GPUs block at it until a deadline.
  /// Problem::unit_warnings of the job's profile (implausible units, P_block in mW), shown in
  /// the job's JSON as "warnings" (empty without a profile, or when plausible).
  std::vector<std::string> warnings;

  /// Index of the fastest point (least time; lowest energy among equal times); for points
  /// with unknown times, the last one (Zeus convention: higher file number = faster).
  /// -1 when there are no points.
  int fastest_index() const;
  /// The Perseus straggler rule (§3.2) over `points` with blocking at pipe_block_w until the
  /// deadline: perseus::lowest_energy_within() (perseus/plan.hpp); -1 when there are no points.
  /// Requires known times.
  int lowest_energy_within(double deadline_s) const;
  /// True when every point has a known time and energy.
  bool times_known() const;
};

/// The planning problem of a job (schedule name, pp as num_ranks, microbatches, chunks,
/// p2p_power_w as p_block_w), for make_problem().
ProblemSpec problem_spec(const JobSpec& spec);

/// How the API names a library InputError field (e.g. "num_ranks" -> "\"pp\""), for
/// InputError::phrased().
std::string json_field_name(const std::string& field);

/// Builds the schedule, DAG and (if any) profile, and parses precomputed plans. Fast: it never
/// solves the frontier. `profile_csv` overrides spec.profile_csv when non-empty (profiles built
/// by a sweep). Throws perseus::InputError (bad schedule, profile or plans) with a user message.
JobModel prepare_model(const JobSpec& spec, const std::string& profile_csv = {});

/// The planner's bound on quanta between a computation's fastest and slowest Pareto time
/// (src/planner/cost_model.cpp, build_cost_model()).
inline constexpr double kMaxQuantaPerComputation = 1e6;

/// Throws InputError naming "unit_time_s" when the planner would refuse this quantum for this
/// profile (more than kMaxQuantaPerComputation quanta for one computation), so that the API
/// refuses the job at POST time instead of failing it later.
void check_time_quantum(const Dag& dag, const Profile& profile, double unit_time_s);

/// Solves the frontier of a profile job (slow: seconds to minutes). With `budgeted`, the solve
/// is bounded by spec.planning_budget_s (PlannerOptions::time_budget_s): when it is reached the
/// planner returns the frontier found so far, marked Frontier::partial(); without, it runs to
/// the end (re-deriving a complete frontier after a restart: a budget that was not reached
/// changes nothing, so the result is the same). Throws InputError, or PlanningCancelled when
/// `cancelled` (checked once per graph-cut step and LP solve) returns true.
std::shared_ptr<const Frontier> solve_model_frontier(const JobModel& model, const JobSpec& spec,
                                                     std::function<bool()> cancelled = {}, bool budgeted = true);

/// Points of a solved frontier.
std::vector<PlanPoint> frontier_points(const Frontier& frontier);

/// The all-max baseline plan of a model with a profile: one clock per op, indexed by the DAG's
/// op id (model.dag), MHz. Throws InputError (also when the model has no profile).
std::vector<int> all_max_freqs(const JobModel& model, const JobSpec& spec);

/// The quick T_min plan of a model with a profile (kQuickPlanIndex): milliseconds, so that
/// a job's ranks run a plan without intrinsic bloat off the critical path at once, while the
/// frontier is solved. Throws InputError.
std::shared_ptr<const ServedPlan> quick_plan(const JobModel& model, const JobSpec& spec);

/// One measured operating point of a profiling sweep: one instruction kind of one stage at
/// one clock.
struct ProfileRow {
  int stage = 0;                                      ///< Pipeline stage.
  InstructionKind kind = InstructionKind::kForward;   ///< Instruction kind (forward, backward, ...).
  int freq_mhz = 0;                                   ///< GPU clock, MHz.
  double time_s = 0, energy_j = 0;                    ///< Time (s) and energy (J) of one computation.
};

/// Profile CSV text (header stage,instruction,frequency,time,energy) of sweep rows, as
/// format_profile_csv() writes it (points sorted by stage, instruction, frequency highest
/// first). Rows are not validated here.
std::string profile_csv_text(const std::vector<ProfileRow>& rows);

}  // namespace perseus::server
