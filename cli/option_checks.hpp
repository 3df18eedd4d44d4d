// Option validators with messages that say what was expected (CLI11's built-in range
// checks print the full double range and accept NaN). A failed check is a usage error:
// exit status 2, like an unknown or missing option.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus::cli {

/// `text` as a decimal number: an optional sign, digits with an optional decimal point ("5",
/// "0.5", ".5", "5.") and an optional exponent ("1e-7"), nothing else. No hexadecimal float
/// ("0x1p3" would be 8), "inf", "nan", spaces or trailing characters: std::nullopt for them,
/// and for a number beyond the range of a double ("1e999"). The one grammar of every number
/// option (strtod, which CLI11's own checks use, accepts all of those).
inline std::optional<double> parse_decimal(std::string_view text) {
  const auto digit = [&](std::size_t i) { return i < text.size() && text[i] >= '0' && text[i] <= '9'; };
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  const std::size_t number_start = i;
  std::size_t mantissa_digits = 0;
  for (; digit(i); ++i) ++mantissa_digits;
  if (i < text.size() && text[i] == '.') {
    for (++i; digit(i); ++i) ++mantissa_digits;
  }
  if (mantissa_digits == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digit(i)) return std::nullopt;
    while (digit(i)) ++i;
  }
  if (i != text.size()) return std::nullopt;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data() + number_start, text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return text[0] == '-' ? -v : v;
}

namespace detail {

/// A decimal number (parse_decimal()) between lo and hi, each end included or not.
inline CLI::Validator number_check(double lo, bool lo_open, double hi, bool hi_open, const std::string& unit) {
  const std::string range =
      fmt::format("{}{}, {}{}{}", lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']', unit.empty() ? "" : " " + unit);
  return CLI::Validator(
      [lo, lo_open, hi, hi_open, range](std::string& text) -> std::string {
        const std::optional<double> v = parse_decimal(text);
        if (!v || (lo_open ? *v <= lo : *v < lo) || (hi_open ? *v >= hi : *v > hi)) {
          return fmt::format("expected a number in {}, got {}", range, quote_input(text));
        }
        return {};
      },
      "NUMBER in " + range);
}

}  // namespace detail

/// A finite decimal number (parse_decimal()) in [lo, hi]; `unit` (e.g. "W", "s") is shown in
/// messages.
inline CLI::Validator number_in(double lo, double hi, const std::string& unit = "") {
  return detail::number_check(lo, false, hi, false, unit);
}

/// A finite decimal number in (0, hi]: strictly positive (e.g. a scale factor).
inline CLI::Validator positive_number_up_to(double hi, const std::string& unit = "") {
  return detail::number_check(0, true, hi, false, unit);
}

/// A finite decimal number in the open interval (lo, hi): both ends excluded (e.g. a share
/// that must leave something on both sides).
inline CLI::Validator number_strictly_between(double lo, double hi, const std::string& unit = "") {
  return detail::number_check(lo, true, hi, true, unit);
}

/// A decimal integer (digits, optional leading '-', no leading zero) in [lo, hi]. `why`, when
/// given, is appended to the message in parentheses (e.g. why the lower bound is what it is).
/// A leading zero is refused because CLI11 converts integers with strtoll base 0, which reads
/// "010" as octal 8 (and "0x10" as 16: refused too, not digits).
inline CLI::Validator integer_in(long lo, long hi, const std::string& why = "") {
  const std::string range = fmt::format("[{}, {}]", lo, hi);
  return CLI::Validator(
      [lo, hi, range, why](std::string& text) -> std::string {
        long v = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const std::size_t first_digit = text.starts_with('-') ? 1 : 0;
        const bool leading_zero = text.size() > first_digit + 1 && text[first_digit] == '0';
        if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || leading_zero || v < lo ||
            v > hi) {
          const std::string note = leading_zero && ec == std::errc() && ptr == text.data() + text.size()
                                       ? "without leading zeros"
                                       : why;
          return fmt::format("expected an integer in {}, got {}{}", range, quote_input(text),
                             note.empty() ? "" : " (" + note + ")");
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
      {"slowdowns", "--slowdown"},     {"zeus_format", "--format"},    {"time_budget_s", "--time-budget"},
      {"polish_time_s", "--polish"},
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
