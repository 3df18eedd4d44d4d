// HTTP layer: routing, bearer-token auth, content types, JSON errors, background expiry.
// Transport limits (sizes, deadlines, connection caps) live in http_daemon.cpp.
#include "perseus/server/server.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <thread>

#include <fmt/core.h>

#include "http_daemon.hpp"
#include "job.hpp"  // equal_constant_time
#include "perseus/error.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/server/job_manager.hpp"
#include "perseus/server/rate_limiter.hpp"
#include "perseus/server/store.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json";

/// Who may call a route (docs/http-api.md, "Authority").
enum class Access {
  kPublic,      ///< Anyone (GET /v1/health).
  kAdmin,       ///< The admin token only: create, list, delete jobs; /metrics.
  kJob,         ///< The admin token or the token of the job named by the first path parameter.
  kZeusCreate,  ///< POST /register_job: the admin token; anyone under --zeus-no-auth (quota).
  kZeusJob,     ///< Zeus routes of one job: as kJob; anyone under --zeus-no-auth.
};

/// One route: method, path pattern ("{}" = parameter segment), who may call it, handler.
struct Route {
  std::string method;
  std::vector<std::string> segments;
  Access access = Access::kAdmin;
  std::function<Reply(const HttpRequest&, const std::vector<std::string>&)> handler;
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

/// The bearer token of an Authorization header ("" when there is none).
std::string_view bearer_token(const std::string& header) {
  static constexpr std::string_view kPrefix = "Bearer ";
  if (header.size() <= kPrefix.size() || header.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  return std::string_view(header).substr(kPrefix.size());
}

/// True for a Content-Type the JSON routes accept: none, application/json, any "+json" type, or
/// text/plain (what many tools send by default).
bool json_content_type(const std::string& type) {
  std::string t = type.substr(0, type.find(';'));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return t.empty() || t == "application/json" || t == "text/plain" || (t.size() > 5 && t.compare(t.size() - 5, 5, "+json") == 0);
}

HttpResponse error_response(int status, std::string_view code, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = error_body(code, message);
  return r;
}

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  Store store;
  JobManager manager;
  RateLimiter limiter;
  std::vector<Route> routes;
  std::unique_ptr<HttpDaemon> http;
  std::size_t loaded = 0;
  double started_s = now_s();
  int port = -1;
  int listen_fd = -1;

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread expiry;

  explicit Impl(ServerOptions o)
      : opt(std::move(o)),
        store(opt.db_path, opt.sync_full),
        manager(store, ManagerOptions{opt.job_idle_ttl_s, opt.planner_threads, opt.max_jobs, 100,
                                      opt.zeus_plan_texts, opt.zeus_profile_csv, opt.zeus_schedule,
                                      opt.zeus_p2p_power_w, opt.zeus_anonymous_max_jobs,
                                      opt.zeus_anonymous_max_ranks, opt.zeus_anonymous_max_bytes}),
        limiter(opt.rate_limit_rps, std::max(1.0, opt.rate_limit_burst)) {
    loaded = manager.load();
    add_routes();
    HttpLimits lim;
    lim.threads = std::max(1, opt.threads);
    lim.max_body_bytes = opt.max_body_bytes;
    lim.header_bytes = opt.max_header_bytes;
    lim.idle_timeout_s = std::max(1, opt.keep_alive_s);
    lim.request_deadline_s = opt.request_deadline_s > 0 ? opt.request_deadline_s : 30;
    lim.max_connections = opt.max_connections;
    lim.per_ip_connections = opt.max_connections_per_ip;
    lim.listen_backlog = opt.listen_backlog;
    http = std::make_unique<HttpDaemon>(
        lim, [this](HttpRequest& q) { return precheck(q); }, [this](HttpRequest& q) { return dispatch(q); },
        [this](const HttpRequest& q, int status) { log(q, status); });
    expiry = std::thread([this] { expiry_loop(); });
  }

  ~Impl() {
    shutdown();
    if (expiry.joinable()) expiry.join();
    if (http) http->stop();
    if (listen_fd >= 0 && !http_started) ::close(listen_fd);
  }
  bool http_started = false;

  void shutdown() {
    manager.begin_shutdown();  // a long solve must not hold up the exit (SIGTERM within 2 s)
    {
      std::lock_guard lock(stop_mu);
      stopping = true;
    }
    stop_cv.notify_all();
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

  static std::optional<std::int64_t> query_index(const HttpRequest& req, const char* key, bool required) {
    const std::string* v = req.param(key);
    if (!v) {
      if (required) throw ApiError(400, "missing_parameter", fmt::format("query parameter \"{}\" is required", key));
      return std::nullopt;
    }
    return parse_index(*v, fmt::format("query parameter \"{}\"", key));
  }

  void add(std::string method, const std::string& pattern, Access access,
           std::function<Reply(const HttpRequest&, const std::vector<std::string>&)> h) {
    routes.push_back({std::move(method), split_path(pattern), access, std::move(h)});
  }

  void add_routes() {
    using P = std::vector<std::string>;
    using R = HttpRequest;
    add("GET", "/v1/health", Access::kPublic, [this](const R&, const P&) {
      return Reply{200, json{{"status", "ok"}, {"version", "0.1.0"}, {"uptime_s", now_s() - started_s}}.dump()};
    });
    add("GET", "/metrics", Access::kAdmin, [this](const R&, const P&) { return Reply{200, manager.metrics_text()}; });
    add("GET", "/v1/jobs", Access::kAdmin, [this](const R&, const P&) { return manager.list_jobs(); });
    add("POST", "/v1/jobs", Access::kAdmin,
        [this](const R& r, const P&) { return manager.create_job(parse_json_body(r.body)); });
    add("GET", "/v1/jobs/{}", Access::kJob, [this](const R&, const P& p) { return manager.get_job(p[0]); });
    add("DELETE", "/v1/jobs/{}", Access::kAdmin, [this](const R&, const P& p) { return manager.delete_job(p[0]); });
    add("POST", "/v1/jobs/{}/ranks", Access::kJob,
        [this](const R& r, const P& p) { return manager.register_rank(p[0], parse_json_body(r.body)); });
    add("GET", "/v1/jobs/{}/ranks/{}/plan", Access::kJob, [this](const R& r, const P& p) {
      return manager.get_plan(p[0], parse_index(p[1], "rank"), query_index(r, "since_version", false));
    });
    add("POST", "/v1/jobs/{}/ranks/{}/measurements", Access::kJob, [this](const R& r, const P& p) {
      return manager.post_measurements(p[0], parse_index(p[1], "rank"), parse_json_body(r.body));
    });
    add("POST", "/v1/jobs/{}/stragglers", Access::kJob,
        [this](const R& r, const P& p) { return manager.post_straggler(p[0], parse_json_body(r.body)); });
    add("DELETE", "/v1/jobs/{}/stragglers/{}", Access::kJob,
        [this](const R&, const P& p) { return manager.clear_straggler(p[0], parse_index(p[1], "pipeline")); });
    // Zeus PFO compatibility.
    add("POST", "/register_job", Access::kZeusCreate, [this](const R& r, const P&) {
      return manager.zeus_register_job(parse_json_body(r.body), /*anonymous=*/!r.admin);
    });
    add("POST", "/register_rank/{}", Access::kZeusJob,
        [this](const R& r, const P& p) { return manager.zeus_register_rank(p[0], parse_json_body(r.body)); });
    add("GET", "/schedule/{}", Access::kZeusJob, [this](const R& r, const P& p) {
      return manager.zeus_schedule(p[0], *query_index(r, "rank", true));
    });
    add("POST", "/result/{}", Access::kZeusJob,
        [this](const R& r, const P& p) { return manager.zeus_result(p[0], parse_json_body(r.body)); });
  }

  /// Checks who may call route `r` (see Access). Sets req.admin. Returns the refusal, if any:
  /// 401 for no or an unknown token, 403 for a job's token outside its job.
  std::optional<HttpResponse> authorize(const Route& r, HttpRequest& req) const {
    if (r.access == Access::kPublic) return std::nullopt;
    const std::string_view token = bearer_token(req.authorization);
    req.admin = !token.empty() && equal_constant_time(token, opt.token);
    if (req.admin) return std::nullopt;
    const bool zeus_open = !opt.zeus_require_token && (r.access == Access::kZeusCreate || r.access == Access::kZeusJob);
    if (zeus_open) return std::nullopt;  // anonymous: Zeus jobs only, quota on creation
    const std::optional<std::string> owner = manager.job_of_token(token);
    if (owner && (r.access == Access::kJob || r.access == Access::kZeusJob) && !req.params.empty() &&
        *owner == req.params[0])
      return std::nullopt;
    if (owner)
      return error_response(
          403, "forbidden",
          r.access == Access::kJob || r.access == Access::kZeusJob
              ? "this bearer token is another job's token: a job's token reaches only that job"
              : "this route needs the admin token (--token-file, PERSEUS_TOKEN or <db>.token); a job's token "
                "reaches only its own job's routes");
    auto e = error_response(401, "unauthorized", "missing or invalid bearer token (Authorization: Bearer <token>)");
    e.headers.emplace_back("WWW-Authenticate", "Bearer");
    return e;
  }

  /// Runs once the headers are in, before the body is read: rate limit, route, auth, type.
  std::optional<HttpResponse> precheck(HttpRequest& req) {
    if (!limiter.allow(req.remote_addr, now_s())) {
      manager.counters().rate_limited++;
      auto r = error_response(429, "rate_limited",
                              fmt::format("more than {} requests/s from this address (--rate-limit-rps); retry later",
                                          opt.rate_limit_rps));
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    const auto segs = split_path(req.path);
    std::string allowed;
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const Route& r = routes[i];
      if (!match(r, segs, req.params)) continue;
      if (r.method != req.method) {
        allowed += (allowed.empty() ? "" : ", ") + r.method;
        continue;
      }
      if (auto refused = authorize(r, req)) return refused;
      if (r.method == "POST" && !json_content_type(req.content_type))
        return error_response(415, "unsupported_media_type",
                              fmt::format("Content-Type \"{}\" is not JSON; send the body as JSON with "
                                          "\"Content-Type: application/json\" (or no Content-Type)",
                                          req.content_type.substr(0, 64)));
      req.route = static_cast<int>(i);
      return std::nullopt;
    }
    if (!allowed.empty()) {
      auto e = error_response(405, "method_not_allowed",
                              fmt::format("{} is not allowed here (allowed: {})", req.method.substr(0, 16), allowed));
      e.headers.emplace_back("Allow", allowed);
      return e;
    }
    return error_response(404, "not_found", "no such route (see docs/http-api.md)");
  }

  HttpResponse dispatch(HttpRequest& req) {
    try {
      if (req.route < 0) return error_response(404, "not_found", "no such route (see docs/http-api.md)");
      const Route& r = routes[static_cast<std::size_t>(req.route)];
      Reply reply = r.handler(req, req.params);
      HttpResponse out;
      out.status = reply.status;
      if (reply.status == 304) return out;
      out.body = std::move(reply.body);
      if (r.segments.size() == 1 && r.segments[0] == "metrics") out.content_type = "text/plain; version=0.0.4";
      return out;
    } catch (const ApiError& e) {
      return error_response(e.status(), e.code(), e.what());
    } catch (const InputError& e) {
      return error_response(422, "invalid_input", e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "perseus serve: internal error on %s %s: %s\n", req.method.c_str(),
                   req.path.substr(0, 200).c_str(), e.what());
      return error_response(500, "internal_error", "internal server error (details are in the server log)");
    }
  }

  void log(const HttpRequest& req, int status) {
    auto& c = manager.counters();
    c.requests++;
    if (status >= 500) c.errors_5xx++;
    else if (status >= 400) c.errors_4xx++;
    if (opt.log_requests)
      std::fprintf(stderr, "%s %s %s -> %d\n", req.remote_addr.c_str(), req.method.substr(0, 16).c_str(),
                   req.path.substr(0, 200).c_str(), status);
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
  if (i.listen_fd >= 0) return i.port;
  i.listen_fd = open_listen_socket(i.opt.host, i.opt.port, i.opt.listen_backlog, &i.port);
  return i.port;
}

bool Server::run() {
  auto& i = *impl_;
  if (i.listen_fd < 0) bind();
  {
    std::lock_guard lock(i.stop_mu);
    if (i.stopping) return true;
  }
  i.http->start(i.listen_fd);  // the daemon owns the socket now
  i.http_started = true;
  std::unique_lock lock(i.stop_mu);
  i.stop_cv.wait(lock, [&] { return i.stopping; });
  lock.unlock();
  i.http->stop();
  return true;
}

void Server::stop() { impl_->shutdown(); }

std::size_t Server::jobs_loaded() const { return impl_->loaded; }

JobManager& Server::manager() { return impl_->manager; }

}  // namespace perseus::server
