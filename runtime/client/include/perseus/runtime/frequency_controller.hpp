// Applies GPU clocks on a dedicated thread, off the training thread's critical path.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "perseus/runtime/gpu_control.hpp"

namespace perseus::runtime {

/// Longest timeout or interval a client takes, s (11.6 days): beyond, a deadline computed
/// from it would overflow the clock's range (infinity is refused too). Here, below client.hpp,
/// because FrequencyController::flush_for clamps to it as well.
inline constexpr double kMaxClientDurationS = 1e6;

/// What the controller did with one request.
enum class FreqOutcome {
  kApplied,     ///< The clock was set to the requested frequency.
  kRedundant,   ///< Already at the requested frequency: no driver call.
  kSuperseded,  ///< A newer request arrived before this one was applied: skipped.
  kFailed,      ///< The backend refused (see FreqLogEntry::error).
  kReset,       ///< A reset request: the clock lock was removed.
  kRefused,     ///< Not one of Options::supported_mhz: never sent to the driver.
};
/// "applied", "redundant", "superseded", "failed", "reset", "refused".
const char* to_string(FreqOutcome outcome);

/// One row of the controller's diagnostic log.
struct FreqLogEntry {
  double request_time_s = 0;  ///< When the training thread asked, s since controller start.
  double done_time_s = 0;     ///< When the controller finished with it, s since controller start.
  int requested_mhz = 0;      ///< Requested SM clock, MHz (0 for a reset).
  int applied_mhz = 0;        ///< Clock in force afterwards, MHz (0 = unlocked/unknown).
  FreqOutcome outcome = FreqOutcome::kApplied;
  std::int64_t iteration = -1;  ///< Caller's tag: training iteration (-1 = none).
  int index = -1;               ///< Caller's tag: instruction index in the iteration (-1 = none).
  std::string error;            ///< Backend message when outcome == kFailed.
};

/// A thread that owns all clock changes of one GPU. request() only enqueues (a mutex and a
/// condition variable; it never calls the driver), so NVML's 10–20 ms clock changes stay
/// off the training thread. The controller skips requests equal to the clock in force and,
/// when several requests are pending, applies only the newest (the others are logged as
/// superseded). Every request is logged with (time, requested, applied, outcome).
class FrequencyController {
 public:
  struct Options {
    bool coalesce = true;               ///< Apply only the newest of several pending requests.
    std::size_t max_log_entries = 1u << 20;  ///< Oldest entries are dropped beyond this.
    /// The GPU's supported clocks, MHz. When non-empty, a request for any other clock is
    /// refused (logged "refused", counted in failures()) and never reaches the backend: the
    /// last line of defence behind the client's plan check.
    std::vector<int> supported_mhz;
  };
  /// Starts the thread with default Options. gpu must outlive nothing: the controller shares
  /// ownership. Throws std::invalid_argument when gpu is null.
  explicit FrequencyController(std::shared_ptr<GpuControl> gpu);
  /// As above, with `options` (coalescing, log size, supported clocks).
  FrequencyController(std::shared_ptr<GpuControl> gpu, Options options);
  /// Calls stop(true).
  ~FrequencyController();
  FrequencyController(const FrequencyController&) = delete;
  FrequencyController& operator=(const FrequencyController&) = delete;

  /// Asks for SM clock freq_mhz, MHz. Non-blocking. iteration/index tag the log entry.
  /// Ignored (not logged) when freq_mhz <= 0 and after stop().
  void request(int freq_mhz, std::int64_t iteration = -1, int index = -1);
  /// Asks for the clock lock to be removed. Non-blocking.
  void request_reset();
  /// Blocks until every request made so far has been handled (tests, shutdown).
  void flush();
  /// Like flush(), for at most timeout_s (s; taken as 0 when negative or NaN, at most
  /// kMaxClientDurationS): true when every request was handled, false
  /// at the timeout (a backend call is still running, e.g. a gpud helper that does not answer).
  bool flush_for(double timeout_s);
  /// Handles pending requests, then (if reset_clocks) removes the clock lock, and joins the
  /// thread. Idempotent; safe to call from any thread but the controller's. Returns false when
  /// reset_clocks was asked and that final reset failed (the backend threw) or did not run:
  /// the clocks may still be locked, and the caller must leave the reset to someone else (the
  /// client hands it to its watchdog and keeps its lock record).
  bool stop(bool reset_clocks = true);

  /// Clock in force, MHz, as far as the controller knows (0 = unlocked or unknown).
  int applied_mhz() const;
  /// True while the last clock change handled failed (no later one succeeded): the GPU runs at
  /// a clock nobody knows. False before any change and while requests are pending.
  bool clock_failed() const;
  /// True once a clock lock succeeded (FreqOutcome::kApplied): before that this controller
  /// never changed the GPU's clocks, so a failed final reset leaves nothing of its own locked
  /// (e.g. another client holds the gpud helper's lock on the GPU: every change is "busy").
  bool ever_locked() const;
  /// Number of failed backend calls so far.
  int failures() const;
  /// Last backend error message ("" if none).
  std::string last_error() const;
  /// Copy of the log, oldest first.
  std::vector<FreqLogEntry> log() const;
  /// Writes the log as CSV (header request_time_s,done_time_s,iteration,index,requested_mhz,
  /// applied_mhz,outcome,error) or, when path ends in ".json", as a JSON array of objects
  /// with the same keys. Throws std::runtime_error when the file cannot be written.
  void write_log(const std::string& path) const;
  /// The GPU backend the controller drives (shared ownership).
  const std::shared_ptr<GpuControl>& gpu() const { return gpu_; }

 private:
  struct Request {
    int freq_mhz;  // 0 = reset
    std::int64_t iteration;
    int index;
    double time_s;
  };
  void run();
  void handle(const Request& req, bool superseded);
  void append_log(FreqLogEntry entry);
  double elapsed_s() const;

  std::shared_ptr<GpuControl> gpu_;
  Options options_;
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Request> queue_;
  std::deque<FreqLogEntry> log_;
  bool busy_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  int applied_mhz_ = 0;
  bool applied_known_ = false;
  bool clock_failed_ = false;
  bool last_reset_ok_ = false;  ///< the last reset request reached the backend and succeeded
  int failures_ = 0;
  bool ever_locked_ = false;
  std::string last_error_;
  std::thread thread_;
};

}  // namespace perseus::runtime
