// Client: plan cache and order check on the training thread; plan poller and reporter threads.
#include "perseus/runtime/client.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/profile.hpp"
#include "perseus/runtime/gpu_lock_record.hpp"
#include "perseus/runtime/job_limits.hpp"
#include "perseus/runtime/watchdog.hpp"
#include "signal_guard.hpp"

namespace perseus::runtime {

namespace {
using Clock = std::chrono::steady_clock;
/// Distinct refusal reasons the client prints before it stops printing them.
constexpr std::size_t kMaxReasonsPrinted = 32;
std::chrono::duration<double> secs(double s) { return std::chrono::duration<double>(s); }

/// Why `url` is not `http://HOST[:PORT][/]` (HOST a name, an IPv4 address or a bracketed IPv6
/// address; PORT 1..65535), or "" when it is. A typo here would otherwise be "server not
/// reachable" for the whole run while training goes on without a plan.
std::string server_url_problem(const std::string& url) {
  if (url.rfind("http://", 0) != 0) return "must start with http://";
  std::string rest = url.substr(7);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.substr(0, rest.find_first_of("/?#")).find('@') != std::string::npos) {
    return "has credentials (USER@ or USER:PASSWORD@), which are not sent; give the job token as the token";
  }
  std::string host = rest, port;
  if (rest.starts_with("[")) {  // [IPv6]:port
    const auto close = rest.find(']');
    if (close == std::string::npos) return "has '[' without ']' around its IPv6 address";
    host = rest.substr(1, close - 1);
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      return "has an invalid IPv6 address";
    }
    const std::string after = rest.substr(close + 1);
    if (!after.empty() && (after[0] != ':' || after.size() == 1)) return "has text after the IPv6 address's ']'";
    port = after.empty() ? "" : after.substr(1);
  } else {
    if (rest.find_first_of("/?#") != std::string::npos) return "has a path, query or fragment (give only http://HOST:PORT)";
    if (const auto colon = rest.find(':'); colon != std::string::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (port.empty()) return "has ':' without a port";
    }
    if (host.empty()) return "has no host";
    if (host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != std::string::npos) {
      return "has characters not allowed in a host name";
    }
  }
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return "has a port that is not a number";
    if (const int p = std::stoi(port); p < 1 || p > 65535) return "has a port outside 1..65535";
  }
  return "";
}

void check_options(const ClientOptions& o) {
  auto bad = [](const std::string& m) { throw ClientError(ClientErrc::kInvalidArgument, m); };
  if (const std::string why = server_url_problem(o.server_url); !why.empty()) {
    bad(fmt::format("server URL {} {}; expected http://HOST[:PORT], e.g. http://10.0.0.1:7787",
                    perseus::quote_input(o.server_url), why));
  }
  if (!runtime::is_sendable_token(o.token)) {
    bad("token has a character not allowed in an HTTP header (a control character, space or non-ASCII byte); "
        "tokens are printable ASCII, e.g. the pjt-... job token");
  }
  // A URL path segment: no '/', '?', '#', '%', space, control character (CR/LF would reach the
  // request line) or non-ASCII byte.
  if (o.job_id.empty() || o.job_id.find_first_of("/?#% ") != std::string::npos ||
      std::any_of(o.job_id.begin(), o.job_id.end(), [](char c) { return c < ' ' || c == '\x7f' || (c & 0x80) != 0; })) {
    bad(fmt::format("job id {} is empty or has characters not allowed in a URL path (printable ASCII other than / ? "
                    "# % and space)",
                    perseus::quote_input(o.job_id)));
  }
  const RankInfo& r = o.ranks;
  if (r.rank < 0 || r.dp_rank < 0 || r.pp_rank < 0 || r.tp_rank < 0) {
    bad(fmt::format("ranks must be >= 0 (rank {}, dp {}, pp {}, tp {})", r.rank, r.dp_rank, r.pp_rank, r.tp_rank));
  }
  // Each becomes a deadline (now + d): infinity or 1e300 would overflow the clock (undefined
  // behaviour; on x86 the deadline lands in the past and create() stops waiting at once).
  // (lowest, lowest allowed): 0 = "> 0", a number = ">= it".
  for (const auto& [name, d, lo, lo_ok] :
       {std::tuple{"request_timeout_s", o.request_timeout_s, 0.0, false},
        std::tuple{"startup_timeout_s", o.startup_timeout_s, 0.0, true},
        std::tuple{"plan_poll_interval_s", o.plan_poll_interval_s, kMinClientPeriodS, true},
        std::tuple{"retry_initial_s", o.retry_initial_s, kMinClientPeriodS, true},
        std::tuple{"retry_max_s", o.retry_max_s, 0.0, false}}) {
    if (!(lo_ok ? d >= lo : d > lo) || !(d <= kMaxClientDurationS)) {
      bad(fmt::format("{} must be a number of seconds in {}{:g}, {:g}], got {}", name, lo_ok ? "[" : "(", lo,
                      kMaxClientDurationS, d));
    }
  }
  if (!(o.retry_max_s >= o.retry_initial_s)) {
    bad(fmt::format("retry_max_s ({} s) must be >= retry_initial_s ({} s)", o.retry_max_s, o.retry_initial_s));
  }
  if (o.max_buffered_reports == 0 || o.max_buffered_reports > kMaxBufferedReports) {
    bad(fmt::format("max_buffered_reports must be in [1, {}], got {}", kMaxBufferedReports, o.max_buffered_reports));
  }
  if (o.max_batch == 0) bad("max_batch must be > 0");
  // The server takes iteration numbers in [0, 2^53] (exact in a JSON double); beyond, every
  // report would be refused, and the counter would overflow past INT64_MAX.
  if (o.first_iteration < 0 || o.first_iteration > (std::int64_t{1} << 53)) {
    bad(fmt::format("first_iteration must be in [0, 2^53], got {}", o.first_iteration));
  }
  if (!(o.clock_snap_tolerance_mhz >= 0)) bad("clock_snap_tolerance_mhz must be >= 0");
  // Written at close(), after the whole run: a typo in its folder must not lose the log then.
  if (!o.freq_log_path.empty()) {
    try {
      perseus::check_output_file_writable(o.freq_log_path, /*force=*/true, "freq_log_path");
    } catch (const perseus::InputError& e) {
      bad(fmt::format("freq_log_path {}", e.message()));
    }
  }
  if (!(o.telemetry.max_power_w > 0) || !(o.telemetry.counter_update_s >= 0)) {
    bad("telemetry.max_power_w must be > 0 and telemetry.counter_update_s >= 0");
  }
}
}  // namespace

