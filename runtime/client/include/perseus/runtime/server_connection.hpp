// The client's side of the `perseus serve` HTTP API (v1): register, fetch plan, report.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  int freq_mhz = 0;         ///< SM clock to use, MHz.
};

/// A rank's plan: its computations of one iteration in execution order.
struct RankPlan {
  std::int64_t version = 0;                ///< Server's plan version (grows on every change).
  std::string job_status;                  ///< Server's job status, e.g. "running".
  std::vector<PlanInstruction> instructions;
};

/// Measurement of one computation (one microbatch) of an iteration.
struct InstructionMeasurement {
  std::string instruction;
  int microbatch = 0;
  int freq_mhz = 0;                 ///< Clock in force when it ended, MHz (requested if unknown).
  double time_s = 0;                ///< Duration, s.
  std::optional<double> energy_j;   ///< Energy, J; absent when the GPU has no counter.
};

/// Measurement of one training iteration of one rank.
struct IterationMeasurement {
  std::int64_t iteration = 0;
  double time_s = 0;        ///< Step begin to step end, s.
  double energy_j = 0;      ///< GPU energy during the step, J (0 when unknown).
  std::int64_t plan_version = 0;
  std::vector<InstructionMeasurement> instructions;
};

/// How a request ended.
enum class CallStatus {
  kOk,           ///< 2xx (and 409 for a repeated registration).
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
  bool ok() const { return status == CallStatus::kOk || status == CallStatus::kNotModified; }
};

/// Serializes measurements as the v1 API's JSON body (one object).
std::string to_json(const IterationMeasurement& m);
/// Parses a plan response body. Throws std::runtime_error naming the bad field.
RankPlan parse_plan_json(const std::string& body);

/// One HTTP connection to `perseus serve` for one rank. Not thread-safe: use one object per
/// thread. No method throws; failures are CallResult values.
class ServerConnection {
 public:
  /// server_url: "http://host:port" (https is not supported). token: bearer token ("" =
  /// none). timeout_s: connect and read timeout per request.
  ServerConnection(const std::string& server_url, std::string token, std::string job_id, RankInfo ranks,
                   double timeout_s);
  ~ServerConnection();
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  /// POST /v1/jobs/{job}/ranks. 409 (already registered, e.g. after a restart) counts as kOk.
  CallResult register_rank(const std::vector<int>& supported_freqs_mhz);
  /// GET /v1/jobs/{job}/ranks/{rank}/plan?since_version=V (V < 0: no since_version).
  /// On kOk fills *plan; kNotModified when the server has nothing newer than V; 409 (the
  /// job has no plan yet) is kRetryable.
  CallResult fetch_plan(std::int64_t since_version, RankPlan* plan);
  /// POST /v1/jobs/{job}/ranks/{rank}/measurements with {"measurements":[...]} (or a single
  /// object when batch has one element).
  CallResult post_measurements(const std::vector<IterationMeasurement>& batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::runtime
