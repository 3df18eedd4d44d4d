// Reading a job export (`GET /v1/jobs/{id}` saved to a file) for the job report.
#include <cmath>
#include <optional>
#include <string_view>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/error.hpp"
#include "perseus/input_file.hpp"
#include "perseus/job_report.hpp"
#include "perseus/json_input.hpp"

namespace perseus {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxExportBytes = std::size_t{256} << 20;
constexpr long kMaxPipelines = 65536;

/// The range of a number the server writes, and its unit.
struct Range {
  double lo, hi;
  std::string_view unit;
};
/// An iteration time (s) and a Unix time (s, up to the year 5138). Wide enough for whatever the
/// server stores (a straggler's declared iteration time, a deadline past a plan's 1e7 s):
/// what they refuse is the impossible, a negative time or energy.
constexpr Range kIterationTime{0, 1e12, "s"}, kUnixTime{0, 1e11, "s (Unix time)"};
/// An iteration's energy (J) and a saving of one (J, negative when a switch cost energy).
constexpr Range kEnergy{0, 1e18, "J"}, kSaving{-1e18, 1e18, "J"};
/// A straggler's slowdown factor (T' / T; derived from a declared iteration time it is not capped).
constexpr Range kSlowdown{0, 1e12, "x"};

/// Typed access to one JSON object with errors naming the file and the field path.
class Reader {
 public:
  Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw InputError::in_file(source_, 0, path, message);
  }
  const json& at(const json& obj, const std::string& prefix, const char* name) const {
    const std::string path = prefix + name;
    if (!obj.is_object()) fail(prefix.empty() ? name : prefix.substr(0, prefix.size() - 1), "expected an object");
    if (!obj.contains(name)) fail(path, "missing (expected an export of GET /v1/jobs/{id})");
    return obj.at(name);
  }
  bool has(const json& obj, const char* name) const { return obj.is_object() && obj.contains(name) && !obj.at(name).is_null(); }
  double number(const json& v, const std::string& path) const {
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(path, "expected a finite number, got " + describe_json_value(v));
    return v.get<double>();
  }
  std::int64_t integer(const json& v, const std::string& path, std::int64_t lo, std::int64_t hi) const {
    if (!v.is_number_integer()) fail(path, "expected an integer, got " + describe_json_value(v));
    const auto i = v.get<std::int64_t>();
    if (i < lo || i > hi) fail(path, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, i));
    return i;
  }
  std::int64_t integer(const json& obj, const std::string& prefix, const char* name, std::int64_t lo,
                       std::int64_t hi) const {
    return integer(at(obj, prefix, name), prefix + name, lo, hi);
  }
  std::string text(const json& obj, const std::string& prefix, const char* name) const {
    const json& v = at(obj, prefix, name);
    if (!v.is_string()) fail(prefix + name, "expected a string, got " + describe_json_value(v));
    return v.get<std::string>();
  }
  const json& array(const json& obj, const std::string& prefix, const char* name) const {
    const json& v = at(obj, prefix, name);
    if (!v.is_array()) fail(prefix + name, "expected an array, got " + describe_json_value(v));
    return v;
  }
  /// A number in [lo, hi] (`unit` names it in the message, e.g. "s").
  double number_in(const json& v, const std::string& path, double lo, double hi, std::string_view unit) const {
    const double x = number(v, path);
    if (!(x >= lo && x <= hi)) fail(path, fmt::format("expected a number in [{}, {}] {}, got {}", lo, hi, unit, describe_json_value(v)));
    return x;
  }
  double number_in(const json& obj, const std::string& prefix, const char* name, const Range& r) const {
    return number_in(at(obj, prefix, name), prefix + name, r.lo, r.hi, r.unit);
  }
  std::optional<double> opt_number_in(const json& obj, const std::string& prefix, const char* name, const Range& r) const {
    if (!has(obj, name)) return std::nullopt;
    return number_in(obj.at(name), prefix + name, r.lo, r.hi, r.unit);
  }

 private:
  std::string source_;
};

