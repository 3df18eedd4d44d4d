// Straggler detection: pipeline iteration aggregation, running medians, hysteresis.
#include "straggler_detector.hpp"

#include <algorithm>
#include <iterator>
#include <set>

#include <fmt/core.h>

#include "perseus/server/api_error.hpp"

namespace perseus::server {

using nlohmann::json;

StragglerOptions StragglerOptions::from_json(const json& body) {
  StragglerOptions o;
  auto it = body.find("straggler_detection");
  if (it == body.end() || it->is_null()) return o;
  const json& s = require_object(*it, "field \"straggler_detection\"");
  reject_unknown_fields(s, {"enabled", "window", "threshold", "consecutive", "clear_threshold", "clear_consecutive",
                            "verify", "verify_iterations", "verify_tolerance", "max_replans"},
                        "straggler_detection.");
  for (auto [key, field] : {std::pair{"enabled", &o.enabled}, std::pair{"verify", &o.verify}}) {
    auto e = s.find(key);
    if (e == s.end() || e->is_null()) continue;
    if (!e->is_boolean())
      throw ApiError(422, "invalid_field", fmt::format("field \"straggler_detection.{}\" must be a boolean", key));
    *field = e->get<bool>();
  }
  try {
    read_numbers(s, o);
  } catch (const ApiError& e) {  // name the field inside its object: "straggler_detection.window"
    std::string what = e.what();
    if (const auto at = what.find("field \""); at != std::string::npos && what.find("straggler_detection.") == std::string::npos)
      what.insert(at + 7, "straggler_detection.");
    throw ApiError(e.status(), e.code(), what);
  }
  return o;
}

void StragglerOptions::read_numbers(const json& s, StragglerOptions& o) {
  o.window = static_cast<int>(get_int(s, "window", o.window, 1, 100));
  o.threshold = get_number(s, "threshold", o.threshold, 1e-4, 10.0);
  o.consecutive = static_cast<int>(get_int(s, "consecutive", o.consecutive, 1, 100));
  o.clear_threshold = get_number(s, "clear_threshold", std::min(o.clear_threshold, o.threshold / 2), 0.0, 10.0);
  if (o.clear_threshold >= o.threshold)
    throw ApiError(422, "invalid_field",
                   fmt::format("field \"straggler_detection.clear_threshold\" must be below threshold ({}) "
                               "so that the state cannot flap", o.threshold));
  o.clear_consecutive = static_cast<int>(get_int(s, "clear_consecutive", o.clear_consecutive, 1, 100));
  o.verify_iterations = static_cast<int>(get_int(s, "verify_iterations", o.verify_iterations, 1, 100));
  o.verify_tolerance = get_number(s, "verify_tolerance", o.verify_tolerance, 1e-4, 1.0);
  o.max_replans = static_cast<int>(get_int(s, "max_replans", o.max_replans, 0, 10));
}

json StragglerOptions::to_json() const {
  return {{"enabled", enabled},
          {"window", window},
          {"threshold", threshold},
          {"consecutive", consecutive},
          {"clear_threshold", clear_threshold},
          {"clear_consecutive", clear_consecutive},
          {"verify", verify},
          {"verify_iterations", verify_iterations},
          {"verify_tolerance", verify_tolerance},
          {"max_replans", max_replans}};
}

double median_of(std::vector<double> v) {
  const std::size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (n % 2) return v[mid];
  const double hi = v[mid];
  return 0.5 * (hi + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)));
}

std::int64_t IterationAggregator::LastIterations::update(int rank, std::int64_t iteration) {
  const auto [at, fresh] = of_rank.try_emplace(rank, iteration);
  if (!fresh) {  // take the rank's previous value out of its half (a value equal to both ends may be in either)
    const std::int64_t old = at->second;
    at->second = iteration;
    if (const auto in_lo = lo.find(old); in_lo != lo.end()) lo.erase(in_lo);
    else hi.erase(hi.find(old));
  }
  // Every value of lo is <= every value of hi.
  if (hi.empty() || iteration <= *hi.begin()) lo.insert(iteration);
  else hi.insert(iteration);
  while (lo.size() > hi.size() + 1) {
    hi.insert(*lo.rbegin());
    lo.erase(std::prev(lo.end()));
  }
  while (lo.size() < hi.size()) {
    lo.insert(*hi.begin());
    hi.erase(hi.begin());
  }
  return *lo.rbegin();
}

