// SwitchVerifier: predicted vs measured after a straggler switch, bounded re-plans.
#include "switch_verifier.hpp"

#include <algorithm>
#include <cmath>

namespace perseus::server {

namespace {

/// Median energy of the samples whose energy is known; nullopt when none is.
std::optional<double> median_known_energy(const auto& samples) {
  std::vector<double> es;
  for (const PipelineSample& s : samples)
    if (s.energy_j) es.push_back(*s.energy_j);
  if (es.empty()) return std::nullopt;
  return median_of(es);
}

}  // namespace

SwitchVerifier::SwitchVerifier(StragglerOptions options, int num_pipelines, double p_block_w, int gpus_per_pipeline)
    : opt_(options), p_block_w_(p_block_w), gpus_(gpus_per_pipeline),
      recent_(static_cast<std::size_t>(std::max(0, num_pipelines))) {}

void SwitchVerifier::start(std::int64_t decision_id, const std::map<int, double>& switched,
                           const std::map<int, double>& targets, const std::set<int>& stragglers, bool new_decision) {
  if (new_decision) {
    replans_ = 0;
    baseline_.clear();
  } else {
    ++replans_;
  }
  decision_id_ = decision_id;
  for (const auto& [d, t] : switched) {
    if (baseline_.count(d) || recent_.at(d).samples.empty()) continue;
    std::vector<double> ts;
    for (const auto& s : recent_[d].samples) ts.push_back(s.time_s);
    baseline_[d] = {median_of(ts), median_known_energy(recent_[d].samples)};
  }
  predicted_ = switched;
  targets_ = targets;
  stragglers_ = stragglers;
  after_.clear();
  straggler_after_.clear();
  active_ = !switched.empty() && !stragglers.empty();
}

void SwitchVerifier::stop() {
  active_ = false;
  after_.clear();
  straggler_after_.clear();
}

std::optional<VerificationRound> SwitchVerifier::observe(const PipelineSample& s) {
  if (s.pipeline < 0 || s.pipeline >= static_cast<int>(recent_.size())) return std::nullopt;
  auto& r = recent_[s.pipeline].samples;
  r.push_back(s);
  while (static_cast<int>(r.size()) > opt_.window) r.pop_front();
  if (!active_) return std::nullopt;
  if (stragglers_.count(s.pipeline)) straggler_after_[s.pipeline].push_back(s.time_s);
  if (predicted_.count(s.pipeline)) after_[s.pipeline].push_back(s);
  // Ready when every switched pipeline and every straggler has enough samples since start().
  const auto n = static_cast<std::size_t>(opt_.verify_iterations);
  for (const auto& [d, t] : predicted_)
    if (after_[d].size() < n) return std::nullopt;
  double straggler_t = 0;
  for (int d : stragglers_) {
    auto& v = straggler_after_[d];
    if (v.empty()) return std::nullopt;
    straggler_t = std::max(straggler_t, median_of(v));
  }
  VerificationRound round;
  round.decision_id = decision_id_;
  round.replans = replans_;
  for (const auto& [d, predicted] : predicted_) {
    std::vector<double> ts;
    for (const auto& a : after_[d]) ts.push_back(a.time_s);
    PipelineVerdict v;
    v.pipeline = d;
    v.measured_time_s = median_of(ts);
    v.predicted_time_s = predicted;
    v.straggler_time_s = straggler_t;
    const auto e_after = median_known_energy(after_[d]);
    if (auto b = baseline_.find(d); b != baseline_.end() && b->second.second && e_after) {
      const double pb = p_block_w_ * gpus_;
      const double before = *b->second.second + pb * std::max(0.0, straggler_t - b->second.first);
      const double after = *e_after + pb * std::max(0.0, straggler_t - v.measured_time_s);
      v.measured_saving_j = before - after;
    }
    const double gap = v.measured_time_s / straggler_t - 1.0;
    if (std::abs(gap) <= opt_.verify_tolerance) {
      v.kind = PipelineVerdict::Kind::kVerified;
    } else if (replans_ < opt_.max_replans) {
      v.kind = PipelineVerdict::Kind::kRetarget;
      const double target = targets_.count(d) ? targets_.at(d) : predicted;
      v.new_target_time_s = target * straggler_t / v.measured_time_s;
    } else {
      v.kind = PipelineVerdict::Kind::kRevert;
    }
    round.verdicts.push_back(v);
  }
  active_ = false;  // the caller restarts it after acting on the round
  return round;
}

}  // namespace perseus::server
