// JobSpec validation and (de)serialization.
#include "perseus/server/job_spec.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "perseus/input_limits.hpp"
#include "perseus/runtime/job_limits.hpp"
#include "perseus/server/api_error.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {
using runtime::kMaxJobChunks, runtime::kMaxJobComputations, runtime::kMaxJobDp, runtime::kMaxJobMicrobatches,
    runtime::kMaxJobPp, runtime::kMaxJobTp, runtime::kMaxJobWorld;
constexpr std::size_t kMaxPayload = std::size_t{1} << 30;
}  // namespace

const char* to_string(PlanSource source) {
  switch (source) {
    case PlanSource::kProfile: return "profile";
    case PlanSource::kPlans: return "plans";
    case PlanSource::kZeusPlans: return "zeus_plans";
    case PlanSource::kProfiling: return "profiling";
  }
  return "unknown";
}

JobSpec JobSpec::from_json(const json& body, bool stored) {
  require_object(body, "request body");
  JobSpec s;
  s.name = get_string(body, "name", std::string(), 256);
  // Shown in listings, logs and terminals: no control characters (a newline or an ANSI escape
  // would forge log lines or recolour a terminal).
  for (std::size_t i = 0; i < s.name.size() && !stored; ++i) {
    const auto c = static_cast<unsigned char>(s.name[i]);
    if (c < 0x20 || c == 0x7f)
      throw ApiError(422, "invalid_field",
                     fmt::format("field \"name\" must not contain control characters, got byte 0x{:02x} at offset {}", c, i));
    // (The body is valid UTF-8: the JSON parser checked it.) C1 controls U+0080..U+009F, and the
    // bidirectional marks, embeddings, overrides and isolates (Unicode UAX #9: U+061C, U+200E,
    // U+200F, U+202A..U+202E, U+2066..U+2069), which make a name display as another.
    const auto next = [&](std::size_t k) { return k < s.name.size() ? static_cast<unsigned char>(s.name[k]) : 0u; };
    const unsigned c1 = next(i + 1), c2 = next(i + 2);
    const bool c1_control = c == 0xc2 && c1 >= 0x80 && c1 <= 0x9f;
    const bool bidi = (c == 0xd8 && c1 == 0x9c) ||
                      (c == 0xe2 && c1 == 0x80 && (c2 == 0x8e || c2 == 0x8f || (c2 >= 0xaa && c2 <= 0xae))) ||
                      (c == 0xe2 && c1 == 0x81 && c2 >= 0xa6 && c2 <= 0xa9);
    if (c1_control || bidi)
      throw ApiError(422, "invalid_field",
                     fmt::format("field \"name\" must not contain {} (U+{:04X} at offset {})",
                                 c1_control ? "C1 control characters" : "bidirectional text controls",
                                 c < 0xe0 ? ((c & 0x1fu) << 6 | (c1 & 0x3fu))  // two bytes (C1, U+061C)
                                          : ((c & 0x0fu) << 12 | (c1 & 0x3fu) << 6 | (c2 & 0x3fu)),
                                 i));
  }
  s.pp = static_cast<int>(get_int(body, "pp", std::nullopt, 1, kMaxJobPp));
  s.dp = static_cast<int>(get_int(body, "dp", 1, 1, kMaxJobDp));
  s.tp = static_cast<int>(get_int(body, "tp", 1, 1, kMaxJobTp));
  if (std::int64_t{s.pp} * s.dp * s.tp > kMaxJobWorld)
    throw ApiError(422, "invalid_field", fmt::format("pp*dp*tp must be at most {}, got {}*{}*{} = {}", kMaxJobWorld,
                                                     s.pp, s.dp, s.tp, std::int64_t{s.pp} * s.dp * s.tp));
  s.microbatches = static_cast<int>(get_int(body, "microbatches", std::nullopt, 1, kMaxJobMicrobatches));
  s.chunks = static_cast<int>(get_int(body, "chunks", 1, 1, kMaxJobChunks));
  if (const std::int64_t ops = std::int64_t{s.pp} * s.chunks * s.microbatches * 3; ops > kMaxJobComputations)
    throw ApiError(422, "invalid_field",
                   fmt::format("fields \"pp\", \"chunks\", \"microbatches\": pp*chunks*microbatches*3 (the "
                               "computations of one pipeline iteration) must be at most {}, got {}*{}*{}*3 = {}",
                               kMaxJobComputations, s.pp, s.chunks, s.microbatches, ops));
  s.schedule = get_string(body, "schedule", std::string("1f1b"), 64);
  // Required, as `perseus optimize --p2p-power` is: a silent 0 W changes every plan.
  s.p_block_w = get_number(body, "p2p_power_w", std::nullopt, 0.0, limits::kMaxPBlockW);
  // The planner's range (PlannerOptions::unit_time_s, src/planner/frontier.cpp): checked here, at POST.
  s.unit_time_s = get_number(body, "unit_time_s", 1e-3, 1e-7, 10.0);
  s.planning_budget_s = get_number(body, "planning_budget_s", 600.0, 0.0, 7 * 86400.0);
  // The library's range (check_timeline_overheads()), checked here so that the 422 names the field.
  s.op_overhead_s = get_number(body, "op_overhead_s", 0.0, 0.0, 3600.0);
  s.p2p_latency_s = get_number(body, "p2p_latency_s", 0.0, 0.0, 3600.0);
  s.straggler = StragglerOptions::from_json(body);

  const bool has_profile = body.contains("profile_csv") && !body["profile_csv"].is_null();
  const bool has_plans = body.contains("plans") && !body["plans"].is_null();
  const bool has_zeus = body.contains("zeus_plans") && !body["zeus_plans"].is_null();
  const std::string mode = get_string(body, "mode", std::string(), 32);
  if (!mode.empty() && mode != "profile" && mode != "plan")
    throw ApiError(422, "invalid_field", "field \"mode\" must be \"profile\" or \"plan\"");
  if (has_profile) s.profile_csv = get_string(body, "profile_csv", std::nullopt, kMaxPayload);
  if (int(has_plans) + int(has_zeus) + int(mode == "profile") > 1)
    throw ApiError(422, "invalid_field", "give only one of \"plans\", \"zeus_plans\" or \"mode\": \"profile\"");
  if (mode != "profile" && (has_profile || has_plans || has_zeus)) {
    // Profiling-mode settings on another kind of job would be silently ignored: refuse them.
    for (const char* k : {"freqs_mhz", "min_freq_mhz", "profile_samples", "max_energy_rises"}) {
      if (auto it = body.find(k); it != body.end() && !it->is_null())
        throw ApiError(422, "invalid_field",
                       fmt::format("field \"{}\" applies only to \"mode\": \"profile\" jobs; this job {}", k,
                                   has_plans  ? "serves the given plans"
                                   : has_zeus ? "serves the given zeus_plans"
                                              : "plans from its profile_csv"));
    }
  }
  if (mode == "profile") {
    if (has_profile) throw ApiError(422, "invalid_field", "\"mode\": \"profile\" does not take a profile_csv");
    s.source = PlanSource::kProfiling;
    s.freqs_mhz = get_clock_list(body, "freqs_mhz", /*allow_empty=*/true);  // [] = the first rank's list (stored specs hold [])
    // A clock listed twice is swept once: kept once, in the order given, so `spec` shows the grid
    // that is swept (session 32's trial saw the duplicates echoed). Not refused: stored specs
    // of earlier versions may hold them.
    std::vector<int> unique;
    for (const int f : s.freqs_mhz)
      if (std::find(unique.begin(), unique.end(), f) == unique.end()) unique.push_back(f);
    s.freqs_mhz = std::move(unique);
    s.min_freq_mhz = static_cast<int>(get_int(body, "min_freq_mhz", 0, 0, limits::kMaxFrequencyMhz));
    s.profile_samples = static_cast<int>(get_int(body, "profile_samples", 3, 1, 1000));
    s.max_energy_rises = static_cast<int>(get_int(body, "max_energy_rises", 5, 1, 1000));
  } else if (has_plans) {
    s.source = PlanSource::kPlans;
    s.plans = body["plans"];
    if (!s.plans.is_array() || s.plans.empty())
      throw ApiError(422, "invalid_field", "field \"plans\" must be a non-empty array");
  } else if (has_zeus) {
    s.source = PlanSource::kZeusPlans;
    const json& z = body["zeus_plans"];
    if (!z.is_array() || z.empty())
      throw ApiError(422, "invalid_field", "field \"zeus_plans\" must be a non-empty array of strings");
    for (const auto& t : z) {
      if (!t.is_string()) throw ApiError(422, "invalid_field", "field \"zeus_plans\" must hold strings");
      s.zeus_plans.push_back(t.get<std::string>());
    }
  } else if (has_profile) {
    s.source = PlanSource::kProfile;
  } else {
    throw ApiError(422, "missing_field",
                   "give one of \"profile_csv\", \"plans\", \"zeus_plans\" or \"mode\": \"profile\"");
  }
  return s;
}

