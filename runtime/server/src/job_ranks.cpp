// JobManager: rank registration, plan fetches (hot path), measurements, profiling sweep steps.
#include <cmath>
#include <functional>
#include <memory>
#include <set>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "job.hpp"
#include "perseus/error.hpp"
#include "perseus/input_limits.hpp"
#include "perseus/plan.hpp"
#include "perseus/profile.hpp"
#include "perseus/runtime/clock_check.hpp"
#include "perseus/runtime/telemetry.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/server/job_manager.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxInstructions = 200000;

/// 422 when energy_j is more than a GPU can draw in time_s: the bound of telemetry.hpp's
/// plausible_energy(), which the client and `perseus monitor` apply to their own readings,
/// max_power_w × time_s plus one energy-counter update period at that power (a counter that
/// ticks every ≤ counter_update_s can put up to that much into a short interval; consecutive
/// intervals still sum to the true energy). `where` names the item.
void check_power(const json& obj, const std::string& where) {
  auto e = obj.find("energy_j");
  if (e == obj.end() || e->is_null()) return;  // unknown energy: fine
  const double energy = e->get<double>(), time = obj["time_s"].get<double>();
  const runtime::TelemetryLimits limits;
  if (!runtime::plausible_energy(energy, time, limits))
    throw ApiError(422, "implausible_energy",
                   fmt::format("{}: energy_j {} J is more than a GPU can use in time_s {} s: the bound is {} W × "
                               "time_s + {} J (one energy-counter update of {} s at that power) = {:.9g} J (an energy "
                               "counter anomaly? leave energy_j out when it is unknown)",
                               where, energy, time, limits.max_power_w, limits.max_power_w * limits.counter_update_s,
                               limits.counter_update_s, limits.max_power_w * (time + limits.counter_update_s)));
}

/// Validates one entry of a measurement's "instructions" against the job (an instruction
/// name, microbatch and stage the schedule has; a time no longer than the iteration's) and
/// returns its validated fields.
json validated_instruction(const json& e, const JobSpec& spec, double iteration_time_s) {
  require_object(e, "each of \"instructions\"");
  const std::string name = get_string(e, "instruction", std::nullopt, 64);
  if (!parse_instruction_kind(name))
    throw ApiError(422, "invalid_field",
                   fmt::format("field \"instruction\" must be forward, backward, backward_input or backward_weight, "
                               "got {}",
                               quote_input(name)));
  json item = {{"instruction", name},
               {"microbatch", get_int(e, "microbatch", std::nullopt, 0, spec.microbatches - 1)},
               {"freq_mhz", get_int(e, "freq_mhz", std::nullopt, 1, limits::kMaxFrequencyMhz)},
               // A computation takes time, as an iteration does (a 0 s timer reading is broken).
               {"time_s", get_number(e, "time_s", std::nullopt, 1e-9, iteration_time_s)}};
  if (auto st = e.find("stage"); st != e.end() && !st->is_null())
    item["stage"] = get_int(e, "stage", 0, 0, std::int64_t{spec.pp} * spec.chunks - 1);
  if (const auto planned = get_int(e, "planned_freq_mhz", 0, 0, limits::kMaxFrequencyMhz); planned > 0) item["planned_freq_mhz"] = planned;
  if (e.contains("energy_j") && !e["energy_j"].is_null()) item["energy_j"] = get_number(e, "energy_j", 0.0, 0, 1e13);
  check_power(e, fmt::format("instruction {} microbatch {}", quote_input(item["instruction"].get<std::string>()),
                             item["microbatch"].get<std::int64_t>()));
  return item;
}


/// Answer to a registration: the rank's place and the job's shape (the client bounds plan
/// responses with it). Caller holds j.mu.
json registration_reply(const Job& j, const StoredRank& r) {
  return {{"job_id", j.id},
          {"rank", r.rank},
          {"pipeline", r.dp_rank},
          {"pp_rank", r.pp_rank},
          {"tp_rank", r.tp_rank},
          {"ranks_registered", j.ranks.size()},
          {"world_size", j.spec.world_size()},
          {"pp", j.spec.pp},
          {"microbatches", j.spec.microbatches},
          {"chunks", j.spec.chunks},
          {"job_status", j.status}};
}

