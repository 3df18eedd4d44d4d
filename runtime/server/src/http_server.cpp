// HTTP layer: routing, bearer-token auth, content types, JSON errors, background expiry.
// Transport limits (sizes, deadlines, connection caps) live in http_daemon.cpp.
#include "perseus/server/server.hpp"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <semaphore>
#include <string_view>
#include <thread>

#include <fmt/core.h>

#include "http_daemon.hpp"
#include "perseus/runtime/job_limits.hpp"
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
/// Request bodies from this size on are followed by malloc_trim() (dispatch()), bytes.
constexpr std::size_t kTrimAfterBodyBytes = std::size_t{1} << 20;
/// Requests with a body of kTrimAfterBodyBytes or more handled at once (dispatch()).
constexpr std::ptrdiff_t kLargeBodiesAtOnce = 2;

/// Who may call a route (docs/http-api.md, "Authority").
enum class Access {
  kPublic,      ///< Anyone (GET /v1/health).
  kAdmin,       ///< The admin token only: create, list, delete jobs; /metrics.
  kJob,         ///< The admin token or the token of the job named by the first path parameter.
  kZeusCreate,  ///< POST /register_job: the admin token; anyone under --zeus-no-auth (quota).
  kZeusJob,     ///< Zeus routes of one job: as kJob; anyone under --zeus-no-auth.
};

