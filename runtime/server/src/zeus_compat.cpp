// Zeus Pipeline Frequency Optimizer (PFO) wire compatibility, mapped onto /v1 jobs.
#include <algorithm>
#include <functional>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "job.hpp"
#include "perseus/error.hpp"
#include "perseus/schedule.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/server/job_manager.hpp"
#include "perseus/zeus_plan_file.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

/// Microbatches of a Zeus plan, from its first stage: the forwards (tuple form) or half the
/// entries (integer form).
std::int64_t zeus_microbatches(const ZeusPlan& plan) {
  std::int64_t forwards = 0, entries = 0;
  for (const auto& e : plan.front()) {
    if (!e.instruction) ++entries;
    else if (*e.instruction == "forward") ++forwards;
  }
  return forwards > 0 ? forwards : entries / 2;
}

/// The body of the POST /v1/jobs request that POST /register_job makes.
json zeus_job_request(const ManagerOptions& o, std::int64_t pp, std::int64_t dp, std::int64_t tp,
                      std::int64_t microbatches, const std::string& name) {
  json req = {{"name", name}, {"pp", pp}, {"dp", dp}, {"tp", tp}, {"microbatches", microbatches},
              {"schedule", o.zeus_schedule}, {"p2p_power_w", o.zeus_p2p_power_w},
              {"zeus_plans", o.zeus_plan_texts}};
  if (!o.zeus_profile_csv.empty()) req["profile_csv"] = o.zeus_profile_csv;
  return req;
}

constexpr std::size_t kMaxZeusPairs = 100000;  ///< iter_time/iter_energy pairs per POST /result
/// The largest iteration a measurement may have (validated_measurement()): sizes the stored text.
constexpr std::int64_t kMaxZeusIteration = std::int64_t{1} << 53;

}  // namespace

void check_zeus_configuration(const ManagerOptions& o, const std::vector<std::string>& plan_names) {
  // Checked with or without --zeus-plan: a typo is never silently kept (session 27's trial).
  const auto names = schedule_names();
  if (std::find(names.begin(), names.end(), o.zeus_schedule) == names.end())
    throw InputError(fmt::format("--zeus-schedule: {} is not a schedule name; expected one of {}",
                                 quote_input(o.zeus_schedule), fmt::join(names, ", ")));
  if (o.zeus_plan_texts.empty()) return;
  const auto name = [&](std::size_t i) {
    return i < plan_names.size() ? plan_names[i] : fmt::format("--zeus-plan (plan {} of {})", i + 1, o.zeus_plan_texts.size());
  };
  std::vector<ZeusPlan> plans;
  for (std::size_t i = 0; i < o.zeus_plan_texts.size(); ++i) plans.push_back(parse_zeus_plan(o.zeus_plan_texts[i], name(i)));
  // Every job the server will make: the plans' pp (one list per stage), any dp and tp (they do
  // not change a pipeline's plan). A plan that does not fit its schedule or the profile shows here.
  const auto pp = static_cast<std::int64_t>(plans.front().size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    try {
      if (static_cast<std::int64_t>(plans[i].size()) != pp)
        throw InputError(fmt::format("has {} stage lists, {} has {}", plans[i].size(), name(0), pp));
      JobSpec spec = JobSpec::from_json(zeus_job_request(o, pp, 1, 1, zeus_microbatches(plans.front()), "zeus"));
      spec.zeus_plans = {o.zeus_plan_texts[i]};
      prepare_model(spec);
    } catch (const ApiError& e) {
      throw InputError(fmt::format("{}: {}", name(i), e.what()));
    } catch (const InputError& e) {
      // prepare_model names the plan as the request does ("zeus_plans[0]: ..."): name the file.
      std::string what = e.phrased(json_field_name);
      if (what.rfind("zeus_plans[0]: ", 0) == 0) what.erase(0, 15);
      throw InputError(fmt::format("{}: {}", name(i), what));
    }
  }
}

