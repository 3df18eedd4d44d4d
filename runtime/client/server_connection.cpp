// HTTP client for the `perseus serve` v1 API (cpp-httplib, one connection per object).
#include "perseus/runtime/server_connection.hpp"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/input_limits.hpp"
#include "perseus/json_input.hpp"
#include "signal_guard.hpp"

namespace perseus::runtime {

using nlohmann::json;

namespace {

// Unknown energies are left out (the server then treats them as unknown, never as 0 J).
json measurement_json(const IterationMeasurement& m) {
  json instrs = json::array();
  for (const auto& i : m.instructions) {
    json o = {{"instruction", i.instruction}, {"microbatch", i.microbatch}, {"freq_mhz", i.freq_mhz}, {"time_s", i.time_s}};
    if (i.planned_freq_mhz > 0) o["planned_freq_mhz"] = i.planned_freq_mhz;
    if (i.energy_j) o["energy_j"] = *i.energy_j;
    instrs.push_back(std::move(o));
  }
  json out = {{"iteration", m.iteration},
              {"time_s", m.time_s},
              {"plan_version", m.plan_version},
              {"instructions", std::move(instrs)}};
  if (m.energy_j) out["energy_j"] = *m.energy_j;
  return out;
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

/// The host of "http://HOST[:PORT][/]" (HOST without the brackets of an IPv6 address).
std::string host_of(const std::string& url) {
  std::string rest = url.substr(url.find("//") == std::string::npos ? 0 : url.find("//") + 2);
  if (rest.starts_with("[")) return rest.substr(1, rest.find(']') - 1);
  return rest.substr(0, rest.find_first_of(":/"));
}

/// Why no connection was made, in words: cpp-httplib says only "Connection" whether the host
/// name does not resolve or nothing listens (session 18's trial), so the name is looked up.
std::string connection_failure(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc != 0) return fmt::format("the host name '{}' does not resolve: {}", host, ::gai_strerror(rc));
  return fmt::format("could not connect to '{}': nothing listens there, or it is unreachable", host);
}

CallResult classify(const httplib::Result& res, const std::string& what, const std::string& host) {
  CallResult r;
  if (!res) {
    r.status = CallStatus::kRetryable;
    r.message = fmt::format("{}: no response ({})", what,
                            res.error() == httplib::Error::Connection ? connection_failure(host)
                                                                      : httplib::to_string(res.error()));
    return r;
  }
  r.http_status = res->status;
  const int s = res->status;
  if (s >= 200 && s < 300) return r;
  if (s == 304) {
    r.status = CallStatus::kNotModified;
    return r;
  }
  r.status = (s == 408 || s == 429 || s >= 500) ? CallStatus::kRetryable : CallStatus::kPermanent;
  r.message = fmt::format("{}: HTTP {}: {}", what, s, server_message(res->body));
  if (s == 401) r.message += " (check the token; a deleted job's tokens are refused too)";
  return r;
}

}  // namespace

std::string to_json(const IterationMeasurement& m) { return measurement_json(m).dump(); }

namespace {

/// Integer field `key` of plan computation #index, in [lo, hi]; never narrowed.
int plan_int(const json& item, const char* key, std::int64_t lo, std::int64_t hi, std::size_t index) {
  const auto it = item.find(key);
  if (it == item.end() || it->is_null())
    throw std::runtime_error(fmt::format("computation #{} has no \"{}\"", index, key));
  const bool integer = it->is_number_integer() &&
                       !(it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX));
  if (!integer || it->get<std::int64_t>() < lo || it->get<std::int64_t>() > hi) {
    throw std::runtime_error(fmt::format("computation #{}: \"{}\" must be an integer in [{}, {}], got {}", index, key,
                                         lo, hi, it->dump().substr(0, 40)));
  }
  return static_cast<int>(it->get<std::int64_t>());
}

/// Records computation #k's kind for its (stage, microbatch) in `seen` (a bit per kind:
/// forward 1, backward 2, backward_input 4, backward_weight 8) and returns its bit; throws
/// when that computation was listed already.
unsigned note_once(std::map<std::pair<int, int>, unsigned>& seen, const PlanInstruction& i, std::size_t k) {
  const unsigned bit = i.instruction == "forward"          ? 1u
                       : i.instruction == "backward"       ? 2u
                       : i.instruction == "backward_input" ? 4u
                                                           : 8u;
  unsigned& kinds = seen[{i.stage, i.microbatch}];
  if (kinds & bit)
    throw std::runtime_error(fmt::format("computation #{}: {} of stage {} microbatch {} appears twice", k,
                                         i.instruction, i.stage, i.microbatch));
  // What must run earlier on this rank: the forward before any backward, backward_input before
  // backward_weight. Such a plan fits no schedule; every step then failed with a PlanMismatch
  // that blamed the training loop (session 23's trial).
  const unsigned before = bit == 1u ? 0u : bit == 8u ? 4u : 1u;
  if ((kinds & before) != before)
    throw std::runtime_error(fmt::format("computation #{}: {} of stage {} microbatch {} comes before its {}", k,
                                         i.instruction, i.stage, i.microbatch,
                                         before == 4u ? "backward_input" : "forward"));
  kinds |= bit;
  return bit;
}

void check_plan_shape(const RankPlan& plan, const JobShape& shape, int pp_rank) {
  const int mb = shape.microbatches, chunks = std::max(shape.chunks, 1);
  // Per (stage, microbatch): which kinds appear (bit per kind).
  std::map<std::pair<int, int>, unsigned> seen;
  std::size_t weights = 0;
  for (std::size_t k = 0; k < plan.instructions.size(); ++k) {
    const PlanInstruction& i = plan.instructions[k];
    if (i.microbatch >= mb)
      throw std::runtime_error(fmt::format("computation #{}: microbatch {} is beyond the job's {} microbatches", k,
                                           i.microbatch, mb));
    if (shape.pp > 0 && pp_rank >= 0 && (i.stage >= shape.pp * chunks || i.stage % shape.pp != pp_rank))
      throw std::runtime_error(fmt::format("computation #{}: stage {} is not a stage of pp_rank {} (pp {}, {} chunk{})",
                                           k, i.stage, pp_rank, shape.pp, chunks, chunks == 1 ? "" : "s"));
    if (note_once(seen, i, k) == 8u) ++weights;
  }
  const std::size_t expected = static_cast<std::size_t>(mb) * static_cast<std::size_t>(chunks);
  std::size_t full_pairs = 0;
  for (const auto& [key, kinds] : seen) {
    const bool full = (kinds & 2u) != 0, split = (kinds & 4u) != 0;
    full_pairs += full;
    if (!(kinds & 1u) || full == split || (full && (kinds & 8u)) || (!split && (kinds & 8u)))
      throw std::runtime_error(fmt::format("stage {} microbatch {} needs one forward and one backward (or "
                                           "backward_input, with backward_weight in all or none)",
                                           key.first, key.second));
  }
  if (full_pairs != 0 && full_pairs != seen.size())
    throw std::runtime_error("plan mixes full backward and split backward (backward_input) computations");
  if (seen.size() != expected || (weights != 0 && weights != expected))
    throw std::runtime_error(fmt::format("plan covers {} (stage, microbatch) pairs; this rank runs {} ({} microbatches "
                                         "x {} chunk{})",
                                         seen.size(), expected, mb, chunks, chunks == 1 ? "" : "s"));
}

}  // namespace

