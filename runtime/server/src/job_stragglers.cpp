// JobManager: straggler reports and the frontier plan switch of the other pipelines (Perseus §3.2).
#include <cmath>
#include <set>

#include <fmt/core.h>

#include "job.hpp"
#include "perseus/input_limits.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/server/job_manager.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

/// The plan choice for a set of stragglers: T' = the largest target, chosen = lowest energy
/// with T <= T' (fastest when there is no straggler).
struct Choice {
  double target_time_s = 0;
  int chosen = 0, fastest = 0;
};

Choice choose(const Job& j, const std::map<int, StoredStraggler>& stragglers) {
  Choice c;
  c.fastest = j.model.fastest_index();
  c.chosen = c.fastest;
  if (stragglers.empty()) return c;
  for (const auto& [d, s] : stragglers) c.target_time_s = std::max(c.target_time_s, s.target_time_s);
  // Every pipeline a straggler: no pipeline runs a slower plan, so nothing is chosen or saved.
  if (static_cast<int>(stragglers.size()) >= j.spec.dp) return c;
  c.chosen = j.model.lowest_energy_within(c.target_time_s);
  return c;
}

void check_ready(const Job& j) {
  if (j.deleted) throw ApiError(404, "unknown_job", "the job was deleted");
  if (j.status != "ready")
    throw ApiError(409, "job_not_ready", fmt::format("job is {}; stragglers need its frontier (status ready)", j.status));
  if (!j.model.times_known() || j.model.points.empty())
    throw ApiError(409, "no_plan_times",
                   "the job's plans have no iteration times (Zeus plans without profile_csv); cannot pick a plan for T'");
}

}  // namespace

Reply JobManager::post_straggler(const std::string& job_id, const json& body) {
  auto j = find_or_404(job_id);
  require_object(body, "request body");
  reject_unknown_fields(body, {"pipeline", "slowdown", "iteration_time_s"}, "");
  const int pipeline = static_cast<int>(get_int(body, "pipeline", std::nullopt, 0, j->spec.dp - 1));
  const bool has_slowdown = body.contains("slowdown") && !body["slowdown"].is_null();
  const bool has_time = body.contains("iteration_time_s") && !body["iteration_time_s"].is_null();
  if (has_slowdown == has_time)
    throw ApiError(422, "invalid_field", "give exactly one of \"slowdown\" (>= 1) or \"iteration_time_s\" (s)");
  double slowdown = has_slowdown ? get_number(body, "slowdown", std::nullopt, 1.0, kMaxStragglerSlowdown) : 0.0;
  const double t_given = has_time ? get_number(body, "iteration_time_s", std::nullopt, 1e-9, limits::kMaxIterationTimeS) : 0.0;
  StoredStraggler s;
  {
    std::shared_lock lock(j->mu);
    check_ready(*j);
    const double t_min = j->model.points[j->model.fastest_index()].time_s;
    s.target_time_s = has_slowdown ? slowdown * t_min : t_given;
    if (!has_slowdown) slowdown = t_given / t_min;
    // A straggler is never faster than the job's fastest plan (slowdown >= 1, as "slowdown").
    if (!has_slowdown && t_given < t_min * (1 - 1e-9))
      throw ApiError(422, "invalid_field",
                     fmt::format("field \"iteration_time_s\" must be >= the job's fastest plan's time T_min = {:.9g} s "
                                 "(a straggler is slower, not faster), got {:.9g}",
                                 t_min, t_given));
    // The cap of "slowdown" holds for a time too (session 21's trial: 1e7 s gave a slowdown of
    // 6.2e6 and moved every other pipeline to its slowest plan; a time in ms sent as s does).
    if (!has_slowdown && slowdown > kMaxStragglerSlowdown)
      throw ApiError(422, "invalid_field",
                     fmt::format("field \"iteration_time_s\" must be <= {:g} x the job's fastest plan's time T_min = "
                                 "{:.9g} s, i.e. <= {:.9g} s (the largest \"slowdown\"), got {:.9g} (a time in ms "
                                 "sent as s?)",
                                 kMaxStragglerSlowdown, t_min, kMaxStragglerSlowdown * t_min, t_given));
    slowdown = std::max(slowdown, 1.0);
  }
  s.pipeline = pipeline;
  s.slowdown = slowdown;
  s.created_s = now_s();
  return apply_stragglers(j, s, std::nullopt);
}

Reply JobManager::clear_straggler(const std::string& job_id, std::int64_t pipeline) {
  auto j = find_or_404(job_id);
  if (pipeline >= j->spec.dp)
    throw ApiError(404, "unknown_straggler", fmt::format("the job has no pipeline {}", pipeline));
  return apply_stragglers(j, std::nullopt, static_cast<int>(pipeline));
}

