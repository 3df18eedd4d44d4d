// JobManager: the closed straggler loop. Measurements feed StragglerLoop (detector + verifier);
// what it decides is applied here through the same path as a declaration (apply_stragglers).
#include <cmath>
#include <cstdio>

#include <fmt/core.h>

#include "job.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/server/job_manager.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

const char* verdict_name(PipelineVerdict::Kind k) {
  switch (k) {
    case PipelineVerdict::Kind::kVerified: return "verified";
    case PipelineVerdict::Kind::kRetarget: return "retargeted";
    case PipelineVerdict::Kind::kRevert: return "reverted";
  }
  return "unknown";
}

/// A known number, or null (unknown).
json opt_json(const std::optional<double>& x) { return x ? json(*x) : json(nullptr); }

/// A detection not acted on: recorded in the loop's ignored_detection (GET /v1/jobs/{id}) and
/// on stderr; `restart_count` also clears the detector's state for the pipeline, so that a
/// later plausible slowdown is detected again.
void ignore_detection(Job& j, const StragglerEvent& e, const std::string& why, bool restart_count) {
  {
    std::lock_guard loop_lock(j.loop.mu);
    if (restart_count) j.loop.detector->set_state(e.pipeline, false);
    j.loop.ignored_detection[e.pipeline] = {{"iteration", e.iteration}, {"slowdown", e.slowdown}, {"reason", why}};
  }
  std::fprintf(stderr, "perseus serve: job %s: pipeline %d: %s\n", j.id.c_str(), e.pipeline, why.c_str());
}

}  // namespace