std::optional<PipelineSample> IterationAggregator::add(int pipeline, int rank, std::int64_t iteration, double time_s,
                                                       std::optional<double> energy_j, double expected_time_s) {
  Pipeline& pl = pipelines_[pipeline];
  const std::int64_t current = pl.last.update(rank, iteration);
  auto& open = pl.open;
  while (!open.empty() && open.begin()->first < current - kKeep) open.erase(open.begin());
  while (!open.empty() && open.rbegin()->first > current + kKeep) open.erase(std::prev(open.end()));
  if (iteration < current - kKeep || iteration > current + kKeep) {
    pl.ignored = {pl.ignored.count + 1, rank, iteration, current};
    return std::nullopt;
  }
  Partial& p = open[iteration];
  if (!p.ranks.emplace(rank, true).second) return std::nullopt;
  if (p.ranks.size() == 1) p.s = {pipeline, iteration, time_s, 0.0, expected_time_s};
  p.s.time_s = std::max(p.s.time_s, time_s);
  if (p.s.energy_j && energy_j) *p.s.energy_j += *energy_j;
  else p.s.energy_j.reset();  // one unknown rank: the pipeline's energy is unknown
  p.s.expected_time_s = std::max(p.s.expected_time_s, expected_time_s);
  if (static_cast<int>(p.ranks.size()) < ranks_) return std::nullopt;
  const PipelineSample done = p.s;
  open.erase(iteration);
  return done;
}

StragglerDetector::StragglerDetector(StragglerOptions options, int num_pipelines)
    : opt_(options), state_(static_cast<std::size_t>(std::max(0, num_pipelines))) {}

std::optional<double> StragglerDetector::ratio(int pipeline) const {
  const auto& s = state_.at(pipeline);
  if (s.ratios.empty()) return std::nullopt;
  return median_of({s.ratios.begin(), s.ratios.end()});
}

std::optional<double> StragglerDetector::time_s(int pipeline) const {
  const auto& s = state_.at(pipeline);
  if (s.times.empty()) return std::nullopt;
  return median_of({s.times.begin(), s.times.end()});
}

std::optional<double> StragglerDetector::healthy_reference(int except) const {
  std::vector<double> r;
  for (int d = 0; d < static_cast<int>(state_.size()); ++d) {
    const auto& s = state_[d];
    if (d == except || s.straggler || static_cast<int>(s.ratios.size()) < opt_.window) continue;
    r.push_back(*ratio(d));
  }
  if (r.empty()) return std::nullopt;
  // Upper median: with an even count the higher middle value, so that one pipeline running
  // faster than its plan (e.g. its GPUs ignore clocks) cannot make the others look slow.
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

void StragglerDetector::set_state(int pipeline, bool straggler) {
  auto& s = state_.at(pipeline);
  s.straggler = straggler;
  s.count = 0;
}

std::optional<StragglerEvent> StragglerDetector::observe(const PipelineSample& sample) {
  if (sample.pipeline < 0 || sample.pipeline >= static_cast<int>(state_.size()) || !(sample.time_s > 0))
    return std::nullopt;
  auto& s = state_[sample.pipeline];
  const bool planned = sample.expected_time_s > 0;
  s.ratios.push_back(sample.time_s / (planned ? sample.expected_time_s : 1.0));
  s.times.push_back(sample.time_s);
  s.planned.push_back(planned);
  s.unplanned += planned ? 0 : 1;
  while (static_cast<int>(s.ratios.size()) > opt_.window) {
    s.unplanned -= s.planned.front() ? 0 : 1;
    s.ratios.pop_front();
    s.times.pop_front();
    s.planned.pop_front();
  }
  if (!opt_.enabled || static_cast<int>(s.ratios.size()) < opt_.window) return std::nullopt;
  const auto ref = healthy_reference(sample.pipeline);
  if (!ref || !(*ref > 0)) return std::nullopt;
  const double slowdown = *ratio(sample.pipeline) / *ref;
  const bool beyond = s.straggler ? slowdown > 1.0 + opt_.clear_threshold : slowdown > 1.0 + opt_.threshold;
  if (s.straggler == beyond) {  // the state holds
    s.count = 0;
    return std::nullopt;
  }
  const int needed = s.straggler ? opt_.clear_consecutive : opt_.consecutive;
  if (++s.count < needed) return std::nullopt;
  s.straggler = !s.straggler;
  s.count = 0;
  StragglerEvent e;
  e.kind = s.straggler ? StragglerEvent::Kind::kDetected : StragglerEvent::Kind::kCleared;
  e.pipeline = sample.pipeline;
  e.iteration = sample.iteration;
  e.slowdown = slowdown;
  e.measured_time_s = *time_s(sample.pipeline);
  return e;
}

}  // namespace perseus::server