Reply JobManager::apply_stragglers(const std::shared_ptr<Job>& j, std::optional<StoredStraggler> set,
                                   std::optional<int> clear, const std::string& origin) {
  // The straggler set after this request, and the plans it selects (caller holds j->mu).
  auto next_choice = [&](auto& next) {
    check_ready(*j);
    next = j->stragglers;
    if (clear && !next.erase(*clear))
      throw ApiError(404, "unknown_straggler", fmt::format("pipeline {} has no straggler report", *clear));
    if (set) next[set->pipeline] = *set;
    return choose(*j, next);
  };
  const bool replan = !set && !clear;  // verification re-targets or reverts some pipelines
  // Per pipeline: the plan it runs for a choice; verification overrides apply only to re-plans
  // (a new straggler set or a clearance starts a fresh decision). Caller holds j->mu and loop.mu.
  auto plan_for = [&](int d, const auto& next, const Choice& c) {
    if (next.count(d)) return c.fastest;
    if (!replan || next.empty()) return c.chosen;
    if (j->loop.reverted.count(d)) return c.fastest;
    if (auto it = j->loop.target_override_s.find(d); it != j->loop.target_override_s.end())
      return j->model.lowest_energy_within(it->second);
    return c.chosen;
  };
  for (int attempt = 0; attempt < 5; ++attempt) {
    Choice c;
    std::set<int> needed;
    {
      std::shared_lock lock(j->mu);
      std::lock_guard loop_lock(j->loop.mu);
      decltype(j->stragglers) next;
      c = next_choice(next);
      for (int d = 0; d < j->spec.dp; ++d) needed.insert(plan_for(d, next, c));
    }
    needed.insert(c.chosen);
    needed.insert(c.fastest);
    for (int idx : needed) ensure_materialized(j, idx);  // may re-derive the frontier (no lock held)

    std::unique_lock lock(j->mu);
    std::lock_guard loop_lock(j->loop.mu);
    j->loop.init(j->spec);
    decltype(j->stragglers) next;
    c = next_choice(next);
    std::vector<int> idx_of(j->spec.dp);
    bool missing = false;
    for (int d = 0; d < j->spec.dp; ++d) {
      idx_of[d] = plan_for(d, next, c);
      missing |= !j->plans.count(idx_of[d]);
    }
    if (missing || !j->plans.count(c.fastest)) continue;  // raced with a change; retry

    const auto& pts = j->model.points;
    const int dp = j->spec.dp;
    // The new state is computed aside, stored, and only then applied: a failed write leaves no trace.
    std::vector<int> switched;
    const std::int64_t version = j->version_counter + 1;
    for (int d = 0; d < dp; ++d)
      if (j->pipelines[d].plan_index != idx_of[d]) switched.push_back(d);
    const std::int64_t new_version = switched.empty() ? j->version_counter : version;

    // Predicted saving over "every pipeline at T_min, waiting for the straggler" (Perseus §3.2).
    const double p_block = j->spec.p_block_w;
    const int gpus_per_pipeline = j->spec.pp * j->spec.tp;
    const int others = dp - static_cast<int>(next.size());
    const PlanPoint fast = pts[c.fastest];
    auto saving_of = [&](const PlanPoint& p) {  // per pipeline and iteration, J
      const double horizon = std::max({c.target_time_s, fast.time_s, p.time_s});
      const double base_j = j->spec.tp * fast.energy_j + p_block * gpus_per_pipeline * (horizon - fast.time_s);
      const double pick_j = j->spec.tp * p.energy_j + p_block * gpus_per_pipeline * (horizon - p.time_s);
      return std::pair{base_j - pick_j, base_j};
    };
    // The plan the decision names: the one every non-straggler pipeline runs when they agree
    // (after a verification re-plan that may be another than the rule's plan for T'), else the
    // rule's plan; pipeline_plans has each pipeline's.
    int named = c.chosen;
    {
      std::set<int> runs;
      for (int d = 0; d < dp; ++d)
        if (!next.count(d)) runs.insert(idx_of[d]);
      if (runs.size() == 1 && !next.empty()) named = *runs.begin();
    }
    const PlanPoint pick = pts[named];
    double saving_j = 0, base_sum_j = 0;
    auto& loop = j->loop;
    loop.predicted_saving_j.clear();
    std::map<int, double> predicted_time, targets;
    for (int d = 0; d < dp && !next.empty(); ++d) {
      if (next.count(d)) continue;
      const auto [s, base] = saving_of(pts[idx_of[d]]);
      saving_j += s;
      base_sum_j += base;
      loop.predicted_saving_j[d] = s;
      if (replan && loop.reverted.count(d)) continue;  // back on the fastest plan: nothing to verify
      predicted_time[d] = pts[idx_of[d]].time_s;
      targets[d] = loop.target_override_s.count(d) && replan ? loop.target_override_s.at(d) : c.target_time_s;
    }
    const char* action = set ? "straggler_set" : clear ? "straggler_cleared" : "replanned";
    json decision = {
        {"id", j->decisions_total + 1},
        {"time_s", now_s()},
        {"action", action},
        {"origin", origin},
        {"pipeline", set ? json(set->pipeline) : clear ? json(*clear) : json(nullptr)},
        {"target_time_s", next.empty() ? json(nullptr) : json(c.target_time_s)},
        {"slowdown", set ? json(set->slowdown) : json(nullptr)},
        {"stragglers", [&] { json a = json::array(); for (const auto& [d, s] : next) a.push_back(d); return a; }()},
        {"plan_index", named},
        {"plan_time_s", pick.time_s},
        {"plan_energy_j", pick.energy_j},
        {"pipeline_plans", idx_of},
        {"fastest_plan_index", c.fastest},
        {"fastest_time_s", fast.time_s},
        {"fastest_energy_j", fast.energy_j},
        {"pipelines_switched", switched.size()},
        {"version", new_version},
        {"predicted_saving_j_per_iteration", saving_j},
        {"predicted_saving_pct", next.empty() || others <= 0 || base_sum_j <= 0 ? 0.0 : 100.0 * saving_j / base_sum_j},
    };
    std::optional<StoredStraggler> up = set;
    if (up) up->origin = straggler_origin(origin);
    std::vector<StoredAssignment> changed;
    for (int d : switched) changed.push_back({d, idx_of[d], version});
    const std::int64_t decision_id = decision["id"].get<std::int64_t>();
    // Serialized once (~200 KB at 65,536 pipelines): stored, and the reply's body.
    const std::string decision_text = record_decision(*j, std::move(decision), new_version, changed, up, clear);
    for (const auto& a : changed) j->pipelines[a.pipeline] = {a.plan_index, version, j->plans.at(a.plan_index)};
    j->version_counter = new_version;
    j->stragglers = next;
    if (up) j->stragglers[up->pipeline].origin = up->origin;  // as stored: GET lists it

    // The closed loop: who is a straggler and why, and verify the new assignment.
    if (set) loop.origin[set->pipeline] = straggler_origin(origin);
    if (clear) loop.origin.erase(*clear);
    if (set && origin != "detected") loop.detector->set_state(set->pipeline, true);
    if (clear && origin != "detected") loop.detector->set_state(*clear, false);
    if (!replan) {
      loop.target_override_s.clear();
      loop.reverted.clear();
      loop.measured_saving_j.clear();
    }
    loop.verification.clear();
    loop.actions[action]++;
    loop.current_decision = decision_id;
    if (next.empty() || !loop.opt.verify) {
      loop.verifier->stop();
    } else {
      std::set<int> strag;
      for (const auto& [d, s] : next) strag.insert(d);
      loop.verifier->start(decision_id, predicted_time, targets, strag, !replan);
      for (const auto& [d, t] : predicted_time) loop.verification[d] = "pending";
      for (int d : loop.reverted) loop.verification[d] = "reverted";
    }
    return {200, "{\"decision\":" + decision_text + "}"};
  }
  throw ApiError(503, "busy", "the job changed during the decision; retry");
}

std::string JobManager::record_decision(Job& j, json decision, std::int64_t version_counter,
                                        const std::vector<StoredAssignment>& assignments,
                                        const std::optional<StoredStraggler>& upsert_straggler,
                                        std::optional<int> delete_straggler) {
  std::string text = decision.dump();
  // How many of the newest decisions, this one included, memory and the store keep.
  std::size_t keep = 1, bytes = text.size();
  for (auto it = j.decision_bytes.rbegin(); it != j.decision_bytes.rend() && keep < opt_.max_decisions_kept; ++it) {
    if (bytes + *it > opt_.max_decision_bytes) break;
    bytes += *it;
    ++keep;
  }
  store_.update_assignments(j.id, version_counter, assignments, upsert_straggler, delete_straggler, text, keep);
  j.decisions.push_back(std::move(decision));
  j.decision_bytes.push_back(text.size());
  ++j.decisions_total;
  while (j.decisions.size() > keep) {
    j.decisions.pop_front();
    j.decision_bytes.pop_front();
  }
  counters_.straggler_decisions++;  // every decision of every job, as decisions_total
  return text;
}

}  // namespace perseus::server
