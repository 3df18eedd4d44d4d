// The in-training client: applies a rank's frequency plan, measures, reports to `perseus serve`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "perseus/runtime/clock_check.hpp"
#include "perseus/runtime/frequency_controller.hpp"
#include "perseus/runtime/gpu_control.hpp"
#include "perseus/runtime/server_connection.hpp"

namespace perseus::runtime {

/// Kinds of client errors (mirrors perseus_status in perseus/client.h).
enum class ClientErrc {
  kInvalidArgument = 1,  ///< Bad option value.
  kServer = 2,           ///< The server refused for good (bad token, unknown job, bad rank).
  kPlanMismatch = 3,     ///< The training loop's instruction order differs from the plan.
  kGpu = 4,              ///< The GPU backend failed (NVML missing, no permission, ...).
  kState = 5,            ///< Hooks called out of order (end without begin, ...).
  kUnsupported = 7,      ///< Operation not available with this backend.
  kCancelled = 8,        ///< create() was cancelled by ClientOptions::startup_cancelled.
};

/// Error thrown by Client methods. what() is a complete message for the user.
class ClientError : public std::runtime_error {
 public:
  ClientError(ClientErrc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ClientErrc code() const { return code_; }

 private:
  ClientErrc code_;
};

// kMaxClientDurationS (longest timeout or interval a client takes, s): frequency_controller.hpp.
/// Shortest period a client repeats a request at (plan_poll_interval_s, retry_initial_s), s:
/// 5e-324 s was accepted and polled the server as fast as the CPU allowed.
inline constexpr double kMinClientPeriodS = 1e-3;
/// Most unsent iteration reports a client keeps (memory bound).
inline constexpr std::size_t kMaxBufferedReports = std::size_t{1} << 20;

/// Client configuration. Times in seconds; every duration in (0, kMaxClientDurationS]
/// (startup_timeout_s may be 0), else Client::create() throws ClientError naming the field.
struct ClientOptions {
  std::string server_url;   ///< "http://host:port" of `perseus serve` (a trailing '/' is allowed; no path).
  std::string token;        ///< Bearer token ("" = none); printable ASCII, no space.
  std::string job_id;       ///< Job created with POST /v1/jobs.
  RankInfo ranks;           ///< Global/dp/pp/tp rank of this process.
  double request_timeout_s = 5.0;     ///< Per HTTP request.
  /// create() waits at most this long for registration and the first plan while the server
  /// is unreachable; afterwards training runs without a plan (clocks untouched) until the
  /// background thread gets one.
  double startup_timeout_s = 10.0;
  /// Polled while create() waits for the server: before each attempt and at least every 50 ms
  /// of the back-off between attempts and of a request in flight (run on a helper thread, then
  /// cut off; a connection attempt to a host that drops packets may still take up to
  /// request_timeout_s). True ends create() with ClientError kCancelled (Ctrl-C in the Python binding).
  /// Called on create()'s thread. Empty: never.
  std::function<bool()> startup_cancelled;
  double plan_poll_interval_s = 1.0;  ///< Background plan refresh period (also polled at every step end).
  double retry_initial_s = 0.1;       ///< First retry delay after a failed report; doubles up to retry_max_s.
  /// Longest retry delay, s (>= retry_initial_s). The plan poller's back-off is capped at
  /// max(retry_max_s, plan_poll_interval_s).
  double retry_max_s = 5.0;
  std::size_t max_buffered_reports = 4096;  ///< Unsent iteration reports kept (1..kMaxBufferedReports); oldest dropped beyond.
  std::size_t max_batch = 64;               ///< Iteration reports per POST (> 0, else kInvalidArgument).
  bool per_instruction_energy = true;       ///< Read the energy counter around every computation.
  /// When clock requests pile up faster than the driver applies them (NVML takes 10–20 ms),
  /// apply only the newest (true, production default) or every one in order (false: exact,
  /// deterministic logs for tests; the controller may lag behind short computations).
  bool coalesce_clock_requests = true;
  std::int64_t first_iteration = 0;         ///< Number of the first step (set when resuming a job).
  bool watchdog = true;          ///< Spawn perseus-watchdog (if the backend needs one).
  std::string watchdog_path;     ///< "" = search (see docs/client.md).
  bool handle_signals = true;    ///< Reset clocks on SIGTERM/SIGINT with default disposition.
  std::string freq_log_path;     ///< Controller log written at close() (.json or .csv); "" = none.
  /// A plan clock at most this far from one of the GPU's supported clocks is snapped to it
  /// (measurements carry the applied clock and the planned one); a plan with any clock
  /// farther away is refused whole (the previous plan stays in use), with one warning per
  /// plan version. MHz, >= 0.
  double clock_snap_tolerance_mhz = kDefaultClockToleranceMhz;
  /// Plausibility bounds of energy readings (telemetry.hpp).
  TelemetryLimits telemetry;
  /// Directory of the per-GPU lock records ("" = $PERSEUS_LOCK_DIR, else /run/perseus/locks if
  /// writable or creatable, else $TMPDIR/perseus-gpu-locks); see gpu_lock_record.hpp.
  std::string lock_dir;
};

/// Counters for diagnostics and tests.
struct ClientStats {
  std::int64_t iterations = 0;          ///< Completed steps.
  std::int64_t plan_version = -1;       ///< Plan in use (-1 = none yet).
  std::int64_t plan_updates = 0;        ///< Times a newer plan replaced the one in use (the first plan is not one).
  std::int64_t latest_plan_version = -1;  ///< Newest plan fetched (switched in at the next step).
  std::int64_t reports_sent = 0;        ///< Iteration reports accepted by the server.
  std::int64_t reports_pending = 0;     ///< Buffered, not yet accepted.
  std::int64_t reports_dropped = 0;     ///< Dropped: buffer full or refused for good (4xx).
  std::int64_t server_failures = 0;     ///< Failed requests (all kinds).
  int gpu_failures = 0;                 ///< Failed clock changes.
  std::int64_t plans_refused = 0;       ///< Plan versions refused (a clock outside the GPU's list, too big).
  std::int64_t clocks_snapped = 0;      ///< Plan clocks snapped to a supported clock (all versions).
  std::int64_t energy_unknown = 0;      ///< Computations and steps reported with unknown energy.
  std::int64_t reports_rejected = 0;    ///< Iteration reports the server refused one by one.
  /// Reports posted for the first time that the server already had: another live process
  /// reports as this rank, or training resumed from reported iterations (warned once).
  std::int64_t reports_foreign_duplicates = 0;
  std::string last_plan_error;          ///< Why the last plan was refused ("" = none).
  bool registered = false;              ///< The server accepted this rank's registration.
  std::string job_status;               ///< From the last plan response.
  std::string last_server_error;        ///< Latest failed request's message ("" = none; kept after successes).
};

/// One rank's client. The hooks are meant for the training thread and are cheap: they
/// compare against the cached plan, enqueue a clock request and take timestamps; all
/// network and driver calls happen on background threads (plan poller, reporter,
/// frequency controller). Call order per step:
///   on_step_begin(); { on_instruction_begin(name); <compute>; on_instruction_end(name); }*
///   on_step_end();
/// A new plan version fetched in the background is switched in at the next on_step_begin().
/// Hook methods must be called from one thread at a time.
class Client {
 public:
  /// Validates options, starts the frequency controller, the watchdog (when the backend
  /// needs one and options.watchdog), registers the rank (supported clocks from the GPU)
  /// and fetches the first plan, waiting at most startup_timeout_s while the server is
  /// unreachable (each request is cut off at the time left). Throws ClientError:
  /// kInvalidArgument (bad options), kServer (the server answered a permanent error such as
  /// 401, 404, or 409 for a rank registered with other coordinates), kGpu (cannot list
  /// clocks, or another live process holds this GPU's lock record), kCancelled
  /// (ClientOptions::startup_cancelled returned true while it waited for the server).
  static std::unique_ptr<Client> create(ClientOptions options, std::shared_ptr<GpuControl> gpu);
  /// Calls close().
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Starts an iteration; switches in a newer plan if one arrived. Throws ClientError
  /// kState when called inside a step, and kServer at every step while the server refused
  /// this rank's registration for good (e.g. 409: its slot is registered with other
  /// coordinates; the client then never touches the clocks).
  void on_step_begin();
  /// Ends the iteration and queues its measurement report. Throws ClientError kState
  /// (outside a step or inside an instruction) or kPlanMismatch (fewer computations than
  /// the plan has); the report is queued in either case.
  void on_step_end();
  /// A computation starts: checks `name` against the plan's next instruction and asks for
  /// its clock. Throws ClientError kPlanMismatch (wrong name or more computations than the
  /// plan has; the rest of this step then runs without clock changes) or kState.
  void on_instruction_begin(std::string_view name);
  /// The computation ended: records its time and energy. Throws ClientError kState when
  /// `name` is not the running instruction.
  void on_instruction_end(std::string_view name);

  /// Waits until every queued report has been accepted or timeout_s (s, in [0,
  /// kMaxClientDurationS]) passed. Returns true when nothing is pending. Throws ClientError
  /// kInvalidArgument for a timeout outside that range (NaN included), before waiting.
  bool flush_reports(double timeout_s);
  /// Flushes reports (bounded by request_timeout_s), cancels requests in flight, resets the
  /// clocks, stops the threads, disarms the watchdog, removes the GPU's lock record and
  /// writes freq_log_path. Bounded by about 2 x request_timeout_s. Idempotent; never throws.
  void close();

  /// A snapshot of the counters. Thread-safe (takes the client's lock).
  ClientStats stats() const;
  /// Copy of the plan in use (version -1 and no instructions when none yet).
  RankPlan plan() const;
  /// The frequency controller that applies this rank's clocks (diagnostics and tests: log(),
  /// failures(), flush()). Its methods are thread-safe, so any thread may use it while the
  /// Client lives; after close() it is stopped (requests are ignored).
  FrequencyController& controller();
  /// The GPU backend the client was created with (thread-safe, see GpuControl).
  GpuControl& gpu();
  /// The options the client runs with: create()'s, server_url without a trailing '/'.
  const ClientOptions& options() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::runtime