void JobManager::run_straggler_actions(const std::shared_ptr<Job>& j, const std::vector<LoopAction>& actions) {
  for (const auto& a : actions) {
    try {
      if (a.kind == LoopAction::Kind::kIgnoredReport) {
        std::fprintf(stderr,
                     "perseus serve: job %s: pipeline %d: rank %d reported iteration %lld, more than %lld from the "
                     "pipeline's current iteration %lld (the median of its ranks' last reports): not used for straggler "
                     "detection; later ones are counted in straggler_loop.pipelines[%d].ignored_reports\n",
                     j->id.c_str(), a.event.pipeline, a.ignored.rank, static_cast<long long>(a.ignored.iteration),
                     static_cast<long long>(IterationAggregator::kKeep),
                     static_cast<long long>(a.ignored.pipeline_iteration), a.event.pipeline);
      } else if (a.kind == LoopAction::Kind::kDetected && !(a.event.slowdown <= kMaxStragglerSlowdown)) {
        // Beyond what a declaration may say: not a straggler any plan can wait for but an
        // impossible reading (a broken timer, ms reported as s). Ignored, recorded, and the
        // detector's count restarts so that a later plausible slowdown is still detected.
        ignore_detection(*j, a.event,
                         fmt::format("measured slowdown {:.6g} (iteration {}) is above {:.0f}, the most a straggler may "
                                     "have; likely a broken measurement, not acted on",
                                     a.event.slowdown, a.event.iteration, kMaxStragglerSlowdown),
                         /*restart_count=*/true);
      } else if (a.kind == LoopAction::Kind::kDetected) {
        StoredStraggler s;
        bool times_known = true;
        {
          std::shared_lock lock(j->mu);
          if (j->deleted || j->status != kStatusReady || j->stragglers.count(a.event.pipeline) || j->model.points.empty())
            continue;  // a declaration wins; no frontier yet
          times_known = j->model.times_known();
          // T' on the plans' time scale: the measured slowdown over the healthy pipelines × T_min.
          if (times_known) s.target_time_s = a.event.slowdown * j->model.points[j->model.fastest_index()].time_s;
        }
        if (!times_known) {
          // Zeus plans without --zeus-profile: no plan's time is known, so no plan meets T'.
          // Said once per detection (the detector keeps the pipeline flagged until it recovers).
          ignore_detection(*j, a.event,
                           fmt::format("measured slowdown {:.6g} (iteration {}), but the job's plans have no iteration "
                                       "times (Zeus plans served without --zeus-profile): no plan to switch to, not "
                                       "acted on",
                                       a.event.slowdown, a.event.iteration),
                           /*restart_count=*/false);
          continue;
        }
        s.pipeline = a.event.pipeline;
        s.slowdown = a.event.slowdown;
        s.created_s = now_s();
        apply_stragglers(j, s, std::nullopt, "detected");
      } else if (a.kind == LoopAction::Kind::kCleared) {
        {
          std::shared_lock lock(j->mu);
          std::lock_guard loop_lock(j->loop.mu);
          auto o = j->loop.origin.find(a.event.pipeline);
          if (!j->stragglers.count(a.event.pipeline) || o == j->loop.origin.end() || o->second != "detected")
            continue;  // declared stragglers are cleared only through the API
        }
        apply_stragglers(j, std::nullopt, a.event.pipeline, "detected");
      } else {
        bool replan = false;
        {
          std::unique_lock lock(j->mu);
          std::lock_guard loop_lock(j->loop.mu);
          auto& loop = j->loop;
          if (j->deleted || a.round.decision_id != loop.current_decision) continue;  // superseded
          json verdicts = json::array();
          double predicted = 0;
          double measured_sum = 0;
          bool measured_known = true;  // unknown when one pipeline's is
          for (const auto& v : a.round.verdicts) {
            const int d = v.pipeline;
            std::string kind = verdict_name(v.kind);
            if (v.kind == PipelineVerdict::Kind::kRetarget) {
              // The frontier may have no slower/faster plan: if the pipeline follows its plan
              // (measured within tolerance of predicted) and the new target picks the same
              // plan, the straggler is simply beyond the frontier's reach.
              const int idx = j->model.lowest_energy_within(v.new_target_time_s);
              const bool follows = std::abs(v.measured_time_s / v.predicted_time_s - 1.0) <= loop.opt.verify_tolerance;
              if (idx == j->pipelines[d].plan_index && follows) {
                kind = "verified_frontier_limit";
              } else {
                loop.target_override_s[d] = v.new_target_time_s;
                replan = true;
              }
            } else if (v.kind == PipelineVerdict::Kind::kRevert) {
              loop.reverted.insert(d);
              loop.target_override_s.erase(d);
              replan = true;
            }
            loop.verification[d] = kind;
            if (v.measured_saving_j) loop.measured_saving_j[d] = *v.measured_saving_j;
            else loop.measured_saving_j.erase(d);
            const double p = loop.predicted_saving_j.count(d) ? loop.predicted_saving_j.at(d) : 0.0;
            predicted += p;
            if (v.measured_saving_j) measured_sum += *v.measured_saving_j;
            else measured_known = false;
            verdicts.push_back({{"pipeline", d},
                                {"verdict", kind},
                                {"predicted_time_s", v.predicted_time_s},
                                {"measured_time_s", v.measured_time_s},
                                {"straggler_time_s", v.straggler_time_s},
                                {"new_target_time_s", v.kind == PipelineVerdict::Kind::kRetarget
                                                          ? json(v.new_target_time_s) : json(nullptr)},
                                {"predicted_saving_j_per_iteration", p},
                                {"measured_saving_j_per_iteration", opt_json(v.measured_saving_j)}});
          }
          json decision = {{"id", j->decisions_total + 1},
                           {"time_s", now_s()},
                           {"action", "verification"},
                           {"origin", "verification"},
                           {"verifies", a.round.decision_id},
                           {"replans_before", a.round.replans},
                           {"verdicts", verdicts},
                           {"predicted_saving_j_per_iteration", predicted},
                           {"measured_saving_j_per_iteration", measured_known ? json(measured_sum) : json(nullptr)},
                           {"version", j->version_counter}};
          record_decision(*j, std::move(decision), j->version_counter);
          loop.actions["verification"]++;
        }
        if (replan) apply_stragglers(j, std::nullopt, std::nullopt, "verification");
      }
    } catch (const ApiError& e) {
      // The job changed meanwhile (deleted, not ready, straggler cleared), or its frontier is
      // being re-derived after a restart: nothing applied. A detection not applied is forgotten,
      // so that the detector can report the pipeline again.
      if (a.kind == LoopAction::Kind::kDetected) {
        std::lock_guard loop_lock(j->loop.mu);
        if (j->loop.detector) j->loop.detector->set_state(a.event.pipeline, false);
      }
      std::fprintf(stderr, "perseus serve: job %s: straggler loop action skipped: %s\n", j->id.c_str(), e.what());
    }
  }
}

}  // namespace perseus::server
