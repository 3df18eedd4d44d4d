// Reading JSON text a user wrote or sent (plan files, job exports, info.json of real-GPU runs,
// the server's request bodies): one parser whose errors name the source, line, column and the
// field, never the JSON library's own exception text.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "perseus/error.hpp"

namespace perseus {

/// parse_json_text()'s error: an InputError (what(): "SOURCE:LINE: field 'FIELD': MESSAGE",
/// the field part absent at the top level) that also says whether the text was valid JSON
/// with a number outside the range of a double, and at which column (1-based byte in LINE).
class JsonTextError : public InputError {
 public:
  JsonTextError(InputError error, bool number_out_of_range, long column)
      : InputError(std::move(error)), number_out_of_range_(number_out_of_range), column_(column) {}
  /// True for a number such as 1e400 (the text is valid JSON; RFC 8259 section 6 leaves the
  /// range of numbers to implementations, ours is a double's, ±1.8e308); false for invalid JSON.
  bool number_out_of_range() const noexcept { return number_out_of_range_; }
  long column() const noexcept { return column_; }

 private:
  bool number_out_of_range_ = false;
  long column_ = 0;
};

/// Deepest array/object nesting parse_json_text() accepts: Perseus's own files nest a few
/// levels; a value nested 100,000 deep parsed, then crashed code that copies or prints values
/// recursively (the server's request bodies have the same limit, kMaxJsonDepth).
inline constexpr int kMaxJsonTextDepth = 64;

/// The nesting and size of a JSON text, scanned before any parser nests or builds a node.
struct JsonShape {
  int deepest = 0;          ///< deepest array/object nesting seen (the scan stops past depth_limit)
  std::size_t values = 0;   ///< JSON values: the top-level one, each array element and object member
  std::size_t too_deep_at = 0;  ///< byte offset of the bracket that passed depth_limit (when deepest > it)
};
/// json_shape(): scans `text` until the nesting passes `depth_limit` or the values pass
/// `value_limit` (strings and escapes skipped). Linear, no recursion, no allocation. Exact for
/// valid JSON, an estimate otherwise (the parser then reports the syntax error).
JsonShape json_shape(std::string_view text, int depth_limit, std::size_t value_limit);

/// Parses `text`, one JSON value (RFC 8259), that came from `source` (a file path, or a name
/// such as "request body"). Throws JsonTextError (an InputError):
/// - invalid JSON: "SOURCE:LINE: malformed JSON at column C: WHAT", WHAT the parser's
///   description (e.g. "syntax error while parsing object - unexpected end of input; expected '}'"),
///   with the field being read when there is one ("SOURCE:LINE: field 'ranks[0].time_s': ...");
/// - a number outside the range of a double: "SOURCE:LINE: field 'ranks[0].time_s': number
///   1e400 is outside the range of a double (±1.8e308); expected a finite number";
/// - nesting deeper than kMaxJsonTextDepth: "SOURCE:LINE: malformed JSON at column C: arrays and
///   objects nest deeper than 64 levels".
/// The field is a path from the top: object keys joined by '.', array indices in brackets.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);
/// parse_json_text() with the json_shape() of `text` the caller already took (depth_limit at
/// most kMaxJsonTextDepth): one linear scan of a large request body, not two.
nlohmann::json parse_json_text(std::string_view text, const std::string& source, const JsonShape& shape);

/// A JSON value read from input as an error message shows it: a number, boolean or null as
/// written; a string by quote_input() (escaped, at most 80 bytes, "'…' (N bytes)" when longer);
/// an array or object by its kind and size only ("an array of 3 values"), so that a value
/// nested 100,000 levels deep (dump() recursed until the stack overflowed) or a megabyte long
/// costs one line. Never throws.
std::string describe_json_value(const nlohmann::json& value);

/// parse_json_text() of a file's whole content. Throws InputError "PATH: cannot read WHAT"
/// when the file cannot be opened, JsonTextError as parse_json_text().
nlohmann::json load_json_file(const std::string& path, std::string_view what = "the file");

}  // namespace perseus