/// Clocks the job's plans may give rank r's GPU. A job of explicit plans ("plans",
/// "zeus_plans") only ever serves those (a straggler switch picks among them): their clocks of
/// this rank's computations, even when a profile gives them times. A job planned from a
/// profile may serve any profile clock (its frontier, re-solved after a restart): the
/// profile's frequencies of the stages and computations this rank runs. Caller holds j.mu.
std::set<int> planned_clocks(const Job& j, int pp_rank) {
  std::set<int> out;
  const JobModel& m = j.model;
  if (!m.dag || pp_rank >= m.dag->num_ranks()) return out;
  for (int id : m.dag->rank_ops(pp_rank)) {
    const auto& op = m.dag->op(id);
    if (m.profile && m.explicit_plans.empty()) {
      for (const auto& p : m.profile->points(op.stage, op.kind)) out.insert(p.freq_mhz);
    }
    for (const auto& plan : m.explicit_plans)
      if (static_cast<std::size_t>(id) < plan.size()) out.insert(plan[static_cast<std::size_t>(id)]);
  }
  return out;
}

/// 422 when a clock the job's plans may give this rank is not one of the GPU's supported
/// clocks (within the client's snapping tolerance): the plan would be refused by the client
/// (or, without the check, sent to the driver). No list = nothing to check.
void check_rank_clocks(const Job& j, const StoredRank& r) {
  if (r.supported_freqs_mhz.empty()) return;
  std::vector<std::string> bad;
  std::size_t unsupported = 0;
  for (int f : planned_clocks(j, r.pp_rank)) {
    const auto c = runtime::check_clock(f, r.supported_freqs_mhz);
    if (!c.ok && unsupported++ < 5) bad.push_back(fmt::format("{} MHz (nearest {} MHz)", f, c.nearest_mhz));
  }
  if (unsupported > bad.size()) bad.push_back(fmt::format("and {} more", unsupported - bad.size()));
  if (!bad.empty())
    throw ApiError(422, "unsupported_clock",
                   fmt::format("field \"supported_freqs_mhz\": the job's plans for pp_rank {} use clocks this GPU does "
                               "not support ({}; tolerance {} MHz): {}. Profile on this GPU model, or register the "
                               "rank on the GPU the job was planned for",
                               r.pp_rank, runtime::describe_clocks(r.supported_freqs_mhz),
                               runtime::kDefaultClockToleranceMhz, fmt::join(bad, ", ")));
}

const StoredRank& rank_or_404(const Job& j, std::int64_t rank) {
  auto it = j.ranks.find(static_cast<int>(rank));
  if (rank > INT32_MAX || it == j.ranks.end())
    throw ApiError(404, "unknown_rank", fmt::format("rank {} is not registered in job {}", rank, j.id));
  return it->second;
}

/// Feeds an accepted measurement to the job's straggler loop when it was measured on the
/// pipeline's current plan (older plan versions would mix two plans' times). Caller holds j.mu.
void feed_straggler_loop(Job& j, const StoredRank& r, const json& m, std::vector<LoopAction>& out) {
  const Assignment& a = j.pipelines[r.dp_rank];
  const bool has_version = m.contains("plan_version") && m["plan_version"].is_number_integer();
  if (!a.plan || !has_version || m["plan_version"].get<std::int64_t>() != a.version) return;
  std::lock_guard lock(j.loop.mu);
  j.loop.init(j.spec);
  const double expected = std::isfinite(a.plan->point.time_s) ? a.plan->point.time_s : 0.0;
  // No energy_j: unknown (the client leaves out an impossible counter reading), never 0 J.
  const std::optional<double> energy_j =
      m.contains("energy_j") && m["energy_j"].is_number() ? std::optional(m["energy_j"].get<double>()) : std::nullopt;
  for (auto& act : j.loop.feed(r.dp_rank, r.rank, m["iteration"].get<std::int64_t>(), m["time_s"].get<double>(),
                               energy_j, expected))
    out.push_back(std::move(act));
}

}  // namespace

/// Relative slack of the rule "a measurement's instructions take no longer than its iteration".
constexpr double kInstructionTimeSlack = 0.01;

