// ApiError helpers: error bodies and strict typed JSON field access.
#include "perseus/server/api_error.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/core.h>

#include "perseus/input_limits.hpp"
#include "perseus/error.hpp"
#include "perseus/json_input.hpp"

namespace perseus::server {

using nlohmann::json;

std::string error_body(std::string_view code, std::string_view message) {
  json j = {{"error", {{"code", std::string(code)}, {"message", std::string(message)}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json parse_json_body(std::string_view body) {
  if (body.empty()) throw ApiError(400, "empty_body", "request body is empty; expected a JSON object");
  const JsonShape shape = json_shape(body, kMaxJsonDepth, kMaxJsonValues);
  if (shape.deepest > kMaxJsonDepth)
    throw ApiError(400, "too_deep", fmt::format("JSON nests deeper than the limit of {} levels", kMaxJsonDepth));
  if (shape.values > kMaxJsonValues)
    throw ApiError(413, "too_many_values",
                   fmt::format("the JSON body holds more than {} values (arrays, objects, members and elements); "
                               "no request needs that many: send large measurement batches in several requests",
                               kMaxJsonValues));
  try {
    static_assert(kMaxJsonDepth <= kMaxJsonTextDepth, "the scan above must stand for parse_json_text()'s own");
    return parse_json_text(body, "request body", shape);
  } catch (const JsonTextError& e) {  // the message names the field, line and column, never the parser's own text
    const std::string field = e.field().empty() ? "" : fmt::format("field \"{}\": ", e.field());
    if (e.number_out_of_range()) {  // e.g. 1e400
      throw ApiError(400, "number_out_of_range", fmt::format("request body, line {}, column {}: {}{}", e.line(),
                                                             e.column(), field, e.message()));
    }
    throw ApiError(400, "malformed_json", fmt::format("request body, line {}: {}{}", e.line(), field, e.message()));
  }
}

const json& require_object(const json& v, std::string_view what) {
  if (!v.is_object()) throw ApiError(422, "invalid_field", fmt::format("{} must be a JSON object", what));
  return v;
}

void reject_unknown_fields(const json& obj, const std::vector<std::string>& known, std::string_view prefix) {
  if (!obj.is_object()) return;
  for (const auto& [k, v] : obj.items()) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    std::string list;
    for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
    throw ApiError(422, "invalid_field",
                   fmt::format("unknown field \"{}{}\"; accepted fields: {}", prefix, k.substr(0, 64), list));
  }
}

namespace {
const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}
/// A refused value as its JSON text, the same way in every message (session 32's trial found
/// '"1.1"', 'true', "8" and '5' for one kind of error): a string keeps its double quotes, so
/// "8" (a string) and 8 (a number) read apart; non-ASCII and control characters are escaped
/// (JSON's \uXXXX), and a long value is cut at 64 bytes with its size said.
std::string json_text(const json& v) {
  const std::string text = v.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() <= 64) return text;
  return fmt::format("{}... ({} bytes)", text.substr(0, 64), text.size());
}
[[noreturn]] void missing(const json& obj, const char* key) {
  throw ApiError(422, "missing_field",
                 fmt::format("field \"{}\" is required{}", key, obj.contains(key) ? " (got null)" : ""));
}
}  // namespace

std::int64_t get_int(const json& obj, const char* key, std::optional<std::int64_t> fallback, std::int64_t min,
                     std::int64_t max) {
  const json* v = field(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    missing(obj, key);
  }
  // Every refusal names the field, the range and what was given. A JSON integer beyond 64 bits
  // (e.g. 99999999999999999999) arrives as a floating-point number: say so rather than "not an integer".
  const auto refuse = [&](const std::string& why) {
    return ApiError(422, "invalid_field", fmt::format("field \"{}\" must be an integer in [{}, {}], got {}{}", key, min,
                                                      max, json_text(*v), why));
  };
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) >= 9.2e18) throw refuse(" (beyond the 64-bit integer range)");
    throw refuse("");
  }
  if (!v->is_number_integer()) throw refuse("");
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) throw refuse("");
  const std::int64_t x = v->get<std::int64_t>();
  if (x < min || x > max) throw refuse("");
  return x;
}

double get_number(const json& obj, const char* key, std::optional<double> fallback, double min, double max) {
  const json* v = field(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    missing(obj, key);
  }
  const double x = v->is_number() ? v->get<double>() : NAN;
  if (!std::isfinite(x) || x < min || x > max)
    throw ApiError(422, "invalid_field",
                   fmt::format("field \"{}\" must be a finite number in [{}, {}], got {}", key, min, max, json_text(*v)));
  return x;
}

std::string get_string(const json& obj, const char* key, std::optional<std::string> fallback, std::size_t max_len) {
  const json* v = field(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    missing(obj, key);
  }
  if (!v->is_string())
    throw ApiError(422, "invalid_field",
                   fmt::format("field \"{}\" must be a string, got {}", key, json_text(*v)));
  const auto& s = v->get_ref<const std::string&>();
  if (s.size() > max_len)
    throw ApiError(422, "invalid_field", fmt::format("field \"{}\" is longer than {} bytes", key, max_len));
  return s;
}

std::vector<int> get_clock_list(const json& obj, const char* key, bool allow_empty) {
  std::vector<int> out;
  const json* v = field(obj, key);
  if (!v) return out;
  if (!v->is_array() || (v->empty() && !allow_empty) || v->size() > 4096)
    throw ApiError(422, "invalid_field",
                   fmt::format("field \"{}\" must be an array of {} to 4096 integers (MHz), or left out", key,
                               allow_empty ? 0 : 1));
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& f = (*v)[i];
    if (!f.is_number_integer() || f.get<std::int64_t>() <= 0 || f.get<std::int64_t>() > limits::kMaxFrequencyMhz)
      throw ApiError(422, "invalid_field", fmt::format("field \"{}[{}]\" must be an integer in [1, {}] (MHz), got {}",
                                                      key, i, limits::kMaxFrequencyMhz, json_text(f)));
    out.push_back(f.get<int>());
  }
  return out;
}

std::int64_t parse_index(std::string_view text, std::string_view what, const char* code) {
  std::int64_t x = -1;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.size() > 1 && text[0] == '0') {  // one spelling per index: "01" is not rank 1
    throw ApiError(400, code, fmt::format("{} must be a non-negative integer without leading zeros, got {}", what,
                                          quote_input(text, 32)));
  }
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || x < 0) {
    throw ApiError(400, code, fmt::format("{} must be a non-negative integer (at most {}), got {}{}", what, INT64_MAX,
                                          quote_input(text, 32),
                                          ec == std::errc::result_out_of_range ? " (beyond 64 bits)" : ""));
  }
  return x;
}

}  // namespace perseus::server
