// The client's side of the `perseus serve` HTTP API (v1): register, fetch plan, report.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perseus/runtime/job_limits.hpp"  // a registration answer beyond them leaves the shape unknown

namespace perseus::runtime {

/// Ranks of one training process. rank is the global rank; dp/pp/tp ranks are its
/// coordinates (pp_rank = pipeline stage, dp_rank = pipeline id).
struct RankInfo {
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  int tp_rank = 0;
};

/// One computation of a rank's plan.
struct PlanInstruction {
  std::string instruction;  ///< "forward", "backward", "backward_input" or "backward_weight".
  int stage = 0;            ///< Pipeline stage.
  int microbatch = 0;       ///< Microbatch index within the iteration.
  int freq_mhz = 0;         ///< SM clock to use, MHz (a supported clock once the client checked it).
  int planned_freq_mhz = 0; ///< What the server asked for when the client snapped it (0 = not snapped).
};

/// A rank's plan: its computations of one iteration in execution order.
struct RankPlan {
  std::int64_t version = 0;                ///< Server's plan version (grows on every change).
  std::string job_status;                  ///< Server's job status, e.g. "running".
  double iteration_time_s = 0;             ///< The plan's predicted iteration time, s (0: unknown).
  /// The plan's predicted energy of one iteration of its pipeline, J, as the server sends it (0: unknown).
  double energy_j = 0;
  std::vector<PlanInstruction> instructions;
};

/// Measurement of one computation (one microbatch) of an iteration.
struct InstructionMeasurement {
  std::string instruction;          ///< "forward", "backward", "backward_input" or "backward_weight".
  int microbatch = 0;               ///< Microbatch index within the iteration, 0-based.
  int freq_mhz = 0;                 ///< Clock in force when it ended, MHz (requested if unknown).
  int planned_freq_mhz = 0;         ///< The plan's clock when it was snapped to freq_mhz (0 = not snapped).
  double time_s = 0;                ///< Duration, s.
  /// Energy, J; absent = unknown (no counter and no power reading, or a counter anomaly: see
  /// telemetry.hpp). Never negative.
  std::optional<double> energy_j;
};

/// Measurement of one training iteration of one rank.
struct IterationMeasurement {
  std::int64_t iteration = 0;  ///< Training iteration number (counts from ClientOptions::first_iteration).
  double time_s = 0;        ///< Step begin to step end, s.
  std::optional<double> energy_j;  ///< GPU energy during the step, J (absent = unknown).
  std::int64_t plan_version = 0;  ///< Version of the plan in use during the step (0 = no plan yet).
  std::vector<InstructionMeasurement> instructions;
  int attempts = 0;  ///< Times it was posted so far (the client's own bookkeeping; not sent).
};

/// How a request ended.
enum class CallStatus {
  kOk,           ///< 2xx.
  kNotModified,  ///< 304 on a plan fetch.
  kRetryable,    ///< Connection failure, timeout, 408, 429 or 5xx: try again later.
  kPermanent,    ///< Any other 4xx (bad token, unknown job, bad body): retrying won't help.
};

/// Result of one request: status, HTTP code (0 when no response) and a message
/// ("<METHOD> <path>: <code> <server's error message>") when not kOk.
struct CallResult {
  CallStatus status = CallStatus::kOk;
  int http_status = 0;
  std::string message;
  /// post_measurements: items the server refused one by one (iteration, reason); the others
  /// were kept (servers with per-item acceptance answer 202 with "rejected").
  std::vector<std::pair<std::int64_t, std::string>> rejected;
  /// post_measurements: iterations the server already had ("duplicate": true).
  std::vector<std::int64_t> duplicates;
  /// fetch_plan: the server answered, but the client refused the plan it sent (larger than the
  /// job's shape allows, or malformed); retried later like a transient error.
  bool plan_refused = false;
  bool ok() const { return status == CallStatus::kOk || status == CallStatus::kNotModified; }
};

/// Serializes measurements as the v1 API's JSON body (one object).
std::string to_json(const IterationMeasurement& m);
/// The job's shape as the server tells it at registration (0 = not told).
struct JobShape {
  int microbatches = 0;  ///< Microbatches per iteration.
  int chunks = 0;        ///< Model chunks (virtual stages) per pipeline rank; stages = pp x chunks.
  int pp = 0;  ///< Pipeline-parallel degree (GPUs per pipeline).
  /// Most computations one rank's plan can hold: 3 per (microbatch, chunk) (zero-bubble
  /// schedules split backward in two); 0 when the shape is unknown.
  std::size_t max_instructions() const {
    return microbatches > 0 ? 3u * static_cast<std::size_t>(microbatches) * static_cast<std::size_t>(std::max(chunks, 1)) : 0;
  }
};

/// Parses and checks a plan response body before any of it can reach a GPU. "version" must
/// be an integer in [0, 2^53]. Every computation needs "instruction" (forward, backward, backward_input or backward_weight),
/// "stage", "microbatch" (integers >= 0) and "freq_mhz" (an integer in [1, 100000] MHz: a
/// float, string or 2^32 + 1305 is refused, never narrowed). With the shape known
/// (shape.microbatches > 0): at most shape.max_instructions() computations, microbatches in
/// [0, microbatches), each computation once, one forward and one backward (or backward_input,
/// plus backward_weight in all or none) per (stage, microbatch) (shape unknown: still each
/// computation once); with shape.pp > 0 and
/// pp_rank >= 0 also stages of this rank only (stage % pp == pp_rank, stage < pp x chunks).
/// Throws std::runtime_error naming the computation and field.
RankPlan parse_plan_json(const std::string& body, const JobShape& shape = {}, int pp_rank = -1);

/// Largest plan response accepted before the job's shape is known, bytes.
inline constexpr std::size_t kDefaultMaxPlanBytes = std::size_t{16} << 20;
/// Bytes allowed per computation of a plan response once the shape is known (a computation
/// is ~80 bytes of JSON), plus kPlanBytesSlack.
inline constexpr std::size_t kPlanBytesPerInstruction = 256;
inline constexpr std::size_t kPlanBytesSlack = 64 * 1024;

/// One HTTP connection to `perseus serve` for one rank. Not thread-safe: use one object per
/// thread. No method throws; failures are CallResult values.
class ServerConnection {
 public:
  /// server_url: "http://host:port" (https is not supported). token: bearer token ("" =
  /// none). timeout_s: deadline of each whole request (connect, send, every read, and the
  /// total: a server that answers one byte at a time is cut off at timeout_s). Neither the URL
  /// nor timeout_s is validated here: that is the caller's job (Client checks ClientOptions).
  ServerConnection(const std::string& server_url, std::string token, std::string job_id, RankInfo ranks,
                   double timeout_s);
  ~ServerConnection();
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  /// POST /v1/jobs/{job}/ranks with the rank's coordinates and supported clocks. A repeated
  /// registration with the same coordinates (a restarted trainer) is answered 200 by the
  /// server; 409 (the rank or its (dp, pp, tp) slot is registered with other coordinates, or
  /// the server refuses the clocks: 422) is kPermanent with the server's message. On success
  /// remembers the job's shape (microbatches, chunks) to bound plan responses.
  CallResult register_rank(const std::vector<int>& supported_freqs_mhz);
  /// GET /v1/jobs/{job}/ranks/{rank}/plan?since_version=V (V < 0: no since_version).
  /// On kOk fills *plan; kNotModified when the server has nothing newer than V; 409 (the
  /// job has no plan yet) is kRetryable. A body larger than max_plan_bytes() or holding
  /// more computations than the job's shape allows is refused (kRetryable, the message says
  /// so) without being kept in memory.
  CallResult fetch_plan(std::int64_t since_version, RankPlan* plan);
  /// POST /v1/jobs/{job}/ranks/{rank}/measurements with {"measurements":[...]} (or a single
  /// object when batch has one element).
  CallResult post_measurements(const std::vector<IterationMeasurement>& batch);

  /// Sets the shape a registration on another connection learned: fetch_plan() checks plans
  /// against it (a connection that never registers would otherwise check none).
  void set_shape(const JobShape& shape);
  /// Changes the whole-request deadline for the following calls, s (> 0; not validated here:
  /// the caller's job).
  void set_timeout(double timeout_s);
  /// Aborts the request in progress, if any (from another thread; close()). Later calls work.
  void cancel();
  /// Largest plan response accepted now, bytes: kDefaultMaxPlanBytes until registration told
  /// the job's shape, then kPlanBytesSlack + kPlanBytesPerInstruction x max_instructions.
  std::size_t max_plan_bytes() const;
  /// The job's shape from the last successful registration.
  JobShape shape() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::runtime
