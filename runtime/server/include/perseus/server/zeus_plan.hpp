// Zeus/Perseus plan files (freqs_pipeline_NNNNN.py) read as DATA, never evaluated.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace perseus::server {

/// One entry of a Zeus plan: a frequency (MHz), with the instruction name when the file uses
/// the PFO tuple form ("forward", 1410); kronos files carry bare integers.
struct ZeusPlanEntry {
  std::optional<std::string> instruction;  ///< e.g. "forward"; absent for bare integers.
  int freq_mhz = 0;                        ///< SM frequency, MHz (> 0).
};

/// A Zeus plan: one list of entries per pipeline stage, in that stage's execution order.
using ZeusPlan = std::vector<std::vector<ZeusPlanEntry>>;

/// Parses the text of a Zeus plan file: a Python list literal of per-stage lists whose items
/// are integers or 2-tuples/lists (string, integer). `#` comments, whitespace and trailing
/// commas are allowed; nothing else (no names, calls or expressions) is. At most
/// `max_entries` entries in total. Throws perseus::InputError naming `source` and the byte
/// offset of the first problem.
ZeusPlan parse_zeus_plan(std::string_view text, const std::string& source, std::size_t max_entries = 10'000'000);

/// Writes a plan back in the PFO tuple form (`[[("forward", 1410), ...], ...]`), for tests.
std::string format_zeus_plan(const ZeusPlan& plan);

}  // namespace perseus::server