json validated_measurement(const json& m, const JobSpec& spec) {
  require_object(m, "measurement");
  json out = {{"iteration", get_int(m, "iteration", std::nullopt, 0, std::int64_t{1} << 53)},
              // An iteration takes time: 0 s is a broken timer, not a measurement (it would pull the mean down).
              {"time_s", get_number(m, "time_s", std::nullopt, 1e-9, limits::kMaxIterationTimeS)},
              {"plan_version", get_int(m, "plan_version", 0, 0, INT64_MAX)}};
  if (m.contains("energy_j") && !m["energy_j"].is_null()) out["energy_j"] = get_number(m, "energy_j", 0.0, 0, 1e13);
  check_power(m, "measurement");
  auto it = m.find("instructions");
  if (it == m.end() || it->is_null()) return out;
  if (!it->is_array() || it->size() > kMaxInstructions)
    throw ApiError(422, "invalid_field",
                   fmt::format("field \"instructions\" must be an array of at most {} objects", kMaxInstructions));
  json list = json::array();
  // Each computation of the iteration once: (instruction, microbatch), and the stage with
  // chunks > 1, where a rank runs several stages (an entry without one cannot be told apart).
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>, std::size_t> seen;
  for (std::size_t k = 0; k < it->size(); ++k) {
    try {
      list.push_back(validated_instruction((*it)[k], spec, out["time_s"].get<double>()));
    } catch (const ApiError& err) {  // name the element
      throw ApiError(err.status(), err.code(), fmt::format("instructions[{}]: {}", k, err.what()));
    }
    const json& e = list.back();
    if (spec.chunks > 1 && !e.contains("stage")) continue;
    const std::int64_t stage = spec.chunks > 1 ? e["stage"].get<std::int64_t>() : 0;
    const auto [at, fresh] = seen.try_emplace({e["instruction"].get<std::string>(), e["microbatch"].get<std::int64_t>(), stage}, k);
    if (!fresh)
      throw ApiError(422, "invalid_field",
                     fmt::format("instructions[{}]: {} of microbatch {}{} is listed twice (also instructions[{}]); "
                                 "each computation of the iteration is reported once",
                                 k, e["instruction"].get<std::string>(), e["microbatch"].get<std::int64_t>(),
                                 spec.chunks > 1 ? fmt::format(" on stage {}", stage) : "", at->second));
  }
  // One GPU runs its computations one after another: together they cannot take longer than the
  // iteration (1 % + 1 µs allow for two timers; the client's own reports use one clock).
  double busy_s = 0;
  for (const json& e : list) busy_s += e["time_s"].get<double>();
  const double time_s = out["time_s"].get<double>();
  if (busy_s > time_s * (1 + kInstructionTimeSlack) + 1e-6)
    throw ApiError(422, "implausible_time",
                   fmt::format("the {} instructions take {:.9g} s in all, more than the iteration's time_s {:.9g} s "
                               "(+{} %): one GPU runs its computations one after another, so these timings "
                               "cannot all be right (check that each instruction's time_s is its own, not "
                               "cumulative; leave out \"instructions\" when unsure)",
                               list.size(), busy_s, time_s, 100 * kInstructionTimeSlack));
  out["instructions"] = std::move(list);
  return out;
}

