// HTTP API errors of the control-plane server and typed access to JSON request fields.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace perseus::server {

/// An expected request failure: HTTP status (4xx, or 5xx for server faults), a stable
/// machine-readable code (e.g. "malformed_json", "unknown_job") and a message for the user.
/// Route handlers throw it; the HTTP layer turns it into `{"error": {"code", "message"}}`.
class ApiError : public std::runtime_error {
 public:
  /// `retry_after_s` > 0: the HTTP layer adds `Retry-After: retry_after_s` (a busy state that
  /// ends by itself, e.g. 503 while a frontier is re-derived).
  ApiError(int status, std::string code, const std::string& message, int retry_after_s = 0)
      : std::runtime_error(message), status_(status), code_(std::move(code)), retry_after_s_(retry_after_s) {}
  int status() const { return status_; }
  const std::string& code() const { return code_; }
  int retry_after_s() const { return retry_after_s_; }

 private:
  int status_;
  std::string code_;
  int retry_after_s_;
};

/// The JSON error body `{"error": {"code": code, "message": message}}` as text.
std::string error_body(std::string_view code, std::string_view message);

/// Deepest array/object nesting a request body may have (every valid request needs <= 6).
inline constexpr int kMaxJsonDepth = 64;

/// Most JSON values (arrays, objects, object members, array elements) a request body may hold.
/// A parsed value costs 16-100 bytes of memory while a body spends as little as 3 bytes on one
/// ("[],"), so without this a body of empty arrays took many times its size to parse. The largest
/// valid request, a measurement of 200,000 instruction entries, holds about 1.2 million.
inline constexpr std::size_t kMaxJsonValues = 2'000'000;

/// Parses a request body as one JSON value. Throws ApiError 400: "malformed_json" (with the
/// parser's position) on invalid JSON, "empty_body" on an empty body, "too_deep" when it nests
/// deeper than kMaxJsonDepth, 413 "too_many_values" when it holds more than kMaxJsonValues
/// values (both checked by a linear scan before parsing, so such a body never reaches the
/// parser, and never a recursive parser or serializer), 400 "number_out_of_range" for numbers
/// outside the range of a double (RFC 8259 section 6 leaves the range to implementations).
nlohmann::json parse_json_body(std::string_view body);

/// Throws ApiError 422 "invalid_field" unless `v` is a JSON object; `what` names it.
const nlohmann::json& require_object(const nlohmann::json& v, std::string_view what);

/// Throws ApiError 422 "invalid_field" for the first key of object `obj` that is not in
/// `known`: `unknown field "PREFIXKEY"; accepted fields: a, b, c` (a typo such as
/// "unit_time" for "unit_time_s" must not silently fall back to a default). `prefix` names the
/// enclosing object ("straggler_detection."; empty at the top level).
void reject_unknown_fields(const nlohmann::json& obj, const std::vector<std::string>& known, std::string_view prefix);

/// Integer field `key` of object `obj` in [min, max]. Absent or null: `fallback` if set,
/// else ApiError 422 "missing_field". Wrong type or out of range: ApiError 422 "invalid_field".
std::int64_t get_int(const nlohmann::json& obj, const char* key, std::optional<std::int64_t> fallback,
                     std::int64_t min, std::int64_t max);

/// Finite number field `key` in [min, max]; integers are accepted. Errors as get_int().
double get_number(const nlohmann::json& obj, const char* key, std::optional<double> fallback, double min,
                  double max);

/// String field `key` of at most max_len bytes. Errors as get_int().
std::string get_string(const nlohmann::json& obj, const char* key, std::optional<std::string> fallback,
                       std::size_t max_len);

/// Clock list field `key` (MHz): an array of at most 4096 integers in [1, 100000] (at least one
/// unless allow_empty); empty when the field is absent or null. ApiError 422 "invalid_field"
/// naming the element otherwise.
std::vector<int> get_clock_list(const nlohmann::json& obj, const char* key, bool allow_empty);

/// A non-negative integer from a URL path or query segment, in decimal without leading zeros (one
/// spelling per index); ApiError 400 `code` otherwise ("invalid_path" for a path segment,
/// "invalid_query" for a query parameter).
std::int64_t parse_index(std::string_view text, std::string_view what, const char* code = "invalid_path");

}  // namespace perseus::server
