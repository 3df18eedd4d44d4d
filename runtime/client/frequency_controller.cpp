// Frequency controller thread: applies clock requests, skips redundant ones, logs everything.
#include "perseus/runtime/frequency_controller.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "signal_guard.hpp"

namespace perseus::runtime {

const char* to_string(FreqOutcome outcome) {
  switch (outcome) {
    case FreqOutcome::kApplied: return "applied";
    case FreqOutcome::kRedundant: return "redundant";
    case FreqOutcome::kSuperseded: return "superseded";
    case FreqOutcome::kFailed: return "failed";
    case FreqOutcome::kReset: return "reset";
    case FreqOutcome::kRefused: return "refused";
  }
  return "?";
}

FrequencyController::FrequencyController(std::shared_ptr<GpuControl> gpu)
    : FrequencyController(std::move(gpu), Options{}) {}

FrequencyController::FrequencyController(std::shared_ptr<GpuControl> gpu, Options options)
    : gpu_(std::move(gpu)), options_(options), origin_(std::chrono::steady_clock::now()) {
  if (!gpu_) throw std::invalid_argument("FrequencyController: null GPU backend");
  thread_ = detail::start_signal_free_thread([this] { run(); });
}

FrequencyController::~FrequencyController() { stop(true); }

double FrequencyController::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

void FrequencyController::request(int freq_mhz, std::int64_t iteration, int index) {
  if (freq_mhz <= 0) return;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    queue_.push_back(Request{freq_mhz, iteration, index, elapsed_s()});
  }
  cv_.notify_one();
}

void FrequencyController::request_reset() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    queue_.push_back(Request{0, -1, -1, elapsed_s()});
  }
  cv_.notify_one();
}

void FrequencyController::flush() {
  std::unique_lock lock(mutex_);
  idle_cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || stopped_; });
}

bool FrequencyController::flush_for(double timeout_s) {
  std::unique_lock lock(mutex_);
  // Clamped to [0, kMaxClientDurationS] (NaN: 0): a duration beyond made wait_for's conversion
  // to clock ticks undefined, as in Client::flush_reports.
  const double wait_s = timeout_s > 0 ? std::min(timeout_s, kMaxClientDurationS) : 0.0;
  return idle_cv_.wait_for(lock, std::chrono::duration<double>(wait_s),
                           [&] { return (queue_.empty() && !busy_) || stopped_; });
}

bool FrequencyController::stop(bool reset_clocks) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      if (!thread_.joinable()) return !reset_clocks || last_reset_ok_;
    } else {
      if (reset_clocks) {
        last_reset_ok_ = false;  // until the reset queued here succeeds
        queue_.push_back(Request{0, -1, -1, elapsed_s()});
      }
      stopping_ = true;
    }
  }
  cv_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  std::lock_guard lock(mutex_);
  return !reset_clocks || (stopped_ && last_reset_ok_);
}

void FrequencyController::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty() && stopping_) break;
    std::deque<Request> batch;
    batch.swap(queue_);
    busy_ = true;
    lock.unlock();
    // Coalesce: of consecutive clock requests only the newest matters; resets are kept.
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const bool newer_follows = i + 1 < batch.size() && batch[i].freq_mhz > 0 && batch[i + 1].freq_mhz > 0;
      handle(batch[i], options_.coalesce && newer_follows);
    }
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
  stopped_ = true;
  idle_cv_.notify_all();
}

