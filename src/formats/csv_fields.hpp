// The one CSV field reader of the library (profile CSV, schedule CSV, the artifact's
// validation CSVs, report tables): UTF-8 BOM, CRLF, quoting, NUL bytes and
// `FILE:LINE: field 'NAME': what was expected` errors, in one place.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace perseus::csv {

/// The whole file as text: read_input_file() (a stream too, at most limits::kMaxInputFileBytes).
/// Throws InputError "PATH: cannot open WHAT: REASON" (the system's reason, or "it is a folder,
/// not a file") / "PATH: cannot read WHAT: REASON" (a read error, or larger than the limit).
std::string read_file(const std::string& path, std::string_view what = "the file");

/// `text` without a leading UTF-8 byte order mark (spreadsheets add one; it is invisible
/// and would otherwise become part of the first field).
std::string_view strip_bom(std::string_view text);

/// Throws InputError when `text` is not text: "SOURCE:LINE: contains a NUL byte (expected CSV
/// text)" (C readers would silently stop the line there), or "SOURCE:LINE: not a text CSV file:
/// byte 0xNN at column C is a control character / is not UTF-8 text" for other control bytes
/// (tab, CR, LF and form feed are text) or bytes that are not UTF-8 (RFC 3629), e.g. a binary or
/// compressed file given as a CSV. LINE is 1-based, C the 1-based byte in that line.
void reject_non_text(std::string_view text, const std::string& source);

/// Fields of one line: comma separated, RFC 4180 quoting ("a,b" and "" for a quote),
/// surrounding spaces/tabs and a trailing CR (CRLF files) trimmed; quoted content keeps
/// its inner spaces. Throws InputError "SOURCE:LINE: unterminated quoted field".
std::vector<std::string> split_line(std::string_view line, const std::string& source, long line_no);

/// Throws InputError::in_file(source, line, field, what): "SOURCE:LINE: field 'FIELD': WHAT".
[[noreturn]] void fail(const std::string& source, long line, std::string_view field, const std::string& what);

/// A finite number (decimal, optional exponent, one optional leading '+' or '-').
/// Throws "...: field 'F': expected a number, got 'X'" (or "a finite number").
double to_double(const std::string& source, long line, std::string_view field, std::string_view text);

/// An integer (one optional leading '+' or '-'); integral floats such as "1410.0" (pandas) are
/// accepted. Throws "expected an integer".
long to_int(const std::string& source, long line, std::string_view field, std::string_view text);

}  // namespace perseus::csv
