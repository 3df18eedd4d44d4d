// Colour scale, axis ticks and the small SVG helpers shared by every picture.
#include <algorithm>
#include <array>
#include <cmath>

#include "render_svg.hpp"

namespace perseus {

namespace {

// matplotlib "viridis" (CC0, van der Walt & Smith 2015) at t = 0, 1/8, ..., 1.
constexpr std::array<std::array<int, 3>, 9> kViridis = {{{0x44, 0x01, 0x54},
                                                         {0x47, 0x2c, 0x7a},
                                                         {0x3b, 0x52, 0x8b},
                                                         {0x2c, 0x72, 0x8e},
                                                         {0x21, 0x91, 0x8c},
                                                         {0x28, 0xae, 0x80},
                                                         {0x5e, 0xc9, 0x62},
                                                         {0xad, 0xdc, 0x30},
                                                         {0xfd, 0xe7, 0x25}}};

double linear_channel(std::uint8_t c) {
  const double v = c / 255.0;
  return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
}

}  // namespace

std::string Rgb::hex() const { return fmt::format("#{:02x}{:02x}{:02x}", r, g, b); }

double Rgb::luminance() const {
  return 0.2126 * linear_channel(r) + 0.7152 * linear_channel(g) + 0.0722 * linear_channel(b);
}

Rgb ColorScale::at(double t) {
  if (!(t >= 0)) t = 0;  // also NaN
  if (t > 1) t = 1;
  const double pos = t * (kViridis.size() - 1);
  const auto i = std::min<std::size_t>(static_cast<std::size_t>(pos), kViridis.size() - 2);
  const double f = pos - static_cast<double>(i);
  auto mix = [&](int ch) {
    return static_cast<std::uint8_t>(std::lround(kViridis[i][ch] + f * (kViridis[i + 1][ch] - kViridis[i][ch])));
  };
  return Rgb{mix(0), mix(1), mix(2)};
}

Rgb ColorScale::operator()(double value) const {
  if (!(max_ > min_)) return at(0.5);
  return at((value - min_) / (max_ - min_));
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return ticks;
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) return {lo};
  max_ticks = std::max(max_ticks, 2);
  // The smallest step of the form {1, 2, 5} x 10^k that gives at most max_ticks ticks.
  auto count = [&](double st) { return std::floor(hi / st + 1e-9) - std::ceil(lo / st - 1e-9) + 1; };
  double step = 0;
  for (int e = static_cast<int>(std::floor(std::log10((hi - lo) / max_ticks))) - 1; step == 0; ++e) {
    for (const double m : {1.0, 2.0, 5.0}) {
      const double st = m * std::pow(10.0, e);
      if (count(st) <= max_ticks) {
        step = st;
        break;
      }
    }
  }
  const double eps = step * 1e-9;
  for (auto k = static_cast<long long>(std::ceil((lo - eps) / step)); k * step <= hi + eps; ++k) {
    double v = static_cast<double>(k) * step;
    if (std::abs(v) < eps) v = 0;
    ticks.push_back(v);
  }
  return ticks;
}

namespace {

struct MethodStyle {
  std::string_view method, display, color;
};
// Tableau 10 colours, one per kEmulationMethods entry.
constexpr MethodStyle kMethodStyles[] = {{"perseus", "Perseus", "#1f77b4"},
                                         {"all_max", "all-max", "#d62728"},
                                         {"zeus_global", "ZeusGlobal", "#ff7f0e"},
                                         {"zeus_per_stage", "ZeusPerStage", "#2ca02c"},
                                         {"envpipe", "EnvPipe", "#9467bd"}};

}  // namespace

std::string method_color(std::string_view method) {
  for (const auto& m : kMethodStyles)
    if (m.method == method) return std::string(m.color);
  return {};
}

std::string method_display_name(std::string_view method) {
  for (const auto& m : kMethodStyles)
    if (m.method == method) return std::string(m.display);
  return std::string(method);
}

namespace render_detail {

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string tick_label(double value, double step) {
  // Beyond 1e12 fixed notation is a wall of digits: scientific, with just enough significant
  // digits to tell neighbouring ticks apart.
  if (std::abs(value) >= 1e12 && std::isfinite(value)) {
    const double rel = step > 0 && std::isfinite(step) ? std::abs(value) / step : 1.0;
    const int digits = std::clamp(static_cast<int>(std::ceil(std::log10(std::max(rel, 1.0)))) + 1, 3, 17);
    return fmt::format("{:.{}g}", value, digits);
  }
  int decimals = 0;
  if (step > 0 && std::isfinite(step)) decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  if (std::abs(value) < step * 1e-6) value = 0;
  return fmt::format("{:.{}f}", value, std::min(decimals, 9));
}

std::string svg_open(double width_px, double height_px, std::string_view css) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"{2}\" font-size=\"12\">\n<style>{3}</style>\n",
      num(width_px), num(height_px), kFontFamily, css);
}

std::string time_axis(double left, double width, double y, double t_end, std::string_view caption) {
  std::string s = fmt::format("<g class=\"axis\"><line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n",
                              num(left), num(left + width), num(y), num(y));
  const auto ticks = nice_ticks(0, t_end, std::max(2, static_cast<int>(width / 90)));
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : t_end;
  for (double t : ticks) {
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/><text x=\"{0}\" y=\"{3}\" "
        "text-anchor=\"middle\">{4}</text>\n",
        num(left + t / t_end * width), num(y), num(y + 4), num(y + 16), tick_label(t, step));
  }
  // Centred under a plot that fits a page; at the left of a wide one (in a scroll box), where
  // it is seen without scrolling.
  const bool wide = width > 1200;
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text></g>\n", num(wide ? left : left + width / 2),
                   num(y + 32), wide ? "start" : "middle", xml_escape(caption));
  return s;
}

std::string color_bar(const ColorScale& scale, double x, double y, double w, double h, std::string_view caption,
                      std::string_view grad_id) {
  std::string out = fmt::format("<defs><linearGradient id=\"{}\" x1=\"0\" y1=\"0\" x2=\"1\" y2=\"0\">", grad_id);
  for (int i = 0; i <= 10; ++i) {
    out += fmt::format("<stop offset=\"{}%\" stop-color=\"{}\"/>", i * 10, ColorScale::at(i / 10.0).hex());
  }
  out += "</linearGradient></defs>\n";
  out += fmt::format("<text class=\"legend-caption\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(x - 8),
                     num(y + h - 2), xml_escape(caption));
  out += fmt::format(
      "<rect class=\"legend-bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#{})\" "
      "stroke=\"#555\" stroke-width=\"0.5\"/>\n",
      num(x), num(y), num(w), num(h), grad_id);
  const double lo = scale.min_value(), hi = scale.max_value();
  if (hi > lo) {
    const auto ticks = nice_ticks(lo, hi, 6);
    const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : hi - lo;
    for (double t : ticks) {
      const double tx = x + (t - lo) / (hi - lo) * w;
      out += fmt::format(
          "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#555\"/>"
          "<text class=\"legend-tick\" x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
          num(tx), num(y + h), num(y + h + 4), num(y + h + 16), tick_label(t, step));
    }
  }
  return out;
}

}  // namespace render_detail
}  // namespace perseus