/// One route: method, path pattern ("{name}" = a parameter segment: {job_id} follows the id
/// rule, {rank} and {pipeline} are non-negative integers; see check_param), who may call it,
/// handler.
struct Route {
  std::string method;
  std::vector<std::string> segments;
  Access access = Access::kAdmin;
  std::function<Reply(const HttpRequest&, const std::vector<std::string>&)> handler;
  std::vector<std::string> query = {};  ///< the query parameters it takes; any other is 400 invalid_query
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

bool is_param(const std::string& pattern_segment) { return !pattern_segment.empty() && pattern_segment[0] == '{'; }

/// Matches decoded path segments against a route; a parameter segment matches any text (its
/// rule is checked afterwards, so that a bad id is a 400 naming it, not a 404).
bool match(const Route& r, const std::vector<std::string>& segs, std::vector<std::string>& params) {
  if (r.segments.size() != segs.size()) return false;
  params.clear();
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (is_param(r.segments[i])) {
      params.push_back(segs[i]);
    } else if (r.segments[i] != segs[i]) {
      return false;
    }
  }
  return true;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// `text` as a message shows it: printable ASCII as is (a quote or backslash escaped), any
/// other byte as \xHH; at most 64 bytes of it ("..." after).
std::string shown(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') out += '\\';
    if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  if (text.size() > 64) out += "...";
  return out;
}

/// One byte as a message names it: '/', NUL (\x00), '\', \x0a, ...
std::string describe_byte(unsigned char c) {
  if (c == 0) return "NUL (\\x00)";
  if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("\\x{:02x}", c);
}

/// `path segment NAME "RAW"`, plus ` (decoded: "DECODED")` when escapes changed it.
std::string segment_intro(std::string_view name, std::string_view raw, std::string_view decoded) {
  std::string s = fmt::format("path segment {} \"{}\"", name, shown(raw));
  if (raw != decoded) s += fmt::format(" (decoded: \"{}\")", shown(decoded));
  return s;
}

/// A raw path segment with its %HH escapes decoded; an ApiError 400 "invalid_path" naming the
/// segment (by position, 1-based) when an escape is malformed ('%' not followed by two hex digits).
std::string percent_decode(const std::string& raw, std::size_t position) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '%') {
      out += raw[i];
      continue;
    }
    const int hi = i + 1 < raw.size() ? hex_digit(raw[i + 1]) : -1;
    const int lo = i + 2 < raw.size() ? hex_digit(raw[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      throw ApiError(400, "invalid_path",
                     fmt::format("path segment {} \"{}\": malformed percent-escape at byte {} (expected %HH: '%' and "
                                 "two hex digits)",
                                 position, shown(raw), i));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

/// The first byte of a decoded segment that no path segment may hold ('/' from an encoded %2F,
/// '\', NUL and the other control bytes), or npos.
std::size_t forbidden_byte(std::string_view decoded) {
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    const auto c = static_cast<unsigned char>(decoded[i]);
    if (c == '/' || c == '\\' || c < 0x20 || c == 0x7f) return i;
  }
  return std::string_view::npos;
}

/// The id rule of path parameter {job_id}: 1 to kMaxIdLength bytes from A-Z a-z 0-9 '-' '_'.
constexpr std::size_t kMaxIdLength = 128;
constexpr const char* kIdRule =
    "a job id is 1 to 128 characters from A-Z a-z 0-9 '-' '_' (the server's ids are \"job-\" + 24 hex digits, "
    "as POST /v1/jobs and POST /register_job answer them)";

bool id_char(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/// Checks one decoded path parameter against the rule of its pattern segment ("{job_id}",
/// "{rank}", "{pipeline}"). Throws ApiError 400 "invalid_path" naming the segment, what it
/// holds (the offending byte and where) and what was expected.
void check_param(std::string_view pattern, const std::string& raw, const std::string& decoded) {
  const std::string_view name = pattern.substr(1, pattern.size() - 2);
  if (name == "job_id") {
    if (decoded.size() > kMaxIdLength)
      throw ApiError(400, "invalid_path", fmt::format("{} is {} bytes long; {}", segment_intro(pattern, raw, decoded),
                                                      decoded.size(), kIdRule));
    for (std::size_t i = 0; i < decoded.size(); ++i) {
      const auto c = static_cast<unsigned char>(decoded[i]);
      if (!id_char(c))
        throw ApiError(400, "invalid_path",
                       fmt::format("{} holds {} at byte {}; {}", segment_intro(pattern, raw, decoded), describe_byte(c),
                                   i, kIdRule));
    }
    return;
  }
  // {rank}, {pipeline}: a non-negative integer (parse_index says so, with the range).
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    const auto c = static_cast<unsigned char>(decoded[i]);
    if (c < '0' || c > '9')
      throw ApiError(400, "invalid_path",
                     fmt::format("{} holds {} at byte {}; a {} is a non-negative integer (at most {})",
                                 segment_intro(pattern, raw, decoded), describe_byte(c), i, name, INT64_MAX));
  }
  // One spelling per index: "%31" would be rank 1 again, as "01" would (parse_index refuses that).
  if (raw != decoded)
    throw ApiError(400, "invalid_path",
                   fmt::format("{} is percent-encoded; a {} is written in plain decimal digits",
                               segment_intro(pattern, raw, decoded), name));
  parse_index(decoded, name);  // beyond 64 bits: "rank must be a non-negative integer (at most ...), got ..."
}

/// The bearer token of an Authorization header ("" when there is none). The scheme name is
/// case-insensitive (RFC 7235 §2.1): "Bearer", "bearer" and "BEARER" all name it. Whitespace
/// around the value is not part of it (RFC 9110 §5.5: libmicrohttpd strips the leading part,
/// this the trailing spaces and tabs a hand-written header may carry).
std::string_view bearer_token(const std::string& header) {
  static constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() + 1 || header[kScheme.size()] != ' ') return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return {};
  std::string_view token = std::string_view(header).substr(kScheme.size() + 1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return token;
}

/// True for a Content-Type the JSON routes accept: none, application/json, any "+json" type, or
/// text/plain (what many tools send by default).
bool json_content_type(const std::string& type) {
  std::string t = type.substr(0, type.find(';'));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return t.empty() || t == "application/json" || t == "text/plain" || (t.size() > 5 && t.compare(t.size() - 5, 5, "+json") == 0);
}

/// The charset parameter of a Content-Type ("" when there is none), lower-case, unquoted.
std::string content_type_charset(const std::string& type) {
  std::size_t at = type.find(';');
  while (at != std::string::npos) {
    const std::size_t next = type.find(';', at + 1);
    std::string param = type.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    for (auto& ch : param) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const auto first = param.find_first_not_of(" \t");
    if (first != std::string::npos && param.compare(first, 8, "charset=") == 0) {
      std::string value = param.substr(first + 8);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
      return value;
    }
    at = next;
  }
  return {};
}

/// Bodies are JSON, which is UTF-8 (RFC 8259 §8.1); US-ASCII is a subset.
bool utf8_charset(const std::string& charset) {
  return charset.empty() || charset == "utf-8" || charset == "utf8" || charset == "us-ascii";
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
  std::atomic<std::size_t> loaded{0};  ///< written by run()'s thread, read by any (jobs_loaded())
  double load_s = 0;
  /// The stored jobs are loaded: every route is served (before, only GET /v1/health).
  std::atomic<bool> ready{false};
  double started_s = monotonic_s();
  std::counting_semaphore<kLargeBodiesAtOnce> large_bodies{kLargeBodiesAtOnce};
  int port = -1;
  int listen_fd = -1;

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread expiry;

  /// The job manager's settings from the server's (by name: the others keep their defaults).
  static ManagerOptions manager_options(const ServerOptions& o) {
    ManagerOptions m;
    m.job_idle_ttl_s = o.job_idle_ttl_s;
    m.planner_threads = o.planner_threads;
    m.max_jobs = o.max_jobs;
    m.max_decision_bytes = o.max_decision_bytes;
    m.zeus_plan_texts = o.zeus_plan_texts;
    m.zeus_profile_csv = o.zeus_profile_csv;
    m.zeus_schedule = o.zeus_schedule;
    m.zeus_p2p_power_w = o.zeus_p2p_power_w;
    m.anonymous_max_jobs = o.zeus_anonymous_max_jobs;
    m.anonymous_max_ranks = o.zeus_anonymous_max_ranks;
    m.anonymous_max_bytes = o.zeus_anonymous_max_bytes;
    m.before_frontier_stored = o.before_frontier_stored;
    return m;
  }

  explicit Impl(ServerOptions o)
      : opt(std::move(o)),
        store(opt.db_path, opt.sync_full),
        manager(store, manager_options(opt)),
        limiter(opt.rate_limit_rps, std::max(1.0, opt.rate_limit_burst)) {
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
  }

  /// Loads the stored jobs (run(), listener started), then serves every route.
  void load_jobs() {
    const auto t0 = std::chrono::steady_clock::now();
    loaded = manager.load();
    load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    expiry = std::thread([this] { expiry_loop(); });
    {
      std::lock_guard lock(stop_mu);
      ready.store(true, std::memory_order_release);
    }
    stop_cv.notify_all();
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
        const auto ids = manager.expire_idle(monotonic_s());
        if (!ids.empty()) {  // which ones: an operator looking for a vanished job finds it here
          std::string named;
          for (std::size_t k = 0; k < ids.size() && k < 10; ++k) named += (k ? ", " : "") + ids[k];
          if (ids.size() > 10) named += fmt::format(" and {} more", ids.size() - 10);
          std::fprintf(stderr, "perseus serve: expired %zu idle job(s) (idle over --job-idle-ttl-s %g s): %s\n",
                       ids.size(), opt.job_idle_ttl_s, named.c_str());
        }
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
    // Form decoding reads '+' as a space: say so, the value shown is the decoded one.
    return parse_index(*v,
                       fmt::format("query parameter \"{}\"{}", key,
                                   v->find(' ') != std::string::npos ? " (a '+' in a query reads as a space)" : ""),
                       "invalid_query");
  }

  void add(std::string method, const std::string& pattern, Access access,
           std::function<Reply(const HttpRequest&, const std::vector<std::string>&)> h,
           std::vector<std::string> query = {}) {
    routes.push_back({std::move(method), split_path(pattern), access, std::move(h), std::move(query)});
  }

  /// The body of GET /v1/health and /v1/ready: "status" "starting" (the stored jobs load),
  /// "degraded" (the database refused its latest write: what the server acknowledges could not
  /// be kept; with an "error" naming SQLite's reason, never a job or path of a request) or "ok".
  json health_body() {
    json body{{"status", "ok"}, {"version", "0.1.0"}, {"uptime_s", monotonic_s() - started_s}};
    const Store::WriteHealth storage = store.write_health();
    if (!ready.load(std::memory_order_acquire)) {
      body["status"] = "starting";
      body["error"] = {{"code", "starting"}, {"message", "the server is loading its stored jobs after a start"}};
    } else if (!storage.ok) {
      body["status"] = "degraded";
      body["error"] = {{"code", "storage_unwritable"},
                       {"message", "the database refused its latest write: " + storage.last_error.substr(0, 200)}};
    }
    return body;
  }

  void add_routes() {
    using P = std::vector<std::string>;
    using R = HttpRequest;
    // Liveness (/v1/health: 200 while the process serves, its state in "status") and readiness
    // (/v1/ready: 200 only when every route is served and the database takes writes; 503 while
    // starting, and while degraded, for load balancers and readiness probes; session 22's trial).
    add("GET", "/v1/health", Access::kPublic, [this](const R&, const P&) { return Reply{200, health_body().dump()}; });
    add("GET", "/v1/ready", Access::kPublic, [this](const R&, const P&) {
      const json body = health_body();
      return Reply{body["status"] == "ok" ? 200 : 503, body.dump()};
    });
    add("GET", "/metrics", Access::kAdmin, [this](const R&, const P&) { return Reply{200, manager.metrics_text()}; });
    add("GET", "/v1/jobs", Access::kAdmin, [this](const R&, const P&) { return manager.list_jobs(); });
    add("POST", "/v1/jobs", Access::kAdmin,
        [this](const R& r, const P&) { return manager.create_job(parse_json_body(r.body)); });
    add("GET", "/v1/jobs/{job_id}", Access::kJob, [this](const R& r, const P& p) {
      return manager.get_job(p[0], query_index(r, "pipelines_from", false).value_or(0),
                             query_index(r, "pipelines_count", false).value_or(JobManager::kMaxPipelinesPerPage));
    }, {"pipelines_from", "pipelines_count"});
    add("DELETE", "/v1/jobs/{job_id}", Access::kAdmin, [this](const R&, const P& p) { return manager.delete_job(p[0]); });
    add("POST", "/v1/jobs/{job_id}/ranks", Access::kJob,
        [this](const R& r, const P& p) { return manager.register_rank(p[0], parse_json_body(r.body)); });
    add("GET", "/v1/jobs/{job_id}/ranks/{rank}/plan", Access::kJob, [this](const R& r, const P& p) {
      return manager.get_plan(p[0], parse_index(p[1], "rank"), query_index(r, "since_version", false));
    }, {"since_version"});
    add("POST", "/v1/jobs/{job_id}/ranks/{rank}/measurements", Access::kJob, [this](const R& r, const P& p) {
      return manager.post_measurements(p[0], parse_index(p[1], "rank"), parse_json_body(r.body));
    });
    add("POST", "/v1/jobs/{job_id}/stragglers", Access::kJob,
        [this](const R& r, const P& p) { return manager.post_straggler(p[0], parse_json_body(r.body)); });
    add("DELETE", "/v1/jobs/{job_id}/stragglers/{pipeline}", Access::kJob,
        [this](const R&, const P& p) { return manager.clear_straggler(p[0], parse_index(p[1], "pipeline")); });
    // Zeus PFO compatibility.
    add("POST", "/register_job", Access::kZeusCreate, [this](const R& r, const P&) {
      return manager.zeus_register_job(parse_json_body(r.body), /*anonymous=*/!r.admin);
    });
    add("POST", "/register_rank/{job_id}", Access::kZeusJob,
        [this](const R& r, const P& p) { return manager.zeus_register_rank(p[0], parse_json_body(r.body)); });
    add("GET", "/schedule/{job_id}", Access::kZeusJob, [this](const R& r, const P& p) {
      return manager.zeus_schedule(p[0], *query_index(r, "rank", true));
    }, {"rank"});
    add("POST", "/result/{job_id}", Access::kZeusJob,
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
    // A job's token on another job id: named both ways, so a typo in the URL's job id reads as
    // one (it was blamed on the token). Whether that job exists is not said.
    if (owner)
      return error_response(
          403, "forbidden",
          r.access == Access::kJob || r.access == Access::kZeusJob
              ? fmt::format("the path names job {} but this bearer token is job {}'s: a job's token reaches only "
                            "that job (check the job id in the URL)",
                            quote_input(req.params.empty() ? std::string() : req.params[0], 80), *owner)
              : "this route needs the admin token (--token-file, PERSEUS_TOKEN or <db>.token); a job's token "
                "reaches only its own job's routes");
    auto e = error_response(401, "unauthorized", "missing or invalid bearer token (Authorization: Bearer <token>)");
    e.headers.emplace_back("WWW-Authenticate", "Bearer");
    return e;
  }

  /// Runs once the headers are in, before the body is read: rate limit, route, auth, type.
  std::optional<HttpResponse> precheck(HttpRequest& req) {
    // Probes are not rate limited: they share an address with trainers behind a NAT or proxy,
    // and a probe refused with 429 took a healthy server out of service (session 22's trial).
    const bool probe = (req.path == "/v1/health" || req.path == "/v1/ready") && (req.method == "GET" || req.method == "HEAD");
    if (!probe && !limiter.allow(req.remote_addr, monotonic_s())) {
      manager.counters().rate_limited++;
      auto r = error_response(429, "rate_limited",
                              fmt::format("more than {} requests/s from this address (--rate-limit-rps); retry later",
                                          opt.rate_limit_rps));
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    // While the stored jobs load, nothing but the health check may touch the job manager (even
    // authorization reads its job tokens): a retry in a second will find them.
    if (!ready.load(std::memory_order_acquire) && !probe) {
      auto r = error_response(503, "starting",
                              "the server is loading its stored jobs after a start; retry (Retry-After, s)");
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    // A query parameter given twice would be read as its first value, silently: refuse it.
    if (req.query.size() > kMaxQueryParameters)
      return error_response(400, "invalid_query", too_many_query_parameters_message());
    for (std::size_t i = 0; i < req.query.size(); ++i)
      for (std::size_t j = i + 1; j < req.query.size(); ++j)
        if (req.query[i].first == req.query[j].first)
          return error_response(400, "invalid_query",
                                fmt::format("query parameter {} is given more than once; give it once",
                                            quote_input(req.query[i].first, 32)));
    // The path arrives as sent (http_daemon.cpp): split at '/', then each segment decoded, so an
    // encoded '/' or NUL can never change the route. Syntax only, before auth: it reveals nothing.
    const std::vector<std::string> raw = split_path(req.path);
    std::vector<std::string> segs;
    segs.reserve(raw.size());
    try {
      for (std::size_t i = 0; i < raw.size(); ++i) segs.push_back(percent_decode(raw[i], i + 1));
    } catch (const ApiError& e) {
      return error_response(e.status(), e.code(), e.what());
    }
    std::string allowed;
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const Route& r = routes[i];
      if (!match(r, segs, req.params)) continue;
      try {  // a bad parameter is named by the route's pattern, whatever the method
        for (std::size_t k = 0; k < segs.size(); ++k)
          if (is_param(r.segments[k])) check_param(r.segments[k], raw[k], segs[k]);
      } catch (const ApiError& e) {
        return error_response(e.status(), e.code(), e.what());
      }
      // HEAD is GET without the body (RFC 9110 §9.3.2; the daemon sends no body for it).
      if (r.method != req.method && !(req.method == "HEAD" && r.method == "GET")) {
        allowed += (allowed.empty() ? "" : ", ") + r.method + (r.method == "GET" ? ", HEAD" : "");
        continue;
      }
      if (auto refused = authorize(r, req)) return refused;
      // A typo never falls back to a default: "?sinceversion=4" was answered with the whole plan.
      for (const auto& [key, value] : req.query) {
        if (std::find(r.query.begin(), r.query.end(), key) != r.query.end()) continue;
        std::string takes;
        for (const auto& k : r.query) takes += (takes.empty() ? "" : ", ") + k;
        return error_response(400, "invalid_query",
                              fmt::format("unknown query parameter {}; this route takes {}", quote_input(key, 32),
                                          takes.empty() ? "no query parameters" : takes));
      }
      if (r.method == "POST" && !json_content_type(req.content_type))
        return error_response(415, "unsupported_media_type",
                              fmt::format("Content-Type {} is not JSON; send the body as JSON with "
                                          "\"Content-Type: application/json\" (or no Content-Type)",
                                          quote_input(req.content_type, 64)));
      if (const std::string charset = content_type_charset(req.content_type);
          r.method == "POST" && !utf8_charset(charset))
        return error_response(415, "unsupported_media_type",
                              fmt::format("charset {} is not supported: a JSON body is UTF-8 (RFC 8259); send "
                                          "\"Content-Type: application/json\" or \"...; charset=utf-8\"",
                                          quote_input(charset, 32)));
      req.route = static_cast<int>(i);
      return std::nullopt;
    }
    // No route: a segment holding '/' (encoded), '\', NUL or a control byte is named as such.
    for (std::size_t k = 0; k < segs.size(); ++k) {
      if (const std::size_t at = forbidden_byte(segs[k]); at != std::string::npos)
        return error_response(
            400, "invalid_path",
            fmt::format("{} holds {} at byte {}; no path segment may hold '/', "
                        "'\\', NUL or a control character",
                        segment_intro(std::to_string(k + 1), raw[k], segs[k]),
                        describe_byte(static_cast<unsigned char>(segs[k][at])), at));
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
    // A large body (a report with 100,000s of instruction entries) is parsed into millions of
    // small JSON nodes; once freed, glibc keeps those pages in its per-thread arenas, so without
    // a trim the server's memory grows with every such report (measured: 17 MiB -> 775 MiB after
    // 20 reports of 13.6 MB). Returning them costs one heap walk per large request.
    struct TrimAfterLargeBody {
      std::size_t bytes;
      ~TrimAfterLargeBody() {
#ifdef __GLIBC__
        if (bytes >= kTrimAfterBodyBytes) ::malloc_trim(0);
#endif
      }
    } trim{req.body.size()};
    // At most kLargeBodiesAtOnce large bodies are parsed and handled at once (the others wait
    // here): each can take ~100 MB as JSON nodes, however many threads serve requests.
    struct LargeBodyTurn {
      std::counting_semaphore<kLargeBodiesAtOnce>* turns;
      ~LargeBodyTurn() {
        if (turns) turns->release();
      }
    } turn{req.body.size() >= kTrimAfterBodyBytes ? &large_bodies : nullptr};
    if (turn.turns) turn.turns->acquire();
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
      auto r = error_response(e.status(), e.code(), e.what());
      if (e.retry_after_s() > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s()));
      return r;
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
  if (!runtime::is_sendable_token(options.token))
    throw InputError("the bearer token must be printable ASCII without spaces (the Perseus clients send no other)");
  ManagerOptions zeus;
  zeus.zeus_plan_texts = options.zeus_plan_texts;
  zeus.zeus_profile_csv = options.zeus_profile_csv;
  zeus.zeus_schedule = options.zeus_schedule;
  zeus.zeus_p2p_power_w = options.zeus_p2p_power_w;
  check_zeus_configuration(zeus, options.zeus_plan_names);
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
  try {
    if (i.opt.before_load) i.opt.before_load();
    i.load_jobs();
    bool stopping = false;
    {
      std::lock_guard lock(i.stop_mu);
      stopping = i.stopping;
    }
    // Stopped while loading (SIGTERM): never announced as ready (no port file).
    if (i.opt.on_ready && !stopping) i.opt.on_ready(i.loaded, i.load_s);
  } catch (...) {
    i.shutdown();
    i.http->stop();
    throw;
  }
  std::unique_lock lock(i.stop_mu);
  i.stop_cv.wait(lock, [&] { return i.stopping; });
  lock.unlock();
  i.http->stop();
  return true;
}

void Server::stop() { impl_->shutdown(); }

bool Server::wait_until_ready() {
  auto& i = *impl_;
  std::unique_lock lock(i.stop_mu);
  i.stop_cv.wait(lock, [&] { return i.ready.load() || i.stopping; });
  return i.ready.load();
}

std::size_t Server::jobs_loaded() const { return impl_->loaded; }

JobManager& Server::manager() { return impl_->manager; }

}  // namespace perseus::server