Reply JobManager::zeus_register_job(const json& body, bool anonymous) {
  require_object(body, "JobInfo");
  if (body.contains("job_id") && !(body["job_id"].is_string() && body["job_id"].get<std::string>().empty()) &&
      !body["job_id"].is_null())
    throw ApiError(422, "invalid_field", "JobInfo.job_id must be empty; the server assigns it");
  const auto pp = get_int(body, "pp_degree", std::nullopt, 1, 1024);
  const auto dp = get_int(body, "dp_degree", std::nullopt, 1, 65536);
  const auto tp = get_int(body, "tp_degree", std::nullopt, 1, 1024);
  const auto world = get_int(body, "world_size", std::nullopt, 1, 1 << 30);
  if (world != pp * dp * tp)
    throw ApiError(422, "invalid_field",
                   fmt::format("field \"world_size\" must equal pp_degree*dp_degree*tp_degree = {}*{}*{} = {}, got {}", pp,
                               dp, tp, pp * dp * tp, world));
  const std::string meta = get_string(body, "job_metadata", std::string(), 256);
  if (opt_.zeus_plan_texts.empty())
    throw ApiError(503, "zeus_not_configured",
                   "this server has no Zeus plan configured (start it with --zeus-plan FILE_OR_DIR)");
  ZeusPlan first;
  try {
    first = parse_zeus_plan(opt_.zeus_plan_texts.front(), "--zeus-plan");
  } catch (const InputError& e) {
    throw ApiError(500, "zeus_plan_invalid", e.what());
  }
  // The server's plans fix the pipeline depth: another pp_degree is this client's mismatch.
  if (pp != static_cast<std::int64_t>(first.size()))
    throw ApiError(422, "invalid_field",
                   fmt::format("JobInfo.pp_degree is {}, but this server's --zeus-plan has {} stage lists (one per "
                               "pipeline stage): it serves only jobs of pp_degree {}",
                               pp, first.size(), first.size()));
  json req = zeus_job_request(opt_, pp, dp, tp, zeus_microbatches(first), meta.empty() ? std::string("zeus") : meta);
  std::unique_lock<std::mutex> quota(anonymous_mu_, std::defer_lock);
  if (anonymous) {
    quota.lock();  // check and insert as one step, so concurrent callers cannot overshoot
    check_anonymous_quota(pp * dp * tp);
  }
  const Reply r = create_job_as(req, anonymous ? kOriginZeusAnonymous : kOriginZeus);
  return {200, json(json::parse(r.body)["job_id"].get<std::string>()).dump()};
}

Reply JobManager::zeus_register_rank(const std::string& job_id, const json& body) {
  find_zeus_or_404(job_id);
  require_object(body, "RankInfo");
  json req = {{"rank", body.value("rank", json())}, {"dp_rank", body.value("dp_rank", json())},
              {"pp_rank", body.value("pp_rank", json())}, {"tp_rank", body.value("tp_rank", json())}};
  if (body.contains("available_frequencies")) req["supported_freqs_mhz"] = body["available_frequencies"];
  try {
    register_rank(job_id, req);
  } catch (const ApiError& e) {
    // A Zeus client sent its clocks as available_frequencies: name that field, not ours.
    std::string message = e.what();
    const std::string ours = "supported_freqs_mhz", theirs = "available_frequencies";
    for (auto at = message.find(ours); at != std::string::npos; at = message.find(ours, at + theirs.size()))
      message.replace(at, ours.size(), theirs);
    throw ApiError(e.status(), e.code(), message, e.retry_after_s());
  }
  return {200, "null"};
}

Reply JobManager::zeus_schedule(const std::string& job_id, std::int64_t rank) {
  auto j = find_zeus_or_404(job_id);
  std::shared_lock lock(j->mu);
  auto it = j->ranks.find(static_cast<int>(rank));
  if (rank > INT32_MAX || it == j->ranks.end())
    throw ApiError(404, "unknown_rank", fmt::format("rank {} is not registered in job {}", rank, job_id));
  const Assignment& a = j->pipelines[it->second.dp_rank];
  if (!a.plan) throw ApiError(409, "no_plan", "the job has no plan yet");
  counters_.plan_fetches++;
  return {200, fmt::format("{{\"rank\":{},\"frequencies\":{}}}", rank, a.plan->rank_zeus_json[it->second.pp_rank])};
}