Reply JobManager::register_rank(const std::string& job_id, const json& body) {
  auto j = find_or_404(job_id);
  require_object(body, "request body");
  reject_unknown_fields(body, {"rank", "dp_rank", "pp_rank", "tp_rank", "supported_freqs_mhz"}, "");
  StoredRank r;
  const JobSpec& spec = j->spec;  // immutable after creation
  r.rank = static_cast<int>(get_int(body, "rank", std::nullopt, 0, spec.world_size() - 1));
  r.dp_rank = static_cast<int>(get_int(body, "dp_rank", std::nullopt, 0, spec.dp - 1));
  r.pp_rank = static_cast<int>(get_int(body, "pp_rank", std::nullopt, 0, spec.pp - 1));
  r.tp_rank = static_cast<int>(get_int(body, "tp_rank", std::nullopt, 0, spec.tp - 1));
  r.supported_freqs_mhz = get_clock_list(body, "supported_freqs_mhz", /*allow_empty=*/false);
  std::unique_lock lock(j->mu);
  if (j->deleted) throw ApiError(404, "unknown_job", "the job was deleted");
  if (auto old = j->ranks.find(r.rank); old != j->ranks.end()) {
    const StoredRank& o = old->second;
    if (o.dp_rank != r.dp_rank || o.pp_rank != r.pp_rank || o.tp_rank != r.tp_rank)
      throw ApiError(409, "duplicate_rank",
                     fmt::format("rank {} is already registered as (dp_rank {}, pp_rank {}, tp_rank {}), not (dp_rank "
                                 "{}, pp_rank {}, tp_rank {})",
                                 r.rank, o.dp_rank, o.pp_rank, o.tp_rank, r.dp_rank, r.pp_rank, r.tp_rank));
    // The same coordinates: the same trainer restarted (maybe on another GPU, whose clocks
    // must fit the plans too). Idempotent.
    check_rank_clocks(*j, r);
    return {200, registration_reply(*j, o).dump()};
  }
  check_rank_clocks(*j, r);
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
  bool inserted = false;
  try {
    inserted = store_.insert_rank(j->id, r);
  } catch (...) {  // the write failed: leave no trace in memory either
    j->ranks.erase(r.rank);
    if (new_sweep) j->sweep.reset();
    throw;
  }
  if (!inserted) {
    j->ranks.erase(r.rank);
    if (new_sweep) j->sweep.reset();
    throw ApiError(409, "duplicate_rank", fmt::format("rank {} is already registered", r.rank));
  }
  j->slots[{r.dp_rank, r.pp_rank, r.tp_rank}] = r.rank;
  if (new_sweep) {
    auto plan = render_sweep_plan(*j, *j->sweep);
    j->plans[kSweepPlanIndex] = plan;
    for (auto& a : j->pipelines) a.plan = plan;
  }
  return {201, registration_reply(*j, r).dump()};
}

