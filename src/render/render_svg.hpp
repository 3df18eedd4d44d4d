// Private helpers shared by the render_*.cpp files (not part of the public API).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "perseus/render.hpp"

namespace perseus::render_detail {

/// A coordinate or length for an SVG attribute: at most 2 decimals, trailing zeros trimmed.
std::string num(double v);


/// Widens a plot axis range [lo, hi] by 4 % of its span on each side, so markers at the ends
/// are not cut by the frame. A range that is one value up to rounding (span <= 1e-6 of its
/// magnitude: a one-point frontier whose all-max time differs in the last bits) is centred in
/// 5 % of its magnitude, and [0, 0] becomes [0, 1] (a flat 0 % curve): before, such a range
/// gave dozens of ticks with the same label and put equal values at opposite edges.
inline void pad_range(double& lo, double& hi) {
  const double mag = std::max(std::abs(lo), std::abs(hi));
  if (!(hi - lo > 1e-6 * mag)) {
    const double mid = 0.5 * (lo + hi);
    if (mag == 0) {
      lo = 0;
      hi = 1;
    } else {
      lo = mid - 0.025 * mag;
      hi = mid + 0.025 * mag;
    }
  }
  const double span = hi - lo;
  lo -= 0.04 * span;
  hi += 0.04 * span;
}

/// A horizontal time axis at height y under a plot spanning [left, left + width] px for
/// t in [0, t_end] s: the axis line, nice ticks with labels, and `caption` (escaped) centred
/// below, as one <g class="axis">. Used by the pipeline and decision timelines.
std::string time_axis(double left, double width, double y, double t_end, std::string_view caption);

/// Tick label of `value` on an axis whose ticks are `step` apart: just enough decimals, or
/// scientific notation ("1.2e+15") from |value| >= 1e12 on.
std::string tick_label(double value, double step);

/// `<svg ...>` start tag of a standalone document (xmlns, size, viewBox, font) plus an
/// inline <style> with `css`. Close with "</svg>\n".
std::string svg_open(double width_px, double height_px, std::string_view css);

/// Fonts used by every picture (generic families only: no downloads).
inline constexpr std::string_view kFontFamily = "DejaVu Sans, Helvetica, Arial, sans-serif";

/// Horizontal colour bar legend for `scale` at (x, y) with size w × h, labelled with nice
/// ticks below it and `caption` (escaped) to its left. Emits a <linearGradient id=grad_id>
/// with 11 stops sampled from the scale, and one <rect class="legend-bar">.
std::string color_bar(const ColorScale& scale, double x, double y, double w, double h, std::string_view caption,
                      std::string_view grad_id);

/// Start of a self-contained HTML5 page (XHTML-compatible): doctype, <head> with `title`
/// (escaped) and kReportCss, <body>, and an <h1> with the same title. Close with
/// "</body>\n</html>\n".
std::string html_page_open(std::string_view title);

/// Style sheet of the HTML reports (report.html, job reports).
inline constexpr std::string_view kReportCss =
    "body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px 32px;color:#111;background:#fff;"
    "max-width:1500px}"
    "h1{font-size:22px;margin:0 0 4px 0}h2{font-size:17px;margin:28px 0 8px 0;border-bottom:1px solid #ddd;"
    "padding-bottom:3px}p.note{color:#555;font-size:13px;margin:4px 0 10px 0}"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0}td,th{border:1px solid #ccc;padding:3px 10px}"
    "th{background:#f2f2f2;text-align:left}table.data td{text-align:right}"
    "table.kv td:first-child{text-align:left;background:#fafafa}table.kv td{text-align:right}"
    ".row{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}"
    ".scroll{overflow-x:auto;border:1px solid #eee;padding:4px}"
    "svg{display:block}";

}  // namespace perseus::render_detail
