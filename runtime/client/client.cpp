// Client: plan cache and order check on the training thread; plan poller and reporter threads.
#include "perseus/runtime/client.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/core.h>

#include "perseus/runtime/watchdog.hpp"
#include "signal_guard.hpp"

namespace perseus::runtime {

namespace {
using Clock = std::chrono::steady_clock;
std::chrono::duration<double> secs(double s) { return std::chrono::duration<double>(s); }

void check_options(const ClientOptions& o) {
  auto bad = [](const std::string& m) { throw ClientError(ClientErrc::kInvalidArgument, m); };
  if (o.server_url.rfind("http://", 0) != 0) bad(fmt::format("server URL must start with http://, got '{}'", o.server_url));
  if (o.job_id.empty() || o.job_id.find_first_of("/?#% ") != std::string::npos) {
    bad(fmt::format("job id '{}' is empty or has characters not allowed in a URL path", o.job_id));
  }
  const RankInfo& r = o.ranks;
  if (r.rank < 0 || r.dp_rank < 0 || r.pp_rank < 0 || r.tp_rank < 0) {
    bad(fmt::format("ranks must be >= 0 (rank {}, dp {}, pp {}, tp {})", r.rank, r.dp_rank, r.pp_rank, r.tp_rank));
  }
  if (!(o.request_timeout_s > 0) || !(o.plan_poll_interval_s > 0) || !(o.retry_initial_s > 0) ||
      !(o.retry_max_s >= o.retry_initial_s) || !(o.startup_timeout_s >= 0)) {
    bad("timeouts and intervals must be > 0 (retry_max_s >= retry_initial_s, startup_timeout_s >= 0)");
  }
  if (o.max_buffered_reports == 0 || o.max_batch == 0) bad("max_buffered_reports and max_batch must be > 0");
}
}  // namespace

struct Client::Impl {
  ClientOptions opt;
  std::shared_ptr<GpuControl> gpu;
  std::unique_ptr<FrequencyController> controller;
  Watchdog watchdog;
  std::vector<int> supported_mhz;
  bool closed = false;

  // Training-thread state (hooks only).
  std::shared_ptr<const RankPlan> plan;
  bool in_step = false;
  bool in_instr = false;
  bool desynced = false;
  std::size_t pos = 0;
  std::int64_t iteration = 0;
  double step_t0 = 0;
  std::optional<double> step_e0;
  std::string cur_name;
  double instr_t0 = 0;
  std::optional<double> instr_e0;
  int cur_freq = 0;
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
  bool stopping = false;
  bool poll_now = false;
  std::deque<IterationMeasurement> outbox;
  std::size_t in_flight = 0;
  ClientStats st;
  std::thread poller;
  std::thread reporter;

