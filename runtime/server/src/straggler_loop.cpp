// StragglerLoop: glue of aggregator, detector and verifier for one job.
#include "straggler_loop.hpp"

#include <fmt/core.h>

#include "perseus/server/job_spec.hpp"

namespace perseus::server {

using nlohmann::json;

void StragglerLoop::init(const JobSpec& spec) {
  if (initialized) return;
  opt = spec.straggler;
  p_block_w = spec.p_block_w;
  gpus_per_pipeline = spec.pp * spec.tp;
  aggregator = std::make_unique<IterationAggregator>(gpus_per_pipeline);
  detector = std::make_unique<StragglerDetector>(opt, spec.dp);
  verifier = std::make_unique<SwitchVerifier>(opt, spec.dp, p_block_w, gpus_per_pipeline);
  initialized = true;
}

std::vector<LoopAction> StragglerLoop::feed(int pipeline, int rank, std::int64_t iteration, double time_s,
                                            std::optional<double> energy_j, double expected_time_s) {
  std::vector<LoopAction> out;
  const std::uint64_t ignored_before = aggregator->ignored(pipeline).count;
  const auto sample = aggregator->add(pipeline, rank, iteration, time_s, energy_j, expected_time_s);
  if (ignored_before == 0 && aggregator->ignored(pipeline).count > 0) {
    LoopAction a;
    a.kind = LoopAction::Kind::kIgnoredReport;
    a.event.pipeline = pipeline;
    a.ignored = aggregator->ignored(pipeline);
    out.push_back(a);
  }
  if (!sample) return out;
  last_time_s[pipeline] = sample->time_s;
  if (auto e = detector->observe(*sample)) {
    LoopAction a;
    a.kind = e->kind == StragglerEvent::Kind::kDetected ? LoopAction::Kind::kDetected : LoopAction::Kind::kCleared;
    a.event = *e;
    out.push_back(a);
  }
  if (auto r = verifier->observe(*sample)) {
    LoopAction a;
    a.kind = LoopAction::Kind::kVerified;
    a.round = *r;
    out.push_back(a);
  }
  return out;
}

json StragglerLoop::pipeline_json(int d) const {
  auto opt_num = [](const std::map<int, double>& m, int k) { return m.count(k) ? json(m.at(k)) : json(nullptr); };
  json j = {{"measured_iteration_time_s", opt_num(last_time_s, d)},
            {"straggler_origin", origin.count(d) ? json(origin.at(d)) : json(nullptr)},
            {"verification", verification.count(d) ? json(verification.at(d)) : json(nullptr)},
            {"predicted_saving_j_per_iteration", opt_num(predicted_saving_j, d)},
            {"measured_saving_j_per_iteration", opt_num(measured_saving_j, d)},
            {"target_override_s", opt_num(target_override_s, d)},
            {"reverted", reverted.count(d) > 0},
            {"ignored_detection", ignored_detection.count(d) ? ignored_detection.at(d) : json(nullptr)},
            {"ignored_reports", nullptr}};
  if (aggregator) {
    if (const auto ig = aggregator->ignored(d); ig.count > 0)
      j["ignored_reports"] = {{"count", ig.count}, {"rank", ig.rank}, {"iteration", ig.iteration},
                              {"pipeline_iteration", ig.pipeline_iteration}};
  }
  if (detector) {
    if (auto m = detector->time_s(d)) j["median_iteration_time_s"] = *m;
    // Unknown (null) while the window holds a sample without a planned time.
    if (auto r = detector->ratio(d)) j["measured_over_planned"] = detector->ratio_is_planned(d) ? json(*r) : json(nullptr);
  }
  return j;
}

const std::map<std::string, std::pair<const char*, const char*>>& StragglerLoop::metric_families() {
  static const std::map<std::string, std::pair<const char*, const char*>> f = {
      {"perseus_pipeline_iteration_time_seconds", {"Last measured iteration time of a pipeline (max over its ranks), s.", "gauge"}},
      {"perseus_pipeline_median_iteration_time_seconds", {"Running median iteration time of a pipeline, s.", "gauge"}},
      {"perseus_pipeline_straggler", {"1 when the pipeline is a straggler; origin detected or declared.", "gauge"}},
      {"perseus_pipeline_predicted_saving_joules", {"Predicted saving of the current decision per pipeline iteration, J.", "gauge"}},
      {"perseus_pipeline_measured_saving_joules", {"Measured saving (verification) per pipeline iteration, J.", "gauge"}},
      {"perseus_job_straggler_decisions_total", {"Straggler decisions of a job, by action.", "counter"}},
  };
  return f;
}

void StragglerLoop::append_metrics(const std::string& job_id, int num_pipelines, const std::set<int>& stragglers,
                                   std::map<std::string, std::string>& families) const {
  auto add = [&](const char* family, const std::string& labels, double v) {
    families[family] += fmt::format("{}{{job=\"{}\"{}}} {}\n", family, job_id, labels, v);
  };
  for (int d = 0; d < num_pipelines; ++d) {
    const bool is = stragglers.count(d) > 0;
    const auto median = detector ? detector->time_s(d) : std::nullopt;
    // A pipeline that never reported and is no straggler has no series: a job of dp 65,536
    // would otherwise expose 65,536 series before its first report.
    if (!is && !median && !last_time_s.count(d) && !predicted_saving_j.count(d) && !measured_saving_j.count(d)) continue;
    const std::string pl = fmt::format(",pipeline=\"{}\"", d);
    if (auto it = last_time_s.find(d); it != last_time_s.end()) add("perseus_pipeline_iteration_time_seconds", pl, it->second);
    if (median) add("perseus_pipeline_median_iteration_time_seconds", pl, *median);
    const std::string origin_label = is ? (origin.count(d) ? origin.at(d) : "declared") : "none";
    add("perseus_pipeline_straggler", pl + fmt::format(",origin=\"{}\"", origin_label), is ? 1 : 0);
    if (auto it = predicted_saving_j.find(d); it != predicted_saving_j.end())
      add("perseus_pipeline_predicted_saving_joules", pl, it->second);
    if (auto it = measured_saving_j.find(d); it != measured_saving_j.end())
      add("perseus_pipeline_measured_saving_joules", pl, it->second);
  }
  for (const auto& [action, n] : actions)
    add("perseus_job_straggler_decisions_total", fmt::format(",action=\"{}\"", action), static_cast<double>(n));
}

}  // namespace perseus::server
