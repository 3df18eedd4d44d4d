// parse_json_text(): nlohmann's DOM parser, driven through its SAX interface so that an error
// knows the field being read (see json_input.hpp).
#include "perseus/json_input.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "csv_fields.hpp"

namespace perseus {

namespace {

using nlohmann::json;

/// The library's DOM builder, plus the path of the value being read (keys and array indices).
/// sax_parse() calls these members on this type, so they hide the base's (which are not virtual).
class PathTrackingParser : public nlohmann::detail::json_sax_dom_parser<json> {
  using Base = nlohmann::detail::json_sax_dom_parser<json>;
  struct Frame {
    bool array = false;
    std::string key;        // objects: the last key read
    std::size_t index = 0;  // arrays: values read so far
    std::set<std::string> keys;  // objects: every key read (a repeated key is an error)
  };

 public:
  explicit PathTrackingParser(json& result) : Base(result, /*allow_exceptions_=*/true) {}

  bool null() { return value_done(Base::null()); }
  bool boolean(bool v) { return value_done(Base::boolean(v)); }
  bool number_integer(json::number_integer_t v) { return value_done(Base::number_integer(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value_done(Base::number_unsigned(v)); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return value_done(Base::number_float(v, s)); }
  bool string(json::string_t& v) { return value_done(Base::string(v)); }
  bool binary(json::binary_t& v) { return value_done(Base::binary(v)); }
  bool start_object(std::size_t n) {
    frames_.push_back({false, {}, 0, {}});
    return Base::start_object(n);
  }
  bool key(json::string_t& k) {
    // A repeated key would silently keep one of two values ({"rank": 0, "rank": 1}): refused.
    if (!frames_.back().keys.insert(k).second) {
      duplicate_key_ = k;
      return false;
    }
    frames_.back().key = k;
    return Base::key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return value_done(Base::end_object());
  }
  bool start_array(std::size_t n) {
    frames_.push_back({true, {}, 0, {}});
    return Base::start_array(n);
  }
  bool end_array() {
    frames_.pop_back();
    return value_done(Base::end_array());
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& ex) {
    error_ = Error{position, token, ex.what(), std::is_same_v<Exception, nlohmann::detail::out_of_range>};
    return false;
  }

  /// Where the parser stopped, when it did.
  struct Error {
    std::size_t position = 0;  // bytes read
    std::string token, what;
    bool number_out_of_range = false;
  };
  const std::optional<Error>& error() const { return error_; }
  /// The key read twice in one object, when that stopped the parse.
  const std::optional<std::string>& duplicate_key() const { return duplicate_key_; }

  /// "ranks[0].time_s": the field being read ("" at the top level).
  std::string path() const {
    std::string out;
    for (const Frame& f : frames_) {
      if (f.array) out += fmt::format("[{}]", f.index);
      else if (!f.key.empty()) out += (out.empty() ? "" : ".") + escape_input(f.key, 64);
    }
    return out;
  }

 private:
  bool value_done(bool ok) {  // a key names the value being read only until that value ends
    if (!frames_.empty()) {
      if (frames_.back().array) ++frames_.back().index;
      else frames_.back().key.clear();
    }
    return ok;
  }
  std::vector<Frame> frames_;
  std::optional<Error> error_;
  std::optional<std::string> duplicate_key_;
};

/// nlohmann's description without its "[json.exception...] parse error at line L, column C: "
/// prefix (we give the position ourselves), and with the token it read ("last read: '...'",
/// as long as a whole string value) cut and escaped by quote_input().
std::string description(const std::string& what, const std::string& token) {
  std::string out = what;
  if (const auto col = out.find("column "); col != std::string::npos) {
    if (const auto colon = out.find(": ", col); colon != std::string::npos) out = out.substr(colon + 2);
  } else if (out.starts_with("[json.exception.")) {
    if (const auto end = out.find("] "); end != std::string::npos) out = out.substr(end + 2);
  }
  if (const auto last = out.find("; last read: "); last != std::string::npos) {
    out = out.substr(0, last) + "; last read: " + quote_input(token);
  }
  return out;
}

}  // namespace

JsonShape json_shape(std::string_view text, int depth_limit, std::size_t value_limit) {
  JsonShape out;
  int depth = 0;
  bool in_string = false, escaped = false, just_opened = false;
  out.values = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') continue;
    if (just_opened && ch != ']' && ch != '}') ++out.values;  // the container's first element
    just_opened = false;
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      out.deepest = std::max(out.deepest, ++depth);
      just_opened = true;
      if (out.deepest > depth_limit) {
        out.too_deep_at = i;
        return out;
      }
    } else if (ch == ']' || ch == '}') {
      --depth;
    } else if (ch == ',') {
      ++out.values;
    }
    if (out.values > value_limit) return out;
  }
  return out;
}

json parse_json_text(std::string_view text, const std::string& source) {
  return parse_json_text(text, source, json_shape(text, kMaxJsonTextDepth, static_cast<std::size_t>(-1)));
}

json parse_json_text(std::string_view text, const std::string& source, const JsonShape& shape) {
  // A NUL byte would end the text early for the parser (and for C readers of the same bytes):
  // junk after it must not pass as valid JSON.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const auto [line, column] = line_and_column(text, nul);
    throw JsonTextError(InputError::in_file(source, line, "",
                                            fmt::format("malformed JSON at column {}: a NUL byte (JSON is UTF-8 text)",
                                                        column)),
                        false, column);
  }
  if (shape.deepest > kMaxJsonTextDepth) {
    const auto [line, column] = line_and_column(text, shape.too_deep_at);
    throw JsonTextError(InputError::in_file(source, line, "",
                                            fmt::format("malformed JSON at column {}: arrays and objects nest deeper "
                                                        "than {} levels",
                                                        column, kMaxJsonTextDepth)),
                        false, column);
  }
  json result;
  PathTrackingParser parser(result);
  bool ok = false;
  std::optional<PathTrackingParser::Error> error;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &parser);
    error = parser.error();
  } catch (const json::exception& e) {  // not expected (errors go through parse_error()); kept as a syntax error
    error = PathTrackingParser::Error{text.size(), "", e.what(), false};
  }
  if (ok && !error) return result;
  if (const auto& dup = parser.duplicate_key()) {
    // The parser stopped after the repeated key; point at its second occurrence.
    const std::string quoted = json(*dup).dump();
    std::size_t at = text.find(quoted);
    if (at != std::string_view::npos) at = text.find(quoted, at + 1);
    const auto [line, column] = line_and_column(text, at == std::string_view::npos ? 0 : at);
    const std::string field = parser.path();
    throw JsonTextError(InputError::in_file(source, line, field,
                                            fmt::format("key {} appears more than once in one object; give it once",
                                                        quote_input(*dup, 64))),
                        false, column);
  }
  if (!error) error = PathTrackingParser::Error{text.size(), "", "unexpected end of input", false};
  // 1-based line and column of the last byte the parser read.
  const std::size_t at = std::min(error->position, text.size());
  const auto [line, column] = line_and_column(text, at == 0 ? 0 : at - 1);
  const std::string field = parser.path();
  if (error->number_out_of_range) {
    throw JsonTextError(
        InputError::in_file(source, line, field,
                            fmt::format("number {} is outside the range of a double (±1.8e308); expected a finite "
                                        "number",
                                        escape_input(error->token, 64))),
        true, column);
  }
  // Python's json.dump writes NaN and Infinity, which JSON has no spelling for: say so.
  std::size_t word = at;
  while (word > 0 && std::isalpha(static_cast<unsigned char>(text[word - 1]))) --word;
  const std::string_view literal = text.substr(word);
  const bool non_finite = word < at && (literal.starts_with("NaN") || literal.starts_with("Infinity"));
  throw JsonTextError(
      InputError::in_file(source, line, field,
                          fmt::format("malformed JSON at column {}: {}{}", column, description(error->what, error->token),
                                      non_finite ? " (NaN and Infinity are not JSON: give a finite number)" : "")),
      false, column);
}

std::string describe_json_value(const json& value) {
  switch (value.type()) {
    case json::value_t::string: return quote_input(value.get_ref<const std::string&>());
    case json::value_t::array:
      return value.empty() ? "an empty array" : fmt::format("an array of {} value{}", value.size(), value.size() == 1 ? "" : "s");
    case json::value_t::object:
      return value.empty() ? "an empty object" : fmt::format("an object of {} key{}", value.size(), value.size() == 1 ? "" : "s");
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "nothing";
    default: return value.dump();  // number, boolean, null: short, and plain ASCII
  }
}

json load_json_file(const std::string& path, std::string_view what) {
  return parse_json_text(csv::read_file(path, what), path);  // read_file names the reason
}

}  // namespace perseus
