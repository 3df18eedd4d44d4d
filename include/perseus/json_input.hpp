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

/// Parses `text`, one JSON value (RFC 8259), that came from `source` (a file path, or a name
/// such as "request body"). Throws JsonTextError (an InputError):
/// - invalid JSON: "SOURCE:LINE: malformed JSON at column C: WHAT", WHAT the parser's
///   description (e.g. "syntax error while parsing object - unexpected end of input; expected '}'"),
///   with the field being read when there is one ("SOURCE:LINE: field 'ranks[0].time_s': ...");
/// - a number outside the range of a double: "SOURCE:LINE: field 'ranks[0].time_s': number
///   1e400 is outside the range of a double (±1.8e308); expected a finite number".
/// The field is a path from the top: object keys joined by '.', array indices in brackets.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

/// parse_json_text() of a file's whole content. Throws InputError "PATH: cannot read WHAT"
/// when the file cannot be opened, JsonTextError as parse_json_text().
nlohmann::json load_json_file(const std::string& path, std::string_view what = "the file");

}  // namespace perseus
