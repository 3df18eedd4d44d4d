// Zeus/Perseus plan files (plans/freqs_pipeline_NNNNN.py): the one writer, and the one reader,
// which reads them as DATA, never evaluated. Format: a Python list literal with one list per
// pipeline stage (rank) of ("instruction", MHz) tuples in execution order (Zeus PFO, Perseus
// artifact); kronos files carry bare integers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/plan.hpp"

namespace perseus {

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

/// "freqs_pipeline_NNNNN.py" (index zero-padded to 5 digits).
std::string zeus_plan_file_name(std::size_t index);

/// The text of a Zeus plan file (the one writer): a Python list literal, one line per stage,
/// entries in the PFO tuple form `("forward", 1410)` (bare integers where an entry has no
/// instruction), then `# COMMENT` lines when `comment` is not empty. parse_zeus_plan() reads it back.
std::string zeus_plan_text(const ZeusPlan& plan, std::string_view comment = {});

/// zeus_plan_text() of a planned FrequencyPlan: each rank's computations in execution order,
/// commented with the plan index, iteration time T (s) and energy (J).
std::string zeus_plan_text(const Dag& dag, const FrequencyPlan& plan, std::size_t index);

}  // namespace perseus
