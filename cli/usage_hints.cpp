// Usage hints: "did you mean" for mistyped subcommands and options.
#include "usage_hints.hpp"

#include <algorithm>
#include <filesystem>
#include <string_view>

#include <fmt/core.h>

namespace perseus::cli {

namespace {

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// adjacent letters ("sreve" -> "serve") cost 1 each.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> before(b.size() + 1), prev(b.size() + 1), row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, row);
  }
  return prev[b.size()];
}

std::string_view without_dashes(std::string_view s) {
  while (!s.empty() && s.front() == '-') s.remove_prefix(1);
  return s;
}

CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(name)) return sub;
  }
  return nullptr;
}

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates) {
  const auto best = closest_name(typed, candidates);
  return best ? fmt::format(" (did you mean {}?)", *best) : "";
}

}  // namespace

std::string unknown_schedule_message(const std::string& value, const std::vector<std::string>& names) {
  std::error_code ec;
  const auto st = std::filesystem::status(value, ec);
  if (!ec && std::filesystem::exists(st)) {
    return fmt::format("'{}' is {}: neither a schedule name nor a schedule CSV file (a regular file)", value,
                       std::filesystem::is_directory(st) ? "a folder" : "not a regular file (a FIFO or device)");
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  return fmt::format("'{}' is not a schedule name ({}) nor an existing schedule CSV file{}", value, list,
                     did_you_mean(value, names));
}

bool is_stream_path(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  return !ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) &&
         !std::filesystem::is_directory(st);
}

std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  const std::string_view t = without_dashes(typed);
  std::optional<std::string> best;
  std::size_t best_d = std::min<std::size_t>(2, t.size() / 3);
  bool found = false;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(t, without_dashes(c));
    if (d <= best_d && (!found || d < best_d)) {
      best = c;
      best_d = d;
      found = true;
    }
  }
  if (found) return best;
  if (t.size() >= 3) {
    for (const auto& c : candidates) {
      if (without_dashes(c).starts_with(t)) return c;
    }
  }
  return std::nullopt;
}

std::optional<std::string> unknown_subcommand_message(CLI::App& app, int argc, const char* const* argv) {
  if (argc < 2 || argv[1][0] == '-' || find_subcommand(app, argv[1]) != nullptr) return std::nullopt;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  return fmt::format("unknown command '{}'{}; commands: {} (perseus --help)", argv[1], did_you_mean(argv[1], names),
                     list);
}

std::vector<std::string> unknown_option_messages(CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> out;
  if (argc < 2 || argv[1][0] == '-') return out;
  CLI::App* sub = find_subcommand(app, argv[1]);
  if (sub == nullptr) return out;
  std::vector<std::string> known;
  for (const CLI::Option* opt : sub->get_options()) {
    for (const auto& l : opt->get_lnames()) known.push_back("--" + l);
  }
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;  // everything after is positional (e.g. the command of monitor)
    if (!arg.starts_with("--") || arg.size() == 2) continue;
    const std::string name(arg.substr(0, arg.find('=')));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    out.push_back(fmt::format("unknown option {}{}", name, did_you_mean(name, known)));
  }
  return out;
}

std::optional<std::string> repeated_option_message(std::string_view cli11_error) {
  constexpr std::string_view kAtMost = ": At Most ", kReceived = " required but received ";
  const std::size_t at = cli11_error.find(kAtMost), rec = cli11_error.find(kReceived);
  if (at == std::string_view::npos || rec == std::string_view::npos || rec < at) return std::nullopt;
  const std::string_view name = cli11_error.substr(0, at);
  const std::string_view most = cli11_error.substr(at + kAtMost.size(), rec - at - kAtMost.size());
  const std::string_view got = cli11_error.substr(rec + kReceived.size());
  if (most == "1") return fmt::format("{} is given {} times; give it once", name, got);
  return fmt::format("{} takes at most {} values, got {}", name, most, got);
}

}  // namespace perseus::cli