RankPlan parse_plan_json(const std::string& body, const JobShape& shape, int pp_rank) {
  // nlohmann's parser ends the text at a NUL byte: whatever follows one would go unread.
  if (const auto nul = body.find('\0'); nul != std::string::npos)
    throw std::runtime_error(fmt::format("the plan answer is not JSON text: a NUL byte at offset {}", nul));
  // One strict reader for what a server sends (perseus/json_input.hpp): a key given twice
  // ({"freq_mhz":1410,"freq_mhz":210} applied 210 MHz: the last one won) or nesting past 64
  // levels is refused, and errors say where instead of the JSON library's own text.
  const json j = parse_json_text(body, "the plan answer");  // throws JsonTextError (a std::exception)
  if (!j.is_object())  // was the JSON library's "cannot use at() with null" (session 32's trial)
    throw std::runtime_error(fmt::format("the plan answer must be a JSON object, got {}", j.type_name()));
  RankPlan plan;
  // A plan's number: absent or null = unknown (0); else finite and >= 0 (a server's -1 s was
  // returned by Client.plan(), session 32's trial).
  const auto plan_number = [&](const char* key, const char* unit) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return 0.0;
    const double x = it->is_number() ? it->get<double>() : -1.0;
    if (!std::isfinite(x) || x < 0)
      throw std::runtime_error(fmt::format("\"{}\" must be a finite number >= 0 ({}; 0 = unknown), got {}", key, unit,
                                           it->dump().substr(0, 40)));
    return x;
  };
  // The plan names the pp_rank it is for: another rank's plan is refused, even when its stage
  // numbers would pass (session 32's trial).
  if (const auto it = j.find("pp_rank"); pp_rank >= 0 && it != j.end() && !it->is_null() &&
                                         !(it->is_number_integer() && it->get<std::int64_t>() == pp_rank))
    throw std::runtime_error(fmt::format("the plan is for pp_rank {}, this rank's is {}", it->dump().substr(0, 40), pp_rank));
  try {
    const json& version = j.at("version");
    if (!version.is_number_integer() || (version.is_number_unsigned() && version.get<std::uint64_t>() > kMaxPlanVersion) ||
        version.get<std::int64_t>() < 0 || version.get<std::int64_t>() > static_cast<std::int64_t>(kMaxPlanVersion))
      throw std::runtime_error(fmt::format("\"version\" must be an integer in [0, 2^53], got {}", version.dump().substr(0, 40)));
    plan.version = version.get<std::int64_t>();
    if (j.contains("job_status") && j["job_status"].is_string()) plan.job_status = j["job_status"].get<std::string>();
    plan.iteration_time_s = plan_number("iteration_time_s", "s");
    plan.energy_j = plan_number("energy_j", "J");
    const json& list = j.at("instructions");
    if (!list.is_array()) throw std::runtime_error("\"instructions\" must be an array");
    const std::size_t max_instructions = shape.max_instructions();
    if (max_instructions > 0 && list.size() > max_instructions) {
      throw std::runtime_error(fmt::format("plan holds {} computations but the job's shape allows at most {} per rank",
                                           list.size(), max_instructions));
    }
    for (std::size_t k = 0; k < list.size(); ++k) {
      const json& i = list[k];
      if (!i.is_object()) throw std::runtime_error(fmt::format("computation #{} is not an object", k));
      PlanInstruction pi;
      const auto name = i.find("instruction");
      if (name == i.end() || !name->is_string())
        throw std::runtime_error(fmt::format("computation #{} has no \"instruction\" string", k));
      pi.instruction = name->get<std::string>();
      if (pi.instruction != "forward" && pi.instruction != "backward" && pi.instruction != "backward_input" &&
          pi.instruction != "backward_weight")
        throw std::runtime_error(fmt::format("computation #{}: instruction '{}' is not forward, backward, "
                                             "backward_input or backward_weight",
                                             k, pi.instruction.substr(0, 40)));
      pi.stage = plan_int(i, "stage", 0, 1 << 20, k);
      pi.microbatch = plan_int(i, "microbatch", 0, 1 << 20, k);
      pi.freq_mhz = plan_int(i, "freq_mhz", 1, perseus::limits::kMaxFrequencyMhz, k);
      plan.instructions.push_back(std::move(pi));
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("malformed plan response: {}", e.what()));
  }
  if (shape.microbatches > 0) {
    check_plan_shape(plan, shape, pp_rank);
  } else {  // shape unknown: each computation once all the same
    std::map<std::pair<int, int>, unsigned> seen;
    for (std::size_t k = 0; k < plan.instructions.size(); ++k) note_once(seen, plan.instructions[k], k);
  }
  return plan;
}

