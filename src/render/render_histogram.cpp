// Per-stage histogram of the frequencies a plan uses.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

#include "render_svg.hpp"

namespace perseus {

using render_detail::num;

namespace {
constexpr const char* kKindColors[kNumInstructionKinds] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f"};
constexpr double kLeft = 70, kRight = 36, kAxisHeight = 40, kLegendHeight = 26;
}  // namespace

std::string render_frequency_histogram_svg(const Dag& dag, const FrequencyPlan& plan, const HistogramOptions& o) {
  if (plan.freq_mhz.size() != static_cast<std::size_t>(dag.num_ops())) {
    throw std::invalid_argument("render_frequency_histogram_svg: plan does not match the DAG's op count");
  }
  // counts[stage][freq][kind]
  std::vector<std::map<int, std::array<int, kNumInstructionKinds>>> counts(dag.num_stages());
  std::vector<int> freqs;
  bool kind_seen[kNumInstructionKinds] = {};
  for (int id = 0; id < dag.num_ops(); ++id) {
    const Computation& c = dag.op(id);
    counts[c.stage][plan.freq_mhz[id]][static_cast<int>(c.kind)] += 1;
    kind_seen[static_cast<int>(c.kind)] = true;
    freqs.push_back(plan.freq_mhz[id]);
  }
  std::vector<int> axis = freqs;  // the plan's clocks and the axis's
  axis.insert(axis.end(), o.axis_clocks_mhz.begin(), o.axis_clocks_mhz.end());
  std::sort(axis.begin(), axis.end());
  axis.erase(std::unique(axis.begin(), axis.end()), axis.end());
  int step = 0;  // frequency grid: the gcd of the gaps (15 MHz on A100/A40)
  for (std::size_t i = 1; i < axis.size(); ++i) step = std::gcd(step, axis[i] - axis[i - 1]);
  if (step <= 0) step = 15;
  const int lo = axis.empty() ? 0 : axis.front(), hi = axis.empty() ? 0 : axis.back();
  // A margin of 3/4 step, and at least 2 % of the range (1 MHz steps put a bar on the frame).
  const double margin = std::max(step * 0.75, 0.02 * (hi - lo));
  const double f0 = lo - margin;
  const double f1 = std::max(hi + margin, f0 + 1);

  const double top = o.title.empty() ? 8 : 30;
  const double pw = o.width_px - kLeft - kRight;
  const double rows_h = dag.num_stages() * o.row_height_px;
  const double height = top + rows_h + kAxisHeight + kLegendHeight;
  auto X = [&](double f) { return kLeft + (f - f0) / (f1 - f0) * pw; };
  const double bar_w = std::max(3.0, static_cast<double>(step) / (f1 - f0) * pw * 0.8);  // never a hairline

  std::string s =
      render_detail::svg_open(o.width_px, height,
                              ".row-label{font-size:11px;fill:#222}.axis text{font-size:10px;fill:#333}"
                              ".title{font-size:14px;font-weight:bold;fill:#111}.legend-text{font-size:11px}");
  if (!o.title.empty())
    s += fmt::format("<text class=\"title\" x=\"{}\" y=\"20\">{}</text>\n", kLeft, xml_escape(o.title));
  for (int st = 0; st < dag.num_stages(); ++st) {
    const double base = top + (st + 1) * o.row_height_px;
    int max_total = 1;
    for (const auto& [f, k] : counts[st]) max_total = std::max(max_total, std::accumulate(k.begin(), k.end(), 0));
    s += fmt::format("<text class=\"row-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">stage {}</text>\n", kLeft - 6,
                     num(base - o.row_height_px / 2 + 4), st);
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#bbb\"/>\n", kLeft, num(kLeft + pw),
                     num(base), num(base));
    const double hmax = o.row_height_px - 6;
    // Count axis at the right of the row: 0 at the base, the stage's largest bar at the top.
    const double ax = kLeft + pw + 4;
    s += fmt::format(
        "<g class=\"axis count-axis\"><line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/>"
        "<line x1=\"{0}\" x2=\"{3}\" y1=\"{1}\" y2=\"{1}\" stroke=\"#333\"/>"
        "<line x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#333\"/>"
        "<text x=\"{4}\" y=\"{5}\">{6}</text><text x=\"{4}\" y=\"{7}\">0</text></g>\n",
        num(ax), num(base - hmax), num(base), num(ax + 3), num(ax + 6), num(base - hmax + 4), max_total, num(base));
    for (const auto& [f, k] : counts[st]) {
      double y = base;
      for (int kind = 0; kind < kNumInstructionKinds; ++kind) {
        if (k[kind] == 0) continue;
        const double h = hmax * k[kind] / max_total;
        y -= h;
        s += fmt::format(
            "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>stage {}, "
            "{} MHz: {} {}</title></rect>\n",
            num(X(f) - bar_w / 2), num(y), num(bar_w), num(h), kKindColors[kind], st, f, k[kind],
            to_string(static_cast<InstructionKind>(kind)));
      }
    }
  }
  const double ay = top + rows_h + 2;
  s += fmt::format("<g class=\"axis\"><line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", kLeft,
                   num(kLeft + pw), num(ay), num(ay));
  const auto ticks = nice_ticks(f0, f1, std::max(3, static_cast<int>(pw / 80)));
  const double tstep = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  for (double t : ticks) {
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/><text x=\"{0}\" y=\"{3}\" "
        "text-anchor=\"middle\">{4}</text>\n",
        num(X(t)), num(ay), num(ay + 4), num(ay + 16), render_detail::tick_label(t, tstep));
  }
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">SM frequency (MHz); bar height: number of computations "
      "at that frequency (count axis at the right of each stage)</text></g>\n",
      num(kLeft + pw / 2), num(ay + 32));
  double lx = kLeft;
  const double ly = ay + kAxisHeight + 4;
  for (int kind = 0; kind < kNumInstructionKinds; ++kind) {
    if (!kind_seen[kind]) continue;
    const auto name = to_string(static_cast<InstructionKind>(kind));
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"{}\"/><text class=\"legend-text\" "
        "x=\"{}\" y=\"{}\">{}</text>\n",
        num(lx), num(ly), kKindColors[kind], num(lx + 19), num(ly + 10), name);
    lx += 19 + 7.0 * static_cast<double>(name.size()) + 20;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace perseus