struct Client::Impl {
  ClientOptions opt;
  std::shared_ptr<GpuControl> gpu;
  std::unique_ptr<FrequencyController> controller;
  Watchdog watchdog;
  std::vector<int> supported_mhz;
  bool closed = false;
  bool has_counter = true;         // false: sample power at the boundaries instead
  TelemetryWarnings warnings;      // training thread only
  bool warned_instruction_sum = false;  // training thread only
  GpuLockRecord lock_record;

  // Training-thread state (hooks only).
  std::shared_ptr<const RankPlan> plan;
  bool in_step = false;
  bool in_instr = false;
  bool desynced = false;
  std::size_t pos = 0;
  std::int64_t iteration = 0;
  double step_t0 = 0;
  CounterReading step_c0;
  std::optional<PowerSample> step_p0;
  std::string cur_name;
  double instr_t0 = 0;
  CounterReading instr_c0;
  std::optional<PowerSample> instr_p0;
  int cur_freq = 0;
  int cur_planned_freq = 0;
  int cur_microbatch = 0;
  IterationMeasurement current;

  // Shared with the background threads (guarded by mu).
  mutable std::mutex mu;
  std::condition_variable wake;      // poller/reporter wake-up
  std::condition_variable drained;   // outbox empty
  std::shared_ptr<const RankPlan> latest;
  std::atomic<bool> plan_pending{false};
  std::atomic<std::int64_t> version_in_use{-1};
  bool registered = false;
  JobShape shape;  // the job's shape from the registration (under mu once the threads run)
  /// shape.microbatches for the training thread's report (0: unknown), without taking mu.
  std::atomic<int> job_microbatches{0};
  std::string registration_error;  // a permanent refusal of the registration (e.g. 409)
  std::int64_t refused_version = -1;  // newest plan version refused by check_plan
  bool warned_snap = false;
  bool warned_foreign_duplicate = false;
  /// Reasons of reports refused for good or rejected, each printed once (a deleted job refuses
  /// every later report the same way: one line per iteration helped nobody). Under mu.
  std::set<std::string> refusals_printed;
  /// True the first time `reason` is seen (then print it). At most kMaxReasonsPrinted reasons
  /// are kept: a server answering with endless distinct reasons gets one last line, then
  /// silence (its reports still count in the stats). Under mu.
  bool first_refusal(const std::string& reason) {
    if (refusals_printed.size() > kMaxReasonsPrinted || refusals_printed.count(reason)) return false;
    if (refusals_printed.size() == kMaxReasonsPrinted) {
      refusals_printed.insert(reason);
      fmt::print(stderr, "perseus client: rank {}: the server gave {} different refusal reasons; no more are printed "
                 "(see stats())\n", opt.ranks.rank, kMaxReasonsPrinted);
      return false;
    }
    return refusals_printed.insert(reason).second;
  }
  bool stopping = false;
  ServerConnection* poll_conn = nullptr;    // for close() to cancel requests in flight
  ServerConnection* report_conn = nullptr;
  bool poll_now = false;
  std::deque<IterationMeasurement> outbox;
  std::size_t in_flight = 0;
  ClientStats st;
  std::thread poller;
  std::thread reporter;

  // Readings at one boundary: the counter, and power where there is no counter.
  void read_boundary(CounterReading* c, std::optional<PowerSample>* p) {
    *c = read_counter(*gpu);
    *p = has_counter ? std::nullopt : read_power(*gpu);
  }

  // Energy between two boundaries (telemetry.hpp): measured or unknown, warned once per kind.
  // `seen` (optional): the anomalies of the interval.
  std::optional<double> interval(const CounterReading& c0, const std::optional<PowerSample>& p0,
                                 const CounterReading& c1, const std::optional<PowerSample>& p1,
                                 std::vector<Anomaly>* seen = nullptr) {
    std::vector<PowerSample> samples;
    if (p0) samples.push_back(*p0);
    if (p1) samples.push_back(*p1);
    const IntervalEnergy r = interval_energy(c0, c1, samples, opt.telemetry);
    if (seen) *seen = r.anomalies;
    if (!warnings.first_time(r).empty()) {
      fmt::print(stderr, "perseus client: rank {}: WARNING: {} (reported as {}; warned once per kind)\n", opt.ranks.rank,
                 r.detail, r.energy_j ? to_string(r.source) : "unknown energy, time kept");
    }
    if (!r.energy_j) {
      std::lock_guard lock(mu);
      ++st.energy_unknown;
    }
    return r.energy_j;
  }

