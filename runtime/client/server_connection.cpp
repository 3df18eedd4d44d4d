// HTTP client for the `perseus serve` v1 API (cpp-httplib, one connection per object).
#include "perseus/runtime/server_connection.hpp"

#include <httplib.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace perseus::runtime {

using nlohmann::json;

namespace {

json measurement_json(const IterationMeasurement& m) {
  json instrs = json::array();
  for (const auto& i : m.instructions) {
    json o = {{"instruction", i.instruction}, {"microbatch", i.microbatch}, {"freq_mhz", i.freq_mhz}, {"time_s", i.time_s}};
    if (i.energy_j) o["energy_j"] = *i.energy_j;
    instrs.push_back(std::move(o));
  }
  return {{"iteration", m.iteration},
          {"time_s", m.time_s},
          {"energy_j", m.energy_j},
          {"plan_version", m.plan_version},
          {"instructions", std::move(instrs)}};
}

// Extracts {"error":{"message"}} from an error body, else a short prefix of the body.
std::string server_message(const std::string& body) {
  try {
    const json j = json::parse(body);
    if (j.contains("error") && j["error"].is_object() && j["error"].contains("message")) {
      std::string msg = j["error"]["message"].get<std::string>();
      if (j["error"].contains("code") && j["error"]["code"].is_string()) {
        msg = j["error"]["code"].get<std::string>() + ": " + msg;
      }
      return msg;
    }
  } catch (const std::exception&) {
  }
  return body.substr(0, 200);
}

CallResult classify(const httplib::Result& res, const std::string& what, bool conflict_ok) {
  CallResult r;
  if (!res) {
    r.status = CallStatus::kRetryable;
    r.message = fmt::format("{}: no response ({})", what, httplib::to_string(res.error()));
    return r;
  }
  r.http_status = res->status;
  const int s = res->status;
  if ((s >= 200 && s < 300) || (conflict_ok && s == 409)) return r;
  if (s == 304) {
    r.status = CallStatus::kNotModified;
    return r;
  }
  r.status = (s == 408 || s == 429 || s >= 500) ? CallStatus::kRetryable : CallStatus::kPermanent;
  r.message = fmt::format("{}: HTTP {}: {}", what, s, server_message(res->body));
  if (s == 401 || s == 403) r.message += " (check the token)";
  return r;
}

}  // namespace

std::string to_json(const IterationMeasurement& m) { return measurement_json(m).dump(); }

RankPlan parse_plan_json(const std::string& body) {
  const json j = json::parse(body);  // throws json::parse_error (a std::exception)
  RankPlan plan;
  try {
    plan.version = j.at("version").get<std::int64_t>();
    if (j.contains("job_status") && j["job_status"].is_string()) plan.job_status = j["job_status"].get<std::string>();
    for (const auto& i : j.at("instructions")) {
      PlanInstruction pi;
      pi.instruction = i.at("instruction").get<std::string>();
      pi.stage = i.value("stage", 0);
      pi.microbatch = i.value("microbatch", 0);
      pi.freq_mhz = i.at("freq_mhz").get<int>();
      plan.instructions.push_back(std::move(pi));
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("malformed plan response: {}", e.what()));
  }
  return plan;
}

struct ServerConnection::Impl {
  httplib::Client http;
  std::string job_id;
  RankInfo ranks;
  Impl(const std::string& url, const std::string& token, std::string job, RankInfo r, double timeout_s)
      : http(url), job_id(std::move(job)), ranks(r) {
    const auto sec = static_cast<time_t>(timeout_s);
    const auto usec = static_cast<time_t>((timeout_s - static_cast<double>(sec)) * 1e6);
    http.set_connection_timeout(sec, usec);
    http.set_read_timeout(sec, usec);
    http.set_write_timeout(sec, usec);
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);  // small JSON requests: no Nagle + delayed-ACK stall (~40 ms)
    if (!token.empty()) http.set_bearer_token_auth(token);
  }
  std::string rank_path() const { return fmt::format("/v1/jobs/{}/ranks/{}", job_id, ranks.rank); }
};

ServerConnection::ServerConnection(const std::string& server_url, std::string token, std::string job_id,
                                   RankInfo ranks, double timeout_s)
    : impl_(std::make_unique<Impl>(server_url, token, std::move(job_id), ranks, timeout_s)) {}

ServerConnection::~ServerConnection() = default;

CallResult ServerConnection::register_rank(const std::vector<int>& supported_freqs_mhz) {
  const json body = {{"rank", impl_->ranks.rank},
                     {"dp_rank", impl_->ranks.dp_rank},
                     {"pp_rank", impl_->ranks.pp_rank},
                     {"tp_rank", impl_->ranks.tp_rank},
                     {"supported_freqs_mhz", supported_freqs_mhz}};
  const std::string path = fmt::format("/v1/jobs/{}/ranks", impl_->job_id);
  auto res = impl_->http.Post(path, body.dump(), "application/json");
  return classify(res, "POST " + path, /*conflict_ok=*/true);
}

CallResult ServerConnection::fetch_plan(std::int64_t since_version, RankPlan* plan) {
  std::string path = impl_->rank_path() + "/plan";
  if (since_version >= 0) path += fmt::format("?since_version={}", since_version);
  auto res = impl_->http.Get(path);
  CallResult r = classify(res, "GET " + path, false);
  if (r.http_status == 409) r.status = CallStatus::kRetryable;  // "no plan yet" (e.g. profiling starts)
  if (r.status == CallStatus::kOk) {
    try {
      *plan = parse_plan_json(res->body);
    } catch (const std::exception& e) {
      r.status = CallStatus::kRetryable;  // a half-written body or a server bug; try again later
      r.message = fmt::format("GET {}: {}", path, e.what());
    }
  }
  return r;
}

CallResult ServerConnection::post_measurements(const std::vector<IterationMeasurement>& batch) {
  json body;
  if (batch.size() == 1) {
    body = measurement_json(batch.front());
  } else {
    body = {{"measurements", json::array()}};
    for (const auto& m : batch) body["measurements"].push_back(measurement_json(m));
  }
  const std::string path = impl_->rank_path() + "/measurements";
  auto res = impl_->http.Post(path, body.dump(), "application/json");
  return classify(res, "POST " + path, false);
}

}  // namespace perseus::runtime
