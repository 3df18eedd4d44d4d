// Private helpers shared by the render_*.cpp files (not part of the public API).
#pragma once

#include <string>
#include <string_view>

#include <fmt/core.h>

#include "perseus/render.hpp"

namespace perseus::render_detail {

/// A coordinate or length for an SVG attribute: at most 2 decimals, trailing zeros trimmed.
std::string num(double v);

/// Tick label of `value` on an axis whose ticks are `step` apart: just enough decimals.
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

}  // namespace perseus::render_detail
