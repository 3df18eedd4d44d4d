// Timeline of a job's straggler decisions (one row per data-parallel pipeline).
#include <algorithm>
#include <cmath>
#include <set>

#include "perseus/job_report.hpp"
#include "render_svg.hpp"

namespace perseus {

using render_detail::num;

namespace {

constexpr double kLeft = 96, kRight = 24, kAxisHeight = 40;
constexpr const char* kSetColor = "#d62728";
constexpr const char* kClearColor = "#2ca02c";
constexpr const char* kReplanColor = "#ff7f0e";
constexpr const char* kUnknownFill = "#c8c8c8";

const char* verdict_color(const std::string& v) {
  if (v == "verified") return "#2ca02c";
  if (v == "verified_frontier_limit") return "#7f7f7f";
  if (v == "retargeted") return "#ff7f0e";
  if (v == "reverted") return "#d62728";
  return "#9467bd";
}

/// A pipeline's plan over [t0, t1): plan index (-1 = unknown) and whether it was a straggler.
struct Span {
  double t0 = 0, t1 = 0;
  int plan = -1;
  bool straggler = false;
};

/// Per pipeline, the spans between decisions that changed its plan or straggler state.
std::vector<std::vector<Span>> spans_of(const JobExport& job, double t_end) {
  const bool complete = job.decisions_total == static_cast<std::int64_t>(job.decisions.size());
  std::vector<std::vector<Span>> rows(job.pipelines);
  for (auto& r : rows) r.push_back({0, t_end, complete ? job.fastest_index : -1, false});
  for (const auto& d : job.decisions) {
    if (d.action == "verification" || (d.pipeline_plans.empty() && d.stragglers.empty() && !d.pipeline)) continue;
    const std::set<int> strag(d.stragglers.begin(), d.stragglers.end());
    for (int p = 0; p < job.pipelines; ++p) {
      Span next = rows[p].back();
      if (!d.pipeline_plans.empty()) next.plan = d.pipeline_plans[p];
      next.straggler = strag.count(p) > 0;
      if (next.plan == rows[p].back().plan && next.straggler == rows[p].back().straggler) continue;
      const double t = std::clamp(d.time_s, rows[p].back().t0, t_end);
      rows[p].back().t1 = t;
      next.t0 = t;
      next.t1 = t_end;
      rows[p].push_back(next);
    }
  }
  return rows;
}

double plan_time(const JobExport& job, int plan) {
  return plan >= 0 && static_cast<std::size_t>(plan) < job.frontier.size() ? job.frontier[plan].time_s : NAN;
}

std::string triangle(double x, double y, double r, bool up) {
  const double s = up ? 1 : -1;
  return fmt::format("{},{} {},{} {},{}", num(x), num(y - s * r), num(x - r), num(y + s * r * 0.8), num(x + r),
                     num(y + s * r * 0.8));
}

}  // namespace

std::string render_decisions_svg(const JobExport& job, const DecisionsPlotOptions& o) {
  double t_end = job.last_activity_s;
  for (const auto& d : job.decisions) t_end = std::max(t_end, d.time_s);
  t_end = t_end > 0 ? t_end * 1.05 : 1.0;
  const auto rows = spans_of(job, t_end);

  // Colour scale over the plan times that appear.
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& r : rows)
    for (const auto& s : r)
      if (const double t = plan_time(job, s.plan); std::isfinite(t)) lo = std::min(lo, t), hi = std::max(hi, t);
  const bool have_scale = lo <= hi;
  const ColorScale scale(have_scale ? lo : 0, have_scale ? hi : 1);

  const double top = o.title.empty() ? 14 : 36;
  const double plot_w = o.width_px - kLeft - kRight;
  const double rows_h = o.row_height_px * job.pipelines;
  const double height = top + rows_h + kAxisHeight + 74;
  auto X = [&](double t) { return kLeft + std::clamp(t / t_end, 0.0, 1.0) * plot_w; };
  auto row_y = [&](int p) { return top + o.row_height_px * p; };