Reply JobManager::zeus_result(const std::string& job_id, const json& body) {
  auto j = find_zeus_or_404(job_id);
  require_object(body, "ProfilingResult");
  const auto rank = get_int(body, "rank", std::nullopt, 0, INT32_MAX);
  const json& times = body.contains("iter_time") ? body["iter_time"] : json();
  const json& energies = body.contains("iter_energy") ? body["iter_energy"] : json();
  if (!times.is_array() || !energies.is_array() || times.size() != energies.size() || times.size() > kMaxZeusPairs)
    throw ApiError(422, "invalid_field",
                   fmt::format("fields \"iter_time\" and \"iter_energy\" must be arrays of equal length, at most {}; "
                               "got {} and {} entries",
                               kMaxZeusPairs, times.is_array() ? std::to_string(times.size()) : "no array",
                               energies.is_array() ? std::to_string(energies.size()) : "no array"));
  // Every pair is checked here by the measurements' own rules (a pair refused later would be
  // lost without the caller knowing). `bytes`: an upper bound of the text they will store (their
  // validated fields, with the longest iteration number), for the anonymous quota.
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    try {
      bytes += static_cast<std::int64_t>(
          validated_measurement({{"iteration", kMaxZeusIteration}, {"time_s", times[i]}, {"energy_j", energies[i]}},
                                j->spec)
              .dump()
              .size());
    } catch (const ApiError& e) {
      // Named as the Zeus request names it: the measurement's own field names are not in it.
      std::string msg = e.what();
      bool named = false;
      for (const auto& [ours, theirs] : {std::pair{"field \"time_s\"", "iter_time"}, {"field \"energy_j\"", "iter_energy"}}) {
        if (const auto at = msg.find(ours); at != std::string::npos) {
          msg.replace(at, std::string_view(ours).size(), fmt::format("{}[{}]", theirs, i));
          named = true;
        }
      }
      throw ApiError(e.status(), e.code(), named ? msg : fmt::format("iter_time[{0}] / iter_energy[{0}]: {1}", i, msg));
    }
  }
  // Zeus results carry no iteration numbers: a client retry is recognized by its content (the
  // same rank, times and energies, among this job's last kZeusDigestsKept results) and answered
  // without counting it again. Kept in memory: a retry across a server restart counts twice.
  constexpr std::size_t kZeusDigestsKept = 4096;
  const std::uint64_t digest = std::hash<std::string>{}(json{rank, times, energies}.dump());
  auto seen_before = [&] {
    const auto& seen = j->zeus_result_digests;
    return std::find(seen.begin(), seen.end(), digest) != seen.end();
  };
  // Refusals (unknown rank, quota) come before anything (the iteration counter, the retry
  // digests) changes, so a refused result changes nothing.
  {
    std::shared_lock lock(j->mu);
    if (seen_before()) return {200, "null"};
    if (!j->ranks.count(static_cast<int>(rank)))
      throw ApiError(404, "unknown_rank", fmt::format("rank {} is not registered in job {}", rank, job_id));
  }
  // The bytes are reserved (check and count in one atomic step) until the results are stored,
  // which counts what they actually take; then the reservation is given back. So concurrent
  // results cannot pass the quota together (a request near the limit may be refused while
  // another is in flight: the reservation is counted with what that one stores).
  const bool anonymous = j->auth.origin == kOriginZeusAnonymous;
  if (anonymous && !anonymous_bytes_.try_reserve(bytes))
    throw ApiError(403, "quota_exceeded",
                   fmt::format("jobs made without a token may store {} bytes of measurements in total "
                               "(--zeus-no-auth-max-mb); {} are stored or reserved and this result needs {}",
                               anonymous_bytes_.limit(), anonymous_bytes_.used(), bytes));
  struct Release {
    ByteQuota* quota;
    std::int64_t bytes;
    ~Release() {
      if (quota) quota->release(bytes);
    }
  } release{anonymous ? &anonymous_bytes_ : nullptr, bytes};
  std::int64_t next;
  {
    std::unique_lock lock(j->mu);
    if (seen_before()) return {200, "null"};
    auto& seen = j->zeus_result_digests;
    seen.push_back(digest);  // reserved now, so a concurrent identical retry is not counted either
    if (seen.size() > kZeusDigestsKept) seen.pop_front();
    next = j->zeus_next_iteration;
    j->zeus_next_iteration += static_cast<std::int64_t>(times.size());
  }
  try {
    // Stored as measurement batches of at most kMaxMeasurementBatch (the /v1 batch limit).
    // Every pair passed the measurements' checks above, so no item is refused. A store fault
    // midway (500) leaves the iterations taken: numbers already stored are never reused.
    for (std::size_t from = 0; from < times.size(); from += kMaxMeasurementBatch) {
      json batch = json::array();
      for (std::size_t i = from; i < std::min(times.size(), from + kMaxMeasurementBatch); ++i)
        batch.push_back({{"iteration", next + static_cast<std::int64_t>(i)}, {"time_s", times[i]},
                         {"energy_j", energies[i]}});
      post_measurements(job_id, rank, json{{"measurements", batch}});
    }
  } catch (...) {  // not stored: forget the digest so that a retry is accepted
    std::unique_lock lock(j->mu);
    auto& seen = j->zeus_result_digests;
    if (auto it = std::find(seen.begin(), seen.end(), digest); it != seen.end()) seen.erase(it);
    throw;
  }
  return {200, "null"};
}

}  // namespace perseus::server
