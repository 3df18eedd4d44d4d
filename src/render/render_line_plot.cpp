// Generic line plot (x, y per series), e.g. saving vs straggler slowdown per method.
#include <algorithm>
#include <cmath>

#include "perseus/emulation_report.hpp"
#include "perseus/error.hpp"
#include "render_svg.hpp"

namespace perseus {

using render_detail::num;

namespace {
constexpr double kLeft = 70, kBottom = 56, kLegendWidth = 190;
// Tableau 10.
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
}  // namespace

std::string render_line_plot_svg(const LinePlotData& d) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = 0;
  bool any = false;
  for (const auto& s : d.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      any = true;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  if (!any) throw InputError("line plot: no finite (x, y) point to draw");
  render_detail::pad_range(x0, x1);
  if (x0 < d.x_floor && x1 > d.x_floor) {  // keep the padded width, moved up to the floor
    x1 += d.x_floor - x0;
    x0 = d.x_floor;
  }
  render_detail::pad_range(y0, y1);
  const double top = d.title.empty() ? 16 : 38;
  const double pw = d.width_px - kLeft - kLegendWidth - 16, ph = d.height_px - top - kBottom;
  auto X = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto Y = [&](double y) { return top + ph - (y - y0) / (y1 - y0) * ph; };

  std::string s = render_detail::svg_open(
      d.width_px, d.height_px,
      ".axis text{font-size:11px;fill:#333}.axis-title{font-size:12px;fill:#111}.grid{stroke:#e6e6e6}"
      ".title{font-size:14px;font-weight:bold;fill:#111}.legend-text{font-size:11px;fill:#222}");
  if (!d.title.empty())
    s += fmt::format("<text class=\"title\" x=\"{}\" y=\"22\">{}</text>\n", kLeft, xml_escape(d.title));
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" stroke=\"#333\"/>\n", kLeft,
                   num(top), num(pw), num(ph));
  s += "<g class=\"axis\">\n";
  const auto xt = nice_ticks(x0, x1, std::max(3, static_cast<int>(pw / 80)));
  const double xs = xt.size() > 1 ? xt[1] - xt[0] : 1;
  for (double t : xt) {
    s += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/><text x=\"{0}\" y=\"{3}\" "
        "text-anchor=\"middle\">{4}</text>\n",
        num(X(t)), num(top), num(top + ph), num(top + ph + 16), render_detail::tick_label(t, xs));
  }
  const auto yt = nice_ticks(y0, y1, std::max(3, static_cast<int>(ph / 50)));
  const double ys = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double v : yt) {
    s += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/><text x=\"{3}\" y=\"{4}\" "
        "text-anchor=\"end\">{5}</text>\n",
        num(kLeft), num(kLeft + pw), num(Y(v)), num(kLeft - 6), num(Y(v) + 4), render_detail::tick_label(v, ys));
  }
  if (y0 < 0 && y1 > 0) {
    s += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#888\"/>\n", num(kLeft), num(kLeft + pw),
                     num(Y(0)));
  }
  s += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   num(kLeft + pw / 2), num(top + ph + 40), xml_escape(d.x_label));
  s += fmt::format(
      "<text class=\"axis-title\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">{2}"
      "</text>\n</g>\n",
      16, num(top + ph / 2), xml_escape(d.y_label));

  for (std::size_t i = 0; i < d.series.size(); ++i) {
    const auto& ser = d.series[i];
    const std::string color = ser.color.empty() ? kColors[i % std::size(kColors)] : ser.color;
    std::string coords;
    for (const auto& [x, y] : ser.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      coords += fmt::format("{}{},{}", coords.empty() ? "" : " ", num(X(x)), num(Y(y)));
    }
    s += fmt::format("<g class=\"series\"><polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                     coords, color);
    for (const auto& [x, y] : ser.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      s += fmt::format(
          "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"><title>{}: {} {:.4g}, {} {:.4g}</title>"
          "</circle>\n",
          num(X(x)), num(Y(y)), color, xml_escape(ser.label), xml_escape(d.x_label), x, xml_escape(d.y_label), y);
    }
    const double ly = top + 10 + 20.0 * static_cast<double>(i);
    const double lx = kLeft + pw + 16;
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"/><circle cx=\"{4}\" "
        "cy=\"{2}\" r=\"3\" fill=\"{3}\"/><text class=\"legend-text\" x=\"{5}\" y=\"{6}\">{7}</text></g>\n",
        num(lx), num(lx + 22), num(ly), color, num(lx + 11), num(lx + 28), num(ly + 4), xml_escape(ser.label));
  }
  s += "</svg>\n";
  return s;
}

}  // namespace perseus
