// Helpers of the server tests: an in-process server on loopback and a JSON HTTP client.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perseus/server/job_manager.hpp"
#include "perseus/server/server.hpp"

namespace perseus::server::testing {

using nlohmann::json;

inline const std::string kToken = "test-token-0123456789abcdef";

/// A server that refuses a body early closes the connection while a client may still be writing:
/// the tests' clients must see EPIPE, not die of SIGPIPE.
inline const bool kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string example_profile() { return read_file(std::string(PERSEUS_EXAMPLES_DIR) + "/stage_profile_gpt3-175b_a100_sxm.csv"); }

/// A fresh temporary directory, removed at destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("perseus-server-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  static int& counter() { static int c = 0; return c; }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

/// Result of one request: status, body text and parsed JSON (null if not JSON).
struct Resp {
  int status = 0;
  std::string body;
  json j;
};

/// Small JSON client with the bearer token set.
class Api {
 public:
  explicit Api(int port, std::string token = kToken) : cli_("127.0.0.1", port), token_(std::move(token)) {
    cli_.set_connection_timeout(5);
    cli_.set_read_timeout(30);
  }
  Resp get(const std::string& path) { return wrap(cli_.Get(path.c_str(), headers())); }
  Resp del(const std::string& path) { return wrap(cli_.Delete(path.c_str(), headers())); }
  Resp post(const std::string& path, const json& body) { return post_raw(path, body.dump()); }
  Resp post_raw(const std::string& path, const std::string& body, const std::string& type = "application/json") {
    return wrap(cli_.Post(path.c_str(), headers(), body, type.c_str()));
  }
  void set_token(std::string t) { token_ = std::move(t); }

 private:
  httplib::Client cli_;
  std::string token_;
  httplib::Headers headers() const {
    if (token_.empty()) return {};
    return {{"Authorization", "Bearer " + token_}};
  }
  static Resp wrap(const httplib::Result& r) {
    Resp out;
    if (!r) {
      out.status = -1;
      return out;
    }
    out.status = r->status;
    out.body = r->body;
    out.j = json::parse(r->body, nullptr, false);
    if (out.j.is_discarded()) out.j = nullptr;
    return out;
  }
};

/// perseus serve in this process, on a free loopback port.
class LocalServer {
 public:
  explicit LocalServer(const std::string& db, ServerOptions opt = {}) {
    opt.port = 0;
    opt.db_path = db;
    if (opt.token.empty()) opt.token = kToken;
    server_ = std::make_unique<Server>(opt);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
    // Listening since bind(); every route is served once the stored jobs are loaded (an event,
    // not a timeout: a loaded machine only makes it later).
    EXPECT_TRUE(server_->wait_until_ready()) << "the server stopped while loading its jobs";
  }
  ~LocalServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  Server& server() { return *server_; }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
  int port_ = 0;
};

/// Polls GET /v1/jobs/{id} until its status is `status` (or timeout_s passes).
inline json wait_status(Api& api, const std::string& job, const std::string& status, double timeout_s = 30) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  json j;
  while (std::chrono::steady_clock::now() < end) {
    j = api.get("/v1/jobs/" + job).j;
    if (j.is_object() && j.value("status", "") == status) return j;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "job " << job << " did not reach status " << status << ": " << j.dump();
  return j;
}

/// POSTs `body` to `path` (a straggler route of `job`); on 503 "frontier_not_ready" (the job's
/// frontier is re-derived on the planner pool after a restart) waits until GET /v1/jobs/{job}
/// says "frontier": {"rederiving": false} (an event; timeout_s is a hang guard) and posts again.
inline Resp post_when_frontier_ready(Api& api, const std::string& job, const std::string& path, const json& body,
                                     double timeout_s = 120) {
  Resp r = api.post(path, body);
  if (r.status != 503 || !r.j.is_object() || r.j["error"]["code"] != "frontier_not_ready") return r;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    const json j = api.get("/v1/jobs/" + job).j;
    if (j.is_object() && j["frontier"]["rederiving"] == false) return api.post(path, body);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "job " << job << ": the frontier was not re-derived";
  return r;
}

/// The value of an unlabelled Prometheus sample `name` in GET /metrics (-1 if absent).
inline double metric_value(Api& api, const std::string& name) {
  const std::string text = api.get("/metrics").body;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

/// Polls /metrics until perseus_planner_running is 1, i.e. a frontier solve has started (an
/// event, not a time); false if it did not within timeout_s (a hang guard only).
inline bool wait_solve_running(Api& api, double timeout_s = 60) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (metric_value(api, "perseus_planner_running") == 1) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// Registers ranks 0..pp-1 (pipeline 0) of `job` with the ten highest A100 clocks, as a
/// profiling sweep's ranks; true when every registration answered 201.
inline bool register_sweep_ranks(Api& api, const std::string& job, int pp = 2) {
  const json freqs = {1410, 1395, 1380, 1365, 1350, 1335, 1320, 1305, 1290, 1275};
  bool ok = true;
  for (int r = 0; r < pp; ++r)
    ok = api.post("/v1/jobs/" + job + "/ranks",
                  {{"rank", r}, {"dp_rank", 0}, {"pp_rank", r}, {"tp_rank", 0}, {"supported_freqs_mhz", freqs}})
                 .status == 201 && ok;
  return ok;
}

/// Measured entries for the instructions of a plan answer (GET .../plan), from a synthetic
/// GPU: time ~ 1/f (backward twice forward), energy lowest at 1380 MHz.
inline json synthetic_instructions(const json& plan) {
  json ins = json::array();
  for (const auto& i : plan["instructions"]) {
    const int f = i["freq_mhz"];
    const double scale = i["instruction"] == "forward" ? 1.0 : 2.0;
    ins.push_back({{"instruction", i["instruction"]}, {"microbatch", i["microbatch"]}, {"freq_mhz", f},
                   {"time_s", scale * 100.0 / f}, {"energy_j", scale * (10.0 + std::pow((f - 1380.0) / 15.0, 2))}});
  }
  return ins;
}

/// An A100's supported SM clocks, MHz: 1410 down to 210 in 15 MHz steps.
inline json a100_clocks() {
  json out = json::array();
  for (int f = 1410; f >= 210; f -= 15) out.push_back(f);
  return out;
}

/// The standard job of the tests: the bundled GPT-3 profile, 8 stages, 4 microbatches.
inline json profile_job(int dp = 2, int pp = 8) {
  return {{"name", "test"}, {"pp", pp}, {"dp", dp}, {"tp", 1}, {"microbatches", 4}, {"schedule", "1f1b"},
          {"p2p_power_w", 83.64}, {"unit_time_s", 0.01}, {"profile_csv", example_profile()}};
}

/// A job whose frontier solve takes minutes (8 stages, 256 microbatches, a 1 µs quantum: about
/// 10^5 graph-cut steps), so that a test can act while it runs.
inline json long_solve_job() {
  json j = profile_job(1, 8);
  j["microbatches"] = 256;
  j["unit_time_s"] = 1e-6;
  return j;
}

}  // namespace perseus::server::testing