Reply JobManager::get_plan(const std::string& job_id, std::int64_t rank, std::optional<std::int64_t> since) {
  auto j = find_or_404(job_id);
  std::shared_lock lock(j->mu);
  const StoredRank& r = rank_or_404(*j, rank);
  const Assignment& a = j->pipelines[r.dp_rank];
  if (!a.plan)
    throw ApiError(409, "no_plan", "the job has no plan yet (profiling waits for supported_freqs_mhz)");
  // A since_version this job never issued (a client ahead of a server restored from an older
  // database): 200 with the plan in force, so that the client can follow the server again.
  if (since && a.version <= *since && *since <= j->version_counter) {
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

std::function<void()> JobManager::finish_profiling(const std::shared_ptr<Job>& j, const Sweep& sweep) {
  std::vector<ProfileRow> rows;
  for (const auto& row : sweep.rows())
    rows.push_back({row.key.stage, static_cast<InstructionKind>(row.key.kind), row.freq_mhz, row.time_s, row.energy_j});
  const std::string csv = profile_csv_text(rows);
  auto model = std::make_shared<JobModel>();
  std::shared_ptr<const ServedPlan> plan;
  try {
    *model = prepare_model(j->spec, csv);
    plan = quick_plan(*model, j->spec);
  } catch (const std::exception& e) {
    const std::string error = fmt::format("profiling finished but the profile is unusable: {}", e.what());
    store_.set_status(j->id, kStatusFailed, error);
    return [j, error] {
      j->status = kStatusFailed;
      j->error = error;
    };
  }
  const std::int64_t version = j->version_counter + 1;
  std::vector<StoredAssignment> next;
  for (int d = 0; d < static_cast<int>(j->pipelines.size()); ++d) next.push_back({d, kQuickPlanIndex, version});
  store_.set_built_profile(j->id, csv);
  store_.put_plan(j->id, kQuickPlanIndex, freqs_json(plan->freq_mhz));
  store_.update_assignments(j->id, version, next);
  store_.set_status(j->id, kStatusPlanning, "");
  return [this, j, model, plan, version] {
    j->model = std::move(*model);
    j->plans[kQuickPlanIndex] = plan;
    j->version_counter = version;
    for (auto& a : j->pipelines) a = {kQuickPlanIndex, version, plan};
    j->status = kStatusPlanning;
    start_solve(j, true);
  };
}

Reply JobManager::post_measurements(const std::string& job_id, std::int64_t rank, const json& body) {
  auto j = find_or_404(job_id);
  require_object(body, "request body");
  // Per item: a batch keeps its valid reports (validated fields only) and names the rejected
  // ones (one bad counter reading must not cost the other iterations); a single report is
  // refused with 422.
  std::vector<json> items;
  std::vector<std::size_t> item_index;  // each valid item's index in the batch
  json rejected = json::array();
  const bool batch = body.contains("measurements");
  if (batch) {
    // One report's fields beside a batch would be dropped silently: refused.
    for (const char* k : {"iteration", "time_s", "energy_j", "plan_version", "instructions"})
      if (body.contains(k))
        throw ApiError(422, "invalid_field",
                       fmt::format("field \"{}\" beside \"measurements\": send one report's fields, or a batch in "
                                   "\"measurements\", not both",
                                   k));
    const json& arr = body["measurements"];
    if (!arr.is_array() || arr.empty() || arr.size() > kMaxMeasurementBatch)
      throw ApiError(422, "invalid_field",
                     fmt::format("field \"measurements\" must be a non-empty array of at most {} objects", kMaxMeasurementBatch));
    for (std::size_t i = 0; i < arr.size(); ++i) {
      try {
        items.push_back(validated_measurement(arr[i], j->spec));
        item_index.push_back(i);
      } catch (const ApiError& e) {
        json it = arr[i].is_object() && arr[i].contains("iteration") ? arr[i]["iteration"] : json(nullptr);
        rejected.push_back({{"index", i}, {"iteration", it},
                            {"error", fmt::format("{}: measurements[{}]: {}", e.code(), i, e.what())}});
        counters_.measurements_rejected++;
      }
    }
  } else {
    try {
      items.push_back(validated_measurement(body, j->spec));
    } catch (const ApiError&) {
      counters_.measurements_rejected++;  // a report refused alone counts, as a batch's refused item does
      throw;
    }
    item_index.push_back(0);
  }

  const bool profiling = j->spec.source == PlanSource::kProfiling;
  std::unique_lock<std::shared_mutex> excl(j->mu, std::defer_lock);
  std::shared_lock<std::shared_mutex> shared(j->mu, std::defer_lock);
  if (profiling) excl.lock();  // the sweep must see measurements in storage order
  else shared.lock();
  if (j->deleted) throw ApiError(404, "unknown_job", "the job was deleted");
  const StoredRank r = rank_or_404(*j, rank);
  const double now = now_s();
  json results = json::array();
  std::vector<LoopAction> loop_actions;  // straggler detection / verification, run after unlocking
  int accepted = 0, duplicates = 0;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const json* m = &items[k];
    const std::int64_t iteration = (*m)["iteration"].get<std::int64_t>();
    // A plan version the server never issued: the report cannot be of one of its plans. A
    // stage another pp_rank runs: the computation cannot be this rank's.
    std::string why;
    if (const std::int64_t version = (*m)["plan_version"].get<std::int64_t>(); version > j->version_counter) {
      why = fmt::format("field \"plan_version\" must be a version this job has issued (at most {}), got {}",
                        j->version_counter, version);
    } else if (m->contains("instructions")) {
      const auto& list = (*m)["instructions"];
      for (std::size_t e = 0; e < list.size() && why.empty(); ++e) {
        if (!list[e].contains("stage")) continue;
        const std::int64_t stage = list[e]["stage"].get<std::int64_t>();
        if (stage % j->spec.pp != r.pp_rank)
          why = fmt::format("instructions[{}]: field \"stage\" {} is not a stage of this rank (pp_rank {} runs stages "
                            "with stage % {} == {})",
                            e, stage, r.pp_rank, j->spec.pp, r.pp_rank);
      }
    }
    if (!why.empty()) {
      counters_.measurements_rejected++;
      if (!batch) throw ApiError(422, "invalid_field", why);
      rejected.push_back({{"index", item_index[k]}, {"iteration", iteration},
                          {"error", fmt::format("invalid_field: measurements[{}]: {}", item_index[k], why)}});
      continue;
    }
    const double time_s = (*m)["time_s"].get<double>();
    const bool energy_known = m->contains("energy_j") && (*m)["energy_j"].is_number();
    const double energy_j = energy_known ? (*m)["energy_j"].get<double>() : 0.0;  // the stored JSON keeps "unknown"
    // Stored: the whole report while a profiling sweep needs it (replayed after a restart),
    // else without its per-computation entries, which nothing reads once the straggler loop
    // has seen them (20 KB per rank and iteration at 96 microbatches: a week of training would
    // fill the disk).
    std::string text;
    if (m->contains("instructions") && !(profiling && j->status == kStatusProfiling)) {
      json compact = *m;
      compact["instructions_count"] = compact["instructions"].size();
      compact.erase("instructions");
      text = compact.dump();
    } else {
      text = m->dump();
    }
    // One transaction per report: the report and the sweep step (or the sweep's end) it causes
    // are stored together or not at all, and memory changes only once they are committed.
    Store::Transaction tx(store_);
    const bool inserted = store_.insert_measurement(j->id, r.rank, iteration, time_s, energy_j, text, now);
    if (!inserted) {
      results.push_back({{"iteration", iteration}, {"duplicate", true}});
      ++duplicates;
      counters_.measurement_duplicates++;
      continue;
    }
    std::unique_ptr<Sweep> next_sweep;  // the sweep after this report, installed after the commit
    std::function<void()> apply_step;
    if (profiling && j->status == kStatusProfiling && j->sweep) {
      next_sweep = std::make_unique<Sweep>(*j->sweep);
      const bool stepped = feed_sweep(*next_sweep, *j, r, *m);
      if (next_sweep->done()) {  // also when an earlier report's finish failed to commit
        apply_step = finish_profiling(j, *next_sweep);
      } else if (stepped) {
        auto plan = render_sweep_plan(*j, *next_sweep);
        const std::int64_t version = j->version_counter + 1;
        std::vector<StoredAssignment> next;
        for (int d = 0; d < static_cast<int>(j->pipelines.size()); ++d) next.push_back({d, kSweepPlanIndex, version});
        store_.update_assignments(j->id, version, next);
        apply_step = [j, plan, version] {
          j->plans[kSweepPlanIndex] = plan;
          j->version_counter = version;
          for (auto& a : j->pipelines) a = {kSweepPlanIndex, version, plan};
        };
      }
    }
    tx.commit();
    results.push_back({{"iteration", iteration}, {"duplicate", false}});
    ++accepted;
    counters_.measurements++;
    {
      std::lock_guard s(j->stats_mu);
      ++j->num_measurements;
      j->sum_time_s += time_s;
      j->sum_energy_j += energy_j;
      if (energy_known) ++j->num_energy_known;
      j->measurement_bytes += static_cast<std::int64_t>(text.size());
    }
    if (j->auth.origin == kOriginZeusAnonymous) anonymous_bytes_.add(static_cast<std::int64_t>(text.size()));
    if (j->status == kStatusReady) feed_straggler_loop(*j, r, *m, loop_actions);
    if (next_sweep) j->sweep = std::move(next_sweep);
    if (apply_step) apply_step();
  }
  Reply reply;
  if (!batch) {
    const bool dup = duplicates > 0;
    reply = {dup ? 200 : 202, json{{"accepted", !dup}, {"duplicate", dup}, {"job_status", j->status}}.dump()};
  } else {
    std::stable_sort(rejected.begin(), rejected.end(),  // in batch order, whichever check refused them
                     [](const json& a, const json& b) { return a["index"].get<std::size_t>() < b["index"].get<std::size_t>(); });
    reply = {202, json{{"accepted", accepted}, {"duplicates", duplicates}, {"results", results},
                       {"rejected", rejected}, {"job_status", j->status}}.dump()};
  }
  if (excl.owns_lock()) excl.unlock();
  if (shared.owns_lock()) shared.unlock();
  if (!loop_actions.empty()) run_straggler_actions(j, loop_actions);
  j->loop.measurements_processed += accepted;
  return reply;
}

}  // namespace perseus::server