// Cuts a request off at its deadline: a thread that calls http.stop() (which shuts the
// socket down, so a blocked connect/read returns) when an armed deadline passes. httplib's
// own timeouts are per system call, so a server dripping one byte per read would never trip
// them.
class RequestDeadline {
 public:
  explicit RequestDeadline(httplib::Client& http)
      : http_(http), thread_(detail::start_signal_free_thread([this] { run(); })) {}
  ~RequestDeadline() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(double seconds) {
    std::lock_guard lock(mu_);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    armed_ = true;
    expired_ = false;
    cv_.notify_all();
  }
  /// Disarms; true when the deadline had passed (the request was cut off).
  bool disarm() {
    std::lock_guard lock(mu_);
    armed_ = false;
    return expired_;
  }
  /// True once the armed deadline passed or cancel_now() ran (the request was stopped).
  bool expired() {
    std::lock_guard lock(mu_);
    return expired_;
  }
  void cancel_now() {
    std::lock_guard lock(mu_);
    if (armed_) {
      expired_ = true;
      http_.stop();
    }
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    while (!quit_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !expired_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        expired_ = true;
        http_.stop();
      }
    }
  }
  httplib::Client& http_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false, expired_ = false, quit_ = false;
  std::thread thread_;
};

struct ServerConnection::Impl {
  httplib::Client http;
  std::string url;  // as given, for messages
  std::string host;  // its host, looked up when no connection could be made
  std::string job_id;
  RankInfo ranks;
  double timeout_s = 5.0;
  JobShape shape;
  RequestDeadline deadline{http};
  Impl(const std::string& url, const std::string& token, std::string job, RankInfo r, double timeout)
      : http(url), url(url), host(host_of(url)), job_id(std::move(job)), ranks(r) {
    set_timeout(timeout);
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);  // small JSON requests: no Nagle + delayed-ACK stall (~40 ms)
    if (!token.empty()) http.set_bearer_token_auth(token);
  }
  void set_timeout(double t) {
    timeout_s = t;
    const auto sec = static_cast<time_t>(t);
    const auto usec = static_cast<time_t>((t - static_cast<double>(sec)) * 1e6);
    http.set_connection_timeout(sec, usec);
    http.set_read_timeout(sec, usec);
    http.set_write_timeout(sec, usec);
  }
  std::string rank_path() const { return fmt::format("/v1/jobs/{}/ranks/{}", job_id, ranks.rank); }
  std::size_t max_plan_bytes() const {
    const std::size_t n = shape.max_instructions();
    return n == 0 ? kDefaultMaxPlanBytes : kPlanBytesSlack + kPlanBytesPerInstruction * n;
  }
  // Runs one request under the whole-request deadline; a cut-off request says so.
  // `resend_after_read_error`: the request may be sent twice (a GET).
  template <typename Fn>
  httplib::Result timed(Fn&& fn, bool* cut_off, bool resend_after_read_error = false) {
    deadline.arm(timeout_s);
    httplib::Result res = fn();
    // The server had closed the kept-alive connection (after an error answer, or its keep-alive
    // timeout between two requests): the request could not be written (Write: nothing was sent)
    // or, for a GET, its answer not read. It is sent once more, on a new connection, under the
    // same deadline, instead of counting a server failure and backing off
    // (Guards.AReportRefusedAloneCountsAsRejected saw both under load). A POST whose answer was
    // lost is not resent here: the reporter's retry counts its attempts.
    // Never after a cut-off or a cancel: that error is the deadline's own doing.
    if (!res && !deadline.expired() &&
        (res.error() == httplib::Error::Write || (resend_after_read_error && res.error() == httplib::Error::Read)))
      res = fn();
    *cut_off = deadline.disarm();
    return res;
  }
};

