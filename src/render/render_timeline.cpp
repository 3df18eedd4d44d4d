// Pipeline timeline picture: one row per GPU, one box per computation, coloured by power.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "render_svg.hpp"

namespace perseus {

using render_detail::num;

namespace {

constexpr double kTitleHeight = 26;
constexpr double kRowGap = 4;
constexpr double kAxisHeight = 40;
constexpr double kLegendHeight = 80;
// px per character at font-size 10 / 8 (DejaVu Sans digits and capitals are 6.4 / 5.1 px wide:
// at 6.2 "W10" spilled out of its box, session 24's trial).
constexpr double kLabelCharWidth = 6.5, kSmallLabelCharWidth = 5.2;
constexpr const char* kCriticalColor = "#e4002b";

// Pattern id and CSS class suffix per kind (forward has no overlay).
constexpr const char* kKindPattern[kNumInstructionKinds] = {"", "hatch-b", "hatch-i", "dots-w"};

std::string pattern_ref(const std::string& prefix, int kind) { return prefix + kKindPattern[kind]; }

double op_power_w(const FrequencyPlan& plan, int id) {
  return plan.time_s[id] > 0 ? plan.energy_j[id] / plan.time_s[id] : 0.0;
}

double color_value(const FrequencyPlan& plan, int id, TimelineColor by) {
  return by == TimelineColor::kPower ? op_power_w(plan, id) : static_cast<double>(plan.freq_mhz[id]);
}

std::string patterns(const std::string& p) {
  return "<defs>\n"
         "<pattern id=\"" +
         p +
         "hatch-b\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#ffffff\" "
         "stroke-opacity=\"0.55\" stroke-width=\"1.6\"/></pattern>\n"
         "<pattern id=\"" +
         p +
         "hatch-i\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(-45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#ffffff\" "
         "stroke-opacity=\"0.55\" stroke-width=\"1.6\"/></pattern>\n"
         "<pattern id=\"" +
         p +
         "dots-w\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\">"
         "<circle cx=\"2.5\" cy=\"2.5\" r=\"1.1\" fill=\"#ffffff\" fill-opacity=\"0.7\"/></pattern>\n"
         "</defs>\n";
}

}  // namespace

std::pair<double, double> timeline_color_range(const FrequencyPlan& plan, const TimelineOptions& options) {
  if (options.color_range) return *options.color_range;
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t id = 0; id < plan.freq_mhz.size(); ++id) {
    const double v = color_value(plan, static_cast<int>(id), options.color_by);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (options.color_by == TimelineColor::kPower) {
    lo = std::min(lo, options.p_block_w);
    hi = std::max(hi, options.p_block_w);
  }
  if (!(lo <= hi)) return {0.0, 1.0};
  if (lo == hi) return {lo, lo + 1.0};
  // Widen to nice ticks so the legend starts and ends on a labelled value.
  const auto ticks = nice_ticks(lo, hi, 10);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : hi - lo;
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step};
}

