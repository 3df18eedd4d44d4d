// Error types shared by the Perseus library.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace perseus {

/// Raised for bad user input: a malformed profile or schedule file, an impossible
/// configuration (e.g. 0 stages), an unknown schedule name.
///
/// Structured: `field` is the input that was wrong, in the library's own vocabulary (the
/// name of the struct member or spec field, e.g. "num_ranks", "p_block_w", "tp_degree";
/// for file errors the CSV column or JSON key), `source`/`line` the file and 1-based line
/// when the input came from a file, `message` what was expected. The library never names a
/// command-line flag: each front end phrases the field in its own terms with phrased()
/// (the CLI as `--stages`, Python as the keyword argument, the server as the JSON field).
///
/// what() is the default phrasing (fields named as they are):
/// - a field error: "FIELD MESSAGE" (e.g. "tp_degree must be >= 1, got 0"; no space when
///   MESSAGE starts with ':');
/// - a file error: "SOURCE:LINE: field 'FIELD': MESSAGE" (without the parts that are empty);
/// - a free-text error (field empty): MESSAGE.
/// A message may name further fields as `{field:NAME}`; phrased() renders them too.
class InputError : public std::runtime_error {
 public:
  /// How a front end names a field (identity: the library's names).
  using Phrase = std::function<std::string(const std::string& field)>;

  /// Free text, no field (messages that already name everything, e.g. file errors built by hand).
  explicit InputError(const std::string& message);
  /// A bad value of input `field`; `message` continues the sentence ("must be >= 1, got 0").
  InputError(std::string field, std::string message);
  /// A bad field in a file: "SOURCE:LINE: field 'FIELD': MESSAGE" (line 0: no line; field empty: no field).
  static InputError in_file(std::string source, long line, std::string field, std::string message);
  /// A file error whose `message` already says where, in its own words (e.g. the schedule CSV's
  /// "FILE:LINE (rank R), action P: ..."): the text stays exactly `message`; field(), source()
  /// and line() (0: no line) still tell a program where.
  static InputError located(std::string source, long line, std::string field, std::string message);

  const std::string& field() const noexcept { return field_; }
  const std::string& source() const noexcept { return source_; }
  long line() const noexcept { return line_; }
  const std::string& message() const noexcept { return message_; }

  /// The full text with every field (the main one and `{field:NAME}` references) named by `phrase`.
  std::string phrased(const Phrase& phrase) const;

 private:
  InputError(std::string field, std::string source, long line, std::string message, bool in_file,
             bool verbatim = false);
  std::string field_, source_, message_;
  long line_ = 0;
  bool in_file_ = false;
  bool verbatim_ = false;  // located(): the message is the whole text
};

/// `{field:NAME}`: a reference to another input field inside an InputError message.
std::string field_ref(const std::string& name);

/// Longest part of an input value an error message quotes, bytes (quote_input()).
inline constexpr std::size_t kMaxQuotedBytes = 80;

/// `text` (an input value: a CSV field, a JSON string) made safe to print in one line of an
/// error message: a backslash becomes `\\`, tab, CR and LF `\t`, `\r`, `\n`, other control
/// characters (C0, DEL, C1 such as the 8-bit CSI) and bytes that are not UTF-8 `\xNN` or
/// `\u00NN`, invisible and direction-changing characters (zero-width spaces and joiners, bidi
/// marks, embeddings, overrides and isolates, U+2028/U+2029, a byte order mark) `\uNNNN`, so a
/// value cannot forge terminal output or hide a character; at most its first `max_bytes` bytes
/// (never half a character), then "…" when cut.
std::string escape_input(std::string_view text, std::size_t max_bytes = kMaxQuotedBytes);

/// Longest error message terminal_safe() passes, bytes.
inline constexpr std::size_t kMaxMessageBytes = 4096;

/// A whole error message made safe to print on a terminal, for messages that may carry text no
/// reader quoted (a path, an operating-system or library message): escape_input()'s rules except
/// that newlines and backslashes are kept (values quoted inside were escaped already); at most
/// its first `max_bytes` bytes, then "…". What the CLI and the Python module print errors with.
std::string terminal_safe(std::string_view message, std::size_t max_bytes = kMaxMessageBytes);

/// 1-based line and column (in bytes) of byte `at` of `text` (`at` past the end: its end), as
/// error messages give a position: {line, column}.
std::pair<long, long> line_and_column(std::string_view text, std::size_t at);

/// escape_input() in single quotes, plus " (N bytes)" when cut: "'abc'", or "'0.1000…' (1048576
/// bytes)" for a 1 MB field. What every reader quotes a bad value with.
std::string quote_input(std::string_view text, std::size_t max_bytes = kMaxQuotedBytes);

}  // namespace perseus
