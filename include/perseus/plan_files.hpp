// Plan JSON files (plans/plan_NNNNN.json): the one writer and the one reader. Zeus plan files
// (plans/freqs_pipeline_NNNNN.py) are in zeus_plan_file.hpp.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/dag.hpp"
#include "perseus/plan.hpp"

namespace perseus {

/// "plan_NNNNN.json" (index zero-padded to 5 digits).
std::string plan_json_file_name(std::size_t index);
/// A plan as JSON: {"plan": index (null when absent), "time_s", "energy_j",
/// "compute_energy_j", "blocking_energy_j", "ranks": [{"rank", "instructions":
/// [{"instruction", "stage", "microbatch", "frequency_mhz", "start_s", "end_s"}]}]}, each
/// rank's computations in execution order. Times in s, energies in J, frequencies in MHz.
nlohmann::json plan_json(const Dag& dag, const FrequencyPlan& plan, std::optional<std::size_t> index);

/// The text of plan_NNNNN.json: plan_json() dumped with indent 1 and a final newline.
std::string plan_json_text(const Dag& dag, const FrequencyPlan& plan, std::size_t index);

/// Per-op frequencies (MHz, indexed by DAG op id) of a plan in JSON, the one plan reader.
/// Accepts both forms: a plan file (plan_json(): "ranks" is a list of {"rank",
/// "instructions": [...]}) and the compact form of the server's "plans" jobs ("ranks" is a
/// list of per-rank lists). An entry gives its frequency as "frequency_mhz" or "freq_mhz"
/// (a positive integer); with "instruction" and "microbatch" (and "stage", else the rank's
/// own stage for one chunk) it names its computation, without them it is the rank's next
/// computation in execution order. In the plan file form (written in execution order) a named
/// entry must be the rank's computation at its position: otherwise (e.g. a 1F1B plan read
/// against GPipe) the plan is of another schedule. Every computation appears exactly once.
/// `where` prefixes error messages (e.g. "plans[3]" or a file name). When `durations_s` is
/// given, every entry must also carry "start_s" and "end_s" (s, end_s > start_s, as plan files
/// do) and durations_s receives end_s − start_s per op id (s; size dag.num_ops()).
/// Throws InputError naming the entry and what was expected.
std::vector<int> plan_frequencies_from_json(const nlohmann::json& plan, const Dag& dag, const std::string& where,
                                            std::vector<double>* durations_s = nullptr);

}  // namespace perseus