  std::string s = render_detail::svg_open(
      o.width_px, height,
      ".axis text,.row-label{font-size:11px;fill:#333}.title{font-size:14px;font-weight:bold;fill:#111}"
      ".band-label{font-size:10px}.legend-text,.legend-caption,.legend-tick{font-size:11px;fill:#222}");
  s += "<defs><pattern id=\"straggler-hatch\" width=\"7\" height=\"7\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"7\" stroke=\"#d62728\" "
       "stroke-width=\"2.2\"/></pattern></defs>\n";
  if (!o.title.empty()) {
    s += fmt::format("<text class=\"title\" x=\"{}\" y=\"22\">{}</text>\n", num(kLeft), xml_escape(o.title));
  }

  // Bands: plan in force, hatched while a straggler.
  for (int p = 0; p < job.pipelines; ++p) {
    const double y = row_y(p) + 3, h = o.row_height_px - 6;
    s += fmt::format("<text class=\"row-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">pipeline {}</text>\n",
                     num(kLeft - 8), num(y + h / 2 + 4), p);
    for (const auto& sp : rows[p]) {
      const double x0 = X(sp.t0), x1 = X(sp.t1);
      if (x1 <= x0) continue;
      const double t = plan_time(job, sp.plan);
      const Rgb fill = std::isfinite(t) ? scale(t) : Rgb{200, 200, 200};
      const std::string what = sp.plan < 0 ? std::string("plan unknown (older decisions were dropped)")
                               : std::isfinite(t) ? fmt::format("plan {}: T = {:.4f} s", sp.plan, t)
                                                  : fmt::format("plan {}", sp.plan);
      s += fmt::format(
          "<g class=\"band{}\"><title>pipeline {}, {:.2f}–{:.2f} s: {}{}</title><rect x=\"{}\" y=\"{}\" "
          "width=\"{}\" height=\"{}\" fill=\"{}\"/>",
          sp.straggler ? " straggler" : "", p, sp.t0, sp.t1, what, sp.straggler ? " (straggler)" : "", num(x0), num(y),
          num(x1 - x0), num(h), sp.plan < 0 ? kUnknownFill : fill.hex());
      if (sp.straggler) {
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#straggler-hatch)\" "
                         "fill-opacity=\"0.55\"/>",
                         num(x0), num(y), num(x1 - x0), num(h));
      }
      const std::string label = std::isfinite(t) ? fmt::format("T={:.3f} s", t) : "";
      if (!label.empty() && x1 - x0 > 7.0 * static_cast<double>(label.size())) {
        s += fmt::format("<text class=\"band-label\" x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>", num(x0 + 4),
                         num(y + h / 2 + 4), fill.luminance() > 0.45 ? "#111" : "#fff", label);
      }
      s += "</g>\n";
    }
  }

  // Markers.
  for (const auto& d : job.decisions) {
    const double x = X(d.time_s);
    const std::string head = fmt::format("decision {} at {:.2f} s: {} ({})", d.id, d.time_s, d.action, d.origin);
    std::string detail;
    if (d.slowdown) detail += fmt::format(", slowdown {:.3f}", *d.slowdown);
    if (d.target_time_s) detail += fmt::format(", T' = {:.4f} s", *d.target_time_s);
    if (d.predicted_saving_j) detail += fmt::format(", predicted saving {:.1f} J/iteration", *d.predicted_saving_j);
    if (d.measured_saving_j) detail += fmt::format(", measured {:.1f} J/iteration", *d.measured_saving_j);
    const double r = std::min(7.0, o.row_height_px / 3);
    if ((d.action == "straggler_set" || d.action == "straggler_cleared") && d.pipeline) {
      const bool set = d.action == "straggler_set";
      const double cy = row_y(*d.pipeline) + o.row_height_px / 2;
      const char* color = set ? kSetColor : kClearColor;
      const bool hollow = d.origin == "declared";
      s += fmt::format(
          "<g class=\"marker {}\"><title>{}{}</title><polygon points=\"{}\" fill=\"{}\" stroke=\"{}\" "
          "stroke-width=\"1.6\"/></g>\n",
          d.action, xml_escape(head), xml_escape(detail), triangle(x, cy, r, set), hollow ? "#ffffff" : color, color);
    } else if (d.action == "replanned") {
      for (int p = 0; p < job.pipelines; ++p) {
        const double cy = row_y(p) + o.row_height_px / 2;
        s += fmt::format(
            "<g class=\"marker replanned\"><title>{}{}</title><polygon points=\"{},{} {},{} {},{} {},{}\" "
            "fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.8\"/></g>\n",
            xml_escape(head), xml_escape(detail), num(x), num(cy - r), num(x + r), num(cy), num(x), num(cy + r),
            num(x - r), num(cy), kReplanColor);
      }
    } else if (d.action == "verification") {
      for (const auto& v : d.verdicts) {
        const double cy = row_y(v.pipeline) + o.row_height_px / 2;
        s += fmt::format(
            "<g class=\"marker verification {}\"><title>{}: pipeline {} {}, measured {:.4f} s vs predicted {:.4f} s "
            "(straggler {:.4f} s), saving {} J/iteration measured vs {:.1f} predicted</title>"
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.8\"/></g>\n",
            v.verdict, xml_escape(head), v.pipeline, xml_escape(v.verdict), v.measured_time_s, v.predicted_time_s,
            v.straggler_time_s, v.measured_saving_j ? fmt::format("{:.1f}", *v.measured_saving_j) : "unknown",
            v.predicted_saving_j, num(x), num(cy), num(r * 0.75),
            verdict_color(v.verdict));
      }
    } else {  // an action this reader does not know: a plain tick across the rows
      s += fmt::format("<g class=\"marker other\"><title>{}{}</title><line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" "
                       "stroke=\"#555\" stroke-dasharray=\"3,2\"/></g>\n",
                       xml_escape(head), xml_escape(detail), num(x), num(x), num(top), num(top + rows_h));
    }
  }

  // Time axis.
  const double ay = top + rows_h + 2;
  s += render_detail::time_axis(kLeft, plot_w, ay, t_end, "time since the job was created (s)");

  // Legend: colour of plan T, then the markers.
  const double ly = ay + kAxisHeight + 4;
  if (have_scale) {
    s += render_detail::color_bar(scale, kLeft + 200, ly, std::min(300.0, plot_w - 220), 12,
                                  "plan iteration time T (s)", "decisions-scale");
  }
  double sx = kLeft;
  const double sy = ly + 36;
  auto swatch = [&](const std::string& body, const std::string& text) {
    s += body + fmt::format("<text class=\"legend-text\" x=\"{}\" y=\"{}\">{}</text>\n", num(sx + 18), num(sy + 4),
                            xml_escape(text));
    sx += 18 + 6.2 * static_cast<double>(text.size()) + 16;
  };
  swatch(fmt::format("<polygon points=\"{}\" fill=\"{}\"/>", triangle(sx + 6, sy, 6, true), kSetColor),
         "straggler set (hollow: declared)");
  swatch(fmt::format("<polygon points=\"{}\" fill=\"{}\"/>", triangle(sx + 6, sy, 6, false), kClearColor), "cleared");
  swatch(fmt::format("<polygon points=\"{},{} {},{} {},{} {},{}\" fill=\"{}\"/>", num(sx + 6), num(sy - 6),
                     num(sx + 12), num(sy), num(sx + 6), num(sy + 6), num(sx), num(sy), kReplanColor),
         "re-planned");
  for (const char* v : {"verified", "verified_frontier_limit", "retargeted", "reverted"}) {
    swatch(fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/>", num(sx + 6), num(sy), verdict_color(v)), v);
  }
  swatch(fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"10\" fill=\"url(#straggler-hatch)\"/>", num(sx),
                     num(sy - 5)),
         "straggler");
  s += "</svg>\n";
  return s;
}

}  // namespace perseus