JobVerdict read_verdict(const Reader& r, const json& v, const std::string& p, int dp) {
  JobVerdict out;
  out.pipeline = static_cast<int>(r.integer(v, p, "pipeline", 0, dp - 1));
  out.verdict = r.text(v, p, "verdict");
  out.predicted_time_s = r.number_in(v, p, "predicted_time_s", kIterationTime);
  out.measured_time_s = r.number_in(v, p, "measured_time_s", kIterationTime);
  out.straggler_time_s = r.number_in(v, p, "straggler_time_s", kIterationTime);
  out.predicted_saving_j = r.number_in(v, p, "predicted_saving_j_per_iteration", kSaving);
  out.measured_saving_j = r.opt_number_in(v, p, "measured_saving_j_per_iteration", kSaving);
  return out;
}

JobDecision read_decision(const Reader& r, const json& d, const std::string& p, double created_s, int dp,
                          std::int64_t num_plans) {
  JobDecision out;
  out.id = r.integer(d, p, "id", 1, INT64_MAX);
  out.time_s = r.number_in(d, p, "time_s", kUnixTime) - created_s;
  out.action = r.text(d, p, "action");
  out.origin = r.text(d, p, "origin");
  if (r.has(d, "pipeline")) out.pipeline = static_cast<int>(r.integer(d.at("pipeline"), p + "pipeline", 0, dp - 1));
  out.target_time_s = r.opt_number_in(d, p, "target_time_s", kIterationTime);
  out.slowdown = r.opt_number_in(d, p, "slowdown", kSlowdown);
  out.predicted_saving_j = r.opt_number_in(d, p, "predicted_saving_j_per_iteration", kSaving);
  out.measured_saving_j = r.opt_number_in(d, p, "measured_saving_j_per_iteration", kSaving);
  if (r.has(d, "stragglers")) {
    const json& s = r.array(d, p, "stragglers");
    for (std::size_t i = 0; i < s.size(); ++i)
      out.stragglers.push_back(static_cast<int>(r.integer(s[i], fmt::format("{}stragglers[{}]", p, i), 0, dp - 1)));
  }
  if (r.has(d, "pipeline_plans")) {
    const json& pp = r.array(d, p, "pipeline_plans");
    if (static_cast<long>(pp.size()) != dp) {
      r.fail(p + "pipeline_plans", fmt::format("expected one plan index per pipeline ({}), got {}", dp, pp.size()));
    }
    for (std::size_t i = 0; i < pp.size(); ++i) {
      out.pipeline_plans.push_back(
          static_cast<int>(r.integer(pp[i], fmt::format("{}pipeline_plans[{}]", p, i), 0, num_plans - 1)));
    }
  }
  // Not drawn, but an index beyond the frontier means the export is not what the server wrote
  // (session 27's trial: plan_index 99999 of 307 plans was accepted).
  for (const char* key : {"plan_index", "fastest_plan_index"}) {
    if (r.has(d, key) && !d.at(key).is_null()) r.integer(d.at(key), p + key, 0, num_plans - 1);
  }
  if (r.has(d, "verifies")) out.verifies = r.integer(d.at("verifies"), p + "verifies", 1, INT64_MAX);
  if (r.has(d, "verdicts")) {
    const json& vs = r.array(d, p, "verdicts");
    for (std::size_t i = 0; i < vs.size(); ++i) out.verdicts.push_back(read_verdict(r, vs[i], fmt::format("{}verdicts[{}].", p, i), dp));
  }
  return out;
}

}  // namespace