  // The computations of the step being ended are sub-intervals of it, read from the same
  // counter. Each passes its own bound, which allows one counter update at max_power_w (up to
  // 300 J for any interval): so when the step's counter rose impossibly fast, or their sum is
  // more than a GPU can draw in the step, their energies are unknown too (session 32's trial: a
  // 5000 W GPU reported 100 J per 20 ms computation while its step was flagged). Training thread.
  void distrust_instruction_energies(const std::vector<Anomaly>& step_anomalies) {
    double sum_j = 0;
    std::int64_t known = 0;
    for (const auto& m : current.instructions)
      if (m.energy_j) sum_j += *m.energy_j, ++known;
    if (known == 0) return;
    const bool jump = std::find(step_anomalies.begin(), step_anomalies.end(), Anomaly::kCounterJump) != step_anomalies.end();
    if (!jump && plausible_energy(sum_j, current.time_s, opt.telemetry)) return;
    for (auto& m : current.instructions) m.energy_j.reset();
    {
      std::lock_guard lock(mu);
      st.energy_unknown += known;
    }
    if (!warned_instruction_sum) {
      warned_instruction_sum = true;
      fmt::print(stderr,
                 "perseus client: rank {}: WARNING: the energies of iteration {}'s computations sum to {:.3f} J in a "
                 "{:.3f} s step ({}): reported as unknown (warned once)\n",
                 opt.ranks.rank, iteration, sum_j, current.time_s,
                 jump ? "its energy counter rose faster than a GPU can draw"
                      : fmt::format("above the {:.0f} W bound", opt.telemetry.max_power_w));
    }
  }

  // Checks every clock of a fetched plan against the GPU's list: snaps within tolerance,
  // else refuses the whole plan (returns false and says why, once per version). Caller holds mu.
  bool check_plan(RankPlan& p) {
    std::vector<std::string> snaps;
    for (auto& i : p.instructions) {
      const ClockCheck c = check_clock(i.freq_mhz, supported_mhz, opt.clock_snap_tolerance_mhz);
      if (!c.ok) {
        ++st.plans_refused;
        st.last_plan_error = fmt::format("plan version {} refused: {} (stage {}, microbatch {}): {}; the previous "
                                         "plan stays in use",
                                         p.version, i.instruction, i.stage, i.microbatch, c.reason);
        if (refused_version != p.version) {
          fmt::print(stderr, "perseus client: rank {}: WARNING: {}\n", opt.ranks.rank, st.last_plan_error);
        }
        refused_version = std::max(refused_version, p.version);
        return false;
      }
      if (c.applied_mhz != i.freq_mhz) {
        if (snaps.size() < 4) snaps.push_back(fmt::format("{}->{}", i.freq_mhz, c.applied_mhz));
        i.planned_freq_mhz = i.freq_mhz;
        i.freq_mhz = c.applied_mhz;
        ++st.clocks_snapped;
      }
    }
    if (!snaps.empty() && !warned_snap) {
      warned_snap = true;
      fmt::print(stderr,
                 "perseus client: rank {}: WARNING: plan version {} has clocks this GPU does not support; snapped to "
                 "the nearest supported ones (tolerance {} MHz): {} MHz{} (measurements carry both; warned once)\n",
                 opt.ranks.rank, p.version, opt.clock_snap_tolerance_mhz, fmt::join(snaps, ", "),
                 snaps.size() >= 4 ? ", ..." : "");
    }
    return true;
  }

  void note_failure(const CallResult& r) {
    ++st.server_failures;
    st.last_server_error = r.message;
    if (r.plan_refused && st.last_plan_error != r.message) {  // counted and warned once per distinct refusal
      ++st.plans_refused;
      st.last_plan_error = r.message;
      fmt::print(stderr, "perseus client: rank {}: WARNING: plan refused, {}: {}\n", opt.ranks.rank,
                 plan || latest ? "the previous plan stays in use" : "no plan in use yet (clocks untouched)",
                 r.message);
    }
  }

  // Accepts a fetched plan if newer. Caller holds mu.
  void offer_plan(RankPlan p) {
    st.job_status = p.job_status;
    // The server answers a since_version it never issued with its plan in force: an older
    // version means it went back (restored from an older database). Follow it, once warned.
    if (latest && p.version < latest->version) {
      fmt::print(stderr, "perseus client: rank {}: WARNING: the server's plan version went back from {} to {} (was it "
                 "restored from an older database?); following the server\n", opt.ranks.rank, latest->version, p.version);
      if (!check_plan(p)) return;
      refused_version = -1;
      latest = std::make_shared<const RankPlan>(std::move(p));
      plan_pending.store(true);
      return;
    }
    if (latest && p.version <= latest->version) return;
    if (p.version <= refused_version || !check_plan(p)) return;
    latest = std::make_shared<const RankPlan>(std::move(p));
    plan_pending.store(true);
  }

