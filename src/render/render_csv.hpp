// Private: a small CSV table reader for the report (frontier, points, emulation tables).
#pragma once

#include <string>
#include <vector>

namespace perseus::render_detail {

/// A CSV file as text cells. Lines are 1-based file lines of each row (for messages).
struct CsvTable {
  std::string source;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;
  /// Index of the first header column named any of `names`, or -1.
  int column(std::initializer_list<const char*> names) const;
};

/// Reads a comma-separated file with a header line. Fields may be double-quoted (RFC 4180,
/// "" inside quotes is a quote; no newlines inside fields). Blank lines are skipped.
/// Throws InputError naming file and line when the file cannot be read, has no header, or
/// a row has a different number of fields than the header.
CsvTable read_csv_table(const std::string& path);

/// Parses a finite double or throws InputError "<source>:<line>: field '<field>': ...".
double csv_number(const CsvTable& t, std::size_t row, int col);

}  // namespace perseus::render_detail