namespace {
CallResult cut_off_result(const std::string& what, double timeout_s) {
  CallResult r;
  r.status = CallStatus::kRetryable;
  r.message = fmt::format("{}: no complete answer within the {} s request deadline", what, timeout_s);
  return r;
}
}  // namespace

ServerConnection::ServerConnection(const std::string& server_url, std::string token, std::string job_id,
                                   RankInfo ranks, double timeout_s)
    : impl_(std::make_unique<Impl>(server_url, token, std::move(job_id), ranks, timeout_s)) {}

ServerConnection::~ServerConnection() = default;

void ServerConnection::set_timeout(double timeout_s) { impl_->set_timeout(timeout_s); }
void ServerConnection::cancel() { impl_->deadline.cancel_now(); }
std::size_t ServerConnection::max_plan_bytes() const { return impl_->max_plan_bytes(); }
JobShape ServerConnection::shape() const { return impl_->shape; }

CallResult ServerConnection::register_rank(const std::vector<int>& supported_freqs_mhz) {
  const json body = {{"rank", impl_->ranks.rank},
                     {"dp_rank", impl_->ranks.dp_rank},
                     {"pp_rank", impl_->ranks.pp_rank},
                     {"tp_rank", impl_->ranks.tp_rank},
                     {"supported_freqs_mhz", supported_freqs_mhz}};
  const std::string path = fmt::format("/v1/jobs/{}/ranks", impl_->job_id);
  bool cut = false;
  auto res = impl_->timed([&] { return impl_->http.Post(path, body.dump(), "application/json"); }, &cut);
  if (cut) return cut_off_result("POST " + path, impl_->timeout_s);
  CallResult r = classify(res, "POST " + path, impl_->host);
  if (r.http_status == 409) {
    r.message += fmt::format(" (this process registers as rank {} with dp_rank {}, pp_rank {}, tp_rank {}; is another "
                             "process using the same rank, or are the ranks computed differently?)",
                             impl_->ranks.rank, impl_->ranks.dp_rank, impl_->ranks.pp_rank, impl_->ranks.tp_rank);
  }
  if (r.status == CallStatus::kOk) {
    // Every Perseus server answers a registration with a JSON object; anything else is not one
    // (a wrong URL reaching another HTTP service must not count as registered).
    json j;
    try {
      j = json::parse(res->body);
    } catch (const std::exception&) {
    }
    if (!j.is_object()) {
      r.status = CallStatus::kPermanent;
      r.message = fmt::format("POST {}: HTTP {} but the answer is not a JSON object; is {} a perseus server?", path,
                              res->status, impl_->url);
      return r;
    }
    // Within the server's own job limits (docs/http-api.md), else unknown: the shape bounds the
    // plan bytes the client accepts, so an answer cannot lift that bound.
    auto count = [&](const char* key, std::int64_t max) {
      const auto it = j.find(key);
      return it != j.end() && it->is_number_integer() &&
                     !(it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) &&
                     it->get<std::int64_t>() > 0 && it->get<std::int64_t>() <= max
                 ? static_cast<int>(it->get<std::int64_t>())
                 : 0;
    };
    impl_->shape.microbatches = count("microbatches", kMaxJobMicrobatches);  // 0 (unknown) from an older server
    impl_->shape.chunks = impl_->shape.microbatches > 0 ? count("chunks", kMaxJobChunks) : 0;
    impl_->shape.pp = count("pp", kMaxJobPp);
  }
  return r;
}

