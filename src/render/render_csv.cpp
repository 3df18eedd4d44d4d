// CSV tables for the report, and the time–energy point reader of the frontier plot.
// Why not libfccp csv.h (used for profiles): its reader needs the column count at compile
// time, while the report shows tables whose columns it does not know in advance
// (emulation.csv) and accepts alternative column names (time / time_s).
#include "render_csv.hpp"

#include <charconv>
#include <cmath>

#include <fmt/core.h>

#include "csv_fields.hpp"
#include "perseus/error.hpp"
#include "perseus/input_limits.hpp"
#include "perseus/render.hpp"

namespace perseus {
namespace render_detail {

int CsvTable::column(std::initializer_list<const char*> names) const {
  for (const char* n : names)
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == n) return static_cast<int>(i);
  return -1;
}

CsvTable read_csv_table(const std::string& path) {
  const std::string text = csv::read_file(path);  // names the reason: missing, a folder, no permission
  csv::reject_non_text(text, path);
  const std::string_view body = csv::strip_bom(text);
  CsvTable t;
  t.source = path;
  int lineno = 0;
  for (std::size_t pos = 0; pos < body.size();) {
    std::size_t eol = body.find('\n', pos);
    if (eol == std::string_view::npos) eol = body.size();
    const std::string_view line = body.substr(pos, eol - pos);
    pos = eol + 1;
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto cells = csv::split_line(line, path, lineno);
    if (t.header.empty()) {
      t.header = std::move(cells);
      continue;
    }
    if (cells.size() != t.header.size()) {
      throw InputError(fmt::format("{}:{}: expected {} fields like the header, got {}", path, lineno, t.header.size(),
                                   cells.size()));
    }
    t.rows.push_back(std::move(cells));
    t.lines.push_back(lineno);
  }
  if (t.header.empty()) throw InputError(fmt::format("{}: empty file (expected a header line)", path));
  return t;
}

double csv_number(const CsvTable& t, std::size_t row, int col) {
  const std::string& s = t.rows[row][col];
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    throw InputError(
        fmt::format("{}:{}: field {}: expected a finite number, got {}", t.source, t.lines[row], quote_input(t.header[col]),
                    quote_input(s)));
  }
  return v;
}

}  // namespace render_detail

/// Largest iteration energy a frontier CSV may give, J (10^18 J: far beyond any cluster).
constexpr double kMaxIterationEnergyJ = 1e18;

std::vector<PlotPoint> load_plot_points_csv(const std::string& path, bool require_label) {
  const auto t = render_detail::read_csv_table(path);
  const int tc = t.column({"time_s", "time"});
  const int ec = t.column({"energy_j", "energy"});
  const int lc = t.column({"name", "method", "label", "plan"});
  // A profile has time and energy columns too, of single computations: never a frontier.
  if (t.column({"instruction"}) >= 0 && t.column({"stage"}) >= 0)
    throw InputError(fmt::format("{}:1: this is a profile (stage, instruction, ... columns), not iteration points; "
                                 "give {}",
                                 path, require_label ? "named points (name,time_s,energy_j)"
                                                     : "a frontier CSV (time_s,energy_j, e.g. another run's "
                                                       "frontier.csv)"));
  if (lc < 0 && require_label)
    throw InputError(fmt::format("{}:1: missing column 'name' (or 'method', 'label'), each point's name", path));
  // A frontier.csv named by plan number is a whole frontier, not a few named points (drawn as
  // points it gave one label per plan, piled on each other: session 26's trial).
  if (require_label && t.header[static_cast<std::size_t>(lc)] == "plan")
    throw InputError(fmt::format("{}:1: has a 'plan' column, as a frontier.csv: a whole frontier is drawn with "
                                 "--reference; --points takes named points (a 'name', 'method' or 'label' column)",
                                 path));
  if (tc < 0) throw InputError(fmt::format("{}:1: missing column 'time_s' (or 'time'), iteration time in s", path));
  if (ec < 0)
    throw InputError(fmt::format("{}:1: missing column 'energy_j' (or 'energy'), iteration energy in J", path));
  // A header alone drew nothing, silently (session 27's trial).
  if (t.rows.empty()) throw InputError(fmt::format("{}: has a header but no rows; expected at least one point", path));
  // Each named point gets a label and a tooltip: 200,000 of them took 76 s and an 80 MB page
  // (session 32's trial).
  if (require_label && t.rows.size() > kMaxNamedPlotPoints)
    throw InputError(fmt::format("{}: has {} named points, more than the {} a plot labels; a whole frontier is drawn "
                                 "with --reference",
                                 path, t.rows.size(), kMaxNamedPlotPoints));
  std::vector<PlotPoint> out;
  out.reserve(t.rows.size());
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    PlotPoint p;
    p.time_s = render_detail::csv_number(t, i, tc);
    p.energy_j = render_detail::csv_number(t, i, ec);
    // Ranges as the readers of measurements (a 1e300 point would draw 300-digit axis labels).
    if (!(p.time_s > 0 && p.time_s <= limits::kMaxIterationTimeS)) {
      throw InputError(fmt::format("{}:{}: field '{}': expected an iteration time > 0 s (at most {} s), got {}", path,
                                   t.lines[i], t.header[tc], limits::kMaxIterationTimeS, t.rows[i][tc]));
    }
    if (!(p.energy_j >= 0 && p.energy_j <= kMaxIterationEnergyJ)) {
      throw InputError(fmt::format("{}:{}: field '{}': expected an energy >= 0 J (at most {} J), got {}", path,
                                   t.lines[i], t.header[ec], kMaxIterationEnergyJ, t.rows[i][ec]));
    }
    p.label = lc >= 0 ? t.rows[i][lc] : std::to_string(i);
    // frontier.csv's plan numbers (a hand-edited 'Infinity' or -4.5 was shown as "plan Infinity").
    if (lc >= 0 && t.header[lc] == "plan" &&
        (p.label.empty() || p.label.size() > 9 || p.label.find_first_not_of("0123456789") != std::string::npos)) {
      throw InputError(fmt::format("{}:{}: field 'plan': expected a plan number (an integer >= 0), got {}", path,
                                   t.lines[i], quote_input(p.label)));
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace perseus