JobExport load_job_export(const std::string& path) {
  // A pipe or /dev/stdin too (file_size() refused them: "Operation not supported"); the read
  // stops at the limit, so an endless stream is refused rather than read into memory.
  const json j = parse_json_text(read_input_file(path, "the job export", kMaxExportBytes), path);
  const Reader r(path);
  if (!j.is_object()) {
    throw InputError(fmt::format("{}: expected a JSON object (the body of GET /v1/jobs/{{id}}), got {}", path,
                                 j.is_array() ? "an array" : j.type_name()));
  }
  JobExport out;
  out.job_id = r.text(j, "", "job_id");
  out.name = r.has(j, "name") ? r.text(j, "", "name") : "";
  out.status = r.has(j, "status") ? r.text(j, "", "status") : "";
  const double created_s = r.number_in(j, "", "created_s", kUnixTime);
  const json& spec = r.at(j, "", "spec");
  out.pipelines = static_cast<int>(r.integer(spec, "spec.", "dp", 1, kMaxPipelines));
  out.stages = static_cast<int>(r.integer(spec, "spec.", "pp", 1, INT32_MAX));
  if (const auto last = r.opt_number_in(j, "", "last_activity_s", kUnixTime)) out.last_activity_s = std::max(0.0, *last - created_s);

  const json& fr = r.at(j, "", "frontier");
  const std::int64_t num_plans = r.integer(fr, "frontier.", "num_points", 1, INT32_MAX);
  out.fastest_index = static_cast<int>(r.integer(fr, "frontier.", "fastest_index", 0, num_plans - 1));
  if (r.has(fr, "points")) {
    const json& pts = r.array(fr, "frontier.", "points");
    if (static_cast<std::int64_t>(pts.size()) != num_plans) {
      r.fail("frontier.points", fmt::format("expected frontier.num_points = {} points, got {}", num_plans, pts.size()));
    }
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const std::string p = fmt::format("frontier.points[{}]", i);
      if (!pts[i].is_array() || pts[i].size() != 2) r.fail(p, "expected [time_s, energy_j], got " + describe_json_value(pts[i]));
      out.frontier.push_back({fmt::format("plan {}", i),
                              r.number_in(pts[i][0], p + "[0]", kIterationTime.lo, kIterationTime.hi, kIterationTime.unit),
                              r.number_in(pts[i][1], p + "[1]", kEnergy.lo, kEnergy.hi, kEnergy.unit)});
    }
  }
  // Since session 32 the server lists a page of the pipelines (pipelines_from, at most 1,024);
  // older exports list all of them.
  const json& pipes = r.array(j, "", "pipelines");
  const long from = r.has(j, "pipelines_from") ? static_cast<long>(r.integer(j, "", "pipelines_from", 0, out.pipelines)) : 0;
  if (r.has(j, "pipelines_from") ? static_cast<long>(pipes.size()) > out.pipelines - from
                                 : static_cast<long>(pipes.size()) != out.pipelines) {
    r.fail("pipelines", r.has(j, "pipelines_from")
                            ? fmt::format("expected at most spec.dp - pipelines_from = {} entries, got {}",
                                          out.pipelines - from, pipes.size())
                            : fmt::format("expected spec.dp = {} entries, got {}", out.pipelines, pipes.size()));
  }
  for (std::size_t i = 0; i < pipes.size(); ++i) {
    out.current_plans.push_back(
        static_cast<int>(r.integer(pipes[i], fmt::format("pipelines[{}].", i), "plan_index", 0, num_plans - 1)));
  }
  const json& decs = r.array(j, "", "decisions");
  for (std::size_t i = 0; i < decs.size(); ++i) {
    const std::string p = fmt::format("decisions[{}].", i);
    JobDecision d = read_decision(r, decs[i], p, created_s, out.pipelines, num_plans);
    // The timeline replays them in order: reversed decisions lost the clearing one, and a
    // created_s after them drew them at -100 s, both without a word (session 32's trial).
    if (d.time_s < 0) {
      r.fail(p + "time_s", fmt::format("is {:.3f} s before the job's created_s: a decision comes after its job", -d.time_s));
    }
    if (!out.decisions.empty()) {
      const JobDecision& prev = out.decisions.back();
      if (d.id <= prev.id) {
        r.fail(p + "id", fmt::format("expected ids increasing, oldest first as the server exports them, got {} after {}",
                                     d.id, prev.id));
      }
      if (d.time_s < prev.time_s) {
        r.fail(p + "time_s", fmt::format("is {:.3f} s before the decision listed above it (id {}): expected oldest first",
                                         prev.time_s - d.time_s, prev.id));
      }
    }
    out.decisions.push_back(std::move(d));
  }
  out.decisions_total = r.has(j, "decisions_total")
                            ? r.integer(j, "", "decisions_total", static_cast<std::int64_t>(decs.size()), INT64_MAX)
                            : static_cast<std::int64_t>(decs.size());
  return out;
}

}  // namespace perseus
