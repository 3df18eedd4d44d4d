// Iteration time–energy frontier plot.
#include <algorithm>
#include <array>
#include <cmath>

#include "perseus/error.hpp"
#include "render_svg.hpp"

namespace perseus {

using render_detail::num;

namespace {

constexpr double kLeft = 84, kRight = 24, kBottom = 58;
constexpr const char* kReferenceColor = "#7f7f7f";
// Near-black: the dark green it had was hard to tell from ZeusPerStage's (session 24's trial).
constexpr const char* kBoundColor = "#111111";
// Colours for named points and series without one: Tableau 10 minus the methods' colours
// (method_color()) and grey, then four darker ones of Tableau 20b, so a user's points
// (`perseus report --points`) never take the colour of a built-in series, and up to eight of
// them each have their own.
constexpr const char* kFreeColors[] = {"#8c564b", "#e377c2", "#bcbd22", "#17becf",
                                       "#393b79", "#843c39", "#7b4173", "#8c6d31"};

bool finite(const PlotPoint& p) { return std::isfinite(p.time_s) && std::isfinite(p.energy_j); }

}  // namespace

std::string render_frontier_svg(const FrontierPlotData& d, const FrontierPlotOptions& o) {
  const std::string frontier_color = method_color("perseus"), all_max_color = method_color("all_max");
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto widen = [&](const PlotPoint& p) {
    if (!finite(p)) return;
    x0 = std::min(x0, p.time_s);
    x1 = std::max(x1, p.time_s);
    y0 = std::min(y0, p.energy_j);
    y1 = std::max(y1, p.energy_j);
  };
  for (const auto* series : {&d.frontier, &d.plans, &d.baselines, &d.reference, &d.lower_bound})
    for (const auto& p : *series) widen(p);
  for (const auto& c : d.candidates)
    for (const auto& p : c.points) widen(p);
  if (d.all_max) widen(*d.all_max);
  if (!(x0 <= x1)) throw InputError("frontier plot: no finite (time, energy) point to draw");
  render_detail::pad_range(x0, x1);
  render_detail::pad_range(y0, y1);

  // Energy unit for the y labels.
  const double emax = std::max(std::abs(y0), std::abs(y1));
  const double escale = emax >= 1e7 ? 1e6 : emax >= 1e4 ? 1e3 : 1.0;
  const char* eunit = escale == 1e6 ? "MJ" : escale == 1e3 ? "kJ" : "J";

  const double top = o.title.empty() ? 16 : 38;
  const double pw = o.width_px - kLeft - kRight, ph = o.height_px - top - kBottom;
  auto X = [&](double t) { return kLeft + (t - x0) / (x1 - x0) * pw; };
  auto Y = [&](double e) { return top + ph - (e - y0) / (y1 - y0) * ph; };

  std::string s = render_detail::svg_open(
      o.width_px, o.height_px,
      ".axis text{font-size:11px;fill:#333}.axis-title{font-size:12px;fill:#111}.grid{stroke:#e6e6e6}"
      ".title{font-size:14px;font-weight:bold;fill:#111}.legend-text,.point-label{font-size:11px;fill:#222}");
  if (!o.title.empty())
    s += fmt::format("<text class=\"title\" x=\"{}\" y=\"22\">{}</text>\n", kLeft, xml_escape(o.title));
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" stroke=\"#333\"/>\n", kLeft,
                   num(top), num(pw), num(ph));

