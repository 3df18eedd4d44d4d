// The header-only CSV reader (libfccp), compiled identically in every file that uses it (ODR),
// and the one phrasing of its header errors.
#pragma once

#include <string>
#include <string_view>

#define CSV_IO_NO_THREAD
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#include <libfccp/csv.h>
#pragma GCC diagnostic pop

namespace perseus::csv {

/// Throws the InputError for a header libfccp's read_header() rejected (`e`), naming what
/// the file should hold:
/// - a blank file: "SOURCE: the file is empty; expected a header line COLUMNS, then the data rows";
/// - otherwise "SOURCE:LINE: the header has no column 'X'" (or "has column 'X' twice") "(expected
///   columns COLUMNS, in any order, extra columns ignored; got 'HEADER')", plus a hint when the
///   header is separated by ';' (a spreadsheet's locale) or tabs instead of commas.
/// `text` is the file's text (its first lines suffice; a UTF-8 BOM already stripped), LINE
/// its first non-blank line. `columns`: the required columns, comma separated.
[[noreturn]] void throw_header_error(const io::error::base& e, const std::string& source, std::string_view text,
                                     std::string_view columns);

/// throw_header_error() for a required column the header lacks (a reader opened with
/// io::ignore_missing_column checks has_column() itself).
[[noreturn]] void throw_missing_column(const char* column, const std::string& source, std::string_view text,
                                       std::string_view columns);

/// Throws the InputError for a row libfccp's read_row() rejected (`e`): "SOURCE:LINE: too few
/// columns" (too many, unclosed quote) ": expected one field per header column (COLUMNS and
/// any extra columns)"; "SOURCE: WHAT" when libfccp gives no line.
[[noreturn]] void throw_row_error(const io::error::base& e, const std::string& source, std::string_view columns);

/// The first `max_bytes` of the file at `path` (for throw_header_error()); empty if unreadable.
std::string read_head(const std::string& path, std::size_t max_bytes = 4096);

}  // namespace perseus::csv
