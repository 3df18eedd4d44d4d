// JobManager: rank registration, plan fetches (hot path), measurements, profiling sweep steps.
#include <cmath>

#include <fmt/core.h>

#include "job.hpp"
#include "perseus/error.hpp"
#include "perseus/plan.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/server/job_manager.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxBatch = 10000;
constexpr std::size_t kMaxInstructions = 200000;

/// Validates one measurement object; throws ApiError 422.
void validate_measurement(const json& m) {
  require_object(m, "measurement");
  get_int(m, "iteration", std::nullopt, 0, std::int64_t{1} << 53);
  get_number(m, "time_s", std::nullopt, 0, 1e7);
  get_number(m, "energy_j", 0.0, 0, 1e13);
  get_int(m, "plan_version", 0, 0, INT64_MAX);
  auto it = m.find("instructions");
  if (it == m.end() || it->is_null()) return;
  if (!it->is_array() || it->size() > kMaxInstructions)
    throw ApiError(422, "invalid_field",
                   fmt::format("field \"instructions\" must be an array of at most {} objects", kMaxInstructions));
  for (const auto& e : *it) {
    require_object(e, "each of \"instructions\"");
    get_string(e, "instruction", std::nullopt, 64);
    get_int(e, "microbatch", 0, 0, 1 << 24);
    get_int(e, "stage", 0, 0, 1 << 24);
    get_int(e, "freq_mhz", std::nullopt, 1, 100000);
    get_number(e, "time_s", std::nullopt, 0, 1e7);
    get_number(e, "energy_j", 0.0, 0, 1e13);
  }
}

const StoredRank& rank_or_404(const Job& j, std::int64_t rank) {
  auto it = j.ranks.find(static_cast<int>(rank));
  if (rank > INT32_MAX || it == j.ranks.end())
    throw ApiError(404, "unknown_rank", fmt::format("rank {} is not registered in job {}", rank, j.id));
  return it->second;
}

}  // namespace

Reply JobManager::register_rank(const std::string& job_id, const json& body) {
  auto j = find_or_404(job_id);
  require_object(body, "request body");
  StoredRank r;
  const JobSpec& spec = j->spec;  // immutable after creation
  r.rank = static_cast<int>(get_int(body, "rank", std::nullopt, 0, spec.world_size() - 1));
  r.dp_rank = static_cast<int>(get_int(body, "dp_rank", std::nullopt, 0, spec.dp - 1));
  r.pp_rank = static_cast<int>(get_int(body, "pp_rank", std::nullopt, 0, spec.pp - 1));
  r.tp_rank = static_cast<int>(get_int(body, "tp_rank", std::nullopt, 0, spec.tp - 1));
  if (auto it = body.find("supported_freqs_mhz"); it != body.end() && !it->is_null()) {
    if (!it->is_array() || it->size() > 4096)
      throw ApiError(422, "invalid_field", "field \"supported_freqs_mhz\" must be an array of at most 4096 integers");
    for (const auto& f : *it) {
      if (!f.is_number_integer() || f.get<std::int64_t>() <= 0 || f.get<std::int64_t>() > 100000)
        throw ApiError(422, "invalid_field", "field \"supported_freqs_mhz\" must hold integers in [1, 100000]");
      r.supported_freqs_mhz.push_back(f.get<int>());
    }
  }
  std::unique_lock lock(j->mu);
  if (j->deleted) throw ApiError(404, "unknown_job", "the job was deleted");
  if (j->ranks.count(r.rank))
    throw ApiError(409, "duplicate_rank", fmt::format("rank {} is already registered", r.rank));
  if (auto s = j->slots.find({r.dp_rank, r.pp_rank, r.tp_rank}); s != j->slots.end())
    throw ApiError(409, "duplicate_rank", fmt::format("(dp_rank {}, pp_rank {}, tp_rank {}) is already rank {}",
                                                      r.dp_rank, r.pp_rank, r.tp_rank, s->second));
  r.seq = static_cast<std::int64_t>(j->ranks.size()) + 1;
  j->ranks[r.rank] = r;
  bool new_sweep = false;
  if (spec.source == PlanSource::kProfiling && !j->sweep && j->status == kStatusProfiling) {
    try {
      j->sweep = make_sweep(*j);
      new_sweep = j->sweep != nullptr;
    } catch (const InputError& e) {
      j->ranks.erase(r.rank);
      throw ApiError(422, "invalid_field", e.what());
    }
  }
  if (!store_.insert_rank(j->id, r)) {
    j->ranks.erase(r.rank);
    if (new_sweep) j->sweep.reset();
    throw ApiError(409, "duplicate_rank", fmt::format("rank {} is already registered", r.rank));
  }
  j->slots[{r.dp_rank, r.pp_rank, r.tp_rank}] = r.rank;
  if (new_sweep) {
    auto plan = render_sweep_plan(*j);
    j->plans[kSweepPlanIndex] = plan;
    for (auto& a : j->pipelines) a.plan = plan;
  }
  json out = {{"job_id", j->id},         {"rank", r.rank},         {"pipeline", r.dp_rank},
              {"pp_rank", r.pp_rank},     {"tp_rank", r.tp_rank},   {"ranks_registered", j->ranks.size()},
              {"world_size", spec.world_size()}, {"job_status", j->status}};
  return {201, out.dump()};
}