  // Grid, ticks and labels.
  s += "<g class=\"axis\">\n";
  const auto xt = nice_ticks(x0, x1, std::max(3, static_cast<int>(pw / 90)));
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1;
  for (double t : xt) {
    s += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/><line x1=\"{0}\" x2=\"{0}\" "
        "y1=\"{2}\" y2=\"{3}\" stroke=\"#333\"/><text class=\"xtick\" x=\"{0}\" y=\"{4}\" "
        "text-anchor=\"middle\">{5}</text>\n",
        num(X(t)), num(top), num(top + ph), num(top + ph + 5), num(top + ph + 18), render_detail::tick_label(t, xstep));
  }
  const auto yt = nice_ticks(y0 / escale, y1 / escale, std::max(3, static_cast<int>(ph / 60)));
  const double ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double v : yt) {
    s += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/><line x1=\"{3}\" x2=\"{0}\" "
        "y1=\"{2}\" y2=\"{2}\" stroke=\"#333\"/><text class=\"ytick\" x=\"{4}\" y=\"{5}\" "
        "text-anchor=\"end\">{6}</text>\n",
        num(kLeft), num(kLeft + pw), num(Y(v * escale)), num(kLeft - 5), num(kLeft - 8), num(Y(v * escale) + 4),
        render_detail::tick_label(v, ystep));
  }
  s += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">iteration time (s)</text>\n",
                   num(kLeft + pw / 2), num(top + ph + 42));
  s += fmt::format(
      "<text class=\"axis-title\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 {0} {1})\">iteration energy ({2})</text>\n</g>\n",
      18, num(top + ph / 2), eunit);

  // Lines, thinned to about one vertex per half pixel.
  auto polyline = [&](std::vector<PlotPoint> pts, const char* cls, const char* color, const char* extra) {
    std::erase_if(pts, [](const PlotPoint& p) { return !finite(p); });
    if (pts.empty()) return;
    std::sort(pts.begin(), pts.end(), [](const PlotPoint& a, const PlotPoint& b) { return a.time_s < b.time_s; });
    std::string coords;
    double lx = -1e300, ly = -1e300;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const double px = X(pts[i].time_s), py = Y(pts[i].energy_j);
      if (i + 1 < pts.size() && std::abs(px - lx) < 0.5 && std::abs(py - ly) < 0.5) continue;
      coords += fmt::format("{}{},{}", coords.empty() ? "" : " ", num(px), num(py));
      lx = px;
      ly = py;
    }
    s += fmt::format("<polyline class=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" {}/>\n", cls, coords, color,
                     extra);
    // A line of one point draws nothing: a one-plan frontier gave an empty plot.
    if (pts.size() == 1)
      s += fmt::format("<circle class=\"{}-point\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"/>\n", cls,
                       num(X(pts[0].time_s)), num(Y(pts[0].energy_j)), color);
  };
  polyline(d.reference, "reference", kReferenceColor, "stroke-width=\"1.6\" stroke-dasharray=\"6 4\"");
  polyline(d.lower_bound, "lower-bound", kBoundColor, "stroke-width=\"1.6\" stroke-dasharray=\"2 3\"");
  polyline(d.frontier, "frontier", frontier_color.c_str(), "stroke-width=\"2\"");

  // Candidate series: small hollow triangles, one colour per series (its own, else a free one).
  std::size_t free_used = 0;
  auto next_free = [&] { return std::string(kFreeColors[free_used++ % std::size(kFreeColors)]); };
  std::vector<std::string> candidate_colors, baseline_colors;
  for (const auto& c : d.candidates) candidate_colors.push_back(c.color.empty() ? next_free() : c.color);
  for (const auto& p : d.baselines) baseline_colors.push_back(p.color.empty() ? next_free() : p.color);
  auto candidate_color = [&](std::size_t i) { return candidate_colors[i]; };
  auto triangle = [](double px, double py) {
    return fmt::format("{},{} {},{} {},{}", num(px), num(py - 5), num(px + 4.5), num(py + 3.5), num(px - 4.5),
                       num(py + 3.5));
  };
  for (std::size_t i = 0; i < d.candidates.size(); ++i) {
    for (const auto& p : d.candidates[i].points) {
      if (!finite(p)) continue;
      s += fmt::format(
          "<polygon class=\"candidate\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.3\">"
          "<title>{}: {}: {} s, {} J</title></polygon>\n",
          triangle(X(p.time_s), Y(p.energy_j)), candidate_color(i), xml_escape(d.candidates[i].label),
          xml_escape(p.label), seconds_text(p.time_s), joules_text(p.energy_j));
    }
  }

  // Points.
  for (const auto& p : d.plans) {
    if (!finite(p)) continue;
    s += fmt::format(
        "<circle class=\"plan\" cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\" stroke=\"#ffffff\" "
        "stroke-width=\"0.8\"><title>{}: {} s, {} J</title></circle>\n",
        num(X(p.time_s)), num(Y(p.energy_j)), frontier_color, xml_escape(p.label), seconds_text(p.time_s),
        joules_text(p.energy_j));
  }
  // Labels of the named markers, moved down (or up) in steps until they overlap no label
  // placed before: EnvPipe's and all-max's were printed over each other when the two plans
  // coincide (a 2-stage profile with one clock; session 24's trial).
  std::vector<std::array<double, 4>> placed;  // x0, x1, y0, y1 of each label's box, px
  auto label_at = [&](double px, double py, const std::string& text) {
    // Left of the marker when near the right edge, else right of it.
    const bool right = px > kLeft + pw * 0.75;
    const double w = 6.3 * static_cast<double>(text.size()), x = right ? px - 8 : px + 8;
    const double bx0 = right ? x - w : x, bx1 = right ? x : x + w;
    double y = py - 6;
    for (double dy : {0.0, 14.0, -14.0, 28.0, -28.0, 42.0, -42.0, 56.0, -56.0}) {
      y = std::clamp(py - 6 + dy, top + 12, top + ph - 4);  // inside the frame (a third label left it)
      const bool clear = std::none_of(placed.begin(), placed.end(), [&](const auto& r) {
        return bx0 < r[1] && r[0] < bx1 && y - 10 < r[3] && r[2] < y + 2;
      });
      if (clear) break;
    }
    placed.push_back({bx0, bx1, y - 10, y + 2});
    // A label moved off its marker gets a thin leader to it: in a near-coincidence a moved
    // label could sit level with the neighbouring marker and read as its label.
    if (std::abs(y - (py - 6)) > 1)
      s += fmt::format("<line class=\"label-leader\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#666\" "
                       "stroke-width=\"0.7\"/>\n",
                       num(px), num(py), num(right ? x + 2 : x - 2), num(y - 4));
    s += fmt::format("<text class=\"point-label\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n", num(x), num(y),
                     right ? "end" : "start", xml_escape(text));
  };
  // Baselines' diamonds are translucent, and the all-max square is drawn last: a plan at the
  // same spot stays visible under them.
  for (std::size_t i = 0; i < d.baselines.size(); ++i) {
    const auto& p = d.baselines[i];
    if (!finite(p)) continue;
    const double px = X(p.time_s), py = Y(p.energy_j);
    s += fmt::format(
        "<polygon class=\"baseline\" points=\"{},{} {},{} {},{} {},{}\" fill=\"{}\" fill-opacity=\"0.75\" "
        "stroke=\"#333\" stroke-width=\"0.6\"><title>{}: {} s, {} J</title></polygon>\n",
        num(px), num(py - 6), num(px + 6), num(py), num(px), num(py + 6), num(px - 6), num(py),
        baseline_colors[i], xml_escape(p.label), seconds_text(p.time_s), joules_text(p.energy_j));
    label_at(px, py, p.label);
  }
  if (d.all_max && finite(*d.all_max)) {
    const double px = X(d.all_max->time_s), py = Y(d.all_max->energy_j);
    s += fmt::format(
        "<rect class=\"allmax\" x=\"{}\" y=\"{}\" width=\"9\" height=\"9\" fill=\"{}\"><title>{}: "
        "{} s, {} J</title></rect>\n",
        num(px - 4.5), num(py - 4.5), all_max_color, xml_escape(d.all_max->label), seconds_text(d.all_max->time_s),
        joules_text(d.all_max->energy_j));
    label_at(px, py, d.all_max->label);
  }

  // Legend (top right, inside the plot).
  std::vector<std::pair<std::string, std::string>> entries;  // (marker svg at 0,0, text)
  if (!d.frontier.empty())
    entries.emplace_back(fmt::format("<line x1=\"0\" x2=\"22\" y1=\"0\" y2=\"0\" stroke=\"{}\" stroke-width=\"2\"/>{}",
                                     frontier_color,
                                     d.plans.empty() ? std::string()
                                                     : fmt::format("<circle cx=\"11\" cy=\"0\" r=\"3\" fill=\"{}\"/>",
                                                                   frontier_color)),
                         d.plans.empty() ? std::string("Perseus frontier")
                                         : "Perseus frontier (dots: " + d.plans_label + ")");
  if (!d.lower_bound.empty())
    entries.emplace_back(fmt::format("<line x1=\"0\" x2=\"22\" y1=\"0\" y2=\"0\" stroke=\"{}\" stroke-width=\"1.6\" "
                                     "stroke-dasharray=\"2 3\"/>",
                                     kBoundColor),
                         "certified lower bound (no plan below)");
  for (std::size_t i = 0; i < d.candidates.size(); ++i)
    entries.emplace_back(fmt::format("<polygon points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.3\"/>",
                                     triangle(11, 0), candidate_color(i)),
                         d.candidates[i].label);
  if (!d.reference.empty())
    entries.emplace_back(fmt::format("<line x1=\"0\" x2=\"22\" y1=\"0\" y2=\"0\" stroke=\"{}\" stroke-width=\"1.6\" "
                                     "stroke-dasharray=\"6 4\"/>",
                                     kReferenceColor),
                         d.reference_label);
  if (d.all_max)
    entries.emplace_back(fmt::format("<rect x=\"6.5\" y=\"-4.5\" width=\"9\" height=\"9\" fill=\"{}\"/>", all_max_color),
                         d.all_max->label);
  if (!entries.empty()) {
    double longest = 0;
    for (const auto& e : entries) longest = std::max(longest, static_cast<double>(e.second.size()));
    const double bw = 40 + longest * 6.3, bh = 8 + 18.0 * static_cast<double>(entries.size());
    // The corner whose box covers the fewest markers and labels (top right first): a user's
    // point under the legend was hidden (session 24's trial).
    std::vector<std::pair<double, double>> marks;  // px
    for (const auto* series : {&d.frontier, &d.plans, &d.baselines})
      for (const auto& p : *series)
        if (finite(p)) marks.emplace_back(X(p.time_s), Y(p.energy_j));
    for (const auto& c : d.candidates)
      for (const auto& p : c.points)
        if (finite(p)) marks.emplace_back(X(p.time_s), Y(p.energy_j));
    if (d.all_max && finite(*d.all_max)) marks.emplace_back(X(d.all_max->time_s), Y(d.all_max->energy_j));
    for (const auto& r : placed) marks.emplace_back(0.5 * (r[0] + r[1]), 0.5 * (r[2] + r[3]));
    double bx = kLeft + pw - bw - 8, by = top + 8;
    std::size_t best = marks.size() + 1;
    for (const auto& [cx, cy] : {std::pair{kLeft + pw - bw - 8, top + 8}, {kLeft + 8, top + 8},
                                 {kLeft + pw - bw - 8, top + ph - bh - 8}, {kLeft + 8, top + ph - bh - 8}}) {
      const auto covered = static_cast<std::size_t>(std::count_if(marks.begin(), marks.end(), [&](const auto& m) {
        return m.first > cx - 6 && m.first < cx + bw + 6 && m.second > cy - 6 && m.second < cy + bh + 6;
      }));
      if (covered < best) {
        best = covered;
        bx = cx;
        by = cy;
      }
    }
    s += fmt::format(
        "<g class=\"legend\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" "
        "fill-opacity=\"0.9\" stroke=\"#bbb\"/>\n",
        num(bx), num(by), num(bw), num(bh));
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const double ey = by + 13 + 18.0 * static_cast<double>(i);
      s += fmt::format(
          "<g transform=\"translate({},{})\">{}</g><text class=\"legend-text\" x=\"{}\" y=\"{}\">{}</text>\n",
          num(bx + 8), num(ey), entries[i].first, num(bx + 36), num(ey + 4), xml_escape(entries[i].second));
    }
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace perseus