  void poll_loop() {
    ServerConnection conn(opt.server_url, opt.token, opt.job_id, opt.ranks, opt.request_timeout_s);
    double backoff = opt.retry_initial_s;
    std::unique_lock lock(mu);
    conn.set_shape(shape);  // learned at start-up's registration: every plan update is checked against it
    poll_conn = &conn;
    while (!stopping && registration_error.empty()) {
      const bool need_register = !registered;
      const std::int64_t since = std::max(latest ? latest->version : -1, refused_version);
      lock.unlock();
      CallResult r;
      RankPlan p;
      bool reg_ok = !need_register;
      if (need_register) {
        r = conn.register_rank(supported_mhz);
        reg_ok = r.ok();
      }
      if (reg_ok) r = conn.fetch_plan(since, &p);
      lock.lock();
      if (need_register && reg_ok) {
        shape = conn.shape();
        job_microbatches.store(shape.microbatches);
        registered = true;
        st.registered = true;
        wake.notify_all();  // the reporter may start
      }
      if (need_register && r.status == CallStatus::kPermanent) {
        note_failure(r);
        registration_error = r.message;
        fmt::print(stderr, "perseus client: rank {}: registration refused: {}\n", opt.ranks.rank, r.message);
        break;
      }
      if (r.status == CallStatus::kOk) offer_plan(std::move(p));
      double delay = opt.plan_poll_interval_s;
      if (r.ok()) {
        backoff = opt.retry_initial_s;
      } else {
        note_failure(r);
        delay = backoff;
        backoff = std::min(backoff * 2, std::max(opt.retry_max_s, opt.plan_poll_interval_s));
      }
      const bool failing = !r.ok();
      wake.wait_for(lock, secs(delay), [&] { return stopping || (poll_now && !failing); });
      poll_now = false;
    }
    poll_conn = nullptr;
  }

  // Posts a batch; when the server refuses a batch of several for good (an older server that
  // validates batches whole), posts each report alone so that the valid ones are kept.
  // Returns the result for the batch as a whole (kOk when every report was settled).
  // A report the server refuses as invalid (422) is rejected, counted as a batch item the
  // server names in "rejected" would be (reports_rejected); other refusals drop it.
  CallResult post(ServerConnection& conn, const std::vector<IterationMeasurement>& batch, std::int64_t* dropped) {
    CallResult r = conn.post_measurements(batch);
    if (r.status == CallStatus::kPermanent && batch.size() == 1 && r.http_status == 422) {
      CallResult rejected;
      rejected.rejected.emplace_back(batch.front().iteration, r.message);
      return rejected;
    }
    if (r.status != CallStatus::kPermanent || batch.size() == 1) return r;
    CallResult settled;
    for (const auto& m : batch) {
      CallResult one = conn.post_measurements({m});
      if (one.status == CallStatus::kRetryable) return one;  // try the whole batch again later
      if (one.status == CallStatus::kPermanent && one.http_status == 422) {
        settled.rejected.emplace_back(m.iteration, one.message);
      } else if (one.status == CallStatus::kPermanent) {
        ++*dropped;
        std::lock_guard lock(mu);
        note_failure(one);
        if (first_refusal(one.message))
          fmt::print(stderr,
                     "perseus client: rank {}: server refused the report of iteration {}: {} (printed once; later "
                     "refusals alike count in reports_dropped)\n",
                     opt.ranks.rank, m.iteration, one.message);
      } else {
        settled.rejected.insert(settled.rejected.end(), one.rejected.begin(), one.rejected.end());
      }
    }
    return settled;
  }

