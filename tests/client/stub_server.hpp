// A tiny in-test stand-in for `perseus serve`: the three v1 routes the client uses.
#pragma once

#include <httplib.h>

#include "perseus/runtime/client.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/runtime/server_connection.hpp"

namespace perseus::testing {

/// Serves job `job_id` on 127.0.0.1. State (plans, registrations, measurements) lives in
/// this object and survives stop()/start(), like a restarted durable server.
class StubServer {
 public:
  explicit StubServer(std::string token = "secret", std::string job_id = "job1")
      : token_(std::move(token)), job_id_(std::move(job_id)) {}
  ~StubServer() { stop(); }

  /// Starts listening (on the previous port after a stop()).
  void start() {
    server_ = std::make_unique<httplib::Server>();
    routes(*server_);
    server_->set_keep_alive_timeout(0);  // stop() must not wait for idle keep-alive connections
    if (port_ == 0) {
      port_ = server_->bind_to_any_port("127.0.0.1");
    } else {
      for (int i = 0; i < 100 && !server_->bind_to_port("127.0.0.1", port_); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void set_plan(int rank, runtime::RankPlan plan) {
    std::lock_guard lock(mu_);
    issued_[rank] = std::max(issued_.count(rank) ? issued_[rank] : -1, plan.version);
    plans_[rank] = std::move(plan);
  }
  /// Like perseus serve restored from an older database: `plan` is in force and no later
  /// version was ever issued (a since_version beyond it is answered with it).
  void restore_plan(int rank, runtime::RankPlan plan) {
    std::lock_guard lock(mu_);
    issued_[rank] = plan.version;
    plans_[rank] = std::move(plan);
  }
  /// A report of `iteration` posted alone is refused whole with 422 (as perseus serve refuses an
  /// invalid single report).
  void refuse_single_with_422(std::int64_t iteration) {
    std::lock_guard lock(mu_);
    refused_single_.insert(iteration);
  }
  /// An item added to the "rejected" list of every measurements answer (a misbehaving server).
  void add_foreign_rejection(nlohmann::json item) {
    std::lock_guard lock(mu_);
    foreign_rejections_.push_back(std::move(item));
  }
  /// Highest plan version answered with 200 to `rank` (-1 = none).
  std::int64_t served_version(int rank) const {
    std::lock_guard lock(mu_);
    auto it = served_.find(rank);
    return it == served_.end() ? -1 : it->second;
  }
  /// Supported frequencies sent at registration (empty when not registered).
  std::vector<int> registered_freqs(int rank) const {
    std::lock_guard lock(mu_);
    auto it = registered_.find(rank);
    return it == registered_.end() ? std::vector<int>{} : it->second;
  }
  /// Measurements received, by iteration (deduplicated).
  std::map<std::int64_t, nlohmann::json> measurements(int rank) const {
    std::lock_guard lock(mu_);
    auto it = measurements_.find(rank);
    return it == measurements_.end() ? std::map<std::int64_t, nlohmann::json>{} : it->second;
  }
  /// Body of registration answers (e.g. the job's shape: {"microbatches":2,"chunks":1}).
  void set_registration_reply(std::string body) {
    std::lock_guard lock(mu_);
    registration_reply_ = std::move(body);
  }
  /// Pre-registers `rank` with coordinates (dp, pp, tp), as another process would.
  void preregister(int rank, int dp, int pp, int tp) {
    std::lock_guard lock(mu_);
    registered_[rank] = {};
    coords_[rank] = {dp, pp, tp};
  }
  /// A raw plan body served instead of the structured plan (e.g. a huge one).
  void set_raw_plan(int rank, std::string body) {
    std::lock_guard lock(mu_);
    raw_plans_[rank] = std::move(body);
  }
  /// A new token: requests with the old one get 401, as for a job deleted on perseus serve.
  void set_token(std::string token) {
    std::lock_guard lock(mu_);
    token_ = std::move(token);
  }
  /// Iterations answered as rejected one by one (per-item acceptance), with a reason.
  void reject_iteration(std::int64_t iteration) {
    std::lock_guard lock(mu_);
    rejected_.insert(iteration);
  }
  int registrations() const {
    std::lock_guard lock(mu_);
    return registrations_;
  }
  int measurement_posts() const {
    std::lock_guard lock(mu_);
    return posts_;
  }

 private:
  static void error(httplib::Response& res, int status, const std::string& code, const std::string& msg) {
    res.status = status;
    res.set_content(nlohmann::json{{"error", {{"code", code}, {"message", msg}}}}.dump(), "application/json");
  }
  bool check(const httplib::Request& req, httplib::Response& res) {
    std::string token;
    {
      std::lock_guard lock(mu_);
      token = token_;
    }
    if (req.get_header_value("Authorization") != "Bearer " + token) {
      error(res, 401, "unauthorized", "missing or bad bearer token");
      return false;
    }
    if (req.matches[1] != job_id_) {
      error(res, 404, "not_found", "unknown job " + std::string(req.matches[1]));
      return false;
    }
    return true;
  }
  void routes(httplib::Server& s) {
    s.Post(R"(/v1/jobs/([^/]+)/ranks)", [this](const httplib::Request& req, httplib::Response& res) {
      if (!check(req, res)) return;
      const auto j = nlohmann::json::parse(req.body);
      std::lock_guard lock(mu_);
      const int rank = j.at("rank").get<int>();
      const std::vector<int> coords = {j.value("dp_rank", 0), j.value("pp_rank", 0), j.value("tp_rank", 0)};
      ++registrations_;
      if (registered_.count(rank) != 0) {  // like perseus serve: same coordinates = a restart
        if (coords_[rank] != coords) return error(res, 409, "duplicate_rank", "rank already registered with other coordinates");
        res.status = 200;
        res.set_content(registration_reply_, "application/json");
        return;
      }
      registered_[rank] = j.at("supported_freqs_mhz").get<std::vector<int>>();
      coords_[rank] = coords;
      res.status = 201;
      res.set_content(registration_reply_, "application/json");
    });
    s.Get(R"(/v1/jobs/([^/]+)/ranks/(\d+)/plan)", [this](const httplib::Request& req, httplib::Response& res) {
      if (!check(req, res)) return;
      const int rank = std::stoi(req.matches[2]);
      std::lock_guard lock(mu_);
      if (auto raw = raw_plans_.find(rank); raw != raw_plans_.end()) {
        res.set_content(raw->second, "application/json");
        return;
      }
      auto it = plans_.find(rank);
      if (it == plans_.end()) return error(res, 404, "not_found", "no plan for rank");
      const auto& p = it->second;
      // As perseus serve: 304 unless newer, or since_version is one never issued.
      if (req.has_param("since_version") && std::stoll(req.get_param_value("since_version")) >= p.version &&
          std::stoll(req.get_param_value("since_version")) <= issued_[rank]) {
        res.status = 304;
        return;
      }
      nlohmann::json instrs = nlohmann::json::array();
      for (const auto& i : p.instructions) {
        instrs.push_back({{"instruction", i.instruction}, {"stage", i.stage}, {"microbatch", i.microbatch},
                          {"freq_mhz", i.freq_mhz}});
      }
      served_[rank] = std::max(served_.count(rank) ? served_[rank] : -1, p.version);
      res.set_content(nlohmann::json{{"version", p.version}, {"job_status", "running"}, {"instructions", instrs}}.dump(),
                      "application/json");
    });
    s.Post(R"(/v1/jobs/([^/]+)/ranks/(\d+)/measurements)", [this](const httplib::Request& req, httplib::Response& res) {
      if (!check(req, res)) return;
      const int rank = std::stoi(req.matches[2]);
      const auto j = nlohmann::json::parse(req.body);
      std::lock_guard lock(mu_);
      ++posts_;
      nlohmann::json rejected = nlohmann::json::array();
      auto add = [&](const nlohmann::json& m) {
        const auto it = m.at("iteration").get<std::int64_t>();
        if (rejected_.count(it) != 0) {
          rejected.push_back({{"iteration", it}, {"error", "test rejects this iteration"}});
          return;
        }
        measurements_[rank][it] = m;
      };
      if (j.contains("measurements")) {
        for (const auto& m : j["measurements"]) add(m);
      } else {
        if (refused_single_.count(j.at("iteration").get<std::int64_t>()) != 0)
          return error(res, 422, "invalid_field", "test refuses this report");
        add(j);
      }
      for (const auto& item : foreign_rejections_) rejected.push_back(item);
      res.status = 202;
      res.set_content(nlohmann::json{{"rejected", rejected}}.dump(), "application/json");
    });
  }

  std::string token_;
  std::string job_id_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<int, runtime::RankPlan> plans_;
  std::map<int, std::int64_t> served_;
  std::map<int, std::int64_t> issued_;  // highest version set per rank (restore_plan lowers it)
  std::vector<nlohmann::json> foreign_rejections_;
  std::set<std::int64_t> refused_single_;
  std::map<int, std::vector<int>> registered_;
  std::map<int, std::vector<int>> coords_;
  std::map<int, std::string> raw_plans_;
  std::set<std::int64_t> rejected_;
  std::string registration_reply_ = "{}";
  int registrations_ = 0;
  std::map<int, std::map<std::int64_t, nlohmann::json>> measurements_;
  int posts_ = 0;
};

/// A plan of `freqs.size()` computations: forward for microbatches 0..n/2-1 then backward.
inline runtime::RankPlan make_plan(std::int64_t version, const std::vector<std::pair<std::string, int>>& seq) {
  runtime::RankPlan p;
  p.version = version;
  p.job_status = "running";
  std::map<std::string, int> count;
  for (const auto& [name, f] : seq) p.instructions.push_back({name, 0, count[name]++, f});
  return p;
}

/// Client options for tests against a StubServer at `url` (token "secret", job "job1"): fast
/// polling and retries, no watchdog or signal handlers, every clock request applied in order
/// (exact logs: computations in these tests take no time).
inline perseus::runtime::ClientOptions stub_client_options(const std::string& url) {
  perseus::runtime::ClientOptions o;
  o.server_url = url;
  o.token = "secret";
  o.job_id = "job1";
  o.plan_poll_interval_s = 0.02;
  o.retry_initial_s = 0.01;
  o.retry_max_s = 0.05;
  o.request_timeout_s = 2.0;
  o.startup_timeout_s = 2.0;
  o.watchdog = false;
  o.handle_signals = false;
  o.coalesce_clock_requests = false;
  return o;
}

}  // namespace perseus::testing
