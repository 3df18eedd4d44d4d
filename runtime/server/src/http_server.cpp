// HTTP layer: routing, bearer-token auth, limits, JSON errors, background expiry.
#include "perseus/server/server.hpp"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <thread>

#include <fmt/core.h>

#include "job.hpp"
#include "perseus/error.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/server/job_manager.hpp"
#include "perseus/server/rate_limiter.hpp"
#include "perseus/server/store.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json";

/// One route: method, path pattern ("{}" = parameter segment), auth requirement, handler.
struct Route {
  std::string method;
  std::vector<std::string> segments;
  bool auth = true;
  bool zeus = false;
  std::function<Reply(const httplib::Request&, const std::vector<std::string>&)> handler;
};

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') { ++i; continue; }
    const std::size_t j = path.find('/', i);
    out.push_back(path.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j;
  }
  return out;
}

bool match(const Route& r, const std::vector<std::string>& segs, std::vector<std::string>& params) {
  if (r.segments.size() != segs.size()) return false;
  params.clear();
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (r.segments[i] == "{}") {
      if (segs[i].empty() || segs[i].size() > 128) return false;
      params.push_back(segs[i]);
    } else if (r.segments[i] != segs[i]) {
      return false;
    }
  }
  return true;
}

/// Constant-time string comparison (token check).
bool equal_ct(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

const char* status_code_name(int status) {
  switch (status) {
    case 400: return "bad_request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 408: return "request_timeout";
    case 413: return "payload_too_large";
    case 414: return "uri_too_long";
    case 416: return "range_not_satisfiable";
    case 429: return "rate_limited";
    case 503: return "unavailable";
    default: return status >= 500 ? "internal_error" : "bad_request";
  }
}

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  Store store;
  JobManager manager;
  RateLimiter limiter;
  httplib::Server http;
  std::vector<Route> routes;
  std::size_t loaded = 0;
  double started_s = now_s();
  int port = -1;

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread expiry;

  explicit Impl(ServerOptions o)
      : opt(std::move(o)),
        store(opt.db_path, opt.sync_full),
        manager(store, ManagerOptions{opt.job_idle_ttl_s, opt.planner_threads, opt.max_jobs, 100,
                                      opt.zeus_plan_texts, opt.zeus_profile_csv, opt.zeus_schedule,
                                      opt.zeus_p2p_power_w}),
        limiter(opt.rate_limit_rps, std::max(1.0, opt.rate_limit_burst)) {
    loaded = manager.load();
    add_routes();
    configure();
    expiry = std::thread([this] { expiry_loop(); });
  }

  ~Impl() {
    shutdown();
    if (expiry.joinable()) expiry.join();
  }

  void shutdown() {
    {
      std::lock_guard lock(stop_mu);
      stopping = true;
    }
    stop_cv.notify_all();
    http.stop();
  }

  void expiry_loop() {
    std::unique_lock lock(stop_mu);
    while (!stop_cv.wait_for(lock, std::chrono::duration<double>(std::max(0.05, opt.expiry_interval_s)),
                             [&] { return stopping; })) {
      lock.unlock();
      try {
        const auto n = manager.expire_idle(now_s());
        if (n) std::fprintf(stderr, "perseus serve: expired %zu idle job(s)\n", n);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "perseus serve: expiry failed: %s\n", e.what());
      }
      lock.lock();
    }
  }

  static std::optional<std::int64_t> query_index(const httplib::Request& req, const char* key, bool required) {
    if (!req.has_param(key)) {
      if (required) throw ApiError(400, "missing_parameter", fmt::format("query parameter \"{}\" is required", key));
      return std::nullopt;
    }
    return parse_index(req.get_param_value(key), fmt::format("query parameter \"{}\"", key));
  }

  void add(std::string method, const std::string& pattern, bool auth, bool zeus,
           std::function<Reply(const httplib::Request&, const std::vector<std::string>&)> h) {
    routes.push_back({std::move(method), split_path(pattern), auth, zeus, std::move(h)});
  }

  void add_routes() {
    using P = std::vector<std::string>;
    using R = httplib::Request;
    add("GET", "/v1/health", false, false, [this](const R&, const P&) {
      return Reply{200, json{{"status", "ok"}, {"version", "0.1.0"}, {"uptime_s", now_s() - started_s}}.dump()};
    });
    add("GET", "/metrics", true, false, [this](const R&, const P&) { return Reply{200, manager.metrics_text()}; });
    add("GET", "/v1/jobs", true, false, [this](const R&, const P&) { return manager.list_jobs(); });
    add("POST", "/v1/jobs", true, false,
        [this](const R& r, const P&) { return manager.create_job(parse_json_body(r.body)); });
    add("GET", "/v1/jobs/{}", true, false, [this](const R&, const P& p) { return manager.get_job(p[0]); });
    add("DELETE", "/v1/jobs/{}", true, false, [this](const R&, const P& p) { return manager.delete_job(p[0]); });
    add("POST", "/v1/jobs/{}/ranks", true, false,
        [this](const R& r, const P& p) { return manager.register_rank(p[0], parse_json_body(r.body)); });
    add("GET", "/v1/jobs/{}/ranks/{}/plan", true, false, [this](const R& r, const P& p) {
      return manager.get_plan(p[0], parse_index(p[1], "rank"), query_index(r, "since_version", false));
    });
    add("POST", "/v1/jobs/{}/ranks/{}/measurements", true, false, [this](const R& r, const P& p) {
      return manager.post_measurements(p[0], parse_index(p[1], "rank"), parse_json_body(r.body));
    });
    add("POST", "/v1/jobs/{}/stragglers", true, false,
        [this](const R& r, const P& p) { return manager.post_straggler(p[0], parse_json_body(r.body)); });
    add("DELETE", "/v1/jobs/{}/stragglers/{}", true, false,
        [this](const R&, const P& p) { return manager.clear_straggler(p[0], parse_index(p[1], "pipeline")); });
    // Zeus PFO compatibility.
    add("POST", "/register_job", true, true,
        [this](const R& r, const P&) { return manager.zeus_register_job(parse_json_body(r.body)); });
    add("POST", "/register_rank/{}", true, true,
        [this](const R& r, const P& p) { return manager.zeus_register_rank(p[0], parse_json_body(r.body)); });
    add("GET", "/schedule/{}", true, true, [this](const R& r, const P& p) {
      return manager.zeus_schedule(p[0], *query_index(r, "rank", true));
    });
    add("POST", "/result/{}", true, true,
        [this](const R& r, const P& p) { return manager.zeus_result(p[0], parse_json_body(r.body)); });
  }

  bool authorized(const httplib::Request& req) const {
    const std::string h = req.get_header_value("Authorization");
    static const std::string prefix = "Bearer ";
    if (h.size() <= prefix.size() || h.compare(0, prefix.size(), prefix) != 0) return false;
    return equal_ct(h.substr(prefix.size()), opt.token);
  }

  static void send_error(httplib::Response& res, int status, std::string_view code, std::string_view message) {
    res.status = status;
    res.set_content(error_body(code, message), kJson);
  }

  void dispatch(const httplib::Request& req, httplib::Response& res) {
    try {
      const auto segs = split_path(req.path);
      std::vector<std::string> params;
      std::string allowed;
      for (const Route& r : routes) {
        if (!match(r, segs, params)) continue;
        if (r.method != req.method) {
          allowed += (allowed.empty() ? "" : ", ") + r.method;
          continue;
        }
        if (r.auth && !(r.zeus && !opt.zeus_require_token) && !authorized(req)) {
          res.set_header("WWW-Authenticate", "Bearer");
          send_error(res, 401, "unauthorized", "missing or invalid bearer token (Authorization: Bearer <token>)");
          return;
        }
        Reply reply = r.handler(req, params);
        res.status = reply.status;
        if (reply.status == 304) return;
        res.set_content(reply.body, r.segments.size() == 1 && r.segments[0] == "metrics"
                                        ? "text/plain; version=0.0.4"
                                        : kJson);
        return;
      }
      if (!allowed.empty()) {
        res.set_header("Allow", allowed);
        send_error(res, 405, "method_not_allowed", fmt::format("{} is not allowed here (allowed: {})", req.method, allowed));
        return;
      }
      send_error(res, 404, "not_found", "no such route (see docs/http-api.md)");
    } catch (const ApiError& e) {
      send_error(res, e.status(), e.code(), e.what());
    } catch (const InputError& e) {
      send_error(res, 422, "invalid_input", e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "perseus serve: internal error on %s %s: %s\n", req.method.c_str(), req.path.c_str(), e.what());
      send_error(res, 500, "internal_error", "internal server error (details are in the server log)");
    }
  }

  void configure() {
    const int threads = std::max(1, opt.threads);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
    http.set_payload_max_length(opt.max_body_bytes);
    http.set_keep_alive_timeout(std::max(0, opt.keep_alive_s));
    http.set_keep_alive_max_count(1000);
    http.set_read_timeout(std::max(1, opt.read_timeout_s), 0);
    http.set_write_timeout(5, 0);
    http.set_tcp_nodelay(true);
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!limiter.allow(req.remote_addr, now_s())) {
        manager.counters().rate_limited++;
        res.set_header("Retry-After", "1");
        send_error(res, 429, "rate_limited", "too many requests from this address; retry later");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { dispatch(req, res); };
    http.Get(".*", handler);
    http.Post(".*", handler);
    http.Delete(".*", handler);
    http.Put(".*", handler);
    http.Patch(".*", handler);
    http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty() && res.status >= 400)
        res.set_content(error_body(status_code_name(res.status), fmt::format("HTTP {}", res.status)), kJson);
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      send_error(res, 500, "internal_error", "internal server error");
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      auto& c = manager.counters();
      c.requests++;
      if (res.status >= 500) c.errors_5xx++;
      else if (res.status >= 400) c.errors_4xx++;
      if (opt.log_requests)
        std::fprintf(stderr, "%s %s %s -> %d\n", req.remote_addr.c_str(), req.method.c_str(), req.path.c_str(),
                     res.status);
    });
  }
};

Server::Server(ServerOptions options) {
  if (options.token.empty()) throw InputError("the server needs a bearer token (--token-file or PERSEUS_TOKEN)");
  if (options.token.size() < 16) throw InputError("the bearer token must be at least 16 characters");
  impl_ = std::make_unique<Impl>(std::move(options));
}

Server::~Server() = default;

int Server::bind() {
  auto& i = *impl_;
  if (i.opt.port == 0) {
    i.port = i.http.bind_to_any_port(i.opt.host);
    if (i.port < 0) throw InputError(fmt::format("cannot bind {}:<any>", i.opt.host));
  } else {
    if (!i.http.bind_to_port(i.opt.host, i.opt.port))
      throw InputError(fmt::format("cannot bind {}:{} (in use, or not a local address?)", i.opt.host, i.opt.port));
    i.port = i.opt.port;
  }
  return i.port;
}

bool Server::run() { return impl_->http.listen_after_bind(); }

void Server::stop() { impl_->shutdown(); }

std::size_t Server::jobs_loaded() const { return impl_->loaded; }

JobManager& Server::manager() { return impl_->manager; }

}  // namespace perseus::server