Reply JobManager::get_plan(const std::string& job_id, std::int64_t rank, std::optional<std::int64_t> since) {
  auto j = find_or_404(job_id);
  std::shared_lock lock(j->mu);
  const StoredRank& r = rank_or_404(*j, rank);
  const Assignment& a = j->pipelines[r.dp_rank];
  if (!a.plan)
    throw ApiError(409, "no_plan", "the job has no plan yet (profiling waits for supported_freqs_mhz)");
  if (since && a.version <= *since) {
    counters_.plan_not_modified++;
    return {304, {}};
  }
  counters_.plan_fetches++;
  std::string body = fmt::format(
      "{{\"version\":{},\"job_status\":\"{}\",\"plan_index\":{},\"pipeline\":{},\"pp_rank\":{},"
      "\"iteration_time_s\":{},\"energy_j\":{},\"instructions\":{}}}",
      a.version, j->status, a.plan_index, r.dp_rank, r.pp_rank, a.plan->time_json, a.plan->energy_json,
      a.plan->rank_instructions_json[r.pp_rank]);
  return {200, std::move(body)};
}

void JobManager::finish_profiling(const std::shared_ptr<Job>& j) {
  // Caller holds j->mu exclusively (or owns j alone, during load()).
  std::vector<ProfileRow> rows;
  for (const auto& row : j->sweep->rows())
    rows.push_back({row.key.stage, static_cast<InstructionKind>(row.key.kind), row.freq_mhz, row.time_s, row.energy_j});
  const std::string csv = profile_csv_text(rows);
  try {
    JobModel model = prepare_model(j->spec, csv);
    auto freq = all_max_freqs(model, j->spec);
    const FrequencyPlan ev = evaluate_plan(*model.dag, *model.profile, freq, j->spec.p_block_w);
    auto plan = render_plan(*model.dag, kAllMaxPlanIndex, {ev.timeline.time_s, ev.total_energy_j()}, std::move(freq));
    store_.set_built_profile(j->id, csv);
    store_.put_plan(j->id, kAllMaxPlanIndex, freqs_json(plan->freq_mhz));
    j->model = std::move(model);
    j->plans[kAllMaxPlanIndex] = plan;
    ++j->version_counter;
    for (auto& a : j->pipelines) a = {kAllMaxPlanIndex, j->version_counter, plan};
    store_.update_assignments(j->id, j->version_counter, stored_assignments(*j));
    j->status = kStatusPlanning;
    store_.set_status(j->id, j->status, "");
    start_solve(j, true);
  } catch (const std::exception& e) {
    j->status = kStatusFailed;
    j->error = fmt::format("profiling finished but the profile is unusable: {}", e.what());
    store_.set_status(j->id, j->status, j->error);
  }
}

Reply JobManager::post_measurements(const std::string& job_id, std::int64_t rank, const json& body) {
  auto j = find_or_404(job_id);
  require_object(body, "request body");
  std::vector<const json*> items;
  const bool batch = body.contains("measurements");
  if (batch) {
    const json& arr = body["measurements"];
    if (!arr.is_array() || arr.empty() || arr.size() > kMaxBatch)
      throw ApiError(422, "invalid_field",
                     fmt::format("field \"measurements\" must be a non-empty array of at most {} objects", kMaxBatch));
    for (const auto& m : arr) items.push_back(&m);
  } else {
    items.push_back(&body);
  }
  for (const json* m : items) validate_measurement(*m);

  const bool profiling = j->spec.source == PlanSource::kProfiling;
  std::unique_lock<std::shared_mutex> excl(j->mu, std::defer_lock);
  std::shared_lock<std::shared_mutex> shared(j->mu, std::defer_lock);
  if (profiling) excl.lock();  // the sweep must see measurements in storage order
  else shared.lock();
  if (j->deleted) throw ApiError(404, "unknown_job", "the job was deleted");
  const StoredRank r = rank_or_404(*j, rank);
  const double now = now_s();
  json results = json::array();
  int accepted = 0, duplicates = 0;
  for (const json* m : items) {
    const std::int64_t iteration = (*m)["iteration"].get<std::int64_t>();
    const double time_s = (*m)["time_s"].get<double>();
    const double energy_j = m->value("energy_j", 0.0);
    const bool inserted = store_.insert_measurement(j->id, r.rank, iteration, time_s, energy_j, m->dump(), now);
    results.push_back({{"iteration", iteration}, {"duplicate", !inserted}});
    if (!inserted) {
      ++duplicates;
      counters_.measurement_duplicates++;
      continue;
    }
    ++accepted;
    counters_.measurements++;
    {
      std::lock_guard s(j->stats_mu);
      ++j->num_measurements;
      j->sum_time_s += time_s;
      j->sum_energy_j += energy_j;
    }
    if (profiling && j->status == kStatusProfiling && feed_sweep(*j, r, *m)) {
      if (j->sweep->done()) {
        finish_profiling(j);
      } else {
        auto plan = render_sweep_plan(*j);
        j->plans[kSweepPlanIndex] = plan;
        ++j->version_counter;
        for (auto& a : j->pipelines) a = {kSweepPlanIndex, j->version_counter, plan};
        store_.update_assignments(j->id, j->version_counter, stored_assignments(*j));
      }
    }
  }
  if (!batch) {
    const bool dup = duplicates > 0;
    return {dup ? 200 : 202, json{{"accepted", !dup}, {"duplicate", dup}, {"job_status", j->status}}.dump()};
  }
  return {202, json{{"accepted", accepted}, {"duplicates", duplicates}, {"results", results},
                    {"job_status", j->status}}.dump()};
}

}  // namespace perseus::server
