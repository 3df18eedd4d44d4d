// ApiError helpers: error bodies and strict typed JSON field access.
#include "perseus/server/api_error.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/core.h>

namespace perseus::server {

using nlohmann::json;

std::string error_body(std::string_view code, std::string_view message) {
  json j = {{"error", {{"code", std::string(code)}, {"message", std::string(message)}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {
/// Deepest array/object nesting of a JSON text, scanning at most until `limit` is passed
/// (strings and escapes skipped). Linear, no recursion: runs before the parser ever nests.
int nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return deepest;
}
}  // namespace

json parse_json_body(std::string_view body) {
  if (body.empty()) throw ApiError(400, "empty_body", "request body is empty; expected a JSON object");
  if (nesting_depth(body, kMaxJsonDepth) > kMaxJsonDepth)
    throw ApiError(400, "too_deep", fmt::format("JSON nests deeper than the limit of {} levels", kMaxJsonDepth));
  try {
    return json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    throw ApiError(400, "malformed_json", fmt::format("request body is not valid JSON (byte {})", e.byte));
  } catch (const json::out_of_range& e) {  // e.g. 1e400: outside the range of a double
    throw ApiError(400, "number_out_of_range",
                   fmt::format("request body has a number outside the range of a double (±1.8e308): {}", e.what()));
  } catch (const json::exception& e) {
    throw ApiError(400, "malformed_json", fmt::format("request body is not valid JSON: {}", e.what()));
  }
}

const json& require_object(const json& v, std::string_view what) {
  if (!v.is_object()) throw ApiError(422, "invalid_field", fmt::format("{} must be a JSON object", what));
  return v;
}

namespace {
const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}
[[noreturn]] void missing(const char* key) {
  throw ApiError(422, "missing_field", fmt::format("field \"{}\" is required", key));
}
}  // namespace

std::int64_t get_int(const json& obj, const char* key, std::optional<std::int64_t> fallback, std::int64_t min,
                     std::int64_t max) {
  const json* v = field(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    missing(key);
  }
  if (!v->is_number_integer())
    throw ApiError(422, "invalid_field", fmt::format("field \"{}\" must be an integer", key));
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    throw ApiError(422, "invalid_field", fmt::format("field \"{}\" must be in [{}, {}]", key, min, max));
  const std::int64_t x = v->get<std::int64_t>();
  if (x < min || x > max)
    throw ApiError(422, "invalid_field", fmt::format("field \"{}\" must be in [{}, {}]", key, min, max));
  return x;
}

double get_number(const json& obj, const char* key, std::optional<double> fallback, double min, double max) {
  const json* v = field(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    missing(key);
  }
  if (!v->is_number()) throw ApiError(422, "invalid_field", fmt::format("field \"{}\" must be a number", key));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max)
    throw ApiError(422, "invalid_field", fmt::format("field \"{}\" must be a finite number in [{}, {}]", key, min, max));
  return x;
}

std::string get_string(const json& obj, const char* key, std::optional<std::string> fallback, std::size_t max_len) {
  const json* v = field(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    missing(key);
  }
  if (!v->is_string()) throw ApiError(422, "invalid_field", fmt::format("field \"{}\" must be a string", key));
  const auto& s = v->get_ref<const std::string&>();
  if (s.size() > max_len)
    throw ApiError(422, "invalid_field", fmt::format("field \"{}\" is longer than {} bytes", key, max_len));
  return s;
}

std::int64_t parse_index(std::string_view text, std::string_view what) {
  std::int64_t x = -1;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || x < 0)
    throw ApiError(400, "invalid_path", fmt::format("{} must be a non-negative integer", what));
  return x;
}

}  // namespace perseus::server