  std::optional<double> read_energy() {
    try {
      return gpu->total_energy_j();
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  void note_failure(const CallResult& r) {
    ++st.server_failures;
    st.last_server_error = r.message;
  }

  // Accepts a fetched plan if newer. Caller holds mu.
  void offer_plan(RankPlan p) {
    st.job_status = p.job_status;
    if (latest && p.version <= latest->version) return;
    latest = std::make_shared<const RankPlan>(std::move(p));
    plan_pending.store(true);
  }

  void poll_loop() {
    ServerConnection conn(opt.server_url, opt.token, opt.job_id, opt.ranks, opt.request_timeout_s);
    double backoff = opt.retry_initial_s;
    std::unique_lock lock(mu);
    while (!stopping) {
      const bool need_register = !registered;
      const std::int64_t since = latest ? latest->version : -1;
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
        registered = true;
        st.registered = true;
        wake.notify_all();  // the reporter may start
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
  }

  void report_loop() {
    ServerConnection conn(opt.server_url, opt.token, opt.job_id, opt.ranks, opt.request_timeout_s);
    double backoff = opt.retry_initial_s;
    std::unique_lock lock(mu);
    for (;;) {
      wake.wait(lock, [&] { return stopping || (registered && !outbox.empty()); });
      if (stopping) break;  // close() already waited for the outbox to drain
      const std::size_t n = std::min(opt.max_batch, outbox.size());
      std::vector<IterationMeasurement> batch(std::make_move_iterator(outbox.begin()),
                                              std::make_move_iterator(outbox.begin() + static_cast<long>(n)));
      outbox.erase(outbox.begin(), outbox.begin() + static_cast<long>(n));
      in_flight = n;
      lock.unlock();
      const CallResult r = conn.post_measurements(batch);
      lock.lock();
      in_flight = 0;
      if (r.ok()) {
        st.reports_sent += static_cast<std::int64_t>(n);
        backoff = opt.retry_initial_s;
      } else if (r.status == CallStatus::kPermanent) {
        note_failure(r);
        st.reports_dropped += static_cast<std::int64_t>(n);
        fmt::print(stderr, "perseus client: server refused {} measurement report(s): {}\n", n, r.message);
      } else {
        note_failure(r);
        for (auto it = batch.rbegin(); it != batch.rend(); ++it) outbox.push_front(std::move(*it));
        trim_outbox();
        wake.wait_for(lock, secs(backoff), [&] { return stopping; });
        backoff = std::min(backoff * 2, opt.retry_max_s);
      }
      if (outbox.empty()) drained.notify_all();
    }
    drained.notify_all();
  }

  // Drops the oldest reports beyond the buffer bound. Caller holds mu.
  void trim_outbox() {
    while (outbox.size() + in_flight > opt.max_buffered_reports && !outbox.empty()) {
      outbox.pop_front();
      ++st.reports_dropped;
    }
  }

  // Registers and fetches the first plan, waiting while the server is unreachable.
  void startup() {
    ServerConnection conn(opt.server_url, opt.token, opt.job_id, opt.ranks, opt.request_timeout_s);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(secs(opt.startup_timeout_s));
    double backoff = opt.retry_initial_s;
    for (;;) {
      CallResult r = registered ? CallResult{} : conn.register_rank(supported_mhz);
      if (r.ok()) {
        registered = true;
        st.registered = true;
        RankPlan p;
        r = conn.fetch_plan(-1, &p);
        if (r.status == CallStatus::kOk) {
          offer_plan(std::move(p));
          return;
        }
      }
      note_failure(r);
      if (r.status == CallStatus::kPermanent) throw ClientError(ClientErrc::kServer, r.message);
      if (Clock::now() + secs(backoff) > deadline) {
        fmt::print(stderr,
                   "perseus client: rank {}: server not reachable ({}); training continues without a plan "
                   "and the client keeps retrying in the background\n",
                   opt.ranks.rank, r.message);
        return;
      }
      std::this_thread::sleep_for(secs(backoff));
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
    }
    wake.notify_all();
    if (poller.joinable()) poller.join();
    if (reporter.joinable()) reporter.join();
    if (controller) {
      detail::unguard_controller(controller.get());
      controller->stop(true);
      if (!opt.freq_log_path.empty()) {
        try {
          controller->write_log(opt.freq_log_path);
        } catch (const std::exception& e) {
          fmt::print(stderr, "perseus client: {}\n", e.what());
        }
      }
    }
    watchdog.disarm();
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
  FrequencyController::Options copt;
  copt.coalesce = impl->opt.coalesce_clock_requests;
  impl->controller = std::make_unique<FrequencyController>(impl->gpu, copt);
  if (impl->opt.watchdog) {
    const auto args = impl->gpu->watchdog_args();
    std::string error;
    if (!args.empty() && !impl->watchdog.start(impl->opt.watchdog_path, args, &error)) {
      fmt::print(stderr, "perseus client: WARNING: {}; clocks will stay locked if this process is killed\n", error);
    }
  }
  if (impl->opt.handle_signals) detail::guard_controller(impl->controller.get());
  std::unique_ptr<Client> client(new Client(std::move(impl)));
  Impl& im = *client->impl_;
  im.startup();  // throws ClientError on permanent errors; ~Client cleans up
  if (im.plan_pending.exchange(false)) {
    im.plan = im.latest;
    im.version_in_use.store(im.plan->version);
  }
  im.poller = std::thread([&im] { im.poll_loop(); });
  im.reporter = std::thread([&im] { im.report_loop(); });
  return client;
}

void Client::on_step_begin() {
  Impl& im = *impl_;
  if (im.in_step) im.state_error("on_step_begin: the previous step was not ended (call on_step_end)");
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
  im.step_e0 = im.read_energy();
  im.step_t0 = im.gpu->now_s();
}

void Client::on_instruction_begin(std::string_view name) {
  Impl& im = *impl_;
  if (!im.in_step) im.state_error(fmt::format("on_instruction_begin('{}') outside a step: call on_step_begin first", name));
  if (im.in_instr) {
    im.state_error(fmt::format("on_instruction_begin('{}') while '{}' is running: call on_instruction_end first", name,
                               im.cur_name));
  }
  im.in_instr = true;
  im.cur_name = name;
  im.cur_freq = 0;
  im.cur_microbatch = static_cast<int>(std::count_if(im.current.instructions.begin(), im.current.instructions.end(),
                                                     [&](const auto& m) { return m.instruction == name; }));
  if (im.opt.per_instruction_energy) im.instr_e0 = im.read_energy();
  im.instr_t0 = im.gpu->now_s();
  if (!im.plan || im.plan->instructions.empty() || im.desynced) return;
  const auto& instrs = im.plan->instructions;
  if (im.pos >= instrs.size()) {
    im.mismatch(fmt::format("computation #{} '{}' is beyond the plan's {} computations (plan version {}); "
                            "the rest of this step runs without clock changes",
                            im.pos, name, instrs.size(), im.plan->version));
  }
  const PlanInstruction& want = instrs[im.pos];
  if (want.instruction != name) {
    im.mismatch(fmt::format("computation #{} is '{}' but the plan expects '{}' (stage {}, microbatch {}, plan "
                            "version {}); does the training schedule match the job's schedule? The rest of this "
                            "step runs without clock changes",
                            im.pos, name, want.instruction, want.stage, want.microbatch, im.plan->version));
  }
  im.cur_freq = want.freq_mhz;
  im.cur_microbatch = want.microbatch;
  im.controller->request(want.freq_mhz, im.iteration, static_cast<int>(im.pos));
}

void Client::on_instruction_end(std::string_view name) {
  Impl& im = *impl_;
  if (!im.in_instr) im.state_error(fmt::format("on_instruction_end('{}') without on_instruction_begin", name));
  if (name != im.cur_name) {
    im.state_error(fmt::format("on_instruction_end('{}') but the running instruction is '{}'", name, im.cur_name));
  }
  const double t1 = im.gpu->now_s();
  InstructionMeasurement m;
  m.instruction = im.cur_name;
  m.microbatch = im.cur_microbatch;
  m.time_s = t1 - im.instr_t0;
  if (im.opt.per_instruction_energy && im.instr_e0) {
    if (const auto e1 = im.read_energy()) m.energy_j = *e1 - *im.instr_e0;
  }
  const int applied = im.controller->applied_mhz();
  m.freq_mhz = applied > 0 ? applied : (im.cur_freq > 0 ? im.cur_freq : im.supported_mhz.front());
  im.current.instructions.push_back(std::move(m));
  im.in_instr = false;
  ++im.pos;
}

void Client::on_step_end() {
  Impl& im = *impl_;
  if (!im.in_step) im.state_error("on_step_end without on_step_begin");
  if (im.in_instr) im.state_error(fmt::format("on_step_end while '{}' is running: call on_instruction_end first", im.cur_name));
  im.in_step = false;
  im.current.time_s = im.gpu->now_s() - im.step_t0;
  if (im.step_e0) {
    if (const auto e1 = im.read_energy()) im.current.energy_j = *e1 - *im.step_e0;
  }
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
  if (impl_->plan) return *impl_->plan;
  RankPlan none;
  none.version = -1;
  return none;
}

FrequencyController& Client::controller() { return *impl_->controller; }
GpuControl& Client::gpu() { return *impl_->gpu; }
const ClientOptions& Client::options() const { return impl_->opt; }

}  // namespace perseus::runtime
