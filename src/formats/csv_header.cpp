// throw_header_error(): libfccp header errors that say what the header should be.
#include "csv_header.hpp"

#include <algorithm>
#include <fstream>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus::csv {

void throw_header_error(const io::error::base& e, const std::string& source, std::string_view text,
                        std::string_view columns) {
  const auto start = text.find_first_not_of(" \t\r\n");  // the header: the first line that is not blank
  if (dynamic_cast<const io::error::header_missing*>(&e) != nullptr || start == std::string_view::npos) {
    throw InputError(fmt::format("{}: the file is empty; expected a header line {}, then the data rows", source, columns));
  }
  std::string what = e.what();  // libfccp's own text (line -1 for a buffer) only where nothing better is known
  if (dynamic_cast<const io::error::escaped_string_not_closed*>(&e) != nullptr) {
    what = "the header has an unclosed quote";
  } else if (dynamic_cast<const io::error::line_length_limit_exceeded*>(&e) != nullptr) {
    what = "the header line is longer than 16 MiB";
  }
  if (const auto* col = dynamic_cast<const io::error::with_column_name*>(&e); col != nullptr) {
    if (dynamic_cast<const io::error::missing_column_in_header*>(&e) != nullptr) {
      what = fmt::format("the header has no column {}", quote_input(col->column_name));
    } else if (dynamic_cast<const io::error::duplicated_column_in_header*>(&e) != nullptr) {
      what = fmt::format("the header has column {} twice", quote_input(col->column_name));
    }
  }
  const std::size_t nl = text.rfind('\n', start);
  const std::size_t line_start = nl == std::string_view::npos ? 0 : nl + 1;
  std::string_view first = text.substr(line_start);
  first = first.substr(0, first.find('\n'));
  if (!first.empty() && first.back() == '\r') first.remove_suffix(1);
  const long line = 1 + static_cast<long>(std::count(text.begin(), text.begin() + line_start, '\n'));
  std::string hint;
  const bool commas = first.find(',') != std::string_view::npos;
  if (!commas && first.find(';') != std::string_view::npos) {
    hint = "; the file is separated by ';' (a spreadsheet's locale setting?): save it comma-separated";
  } else if (!commas && first.find('\t') != std::string_view::npos) {
    hint = "; the file is separated by tabs: save it comma-separated";
  }
  throw InputError::in_file(source, static_cast<long>(line), "",
                            fmt::format("{} (expected columns {}, in any order, extra columns ignored; got {}){}", what,
                                        columns, quote_input(first, 120), hint));
}

void throw_missing_column(const char* column, const std::string& source, std::string_view text,
                          std::string_view columns) {
  io::error::missing_column_in_header err;
  err.set_column_name(column);
  throw_header_error(err, source, text, columns);
}

void throw_row_error(const io::error::base& e, const std::string& source, std::string_view columns) {
  const auto* at = dynamic_cast<const io::error::with_file_line*>(&e);
  std::string what = e.what();
  if (dynamic_cast<const io::error::too_few_columns*>(&e) != nullptr) what = "too few columns";
  if (dynamic_cast<const io::error::too_many_columns*>(&e) != nullptr) what = "too many columns";
  if (dynamic_cast<const io::error::escaped_string_not_closed*>(&e) != nullptr) what = "unclosed quote (a quoted field must end on its own line)";
  if (dynamic_cast<const io::error::line_length_limit_exceeded*>(&e) != nullptr) what = "line longer than 16 MiB";
  if (at == nullptr || at->file_line < 0) throw InputError(fmt::format("{}: {}", source, what));
  throw InputError::in_file(source, static_cast<long>(at->file_line), "",
                            fmt::format("{}: expected one field per header column ({} and any extra columns)", what,
                                        columns));
}

std::string read_head(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text(max_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(max_bytes));
  text.resize(static_cast<std::size_t>(std::max<std::streamsize>(0, in.gcount())));
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);  // a UTF-8 BOM
  return text;
}

}  // namespace perseus::csv
