// Usage hints of the `perseus` command: an unknown subcommand or option gets a message that
// names it and, for a near miss (a typo), the name the user probably meant.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace perseus::cli {

/// The candidate closest to `typed` when it is a near miss: Levenshtein distance <= 2 (at most
/// a third of typed's length, so short words do not match everything), or a candidate that
/// starts with `typed` (at least 3 characters besides leading dashes). Ties: first candidate.
/// std::nullopt when none is close.
std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& candidates);

/// The usage error of a --schedule value that is neither a schedule name nor a regular file:
/// for a path that exists but is not a regular file (a folder, FIFO, device), says so; else
/// "'X' is not a schedule name (NAMES) nor an existing schedule CSV file", with "did you mean"
/// for a near miss of a name.
std::string unknown_schedule_message(const std::string& value, const std::vector<std::string>& names);

/// True when `path` names a stream (a pipe, `/dev/stdin`, `<(cmd)`: it exists and is neither a
/// regular file nor a folder). A command reads it once with keep_stream_input() (`--schedule
/// /dev/stdin`), so the schedule reader finds its text.
bool is_stream_path(const std::string& path);

/// When argv[1] is neither an option nor a subcommand of `app`: "unknown command 'X'" with a
/// "did you mean" for a near miss and the list of commands. std::nullopt otherwise.
std::optional<std::string> unknown_subcommand_message(CLI::App& app, int argc, const char* const* argv);

/// The options of argv (tokens "--NAME" or "--NAME=VALUE" after the subcommand) that the
/// subcommand named by argv[1] does not have, each "unknown option --X" with "did you mean --Y"
/// for a near miss; empty when there are none (or argv names no subcommand).
std::vector<std::string> unknown_option_messages(CLI::App& app, int argc, const char* const* argv);

/// CLI11's error for an option given more often than it takes ("--stages: At Most 1 required
/// but received 2") as "--stages is given 2 times; give it once"; std::nullopt for any other error.
std::optional<std::string> repeated_option_message(std::string_view cli11_error);

}  // namespace perseus::cli
