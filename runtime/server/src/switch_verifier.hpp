// Verification after a straggler switch: do the switched pipelines now finish with the
// straggler, and what did the switch save? Pure logic (no clock, no locks). Private to the server.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "straggler_detector.hpp"

namespace perseus::server {

/// The verdict on one switched pipeline.
struct PipelineVerdict {
  enum class Kind {
    kVerified,  ///< Finishes within verify_tolerance of the straggler.
    kRetarget,  ///< Clearly earlier or later: re-plan with new_target_time_s.
    kRevert,    ///< Still off after max_replans re-plans: back to the fastest plan.
  } kind = Kind::kVerified;
  int pipeline = 0;
  double measured_time_s = 0;      ///< Median iteration time on the new plan, s.
  double predicted_time_s = 0;     ///< The new plan's predicted iteration time, s.
  double straggler_time_s = 0;     ///< The straggler's median iteration time meanwhile, s.
  double new_target_time_s = 0;    ///< kRetarget: T'' = T' × straggler / measured, s.
  /// Per iteration vs before the switch (blocking included), J; nullopt when unknown (no
  /// baseline, or no sample before or after the switch with a known energy).
  std::optional<double> measured_saving_j;
};

/// All verdicts of one verification round (every switched pipeline has been measured).
struct VerificationRound {
  std::int64_t decision_id = 0;
  int replans = 0;                 ///< Re-plans done for the decision before this round.
  std::vector<PipelineVerdict> verdicts;
};

/// Watches the pipelines of one straggler decision. Every pipeline's recent samples are kept
/// (the baseline before a switch); after start(), each switched pipeline needs
/// verify_iterations samples on the new plan, then observe() returns a round. Measured saving
/// of a pipeline over the decision's baseline (Perseus §3.2: without the switch it races at T_min
/// and blocks until the straggler finishes):
///   (E_before + P_block·G·max(0, t_s − t_before)) − (E_after + P_block·G·max(0, t_s − t_after)),
/// E per pipeline iteration (Σ over its G GPUs), t_s the straggler's median time. E_before and
/// E_after are medians over the samples whose energy is known; with none, the saving is unknown.
class SwitchVerifier {
 public:
  /// p_block_w: blocking power of one GPU, W; gpus_per_pipeline: G = pp × tp.
  SwitchVerifier(StragglerOptions options, int num_pipelines, double p_block_w, int gpus_per_pipeline);

  /// Starts (or restarts, after a re-plan) verifying a decision. `switched`: pipeline ->
  /// the predicted iteration time of its new plan, s. `stragglers`: the straggler pipelines.
  /// `target_time_s`: each switched pipeline's target T' (s). `new_decision`: false for a
  /// re-plan of the same decision (the baseline and re-plan count are kept).
  void start(std::int64_t decision_id, const std::map<int, double>& switched, const std::map<int, double>& targets,
             const std::set<int>& stragglers, bool new_decision);
  /// Stops verifying (stragglers cleared).
  void stop();
  bool active() const { return active_; }
  /// Feeds one complete pipeline iteration measured on its current plan.
  std::optional<VerificationRound> observe(const PipelineSample& s);

 private:
  struct Recent {
    std::deque<PipelineSample> samples;
  };
  StragglerOptions opt_;
  double p_block_w_;
  int gpus_;
  std::vector<Recent> recent_;
  bool active_ = false;
  std::int64_t decision_id_ = 0;
  int replans_ = 0;
  std::map<int, double> predicted_, targets_;
  std::map<int, std::pair<double, std::optional<double>>> baseline_;  // pipeline -> (time_s, energy_j) before
  std::set<int> stragglers_;
  std::map<int, std::vector<PipelineSample>> after_;   // switched pipeline -> samples on the new plan
  std::map<int, std::vector<double>> straggler_after_;
};

}  // namespace perseus::server
