// The one CSV field reader (see csv_fields.hpp).
#include "csv_fields.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/core.h>
#include <utf8cpp/utf8.h>

#include "perseus/error.hpp"
#include "perseus/input_file.hpp"

namespace perseus::csv {

std::string read_file(const std::string& path, std::string_view what) {
  return read_input_file(path, what);  // streams too, with the input size limit
}

std::string_view strip_bom(std::string_view text) {
  return text.starts_with("\xEF\xBB\xBF") ? text.substr(3) : text;
}

void reject_non_text(std::string_view text, const std::string& source) {
  // The first byte that is not UTF-8 (RFC 3629, checked by utfcpp: no overlongs, no
  // surrogates, at most U+10FFFF), or a NUL / control character (bytes < 0x80, so never inside a
  // multi-byte sequence), whichever comes first.
  const std::size_t invalid = static_cast<std::size_t>(utf8::find_invalid(text.begin(), text.end()) - text.begin());
  std::size_t control = 0;
  for (; control < invalid; ++control) {
    const auto c = static_cast<unsigned char>(text[control]);
    if ((c < 0x20 && c != '\t' && c != '\r' && c != '\f' && c != '\n') || c == 0x7F) break;
  }
  const std::size_t at = std::min(control, invalid);
  if (at == text.size()) {
    // A carriage return not followed by a line feed (classic Mac line endings): every reader
    // would see one long line and report a puzzling header or field.
    const std::size_t cr = text.find('\r');
    for (std::size_t i = cr; i != std::string_view::npos; i = text.find('\r', i + 1)) {
      if (i + 1 < text.size() && text[i + 1] != '\n') {
        throw InputError::in_file(source, line_and_column(text, i).first, "",
                                  "a carriage return (CR) without a line feed: lines must end with LF or CR LF "
                                  "(old Mac CR-only line endings are not read; convert the file, e.g. tr '\\r' '\\n')");
      }
    }
    return;
  }
  // UTF-16 (a spreadsheet's "Unicode text") starts with its byte-order mark: say what to do
  // rather than "binary?" (session 32's trial).
  if (text.starts_with("\xFF\xFE") || text.starts_with("\xFE\xFF")) {
    throw InputError::in_file(source, 1, "",
                              fmt::format("not a UTF-8 CSV file: it starts with a UTF-16 byte-order mark (0x{:02X} 0x{:02X}); "
                                          "save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)",
                                          static_cast<unsigned char>(text[0]), static_cast<unsigned char>(text[1])));
  }
  const auto c = static_cast<unsigned char>(text[at]);
  const auto [line, column] = line_and_column(text, at);
  if (c == 0) throw InputError::in_file(source, line, "", "contains a NUL byte (expected CSV text)");
  throw InputError::in_file(source, line, "",
                            fmt::format("not a text CSV file: byte 0x{:02X} at column {} {} ({})", c, column,
                                        control < invalid ? "is a control character" : "is not UTF-8 text",
                                        control < invalid ? "a binary or compressed file?"
                                                          : "a binary or compressed file, or text in another encoding "
                                                            "such as Latin-1: save it as UTF-8"));
}

std::vector<std::string> split_line(std::string_view line, const std::string& source, long line_no) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string> out;
  std::string cell;
  bool quoted = false, was_quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"' && cell.find_first_not_of(" \t") == std::string::npos && !was_quoted) {
      cell.clear();
      quoted = was_quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cell));
      cell.clear();
      was_quoted = false;
    } else {
      cell += c;
    }
  }
  if (quoted) throw InputError::in_file(source, static_cast<long>(line_no), "", "unterminated quoted field (a quoted field must end on its own line)");
  out.push_back(std::move(cell));
  for (auto& f : out) {  // trim spaces (quoted content keeps inner spaces)
    const auto b = f.find_first_not_of(" \t");
    const auto e = f.find_last_not_of(" \t");
    f = b == std::string::npos ? std::string() : f.substr(b, e - b + 1);
  }
  return out;
}

void fail(const std::string& source, long line, std::string_view field, const std::string& what) {
  throw InputError::in_file(source, line, std::string(field), what);
}

namespace {
/// `s` without one leading '+' before a digit or '.' ("+1" and "+.5", as Python and spreadsheets
/// read them; std::from_chars refuses the sign). "+-1", "++1" and "+" stay refused.
std::string_view without_plus(std::string_view s) {
  return s.size() > 1 && s[0] == '+' && (s[1] == '.' || (s[1] >= '0' && s[1] <= '9')) ? s.substr(1) : s;
}
}  // namespace

double to_double(const std::string& source, long line, std::string_view field, std::string_view text) {
  const std::string_view s = without_plus(text);
  double value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range && ptr == s.data() + s.size())
    fail(source, line, field,
         fmt::format("expected a number within a double's range (magnitude about 1e-308 to 1e308, or 0), got {}",
                     quote_input(text)));
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    fail(source, line, field, fmt::format("expected a number, got {}", quote_input(text)));
  }
  if (!std::isfinite(value))
    fail(source, line, field, fmt::format("expected a finite number, got {}", quote_input(text)));
  return value;
}

long to_int(const std::string& source, long line, std::string_view field, std::string_view text) {
  const std::string_view s = without_plus(text);
  long value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (!s.empty() && ec == std::errc() && ptr == s.data() + s.size()) return value;
  // Accept integral floats such as "1410.0" written by pandas.
  double d = 0;
  const auto [p2, e2] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (!s.empty() && e2 == std::errc() && p2 == s.data() + s.size() && std::isfinite(d) && d == std::floor(d) &&
      std::abs(d) < 1e9) {
    return static_cast<long>(d);
  }
  const bool digits = !s.empty() && std::all_of(s.begin() + (s[0] == '-' ? 1 : 0), s.end(), [](char c) {
    return c >= '0' && c <= '9';
  }) && s != "-";
  fail(source, line, field,
       digits ? fmt::format("expected an integer, got {}, which is out of range", quote_input(text))
              : fmt::format("expected a decimal integer, got {}", quote_input(text)));
}

}  // namespace perseus::csv