void FrequencyController::handle(const Request& req, bool superseded) {
  FreqLogEntry e;
  e.request_time_s = req.time_s;
  e.requested_mhz = req.freq_mhz;
  e.iteration = req.iteration;
  e.index = req.index;
  int applied = 0;
  bool known = false;
  {
    std::lock_guard lock(mutex_);
    applied = applied_mhz_;
    known = applied_known_;
  }
  const auto& sup = options_.supported_mhz;
  if (superseded) {
    e.outcome = FreqOutcome::kSuperseded;
  } else if (req.freq_mhz > 0 && !sup.empty() && std::find(sup.begin(), sup.end(), req.freq_mhz) == sup.end()) {
    e.outcome = FreqOutcome::kRefused;
    e.error = fmt::format("refused: {} MHz is not a supported clock of this GPU", req.freq_mhz);
    std::lock_guard lock(mutex_);
    if (failures_ == 0) fmt::print(stderr, "perseus client: clock change {}\n", e.error);
    ++failures_;
    last_error_ = e.error;
  } else if (req.freq_mhz > 0 && known && applied == req.freq_mhz && !gpu_->lock_may_be_lost()) {
    e.outcome = FreqOutcome::kRedundant;
  } else {
    try {
      if (req.freq_mhz > 0) {
        gpu_->set_locked_clocks(req.freq_mhz);
        e.outcome = FreqOutcome::kApplied;
      } else {
        gpu_->reset_locked_clocks();
        e.outcome = FreqOutcome::kReset;
      }
      applied = req.freq_mhz;
      known = true;
    } catch (const std::exception& ex) {
      e.outcome = FreqOutcome::kFailed;
      e.error = ex.what();
      known = false;  // state unknown: the next request is applied, not skipped
      applied = 0;
      std::lock_guard lock(mutex_);
      if (failures_ == 0) fmt::print(stderr, "perseus client: clock change failed: {}\n", ex.what());
      ++failures_;
      last_error_ = ex.what();
    }
  }
  e.applied_mhz = applied;
  e.done_time_s = elapsed_s();
  std::lock_guard lock(mutex_);
  applied_mhz_ = applied;
  applied_known_ = known;
  if (e.outcome == FreqOutcome::kFailed) clock_failed_ = true;
  if (e.outcome == FreqOutcome::kApplied || e.outcome == FreqOutcome::kReset) clock_failed_ = false;
  if (e.outcome == FreqOutcome::kApplied) ever_locked_ = true;
  if (req.freq_mhz == 0) last_reset_ok_ = e.outcome == FreqOutcome::kReset;
  log_.push_back(std::move(e));
  while (log_.size() > options_.max_log_entries) log_.pop_front();
}

bool FrequencyController::clock_failed() const {
  std::lock_guard lock(mutex_);
  return clock_failed_;
}

int FrequencyController::applied_mhz() const {
  std::lock_guard lock(mutex_);
  return applied_mhz_;
}

int FrequencyController::failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

bool FrequencyController::ever_locked() const {
  std::lock_guard lock(mutex_);
  return ever_locked_;
}

std::string FrequencyController::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

std::vector<FreqLogEntry> FrequencyController::log() const {
  std::lock_guard lock(mutex_);
  return {log_.begin(), log_.end()};
}

void FrequencyController::write_log(const std::string& path) const {
  const std::vector<FreqLogEntry> entries = log();
  std::string text;
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : entries) {
      arr.push_back({{"request_time_s", e.request_time_s},
                     {"done_time_s", e.done_time_s},
                     {"iteration", e.iteration},
                     {"index", e.index},
                     {"requested_mhz", e.requested_mhz},
                     {"applied_mhz", e.applied_mhz},
                     {"outcome", to_string(e.outcome)},
                     {"error", e.error}});
    }
    text = arr.dump(1) + "\n";
  } else {
    text = "request_time_s,done_time_s,iteration,index,requested_mhz,applied_mhz,outcome,error\n";
    for (const auto& e : entries) {
      std::string err = e.error;
      for (char& c : err) {
        if (c == ',' || c == '\n' || c == '"') c = ' ';
      }
      text += fmt::format("{:.6f},{:.6f},{},{},{},{},{},{}\n", e.request_time_s, e.done_time_s, e.iteration, e.index,
                          e.requested_mhz, e.applied_mhz, to_string(e.outcome), err);
    }
  }
  // Atomically (never a half-written log), and the reason when it cannot be written.
  try {
    write_file_atomically(path, text);
  } catch (const InputError& e) {
    throw std::runtime_error(fmt::format("cannot write frequency log: {}", e.what()));
  }
}

}  // namespace perseus::runtime