const std::vector<std::string>& JobSpec::request_fields() {
  static const std::vector<std::string> fields = [] {
    JobSpec every;  // a profiling spec stores the sweep's fields too
    every.source = PlanSource::kProfiling;
    std::vector<std::string> out;
    const json stored = every.to_json();  // items() refers to it: not a temporary
    for (const auto& [k, v] : stored.items()) out.push_back(k);
    for (const char* k : {"mode", "profile_csv", "plans", "zeus_plans"})
      if (std::find(out.begin(), out.end(), k) == out.end()) out.emplace_back(k);
    return out;
  }();
  return fields;
}

json JobSpec::summary_json() const {
  json j = {{"name", name}, {"pp", pp}, {"dp", dp}, {"tp", tp}, {"microbatches", microbatches},
            {"chunks", chunks}, {"schedule", schedule}, {"p2p_power_w", p_block_w},
            {"unit_time_s", unit_time_s}, {"planning_budget_s", planning_budget_s},
            {"op_overhead_s", op_overhead_s}, {"p2p_latency_s", p2p_latency_s},
            {"source", to_string(source)}, {"world_size", world_size()},
            {"straggler_detection", straggler.to_json()}};
  if (source == PlanSource::kProfiling) {
    j["freqs_mhz"] = freqs_mhz;
    j["min_freq_mhz"] = min_freq_mhz;
    j["profile_samples"] = profile_samples;
    j["max_energy_rises"] = max_energy_rises;
  }
  return j;
}

json JobSpec::to_json() const {
  json j = summary_json();
  j.erase("source");
  j.erase("world_size");
  if (source == PlanSource::kProfiling) j["mode"] = "profile";
  if (!profile_csv.empty()) j["profile_csv"] = profile_csv;
  if (source == PlanSource::kPlans) j["plans"] = plans;
  if (source == PlanSource::kZeusPlans) j["zeus_plans"] = zeus_plans;
  return j;
}

}  // namespace perseus::server
