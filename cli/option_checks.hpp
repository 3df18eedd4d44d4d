// Option validators with messages that say what was expected (CLI11's built-in range
// checks print the full double range and accept NaN). A failed check is a usage error:
// exit status 2, like an unknown or missing option.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus::cli {

/// A finite decimal number in [lo, hi]; `unit` (e.g. "W", "s") is shown in messages.
inline CLI::Validator number_in(double lo, double hi, const std::string& unit = "") {
  const std::string range = fmt::format("[{}, {}]{}", lo, hi, unit.empty() ? "" : " " + unit);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < lo || v > hi) {
          return fmt::format("expected a number in {}, got '{}'", range, text);
        }
        return {};
      },
      "NUMBER in " + range);
}

/// A finite decimal number in (0, hi]: strictly positive (e.g. a scale factor).
inline CLI::Validator positive_number_up_to(double hi, const std::string& unit = "") {
  const std::string range = fmt::format("(0, {}]{}", hi, unit.empty() ? "" : " " + unit);
  return CLI::Validator(
      [hi, range](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0 || v > hi) {
          return fmt::format("expected a number in {}, got '{}'", range, text);
        }
        return {};
      },
      "NUMBER in " + range);
}

/// A finite decimal number in the open interval (lo, hi): both ends excluded (e.g. a share
/// that must leave something on both sides).
inline CLI::Validator number_strictly_between(double lo, double hi, const std::string& unit = "") {
  const std::string range = fmt::format("({}, {}){}", lo, hi, unit.empty() ? "" : " " + unit);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= lo || v >= hi) {
          return fmt::format("expected a number in {}, got '{}'", range, text);
        }
        return {};
      },
      "NUMBER in " + range);
}

/// A decimal integer (digits, optional leading '-') in [lo, hi]. `why`, when given, is
/// appended to the message in parentheses (e.g. why the lower bound is what it is).
inline CLI::Validator integer_in(long lo, long hi, const std::string& why = "") {
  const std::string range = fmt::format("[{}, {}]", lo, hi);
  return CLI::Validator(
      [lo, hi, range, why](std::string& text) -> std::string {
        long v = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi) {
          return fmt::format("expected an integer in {}, got '{}'{}", range, text, why.empty() ? "" : " (" + why + ")");
        }
        return {};
      },
      "INT in " + range);
}

/// A file or folder path that is not empty (`--out ''` is a usage error, not an attempt to
/// write a file named ""). `what` says what the path names, e.g. "an output folder".
inline CLI::Validator non_empty_path(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string {
        if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
          return fmt::format("expected {}, got an empty path '{}'", what, text);
        }
        return {};
      },
      "PATH");
}

/// How the CLI names a library InputError field: its command-line flag ("num_ranks" ->
/// "--stages", "p_block_w" -> "--p2p-power"; otherwise "--" and the name with '-' for '_').
inline std::string flag_for_field(const std::string& field) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"num_ranks", "--stages"},       {"p_block_w", "--p2p-power"},   {"tp_degree", "--tp"},
      {"out_dir", "--out"},            {"profile_path", "--profile"},  {"unit_time_s", "--unit-time"},
      {"slowdowns", "--slowdown"},     {"zeus_format", "--format"},
  };
  for (const auto& [name, flag] : kFlags)
    if (field == name) return flag;
  std::string flag = "--" + field;
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

/// How the CLI words a library InputError: its fields named as flags (flag_for_field()); a
/// free-text error about a quantity an option sets (the planner's "unit time 1e-07 s is too
/// small for computations of up to 1 s") is prefixed with that option ("--unit-time: unit
/// time ..."), so every error names the option to change.
inline std::string phrase_input_error(const InputError& e) {
  static const std::pair<const char*, const char*> kQuantities[] = {
      {"unit time ", "--unit-time"},
      {"backward input fraction ", "--backward-input-fraction"},
  };
  const std::string text = e.phrased(flag_for_field);
  if (e.field().empty() && e.source().empty()) {
    for (const auto& [quantity, flag] : kQuantities)
      if (text.starts_with(quantity)) return std::string(flag) + ": " + text;
  }
  return text;
}

}  // namespace perseus::cli