std::vector<int> critical_path(const Dag& dag, const Timeline& timeline) {
  std::vector<int> path;
  if (dag.num_ops() == 0) return path;
  int cur = 0;
  for (int id = 1; id < dag.num_ops(); ++id)
    if (timeline.end_s[id] > timeline.end_s[cur]) cur = id;
  const double eps = 1e-9 * std::max(1.0, timeline.time_s);
  path.push_back(cur);
  while (timeline.start_s[cur] > eps) {
    int best = -1;
    for (int p : dag.predecessors(cur)) {
      if (std::abs(timeline.end_s[p] - timeline.start_s[cur]) > eps) continue;
      if (best < 0 || (dag.rank_of(p) == dag.rank_of(cur) && dag.rank_of(best) != dag.rank_of(cur))) best = p;
    }
    if (best < 0) break;
    path.push_back(best);
    cur = best;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::string render_timeline_svg(const Dag& dag, const FrequencyPlan& plan, const TimelineOptions& o) {
  const auto n = static_cast<std::size_t>(dag.num_ops());
  if (plan.freq_mhz.size() != n || plan.time_s.size() != n || plan.energy_j.size() != n ||
      plan.timeline.start_s.size() != n || plan.timeline.end_s.size() != n) {
    throw std::invalid_argument("render_timeline_svg: plan arrays do not match the DAG's op count");
  }
  const double T = plan.timeline.time_s > 0 ? plan.timeline.time_s : 1.0;
  const double left = o.label_width_px;
  const double plot_w = std::max(10.0, o.width_px - o.label_width_px - o.right_margin_px);
  const double top = o.title.empty() ? 8 : kTitleHeight + 4;
  const double pitch = o.row_height_px + kRowGap;
  const double rows_h = dag.num_ranks() * pitch;
  const double height = top + rows_h + kAxisHeight + kLegendHeight;
  const double t_end = o.time_end_s && *o.time_end_s > T ? *o.time_end_s : T;  // right end of the axis
  auto x_of = [&](double t) { return left + t / t_end * plot_w; };
  auto row_y = [&](int r) { return top + r * pitch; };

  const auto [cmin, cmax] = timeline_color_range(plan, o);
  const ColorScale scale(cmin, cmax);
  const bool power = o.color_by == TimelineColor::kPower;

  std::string s = render_detail::svg_open(
      o.width_px, height,
      ".op-label{font-size:10px;pointer-events:none}.op-label.small{font-size:8px}.row-label{font-size:11px;fill:#222}"
      ".axis text,.legend-tick{font-size:10px;fill:#333}.legend-caption,.legend-text{font-size:11px;fill:#222}"
      ".title{font-size:14px;font-weight:bold;fill:#111}");
  s += patterns(o.id_prefix);
  if (!o.title.empty()) {
    s += fmt::format("<text class=\"title\" x=\"{}\" y=\"18\">{}</text>\n", num(left), xml_escape(o.title));
  }

  // Rows: background = idle (blocking) time, coloured by P_block in power mode.
  const std::string idle_fill = power ? scale(o.p_block_w).hex() : std::string("#d9d9d9");
  for (int r = 0; r < dag.num_ranks(); ++r) {
    const double y = row_y(r);
    s += fmt::format("<text class=\"row-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">GPU {}</text>\n", num(left - 6),
                     num(y + o.row_height_px / 2 + 4), r);
    s += fmt::format(
        "<rect class=\"idle\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>GPU {}: "
        "idle / blocking{}</title></rect>\n",
        num(left), num(y), num(x_of(T) - left), num(o.row_height_px), idle_fill, r,
        power ? fmt::format(" at P_block = {:.1f} W", o.p_block_w) : std::string());
  }

  // Boxes. With several stages (model chunks) per GPU (interleaved schedules), labels name the
  // chunk too: F3c1 = forward of microbatch 3 in the GPU's chunk 1 (its stages in increasing order).
  const bool chunked = dag.num_stages() > dag.num_ranks();
  std::vector<int> chunk_of(static_cast<std::size_t>(dag.num_stages()), 0);
  for (int r = 0; chunked && r < dag.num_ranks(); ++r) {
    std::vector<int> stages;
    for (int id : dag.rank_ops(r)) stages.push_back(dag.op(id).stage);
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    for (std::size_t i = 0; i < stages.size(); ++i) chunk_of[static_cast<std::size_t>(stages[i])] = static_cast<int>(i);
  }
  bool kind_seen[kNumInstructionKinds] = {};
  for (int r = 0; r < dag.num_ranks(); ++r) {
    const double y = row_y(r) + 1;
    const double h = o.row_height_px - 2;
    for (int id : dag.rank_ops(r)) {
      const Computation& c = dag.op(id);
      const int k = static_cast<int>(c.kind);
      kind_seen[k] = true;
      const double x = x_of(plan.timeline.start_s[id]);
      const double w = std::max(0.0, x_of(plan.timeline.end_s[id]) - x);
      const double value = color_value(plan, id, o.color_by);
      const Rgb fill = scale(value);
      const double pw = op_power_w(plan, id);
      const std::string chunk = chunked ? fmt::format("c{}", chunk_of[static_cast<std::size_t>(c.stage)]) : "";
      std::string tip = fmt::format("{}{}{} (stage {}{}, microbatch {}): {} MHz, {} s", to_letter(c.kind),
                                    c.microbatch, chunk, c.stage,
                                    chunked ? fmt::format(", chunk {}", chunk_of[static_cast<std::size_t>(c.stage)]) : "",
                                    c.microbatch, plan.freq_mhz[id], seconds_text(plan.time_s[id]));
      if (pw > 0) tip += fmt::format(", {:.1f} W, {} J", pw, joules_text(plan.energy_j[id]));
      tip += fmt::format("; {}-{} s", seconds_text(plan.timeline.start_s[id]),
                         seconds_text(plan.timeline.end_s[id]));
      s += fmt::format(
          "<rect class=\"op {}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
          "stroke=\"#ffffff\" stroke-width=\"0.4\"><title>{}</title></rect>\n",
          to_string(c.kind), num(x), num(y), num(w), num(h), fill.hex(), xml_escape(tip));
      if (*kKindPattern[k]) {
        s += fmt::format(
            "<rect class=\"kind-overlay\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#{})\" "
            "pointer-events=\"none\"/>\n",
            num(x), num(y), num(w), num(h), pattern_ref(o.id_prefix, k));
      }
      const std::string label = fmt::format("{}{}{}", to_letter(c.kind), c.microbatch, chunk);
      // At font-size 10, else 8 (12-microbatch 1F1B dropped every F10/F11, interleaved every
      // "F0c1"), else none: the tooltip has it all.
      const double chars = static_cast<double>(label.size());
      const bool fits = w >= kLabelCharWidth * chars + 3, fits_small = w >= kSmallLabelCharWidth * chars + 2;
      if ((fits || fits_small) && h >= 10) {
        s += fmt::format("<text class=\"op-label{}\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                         fits ? "" : " small", num(x + w / 2), num(y + h / 2 + (fits ? 3.5 : 3)),
                         fill.luminance() > 0.18 ? "#000000" : "#ffffff", label);
      }
    }
  }

  // On a shared time scale that runs past this plan's T, a dashed line marks where it ends.
  if (t_end > T) {
    s += fmt::format(
        "<line class=\"t-end\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\" stroke-dasharray=\"4 3\"/>"
        "<text class=\"legend-text\" x=\"{3}\" y=\"{4}\">T</text>\n",
        num(x_of(T)), num(top - 2), num(top + rows_h), num(x_of(T) + 3), num(top + 10));
  }

  // Critical path: outlined boxes joined by lines.
  if (o.outline_critical_path) {
    const auto path = critical_path(dag, plan.timeline);
    std::string joins;
    for (std::size_t i = 0; i < path.size(); ++i) {
      const int id = path[i];
      const double y = row_y(dag.rank_of(id)) + 1;
      const double x = x_of(plan.timeline.start_s[id]);
      const double w = std::max(0.0, x_of(plan.timeline.end_s[id]) - x);
      s += fmt::format(
          "<rect class=\"critical\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
          "stroke=\"{}\" stroke-width=\"1.6\" pointer-events=\"none\"/>\n",
          num(x), num(y), num(w), num(o.row_height_px - 2), kCriticalColor);
      if (i > 0 && dag.rank_of(path[i - 1]) != dag.rank_of(id)) {
        const int prev = path[i - 1];
        joins += fmt::format(
            "<line class=\"critical-join\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
            "stroke-width=\"1.2\"/>\n",
            num(x_of(plan.timeline.end_s[prev])), num(row_y(dag.rank_of(prev)) + o.row_height_px / 2), num(x),
            num(row_y(dag.rank_of(id)) + o.row_height_px / 2), kCriticalColor);
      }
    }
    s += joins;
  }

  // Time axis.
  const double ay = top + rows_h + 2;
  s += render_detail::time_axis(left, plot_w, ay, t_end,
                                fmt::format("time (s); iteration time T = {} s", seconds_text(plan.timeline.time_s)));

  // Legend: colour bar, then kinds, idle and critical path swatches.
  const double ly = ay + kAxisHeight + 4;
  const double bar_x = left + 150;
  s += render_detail::color_bar(scale, bar_x, ly, std::min(320.0, plot_w - 160), 12,
                                power ? "average power (W)" : "SM frequency (MHz)", o.id_prefix + "timeline-scale");
  double sx = left;
  const double sy = ly + 38;
  auto swatch = [&](const std::string& body, const std::string& text) {
    s += body;
    s += fmt::format("<text class=\"legend-text\" x=\"{}\" y=\"{}\">{}</text>\n", num(sx + 28), num(sy + 11),
                     xml_escape(text));
    sx += 28 + kLabelCharWidth * 1.1 * static_cast<double>(text.size()) + 18;
  };
  const std::string grey = "#6b6b6b";
  for (int k = 0; k < kNumInstructionKinds; ++k) {
    if (!kind_seen[k]) continue;
    const auto kind = static_cast<InstructionKind>(k);
    std::string body =
        fmt::format("<rect class=\"legend-kind\" x=\"{}\" y=\"{}\" width=\"22\" height=\"14\" fill=\"{}\"/>", num(sx),
                    num(sy), grey);
    if (*kKindPattern[k]) {
      body += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"22\" height=\"14\" fill=\"url(#{})\"/>", num(sx), num(sy),
                          pattern_ref(o.id_prefix, k));
    }
    swatch(body + "\n", fmt::format("{} = {}", to_letter(kind), to_string(kind)));
  }
  swatch(fmt::format("<rect class=\"legend-idle\" x=\"{}\" y=\"{}\" width=\"22\" height=\"14\" fill=\"{}\" "
                     "stroke=\"#555\" stroke-width=\"0.5\"/>\n",
                     num(sx), num(sy), idle_fill),
         power ? fmt::format("idle / blocking (P_block {:.1f} W)", o.p_block_w) : std::string("idle / blocking"));
  if (o.outline_critical_path) {
    swatch(fmt::format("<rect x=\"{}\" y=\"{}\" width=\"22\" height=\"14\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"1.6\"/>\n",
                       num(sx + 1), num(sy + 1), kCriticalColor),
           "critical path");
  }
  s += "</svg>\n";
  return s;
}

}  // namespace perseus
