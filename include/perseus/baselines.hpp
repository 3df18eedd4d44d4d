// Baseline frequency planners that Perseus is compared with: all-max, ZeusGlobal,
// ZeusPerStage and EnvPipe. Every plan is evaluated exactly like the planner's plans
// (evaluate_plan(): profile times and energies, longest path, one GPU per rank, P_block
// for idle time), so energies are comparable one to one. See docs/baselines.md.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/plan.hpp"
#include "perseus/profile.hpp"

namespace perseus {

/// Checks that every (stage, kind) the DAG uses has a profile row at the profile's highest
/// frequency (profile.max_freq_mhz()). The all-max baseline and EnvPipe's envelope run there;
/// without it "all-max" would silently mean different clocks on different stages. This is the
/// one rule of every planning front end: `perseus optimize` (optimize()), `perseus emulate`
/// (run_emulation()) and the Python planner refuse such a profile the same way.
/// Throws InputError naming the profile, the computations without the row (stage,
/// instruction, their highest clock), the missing frequency and the two ways to fix it.
void require_max_frequency(const Dag& dag, const Profile& profile);

/// Frequencies (MHz) that every (stage, kind) used by the DAG has in the profile, highest
/// first. These are the clocks ZeusGlobal can lock all GPUs to. May be empty.
std::vector<int> common_frequencies(const Dag& dag, const Profile& profile);

/// Energy (J) of a plan of one pipeline when the pipeline must wait until deadline_s (>= T):
/// plan energy plus P_block on every rank for the extra time, E + P_block·ranks·(deadline − T);
/// p_block_w in W per rank.
double energy_at_deadline(const FrequencyPlan& plan, int num_ranks, double p_block_w, double deadline_s);

/// The Perseus straggler rule (SOSP'24 §3.2) over whole plans, p_block_w in W per rank:
/// perseus::lowest_energy_within() (plan.hpp) of each plan's (T, E), so the same index: the plan
/// with the lowest energy_at_deadline() among those with T <= deadline_s (relative tolerance 1e-9
/// for rounding), ties to the faster plan, then to the lower index; the fastest plan if none
/// meets the deadline. Throws std::invalid_argument when plans is empty.
std::size_t lowest_energy_within(const std::vector<FrequencyPlan>& plans, int num_ranks, double p_block_w,
                                 double deadline_s);

/// Index of the plan with the lowest total_energy_j() (no deadline; ties to the lower index).
/// Throws std::invalid_argument when plans is empty.
std::size_t lowest_energy(const std::vector<FrequencyPlan>& plans);

/// ZeusGlobal candidates: for every frequency in common_frequencies() (highest first), the
/// plan with every computation on every GPU at that frequency; p_block_w: P_block, W.
/// Source: Zeus (NSDI'23) as used as "ZeusGlobal" in Perseus (SOSP'24) §6.1.
/// Throws InputError when no frequency is common to all (stage, kind).
std::vector<FrequencyPlan> zeus_global_candidates(const Dag& dag, const Profile& profile, double p_block_w);

/// ZeusGlobal: the lowest-energy single-frequency plan with T <= target_time_s (energy
/// counted until the target, energy_at_deadline()); without a target, the min-energy one.
/// p_block_w: P_block, W; target_time_s in s. Falls back to the fastest candidate when none
/// meets the target. Throws as above.
FrequencyPlan zeus_global_plan(const Dag& dag, const Profile& profile, double p_block_w,
                               std::optional<double> target_time_s = std::nullopt);

/// ZeusPerStage candidates. One frequency per stage (used by all of the stage's
/// computations). The heaviest stage h is the one with the longest total computation time
/// at max frequency (first on ties). For each frequency f_h of h (highest first) the other
/// stages are balanced to h's computation time τ(f_h) = Σ_{ops of h} t(f_h): each stage s
/// takes, among its frequencies whose total computation time is <= τ, the one with the lowest
/// effective energy Σ_{ops of s} (e − P_block·t) (the stage's energy when the iteration
/// length is fixed); the stage's fastest frequency when none is fast enough. p_block_w: P_block, W.
/// Source: "ZeusPerStage" of Perseus (SOSP'24) §6.1. Throws InputError when a stage has no
/// frequency common to all its computations.
std::vector<FrequencyPlan> zeus_per_stage_candidates(const Dag& dag, const Profile& profile, double p_block_w);

/// ZeusPerStage with the same target rule as zeus_global_plan() (p_block_w in W, target_time_s
/// in s). Throws InputError as zeus_per_stage_candidates(): the profile lacks a (stage, kind)
/// the DAG uses, or a stage has no frequency common to all its computations.
FrequencyPlan zeus_per_stage_plan(const Dag& dag, const Profile& profile, double p_block_w,
                                  std::optional<double> target_time_s = std::nullopt);

/// EnvPipe settings.
struct EnvPipeOptions {
  double unit_time_s = 1e-3;  ///< Time quantum u of EnvPipe's critical-path search, s (> 0).
  int max_iterations = 10000; ///< Iteration cap (the artifact's value), >= 1.
};

/// How EnvPipe's loop ended.
enum class EnvPipeStatus {
  kConverged,     ///< The critical path it followed consists of envelope computations only.
  kStuck,         ///< Every computation on that path already runs at max frequency but some
                  ///< is outside the envelope: the original loops forever here; we stop.
  kIterationCap,  ///< max_iterations reached before converging.
};

/// Result of envpipe_plan().
struct EnvPipeResult {
  FrequencyPlan plan;        ///< Final plan, evaluated with evaluate_plan() (exact, 1× P_block).
  int iterations = 0;        ///< Loop iterations run.
  EnvPipeStatus status = EnvPipeStatus::kConverged;
  std::string message;       ///< Human-readable reason when status != kConverged, else empty.
  double path_time_s = 0;    ///< Last "iteration time" EnvPipe logs: Σ real times on the path it followed, s.
};

/// EnvPipe (Choi et al., ATC'23) as the Perseus artifact's scripts/envpipe.py runs it (an
/// evaluation baseline of Perseus, SOSP'24 §6.1; details in docs/baselines.md): every
/// computation starts at its slowest hard-Pareto candidate; the "outer envelope" (all
/// computations of the last stage, the first forward and the last backward of every stage) is
/// forced to the max frequency; then repeatedly
/// the first critical path of the quantized DAG is taken and its lowest-frequency
/// computations are raised one frequency step, until that path has only envelope
/// computations. Fixes against the artifact: the final plan is evaluated exactly (true
/// longest path with real times, blocking power once per GPU, not ×8), the loop is capped,
/// and a path that cannot be sped up any more ends the loop (kStuck) instead of spinning.
/// p_block_w: P_block, W.
/// Throws InputError on bad options, a missing max-frequency row (require_max_frequency),
/// or a profile without the DAG's (stage, kind).
EnvPipeResult envpipe_plan(const Dag& dag, const Profile& profile, double p_block_w, const EnvPipeOptions& options = {});

}  // namespace perseus