  void report_loop() {
    ServerConnection conn(opt.server_url, opt.token, opt.job_id, opt.ranks, opt.request_timeout_s);
    double backoff = opt.retry_initial_s;
    std::unique_lock lock(mu);
    report_conn = &conn;
    for (;;) {
      wake.wait(lock, [&] { return stopping || (registered && !outbox.empty()); });
      if (stopping) break;  // close() already waited for the outbox to drain
      const std::size_t n = std::min(opt.max_batch, outbox.size());
      std::vector<IterationMeasurement> batch(std::make_move_iterator(outbox.begin()),
                                              std::make_move_iterator(outbox.begin() + static_cast<long>(n)));
      outbox.erase(outbox.begin(), outbox.begin() + static_cast<long>(n));
      in_flight = n;
      lock.unlock();
      for (auto& m : batch) ++m.attempts;
      std::int64_t dropped = 0;
      const CallResult r = post(conn, batch, &dropped);
      lock.lock();
      in_flight = 0;
      if (r.ok()) {
        // Only rejections of iterations of this batch count, each once: a server naming others
        // (or none) cannot push the counters below zero.
        // Printed once per reason (the first iteration named): a server rejecting every report,
        // or naming thousands of items this batch does not hold, cannot flood the trainer's log.
        std::set<std::int64_t> rejected_iterations;
        for (const auto& [iteration, why] : r.rejected) {
          const bool ours = std::any_of(batch.begin(), batch.end(), [&](const auto& m) { return m.iteration == iteration; });
          if (ours && !rejected_iterations.insert(iteration).second) continue;
          if (!first_refusal((ours ? "rejected: " : "foreign: ") + why)) continue;
          if (ours)
            fmt::print(stderr,
                       "perseus client: rank {}: server rejected the report of iteration {}: {} (printed once; later "
                       "rejections alike count in reports_rejected)\n",
                       opt.ranks.rank, iteration, why);
          else
            fmt::print(stderr,
                       "perseus client: rank {}: server rejected an item this batch does not hold ({}): {} (printed "
                       "once; not counted)\n",
                       opt.ranks.rank, iteration >= 0 ? fmt::format("iteration {}", iteration) : "no iteration", why);
        }
        const auto rejected = std::min(static_cast<std::int64_t>(rejected_iterations.size()),
                                       static_cast<std::int64_t>(n) - dropped);
        st.reports_sent += static_cast<std::int64_t>(n) - dropped - rejected;
        st.reports_dropped += dropped;
        st.reports_rejected += rejected;
        // The server already had an iteration this client posts for the first time: another
        // live process reports as this rank (its reports and ours overwrite nothing: the first
        // stays, the other is lost), or this trainer resumed from iterations it had reported.
        for (const std::int64_t iteration : r.duplicates) {
          const auto m = std::find_if(batch.begin(), batch.end(), [&](const auto& x) { return x.iteration == iteration; });
          if (m == batch.end() || m->attempts != 1) continue;  // a retry whose first answer was lost: fine
          ++st.reports_foreign_duplicates;
          if (!warned_foreign_duplicate) {
            warned_foreign_duplicate = true;
            fmt::print(stderr,
                       "perseus client: rank {}: WARNING: the server already had iteration {} of this rank, posted "
                       "here for the first time: is another process running as rank {} (its reports and this "
                       "one's cannot both be kept), or did training resume from an iteration already reported "
                       "(set first_iteration past it)? Counted in the stats; warned once\n",
                       opt.ranks.rank, iteration, opt.ranks.rank);
          }
        }
        backoff = opt.retry_initial_s;
      } else if (r.status == CallStatus::kPermanent) {
        note_failure(r);
        st.reports_dropped += static_cast<std::int64_t>(n);
        if (first_refusal(r.message))
          fmt::print(stderr,
                     "perseus client: rank {}: server refused {} measurement report(s): {} (printed once; later "
                     "refusals alike count in reports_dropped)\n",
                     opt.ranks.rank, n, r.message);
      } else {
        note_failure(r);
        for (auto it = batch.rbegin(); it != batch.rend(); ++it) outbox.push_front(std::move(*it));
        trim_outbox();
        wake.wait_for(lock, secs(backoff), [&] { return stopping; });
        backoff = std::min(backoff * 2, opt.retry_max_s);
      }
      if (outbox.empty()) drained.notify_all();
    }
    report_conn = nullptr;
    drained.notify_all();
  }

  // Drops the oldest reports beyond the buffer bound. Caller holds mu.
  void trim_outbox() {
    while (outbox.size() + in_flight > opt.max_buffered_reports && !outbox.empty()) {
      outbox.pop_front();
      ++st.reports_dropped;
    }
  }