void ServerConnection::set_shape(const JobShape& shape) { impl_->shape = shape; }

CallResult ServerConnection::fetch_plan(std::int64_t since_version, RankPlan* plan) {
  std::string path = impl_->rank_path() + "/plan";
  if (since_version >= 0) path += fmt::format("?since_version={}", since_version);
  // The body is received through a size-bounded receiver: an oversized plan is cut off
  // while it streams in, never held whole.
  const std::size_t limit = impl_->max_plan_bytes();
  std::string body;
  bool too_big = false;
  bool cut = false;
  auto res = impl_->timed(
      [&] {
        body.clear();  // a resent request starts over
        return impl_->http.Get(
            path, [&](const httplib::Response&) { return true; },
            [&](const char* data, std::size_t n) {
              if (body.size() + n > limit) {
                too_big = true;
                return false;
              }
              body.append(data, n);
              return true;
            });
      },
      &cut, /*resend_after_read_error=*/true);
  if (too_big) {
    CallResult r;
    r.status = CallStatus::kRetryable;
    r.plan_refused = true;
    r.message = impl_->shape.microbatches > 0
                    ? fmt::format("GET {}: plan response larger than {} bytes (the job's shape: {} microbatches x {} "
                                  "chunks); refused",
                                  path, limit, impl_->shape.microbatches, std::max(impl_->shape.chunks, 1))
                    : fmt::format("GET {}: plan response larger than {} bytes (the job's shape is unknown); refused",
                                  path, limit);
    return r;
  }
  if (cut) return cut_off_result("GET " + path, impl_->timeout_s);
  if (res) res->body = body;
  CallResult r = classify(res, "GET " + path, impl_->host);
  if (r.http_status == 409) r.status = CallStatus::kRetryable;  // "no plan yet" (e.g. profiling starts)
  if (r.status == CallStatus::kOk) {
    try {
      *plan = parse_plan_json(body, impl_->shape, impl_->ranks.pp_rank);
    } catch (const std::exception& e) {
      r.status = CallStatus::kRetryable;  // a half-written body or a server bug; try again later
      r.plan_refused = true;
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
  bool cut = false;
  auto res = impl_->timed([&] { return impl_->http.Post(path, body.dump(), "application/json"); }, &cut);
  if (cut) return cut_off_result("POST " + path, impl_->timeout_s);
  CallResult r = classify(res, "POST " + path, impl_->host);
  if (r.status == CallStatus::kOk) {
    try {  // per-item acceptance: {"rejected":[{"iteration":I,"error":"..."}]}
      const json j = json::parse(res->body);
      if (auto it = j.find("rejected"); it != j.end() && it->is_array()) {
        for (const auto& x : *it) {  // iteration -1: none given (the server's null for a non-object item)
          if (!x.is_object()) continue;
          const auto i = x.find("iteration"), e = x.find("error");
          r.rejected.emplace_back(i != x.end() && i->is_number_integer() ? i->get<std::int64_t>() : -1,
                                  e != x.end() && e->is_string() ? e->get<std::string>() : std::string());
        }
      }
      if (batch.size() == 1 && j.is_object() && j.value("duplicate", false)) {  // a single report's answer
        r.duplicates.push_back(batch.front().iteration);
      }
      if (auto it = j.find("results"); it != j.end() && it->is_array()) {
        for (const auto& x : *it)
          if (x.is_object() && x.value("duplicate", false)) r.duplicates.push_back(x.value("iteration", std::int64_t{-1}));
      }
    } catch (const std::exception&) {
    }
  }
  return r;
}

}  // namespace perseus::runtime