  // Runs one start-up request on a helper thread while this (the caller's) thread polls
  // opt.startup_cancelled every 50 ms; when it asks to stop, the request is cut off
  // (ServerConnection::cancel) and ClientError kCancelled is thrown. Polled only between
  // requests, a server that accepted the connection but never answered held Ctrl-C up for
  // request_timeout_s (session 23's trial).
  template <typename Request>
  CallResult cancellable(ServerConnection& conn, Request request) {
    if (!opt.startup_cancelled) return request();
    std::promise<CallResult> done;
    std::future<CallResult> result = done.get_future();
    std::thread worker = detail::start_signal_free_thread([&] {
      try {
        done.set_value(request());
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
    bool cancelled = false;
    try {
      while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
        // Again at each slice: a cancel before the request armed its deadline does nothing.
        if (cancelled || (cancelled = opt.startup_cancelled())) conn.cancel();
      }
    } catch (...) {  // the hook threw: stop the request, join, pass the exception on
      while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) conn.cancel();
      worker.join();
      throw;
    }
    worker.join();
    if (cancelled)
      throw ClientError(ClientErrc::kCancelled, fmt::format("rank {}: cancelled while waiting for the server", opt.ranks.rank));
    return result.get();
  }

  // Registers and fetches the first plan, waiting while the server is unreachable.
  void startup() {
    ServerConnection conn(opt.server_url, opt.token, opt.job_id, opt.ranks, opt.request_timeout_s);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(secs(opt.startup_timeout_s));
    double backoff = opt.retry_initial_s;
    auto check_cancelled = [&] {
      if (opt.startup_cancelled && opt.startup_cancelled())
        throw ClientError(ClientErrc::kCancelled,
                          fmt::format("rank {}: cancelled while waiting for the server", opt.ranks.rank));
    };
    for (;;) {
      check_cancelled();
      // Every request is cut off at the time left (but gets at least 10 ms).
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      conn.set_timeout(std::max(0.01, std::min(opt.request_timeout_s, left)));
      CallResult r = registered ? CallResult{} : cancellable(conn, [&] { return conn.register_rank(supported_mhz); });
      if (r.ok()) {
        shape = conn.shape();
        job_microbatches.store(shape.microbatches);
        registered = true;
        st.registered = true;
        RankPlan p;
        r = cancellable(conn, [&] { return conn.fetch_plan(-1, &p); });
        if (r.status == CallStatus::kOk) {
          offer_plan(std::move(p));
          return;
        }
        if (r.plan_refused) {  // the server answered with a plan this client will not use
          note_failure(r);     // warned; the poller keeps asking for a newer one
          return;
        }
      }
      note_failure(r);
      if (r.status == CallStatus::kPermanent) {
        throw ClientError(ClientErrc::kServer, fmt::format("rank {}: {}", opt.ranks.rank, r.message));
      }
      if (Clock::now() + secs(backoff) > deadline) {
        fmt::print(stderr,
                   "perseus client: rank {}: no plan from the server within the startup timeout ({}); training "
                   "continues without one "
                   "and the client keeps retrying in the background\n",
                   opt.ranks.rank, r.message.empty() ? std::string("an answer without a plan, e.g. 304") : r.message);
        return;
      }
      // The back-off in slices, so a cancellation (Ctrl-C) is seen within 50 ms.
      for (auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(secs(backoff));;) {
        const auto left = until - Clock::now();
        if (left <= Clock::duration::zero()) break;
        std::this_thread::sleep_for(std::min<Clock::duration>(left, std::chrono::milliseconds(50)));
        check_cancelled();
      }
      backoff = std::min(backoff * 2, opt.retry_max_s);
    }
  }

  void close() {
    if (closed) return;
    closed = true;
    {
      std::unique_lock lock(mu);
      drained.wait_for(lock, secs(opt.request_timeout_s), [&] { return outbox.empty() && in_flight == 0; });
      stopping = true;
      if (poll_conn != nullptr) poll_conn->cancel();
      if (report_conn != nullptr) report_conn->cancel();
    }
    wake.notify_all();
    if (poller.joinable()) poller.join();
    if (reporter.joinable()) reporter.join();
    bool reset = true;  // the clocks are known to be unlocked (or were never touched)
    if (controller) {
      detail::unguard_controller(controller.get());
      reset = controller->stop(true);
      if (!opt.freq_log_path.empty()) {
        try {
          controller->write_log(opt.freq_log_path);
        } catch (const std::exception& e) {
          fmt::print(stderr, "perseus client: {}\n", e.what());
        }
      }
    }
    if (reset) {
      watchdog.disarm();
      lock_record.release();
    } else if (gpu->reset_on_disconnect() && watchdog.pid() <= 0 && !controller->ever_locked()) {
      // gpud, and every clock change of this client failed (session 32's trial: a second trainer
      // on a GPU whose helper lock another client holds: "busy"): it never locked the clocks, so
      // the reset had nothing of its own to undo; the helper's message would blame it.
      fmt::print(stderr, "perseus client: rank {}: the final clock reset failed ({}), but this client never locked "
                         "the GPU's clocks (each of its clock changes failed): nothing of its own to reset\n",
                 opt.ranks.rank, controller->last_error());
      lock_record.release();
    } else if (gpu->reset_on_disconnect() && watchdog.pid() <= 0) {
      // gpud: the helper resets this GPU when this client's connection closes (below, at the
      // latest when the process exits); "may stay locked" would be wrong (session 31's trial).
      fmt::print(stderr, "perseus client: rank {}: the final clock reset failed ({}); the perseus gpud helper resets "
                         "the clocks when this client's connection to it closes\n", opt.ranks.rank, controller->last_error());
      lock_record.release();
    } else {
      // Never leave a GPU locked quietly: the watchdog (its own driver session) tries; if it
      // cannot either, the lock record keeps its text, so the next client on this GPU resets it.
      // Without a watchdog (watchdog = false) say so, not "the watchdog".
      const bool has_watchdog = watchdog.pid() > 0;
      fmt::print(stderr, "perseus client: rank {}: WARNING: the final clock reset failed ({}); {}\n", opt.ranks.rank,
                 controller->last_error(),
                 has_watchdog ? "handing it to the watchdog" : "there is no watchdog to hand it to (it is disabled)");
      if (watchdog.reset_now()) {
        lock_record.release();
      } else {
        fmt::print(stderr, "perseus client: rank {}: WARNING: the GPU's clocks could not be reset and may stay locked; "
                           "the next Perseus client on this GPU resets them{}\n", opt.ranks.rank,
                   lock_record.path().empty() ? " only if it has a lock record (none here)" :
                                                " (lock record " + lock_record.path() + " kept)");
        lock_record.abandon();
      }
    }
    std::lock_guard lock(mu);
    if (!outbox.empty()) {
      fmt::print(stderr, "perseus client: rank {}: {} measurement report(s) not delivered at exit\n", opt.ranks.rank,
                 outbox.size());
    }
  }

  [[noreturn]] void state_error(const std::string& m) { throw ClientError(ClientErrc::kState, m); }
  [[noreturn]] void mismatch(const std::string& m) {
    desynced = true;
    throw ClientError(ClientErrc::kPlanMismatch, fmt::format("rank {}: iteration {}: {}", opt.ranks.rank, iteration, m));
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() { close(); }

std::unique_ptr<Client> Client::create(ClientOptions options, std::shared_ptr<GpuControl> gpu) {
  check_options(options);
  if (options.server_url.ends_with('/')) options.server_url.pop_back();  // http://h:p/ is http://h:p
  if (!gpu) throw ClientError(ClientErrc::kInvalidArgument, "null GPU backend");
  auto impl = std::make_unique<Impl>();
  impl->opt = std::move(options);
  impl->gpu = std::move(gpu);
  impl->iteration = impl->opt.first_iteration;
  try {
    impl->supported_mhz = impl->gpu->supported_graphics_clocks_mhz();
  } catch (const std::exception& e) {
    throw ClientError(ClientErrc::kGpu, e.what());
  }
  if (impl->supported_mhz.empty()) {
    throw ClientError(ClientErrc::kGpu, fmt::format("{}: the driver lists no supported SM clocks", impl->gpu->identity()));
  }
  {
    const CounterReading c = read_counter(*impl->gpu);
    impl->has_counter = c.energy_j.has_value() || c.failed;
  }
  // Stale clock locks (a container teardown killed trainer and watchdog together) are reset
  // before this client touches the GPU; a live owner is refused.
  if (!impl->gpu->watchdog_args().empty()) {
    try {
      impl->lock_record = GpuLockRecord::claim(*impl->gpu, impl->opt.lock_dir);
    } catch (const GpuError& e) {
      throw ClientError(ClientErrc::kGpu, e.what());
    }
  }
  FrequencyController::Options copt;
  copt.coalesce = impl->opt.coalesce_clock_requests;
  copt.supported_mhz = impl->supported_mhz;
  impl->controller = std::make_unique<FrequencyController>(impl->gpu, copt);
  if (impl->opt.watchdog) {
    auto args = impl->gpu->watchdog_args();
    if (!args.empty() && !impl->lock_record.path().empty()) {
      args.push_back("--lock-record");
      args.push_back(impl->lock_record.path());
    }
    std::string error;
    if (!args.empty() && !impl->watchdog.start(impl->opt.watchdog_path, args, &error)) {
      fmt::print(stderr, "perseus client: WARNING: {}; clocks will stay locked if this process is killed\n", error);
    }
  }
  if (impl->opt.handle_signals) {
    // A reset done on SIGTERM/SIGINT is a cleanup: the watchdog stands down and the lock record
    // is emptied, as at close(). close() unguards first, so the two never run at once.
    detail::guard_controller(impl->controller.get(), [im = impl.get()] {
      im->watchdog.disarm();
      im->lock_record.release();
    });
  }
  std::unique_ptr<Client> client(new Client(std::move(impl)));
  Impl& im = *client->impl_;
  im.startup();  // throws ClientError on permanent errors; ~Client cleans up
  im.opt.startup_cancelled = nullptr;  // its caller's state may be gone once create() returns
  if (im.plan_pending.exchange(false)) {
    im.plan = im.latest;
    im.version_in_use.store(im.plan->version);
  }
  im.poller = detail::start_signal_free_thread([&im] { im.poll_loop(); });
  im.reporter = detail::start_signal_free_thread([&im] { im.report_loop(); });
  return client;
}

void Client::on_step_begin() {
  Impl& im = *impl_;
  if (im.in_step) im.state_error("on_step_begin: the previous step was not ended (call on_step_end)");
  {
    std::lock_guard lock(im.mu);
    if (!im.registration_error.empty()) {
      throw ClientError(ClientErrc::kServer, fmt::format("rank {}: the server refused this rank's registration: {}",
                                                         im.opt.ranks.rank, im.registration_error));
    }
  }
  if (im.plan_pending.exchange(false)) {
    std::lock_guard lock(im.mu);
    if (im.plan) ++im.st.plan_updates;
    im.plan = im.latest;
    im.version_in_use.store(im.plan->version);
  }
  im.in_step = true;
  im.desynced = false;
  im.pos = 0;
  im.current = IterationMeasurement{};
  im.current.iteration = im.iteration;
  im.current.plan_version = im.plan ? im.plan->version : 0;
  im.read_boundary(&im.step_c0, &im.step_p0);
  im.step_t0 = im.step_c0.t_s;
}

void Client::on_instruction_begin(std::string_view name) {
  Impl& im = *impl_;
  if (!im.in_step) {
    im.state_error(fmt::format("on_instruction_begin({}) outside a step: call on_step_begin first",
                               perseus::quote_input(name)));
  }
  if (im.in_instr) {
    im.state_error(fmt::format("on_instruction_begin({}) while {} is running: call on_instruction_end first",
                               perseus::quote_input(name), perseus::quote_input(im.cur_name)));
  }
  im.in_instr = true;
  im.cur_name = name;
  im.cur_freq = 0;
  im.cur_planned_freq = 0;
  im.cur_microbatch = static_cast<int>(std::count_if(im.current.instructions.begin(), im.current.instructions.end(),
                                                     [&](const auto& m) { return m.instruction == name; }));
  if (im.opt.per_instruction_energy) {
    im.read_boundary(&im.instr_c0, &im.instr_p0);
    im.instr_t0 = im.instr_c0.t_s;
  } else {
    im.instr_t0 = im.gpu->now_s();
  }
  if (!im.plan || im.plan->instructions.empty() || im.desynced) return;
  const auto& instrs = im.plan->instructions;
  if (im.pos >= instrs.size()) {
    im.mismatch(fmt::format("computation #{} {} is beyond the plan's {} computations (plan version {}); "
                            "the rest of this step runs without clock changes",
                            im.pos, perseus::quote_input(name), instrs.size(), im.plan->version));
  }
  const PlanInstruction& want = instrs[im.pos];
  if (want.instruction != name) {
    im.mismatch(fmt::format("computation #{} is {} but the plan expects '{}' (stage {}, microbatch {}, plan "
                            "version {}); does the training schedule match the job's schedule? The rest of this "
                            "step runs without clock changes",
                            im.pos, perseus::quote_input(name), want.instruction, want.stage, want.microbatch,
                            im.plan->version));
  }
  im.cur_freq = want.freq_mhz;
  im.cur_planned_freq = want.planned_freq_mhz;
  im.cur_microbatch = want.microbatch;
  im.controller->request(want.freq_mhz, im.iteration, static_cast<int>(im.pos));
}

void Client::on_instruction_end(std::string_view name) {
  Impl& im = *impl_;
  if (!im.in_instr) {
    im.state_error(fmt::format("on_instruction_end({}) without on_instruction_begin", perseus::quote_input(name)));
  }
  if (name != im.cur_name) {
    im.state_error(fmt::format("on_instruction_end({}) but the running instruction is {}", perseus::quote_input(name),
                               perseus::quote_input(im.cur_name)));
  }
  InstructionMeasurement m;
  m.instruction = im.cur_name;
  m.microbatch = im.cur_microbatch;
  if (im.opt.per_instruction_energy) {
    CounterReading c1;
    std::optional<PowerSample> p1;
    im.read_boundary(&c1, &p1);
    m.time_s = c1.t_s - im.instr_t0;
    m.energy_j = im.interval(im.instr_c0, im.instr_p0, c1, p1);
  } else {
    m.time_s = im.gpu->now_s() - im.instr_t0;
  }
  const int applied = im.controller->applied_mhz();
  m.freq_mhz = applied > 0 ? applied : (im.cur_freq > 0 ? im.cur_freq : im.supported_mhz.front());
  if (im.cur_planned_freq > 0 && m.freq_mhz == im.cur_freq) m.planned_freq_mhz = im.cur_planned_freq;
  // A clock was requested but none is in force (the change failed: no permission, gpud away):
  // the GPU ran at a clock nobody knows, so the computation is left out rather than labelled
  // with the planned clock (an online profile built from such samples was false, session 18's
  // trial). The step's time and energy still go.
  const bool clock_unknown = applied <= 0 && im.cur_freq > 0 && im.controller->clock_failed();
  // A computation the job does not have (after a plan mismatch with strict off: a name that is
  // no instruction kind, or a microbatch beyond the job's) would make the server refuse the whole
  // report: it is left out too.
  const int job_mb = im.job_microbatches.load(std::memory_order_relaxed);
  if (!clock_unknown && parse_instruction_kind(m.instruction) && (job_mb <= 0 || m.microbatch < job_mb))
    im.current.instructions.push_back(std::move(m));
  im.in_instr = false;
  ++im.pos;
}

void Client::on_step_end() {
  Impl& im = *impl_;
  if (!im.in_step) im.state_error("on_step_end without on_step_begin");
  if (im.in_instr) im.state_error(fmt::format("on_step_end while '{}' is running: call on_instruction_end first", im.cur_name));
  im.in_step = false;
  CounterReading c1;
  std::optional<PowerSample> p1;
  im.read_boundary(&c1, &p1);
  im.current.time_s = c1.t_s - im.step_t0;
  std::vector<Anomaly> step_anomalies;
  im.current.energy_j = im.interval(im.step_c0, im.step_p0, c1, p1, &step_anomalies);
  im.distrust_instruction_energies(step_anomalies);
  const std::int64_t done_iteration = im.iteration++;
  {
    std::lock_guard lock(im.mu);
    im.outbox.push_back(std::move(im.current));
    im.trim_outbox();
    ++im.st.iterations;
    im.poll_now = true;
  }
  im.wake.notify_all();
  if (im.plan && !im.plan->instructions.empty() && !im.desynced && im.pos < im.plan->instructions.size()) {
    im.desynced = true;
    throw ClientError(ClientErrc::kPlanMismatch,
                      fmt::format("rank {}: iteration {} ended after {} computations but the plan (version {}) has {}",
                                  im.opt.ranks.rank, done_iteration, im.pos, im.plan->version,
                                  im.plan->instructions.size()));
  }
}

bool Client::flush_reports(double timeout_s) {
  // A NaN or huge duration made wait_for's conversion to the clock's integer ticks undefined.
  if (!(timeout_s >= 0) || !(timeout_s <= kMaxClientDurationS)) {
    throw ClientError(ClientErrc::kInvalidArgument,
                      fmt::format("flush_reports: timeout_s must be in [0, {}] s, got {}", kMaxClientDurationS, timeout_s));
  }
  Impl& im = *impl_;
  std::unique_lock lock(im.mu);
  im.wake.notify_all();
  return im.drained.wait_for(lock, secs(timeout_s), [&] { return im.outbox.empty() && im.in_flight == 0; });
}

void Client::close() {
  if (impl_) impl_->close();
}

ClientStats Client::stats() const {
  const Impl& im = *impl_;
  std::lock_guard lock(im.mu);
  ClientStats s = im.st;
  s.plan_version = im.version_in_use.load();
  s.latest_plan_version = im.latest ? im.latest->version : -1;
  s.reports_pending = static_cast<std::int64_t>(im.outbox.size() + im.in_flight);
  s.gpu_failures = im.controller ? im.controller->failures() : 0;
  return s;
}

RankPlan Client::plan() const {
  std::lock_guard lock(impl_->mu);  // on_step_begin() swaps it under mu: any thread may ask
  if (impl_->plan) return *impl_->plan;
  RankPlan none;
  none.version = -1;
  return none;
}

FrequencyController& Client::controller() { return *impl_->controller; }
GpuControl& Client::gpu() { return *impl_->gpu; }
const ClientOptions& Client::options() const { return impl_->opt; }

}  // namespace perseus::runtime
