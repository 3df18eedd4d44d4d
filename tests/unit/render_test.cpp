// Pictures: XML escaping, colour scale, ticks, the timeline and the frontier plot.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "perseus/error.hpp"
#include "perseus/render.hpp"
#include "perseus/schedule.hpp"
#include "test_util.hpp"
#include "xml_check.hpp"

namespace perseus {
namespace {

using testing::TempDir;

/// Attribute `name` of the element starting in `tag` ("" if absent).
std::string attr(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const auto p = tag.find(key);
  if (p == std::string::npos) return "";
  const auto b = p + key.size();
  return tag.substr(b, tag.find('"', b) - b);
}

/// Every element `<rect class="op ...">...</rect>` (start tag + title) in order.
struct Box {
  std::string kind, fill, title;
  double x, w;
};
std::vector<Box> boxes(const std::string& svg) {
  std::vector<Box> out;
  const std::string open = "<rect class=\"op ";
  for (auto p = svg.find(open); p != std::string::npos; p = svg.find(open, p + 1)) {
    const auto kind_end = svg.find('"', p + open.size());
    const auto tag_end = svg.find('>', p);
    const auto title = svg.find("<title>", tag_end);
    const auto title_end = svg.find("</title></rect>", title);
    const std::string tag = svg.substr(p, tag_end - p);
    out.push_back({svg.substr(p + open.size(), kind_end - p - open.size()), attr(tag, "fill"),
                   svg.substr(title + 7, title_end - title - 7), std::stod(attr(tag, "x")),
                   std::stod(attr(tag, "width"))});
  }
  return out;
}

/// 2 stages, forward/backward at two frequencies with distinct powers.
Profile two_freq_profile(int stages) {
  // forward: 1410 MHz 0.10 s 30 J (300 W), 1005 MHz 0.16 s 24 J (150 W)
  // backward: 1410 MHz 0.20 s 80 J (400 W), 1005 MHz 0.30 s 60 J (200 W)
  return testing::uniform_profile(stages, {{1410, 0.10, 30}, {1005, 0.16, 24}}, {{1410, 0.20, 80}, {1005, 0.30, 60}});
}

TEST(XmlEscape, EscapesMarkupAndControlCharacters) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(xml_escape("tab\tnl\n"), "tab\tnl\n");
  EXPECT_EQ(xml_escape(std::string("x\x01y", 3)), "x\xEF\xBF\xBDy");
  EXPECT_EQ(xml_escape("Zeus \xC3\xA9t\xC3\xA9"), "Zeus \xC3\xA9t\xC3\xA9");  // UTF-8 passes
  EXPECT_EQ(xml_escape(""), "");
}

TEST(NiceTicks, StepsOfOneTwoFive) {
  auto t = nice_ticks(0, 2.8365, 8);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_DOUBLE_EQ(t[0], 0);
  EXPECT_DOUBLE_EQ(t[5], 2.5);
  t = nice_ticks(5646.5, 7339.0, 6);
  ASSERT_FALSE(t.empty());
  EXPECT_DOUBLE_EQ(t.front(), 6000);  // step 200 would give 8 ticks
  EXPECT_DOUBLE_EQ(t[1] - t[0], 500);
  t = nice_ticks(5646.5, 7339.0, 8);
  EXPECT_DOUBLE_EQ(t.front(), 5800);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 200);
  EXPECT_EQ(t.size(), 8u);
  EXPECT_LE(t.back(), 7339.0);
  t = nice_ticks(-0.3, 0.3, 6);
  EXPECT_NE(std::find(t.begin(), t.end(), 0.0), t.end());  // exact zero, not 1e-17
  EXPECT_EQ(nice_ticks(3, 3).size(), 1u);
  EXPECT_TRUE(nice_ticks(NAN, 1).empty());
}

TEST(ColorScale, ViridisEndsAndClamping) {
  const ColorScale s(100, 300);
  EXPECT_EQ(s(100).hex(), "#440154");
  EXPECT_EQ(s(300).hex(), "#fde725");
  EXPECT_EQ(s(50), s(100));
  EXPECT_EQ(s(1000), s(300));
  EXPECT_EQ(s(200).hex(), "#21918c");  // the middle stop
  EXPECT_LT(s(100).luminance(), 0.05);
  EXPECT_GT(s(300).luminance(), 0.7);
  // Brightness grows along the scale.
  for (int v = 100; v < 300; v += 10) EXPECT_LT(s(v).luminance(), s(v + 10).luminance() + 1e-9) << v;
}

TEST(Timeline, TwoStagesTwoMicrobatchesHasEightBoxesAtTheirTimes) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  const Profile prof = two_freq_profile(2);
  std::vector<int> f(dag.num_ops(), 1410);
  f[dag.find({0, 1, InstructionKind::kForward})] = 1005;
  f[dag.find({1, 0, InstructionKind::kBackward})] = 1005;
  const FrequencyPlan plan = evaluate_plan(dag, prof, f, 50.0);
  TimelineOptions o;
  o.width_px = 1000;
  o.label_width_px = 100;
  o.right_margin_px = 0;
  o.p_block_w = 50;
  const std::string svg = render_timeline_svg(dag, plan, o);
  TempDir tmp;
  EXPECT_EQ(testing::xml_problem(svg, (tmp.path() / "t.svg").string()), "");

  const auto bx = boxes(svg);
  ASSERT_EQ(bx.size(), 8u);
  const auto [lo, hi] = timeline_color_range(plan, o);
  EXPECT_LE(lo, 50);   // P_block is on the scale
  EXPECT_GE(hi, 400);  // and so is the hottest op
  const ColorScale scale(lo, hi);
  const double T = plan.timeline.time_s;
  int matched = 0;
  for (int id = 0; id < dag.num_ops(); ++id) {
    const Computation& c = dag.op(id);
    const std::string prefix = fmt::format("{}{} (stage {},", to_letter(c.kind), c.microbatch, c.stage);
    for (const auto& b : bx) {
      if (b.title.rfind(prefix, 0) != 0) continue;
      ++matched;
      EXPECT_EQ(b.kind, to_string(c.kind));
      EXPECT_NEAR(b.x, 100 + plan.timeline.start_s[id] / T * 900, 0.01) << b.title;
      EXPECT_NEAR(b.w, plan.time_s[id] / T * 900, 0.02) << b.title;
      EXPECT_EQ(b.fill, scale(plan.energy_j[id] / plan.time_s[id]).hex()) << b.title;
      EXPECT_NE(b.title.find(fmt::format("{} MHz", f[id])), std::string::npos) << b.title;
    }
  }
  EXPECT_EQ(matched, 8);
  // Idle background has P_block's colour; the slow forward (150 W) and fast backward (400 W) differ.
  EXPECT_NE(svg.find("class=\"idle\" x=\"100\" y=\"8\" width=\"900\" height=\"24\" fill=\"" + scale(50).hex() + "\""),
            std::string::npos);
  // Kinds look different: backward boxes carry a hatch overlay, forward boxes none.
  std::size_t overlays = 0;
  for (auto p = svg.find("class=\"kind-overlay\""); p != std::string::npos;
       p = svg.find("class=\"kind-overlay\"", p + 1))
    ++overlays;
  EXPECT_EQ(overlays, 4u);
}

TEST(Timeline, ColoursFollowTheLegend) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  std::vector<int> f(dag.num_ops(), 1410);
  f[dag.find({0, 0, InstructionKind::kForward})] = 1005;  // 150 W: the coolest op
  const FrequencyPlan plan = evaluate_plan(dag, two_freq_profile(2), f, 50.0);
  TimelineOptions o;
  o.color_range = std::make_pair(150.0, 400.0);  // scale ends = coolest and hottest op
  o.p_block_w = 50;
  const std::string svg = render_timeline_svg(dag, plan, o);
  // Legend gradient: 11 stops from the scale's low end to its high end.
  const std::regex stop_re("<stop offset=\"(\\d+)%\" stop-color=\"(#[0-9a-f]{6})\"/>");
  std::map<int, std::string> stops;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), stop_re); it != std::sregex_iterator(); ++it)
    stops[std::stoi((*it)[1].str())] = (*it)[2].str();
  ASSERT_EQ(stops.size(), 11u);
  std::set<std::string> fills;
  for (const auto& b : boxes(svg)) {
    fills.insert(b.fill);
    if (b.title.rfind("F0 (stage 0,", 0) == 0) {
      EXPECT_EQ(b.fill, stops[0]);  // 150 W -> left end
    } else if (b.title.find("400.0 W") != std::string::npos) {
      EXPECT_EQ(b.fill, stops[100]);  // 400 W -> right end
    } else {
      EXPECT_NE(b.title.find("300.0 W"), std::string::npos) << b.title;
      EXPECT_EQ(b.fill, stops[60]);  // (300 - 150) / 250 = 60 %
    }
  }
  EXPECT_EQ(fills.size(), 3u);  // 150, 300, 400 W
  // Legend ticks label the range in W.
  EXPECT_NE(svg.find(">average power (W)<"), std::string::npos);
  EXPECT_NE(svg.find(">150<"), std::string::npos);
  EXPECT_NE(svg.find(">400<"), std::string::npos);
}

TEST(Timeline, FrequencyColouringAndCriticalPath) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  const FrequencyPlan plan = evaluate_plan(dag, two_freq_profile(2), std::vector<int>(dag.num_ops(), 1410), 50.0);
  const auto path = critical_path(dag, plan.timeline);
  ASSERT_GE(path.size(), 2u);
  EXPECT_NEAR(plan.timeline.start_s[path.front()], 0, 1e-12);
  EXPECT_NEAR(plan.timeline.end_s[path.back()], plan.timeline.time_s, 1e-12);
  for (std::size_t i = 1; i < path.size(); ++i) {
    EXPECT_NEAR(plan.timeline.end_s[path[i - 1]], plan.timeline.start_s[path[i]], 1e-12);
    const auto preds = dag.predecessors(path[i]);
    EXPECT_NE(std::find(preds.begin(), preds.end(), path[i - 1]), preds.end());
  }
  TimelineOptions o;
  o.color_by = TimelineColor::kFrequency;
  o.color_range = std::make_pair(1005.0, 1410.0);
  const std::string svg = render_timeline_svg(dag, plan, o);
  for (const auto& b : boxes(svg)) EXPECT_EQ(b.fill, "#fde725");  // all at the top of the MHz scale
  EXPECT_NE(svg.find("SM frequency (MHz)"), std::string::npos);
  std::size_t outlined = 0;
  for (auto p = svg.find("class=\"critical\""); p != std::string::npos; p = svg.find("class=\"critical\"", p + 1))
    ++outlined;
  EXPECT_EQ(outlined, path.size());
}

TEST(Timeline, LabelsAreDroppedWhenTheyDoNotFit) {
  const Dag dag = Dag::build(make_1f1b(8, 96));
  const Profile prof = two_freq_profile(8);
  const FrequencyPlan plan = evaluate_plan(dag, prof, std::vector<int>(dag.num_ops(), 1410), 50.0);
  TimelineOptions o;
  o.width_px = 1200;
  const std::string svg = render_timeline_svg(dag, plan, o);
  TempDir tmp;
  EXPECT_EQ(testing::xml_problem(svg, (tmp.path() / "big.svg").string()), "");
  const auto bx = boxes(svg);
  ASSERT_EQ(bx.size(), 8u * 96 * 2);
  // Every label lies inside a box wide enough for it: no label overlaps a neighbour.
  std::map<std::string, std::vector<const Box*>> by_label;  // "F3" -> the boxes of F3 on every stage
  for (const auto& b : bx) by_label[b.title.substr(0, b.title.find(' '))].push_back(&b);
  const std::regex label_re("<text class=\"op-label\" x=\"([0-9.]+)\"[^>]*>([A-Z][0-9]+)</text>");
  std::size_t labels = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label_re); it != std::sregex_iterator(); ++it) {
    ++labels;
    const double cx = std::stod((*it)[1].str());
    const double half = 3.1 * static_cast<double>((*it)[2].str().size());
    const auto& cands = by_label[(*it)[2].str()];
    const bool inside = std::any_of(cands.begin(), cands.end(), [&](const Box* b) {
      return cx - half >= b->x - 0.01 && cx + half <= b->x + b->w + 0.01;
    });
    EXPECT_TRUE(inside) << (*it)[2].str() << " at " << cx;
  }
  EXPECT_LT(labels, bx.size());  // 8x96 at 1200 px cannot label everything
  // A wide canvas labels every box.
  o.width_px = 12000;
  const std::string wide = render_timeline_svg(dag, plan, o);
  std::size_t wide_labels = 0;
  for (auto p = wide.find("class=\"op-label\""); p != std::string::npos; p = wide.find("class=\"op-label\"", p + 1))
    ++wide_labels;
  EXPECT_EQ(wide_labels, bx.size());
}

// Interleaved 1F1B: labels and tips name the chunk (F0c0 ... F0c1), not only the microbatch.
TEST(Timeline, InterleavedLabelsNameTheChunk) {
  const Dag dag = Dag::build(make_interleaved_1f1b(2, 4, 2));
  const FrequencyPlan plan = evaluate_plan(dag, two_freq_profile(4), std::vector<int>(dag.num_ops(), 1410), 50.0);
  TimelineOptions o;
  o.width_px = 4000;
  const std::string svg = render_timeline_svg(dag, plan, o);
  // GPU 0 holds stages 0 and 2: chunk 0 and chunk 1.
  EXPECT_NE(svg.find(">F0c0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">F0c1</text>"), std::string::npos);
  EXPECT_NE(svg.find(">B3c1</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>F0c1 (stage 2, chunk 1, microbatch 0)"), std::string::npos);
  // One stage per GPU: no chunk.
  const Dag plain = Dag::build(make_1f1b(2, 2));
  const std::string p = render_timeline_svg(plain, evaluate_plan(plain, two_freq_profile(2),
                                                                  std::vector<int>(plain.num_ops(), 1410), 50.0), o);
  EXPECT_NE(p.find(">F0</text>"), std::string::npos);
  EXPECT_EQ(p.find("c0<"), std::string::npos);
}

TEST(Timeline, RejectsPlanOfAnotherDag) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  FrequencyPlan plan;
  EXPECT_THROW(render_timeline_svg(dag, plan), std::invalid_argument);
}

TEST(Histogram, CountsPerStageAndFrequency) {
  const Dag dag = Dag::build(make_1f1b(2, 3));
  std::vector<int> f(dag.num_ops(), 1410);
  f[dag.find({1, 0, InstructionKind::kForward})] = 1005;
  f[dag.find({1, 2, InstructionKind::kForward})] = 1005;
  const FrequencyPlan plan = evaluate_plan(dag, two_freq_profile(2), f, 50.0);
  const std::string svg = render_frequency_histogram_svg(dag, plan);
  TempDir tmp;
  EXPECT_EQ(testing::xml_problem(svg, (tmp.path() / "h.svg").string()), "");
  EXPECT_NE(svg.find("<title>stage 1, 1005 MHz: 2 forward</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>stage 1, 1410 MHz: 1 forward</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>stage 0, 1410 MHz: 3 forward</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>stage 0, 1410 MHz: 3 backward</title>"), std::string::npos);
  EXPECT_EQ(svg.find("stage 0, 1005 MHz"), std::string::npos);
  // A count axis per stage: 0 and the largest bar (stage 0: 3 F + 3 B at 1410; stage 1: 1 F + 3 B).
  const std::regex axis("<g class=\"axis count-axis\">.*?<text[^>]*>([0-9]+)</text><text[^>]*>0</text></g>");
  std::vector<std::string> tops;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), axis); it != std::sregex_iterator(); ++it)
    tops.push_back((*it)[1].str());
  EXPECT_EQ(tops, (std::vector<std::string>{"6", "4"}));
  EXPECT_NE(svg.find("bar height: number of computations at that frequency (count axis"), std::string::npos);
}

// Session 24's trial: the report's two timelines were each as wide as the page whatever their T
// (a 14 % slower plan looked as long), and a histogram's bars were as wide as the gap between
// the clocks the plan happened to use (two clocks 405 MHz apart: 324 MHz bars).
TEST(Timeline, ASharedTimeEndScalesBoxesAndStopsTheRowAtT) {
  const Dag dag = Dag::build(make_1f1b(2, 2));
  const FrequencyPlan plan = evaluate_plan(dag, two_freq_profile(2), std::vector<int>(dag.num_ops(), 1410), 50.0);
  TimelineOptions o;
  o.width_px = 1000;
  o.label_width_px = 100;
  o.right_margin_px = 0;
  const double T = plan.timeline.time_s;
  o.time_end_s = 2 * T;
  const std::string svg = render_timeline_svg(dag, plan, o);
  for (const auto& b : boxes(svg)) EXPECT_LE(b.x + b.w, 100 + 450 + 0.02) << b.title;  // within the first half
  EXPECT_NE(svg.find("class=\"idle\" x=\"100\" y=\"8\" width=\"450\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("<line class=\"t-end\" x1=\"550\""), std::string::npos) << "a dashed line at T";
  o.time_end_s = 0.5 * T;  // below T: the plan's own T
  EXPECT_NE(render_timeline_svg(dag, plan, o).find("class=\"idle\" x=\"100\" y=\"8\" width=\"900\""),
            std::string::npos);
}

TEST(Histogram, AGivenRangeAndStepSetTheAxisAndBarWidth) {
  const Dag dag = Dag::build(make_1f1b(2, 3));
  std::vector<int> f(dag.num_ops(), 1410);
  f[dag.find({1, 0, InstructionKind::kForward})] = 1005;
  const FrequencyPlan plan = evaluate_plan(dag, two_freq_profile(2), f, 50.0);
  auto bar_width = [](const std::string& svg) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(svg, m, std::regex("<rect class=\"bar\" x=\"[0-9.]+\" y=\"[0-9.]+\" width=\"([0-9.]+)\"")));
    return m.empty() ? 0.0 : std::stod(m[1]);
  };
  HistogramOptions o;
  const double wide = bar_width(render_frequency_histogram_svg(dag, plan, o));
  for (int mhz = 210; mhz <= 1410; mhz += 15) o.axis_clocks_mhz.push_back(mhz);  // the profile's clocks
  const std::string svg = render_frequency_histogram_svg(dag, plan, o);
  const double narrow = bar_width(svg);
  EXPECT_GT(wide, 100.0);  // 405 MHz gaps: bars hundreds of MHz wide
  EXPECT_LT(narrow, 12.0);  // one 15 MHz step of a 1200 MHz axis on 794 px, 80 %
  EXPECT_NE(svg.find(">400<"), std::string::npos) << "the axis covers the profile's range";
}

/// Linear map value -> pixel from the tick labels of one axis (class xtick / ytick).
struct AxisMap {
  double a = 0, b = 0;  // px = a + b * value
};
AxisMap axis_from_ticks(const std::string& svg, const std::string& cls, const char* coord, double offset, double unit) {
  const std::regex re("<text class=\"" + cls + "\"([^>]*)>([-0-9.]+)</text>");
  std::vector<std::pair<double, double>> vp;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    vp.emplace_back(std::stod((*it)[2].str()) * unit, std::stod(attr((*it)[1].str(), coord)) - offset);
  EXPECT_GE(vp.size(), 3u);
  AxisMap m;
  m.b = (vp.back().second - vp.front().second) / (vp.back().first - vp.front().first);
  m.a = vp.front().second - m.b * vp.front().first;
  return m;
}

TEST(FrontierPlot, PointsMatchFrontierCsv) {
  TempDir tmp;
  std::string csv = "plan,time_s,energy_j\n";
  for (int i = 0; i < 40; ++i) csv += fmt::format("{},{:.6f},{:.3f}\n", i, 3.2 - 0.01 * i, 5600 + 0.9 * i * i);
  const auto pts = load_plot_points_csv(tmp.write("frontier.csv", csv));
  ASSERT_EQ(pts.size(), 40u);
  EXPECT_EQ(pts[3].label, "3");
  FrontierPlotData d;
  d.frontier = pts;
  for (int i = 0; i < 40; i += 3) d.plans.push_back(pts[i]);
  d.all_max = PlotPoint{"all-max", 2.81, 7339};
  d.baselines = {{"EnvPipe", 2.9, 6500}, {"ZeusGlobal <&>", 3.0, 6800}};
  d.reference = {{"", 3.4, 5700}, {"", 2.9, 6300}};
  const std::string svg = render_frontier_svg(d);
  EXPECT_EQ(testing::xml_problem(svg, (tmp.path() / "f.svg").string()), "");
  EXPECT_NE(svg.find("iteration time (s)"), std::string::npos);
  EXPECT_NE(svg.find("iteration energy (J)"), std::string::npos);
  EXPECT_NE(svg.find("ZeusGlobal &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("class=\"reference\""), std::string::npos);

  const AxisMap mx = axis_from_ticks(svg, "xtick", "x", 0, 1);
  const AxisMap my = axis_from_ticks(svg, "ytick", "y", 4, 1);  // labels sit 4 px below their tick
  const std::regex circ("<circle class=\"plan\" cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"[^>]*><title>([^<]*)</title>");
  std::size_t n = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circ); it != std::sregex_iterator(); ++it, ++n) {
    ASSERT_LT(n, d.plans.size());
    const PlotPoint& p = d.plans[n];
    EXPECT_NEAR(std::stod((*it)[1].str()), mx.a + mx.b * p.time_s, 0.02) << p.label;
    EXPECT_NEAR(std::stod((*it)[2].str()), my.a + my.b * p.energy_j, 0.02) << p.label;
    EXPECT_EQ((*it)[3].str(), fmt::format("{}: {:.4f} s, {:.1f} J", p.label, p.time_s, p.energy_j));
  }
  EXPECT_EQ(n, d.plans.size());
  EXPECT_GT(mx.b, 0);  // time grows to the right
  EXPECT_LT(my.b, 0);  // energy grows upward
  EXPECT_NE(svg.find("<rect class=\"allmax\""), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 0 && svg.find("class=\"baseline\"") != std::string::npos &&
                svg.find("class=\"baseline\"", svg.find("class=\"baseline\"") + 1) != std::string::npos,
            true);
}

TEST(FrontierPlot, KilojoulesForLargeEnergiesAndThinnedLines) {
  FrontierPlotData d;
  for (int i = 0; i < 20000; ++i) d.frontier.push_back({"", 30.0 - i * 1e-4, 5.0e5 + i * 3.0});
  const std::string svg = render_frontier_svg(d);
  EXPECT_NE(svg.find("iteration energy (kJ)"), std::string::npos);
  const auto p = svg.find("class=\"frontier\" points=\"");
  ASSERT_NE(p, std::string::npos);
  const auto e = svg.find('"', p + 26);
  const auto vertices = std::count(svg.begin() + p, svg.begin() + e, ',');
  EXPECT_LT(vertices, 3000);  // about one per half pixel, not 20000
  EXPECT_GT(vertices, 500);
}

TEST(FrontierPlot, HugeValuesGetShortDistinctTickLabels) {
  // Python's render_frontier_svg takes any finite number (the CSV readers refuse such values):
  // 1e300 J drew 300-digit tick labels (new-user trial, session 26).
  FrontierPlotData d;
  d.frontier = {{"", 1e15, 1e300}, {"", 3e15, 5e299}};
  const std::string svg = render_frontier_svg(d);
  const std::regex tick(R"(class="[xy]tick"[^>]*>([^<]*)<)");
  std::set<std::string> labels[2];
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator(); ++it) {
    const std::string label = (*it)[1];
    EXPECT_LE(label.size(), 12u) << label;
    labels[it->str().find("ytick") != std::string::npos].insert(label);
  }
  EXPECT_GE(labels[0].size(), 3u);
  EXPECT_GE(labels[1].size(), 3u);
  EXPECT_EQ(labels[0].count("1.5e+15"), 1u) << svg;
}

TEST(FrontierPlot, NothingToDrawIsAnError) {
  try {
    render_frontier_svg(FrontierPlotData{});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no finite (time, energy) point"), std::string::npos);
  }
}

TEST(PlotPointsCsv, ErrorsNameFileLineAndField) {
  TempDir tmp;
  auto err = [&](const std::string& text) {
    try {
      load_plot_points_csv(tmp.write("p.csv", text));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("name,energy_j\nx,1\n").find("p.csv:1: missing column 'time_s'"), std::string::npos);
  EXPECT_NE(err("time\n1\n").find("missing column 'energy_j'"), std::string::npos);
  EXPECT_NE(err("time,energy\n1,2\n3,abc\n").find("p.csv:3: field 'energy': expected a finite number, got 'abc'"),
            std::string::npos);
  EXPECT_NE(err("time,energy\n1,2,3\n").find("p.csv:2: expected 2 fields"), std::string::npos);
  EXPECT_NE(err("time,energy\n1,inf\n").find("field 'energy'"), std::string::npos);
  EXPECT_NE(err("time_s,energy_j\n1,2\n-1,2\n").find("p.csv:3: field 'time_s': expected an iteration time > 0 s (at most 10000000 s), got -1"),
            std::string::npos);
  EXPECT_NE(err("time_s,energy_j\n1e300,2\n").find("p.csv:2: field 'time_s': expected an iteration time > 0 s (at most "
                                                  "10000000 s), got 1e300"),
            std::string::npos);
  EXPECT_NE(err("time_s,energy_j\n1,1e300\n").find("p.csv:2: field 'energy_j': expected an energy >= 0 J"),
            std::string::npos);
  EXPECT_NE(err("time_s,energy_j\n1,-2\n").find("p.csv:2: field 'energy_j': expected an energy >= 0 J"),
            std::string::npos);
  EXPECT_NE(err("").find("empty file"), std::string::npos);
  EXPECT_NE(err("name,time_s\n\"unterminated,1\n").find("unterminated quoted field"), std::string::npos);
  // Named points beyond what a plot labels (session 32's trial: 200,000 took 76 s and 80 MB);
  // the same rows as a reference frontier (no labels) are fine.
  std::string many = "name,time_s,energy_j\n";
  for (std::size_t i = 0; i <= kMaxNamedPlotPoints; ++i) many += fmt::format("p{},{},{}\n", i, 1.0 + 1e-3 * i, 100.0);
  try {
    load_plot_points_csv(tmp.write("p.csv", many), true);
    ADD_FAILURE() << "1001 named points accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p.csv: has 1001 named points, more than the 1000 a plot labels"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(err(many), "");
  // A profile (times of single computations) given where iteration points are expected.
  EXPECT_NE(err("stage,instruction,frequency,time,energy\n0,forward,1410,0.01,3\n").find("p.csv:1: this is a profile"),
            std::string::npos);
  try {
    load_plot_points_csv((tmp.path() / "missing.csv").string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.csv: cannot open the file: No such file or directory"),
              std::string::npos) << e.what();
  }
  try {  // a folder is named as one, not read as an empty file
    load_plot_points_csv(tmp.path().string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(": cannot open the file: it is a folder, not a file"), std::string::npos)
        << e.what();
  }
  // Quoted names with commas; reference-style columns.
  const auto pts = load_plot_points_csv(tmp.write("q.csv", "method,time_s,energy_j\n\"Zeus, global\",1.5,20\n"));
  ASSERT_EQ(pts.size(), 1u);
  EXPECT_EQ(pts[0].label, "Zeus, global");
  const auto ref = load_plot_points_csv(testing::test_data("emulation/frontier_gpt3-175b_a100_sxm_mb12.csv"));
  EXPECT_EQ(ref.size(), 639u);
  EXPECT_DOUBLE_EQ(ref[0].time_s, 3.456);
}

}  // namespace
}  // namespace perseus

namespace {
// Session 18's trial: a one-point frontier (every clock the same) whose all-max time differed in
// the last bits got 65 x-axis ticks all labelled "1", the plan at the left edge and the all-max
// square at the right; a flat 0 % line plot got ticks "-0.000000000".
TEST(Render, AOnePointFrontierIsDrawnAsOnePoint) {
  perseus::FrontierPlotData d;
  d.frontier = {{"", 0.75, 505.1}};
  d.plans = {{"plan 0", 0.75, 505.1}};
  d.all_max = perseus::PlotPoint{"all-max", 0.75 * (1 + 1e-15), 505.1};
  const std::string svg = perseus::render_frontier_svg(d);
  const std::regex xtick("class=\"xtick\"");
  const auto n = std::distance(std::sregex_iterator(svg.begin(), svg.end(), xtick), std::sregex_iterator());
  EXPECT_GE(n, 2);
  EXPECT_LE(n, 12) << svg;
  std::smatch plan, square;
  ASSERT_TRUE(std::regex_search(svg, plan, std::regex("<circle class=\"plan\" cx=\"([0-9.]+)\"")));
  ASSERT_TRUE(std::regex_search(svg, square, std::regex("<rect class=\"allmax\" x=\"([0-9.]+)\"")));
  EXPECT_NEAR(std::stod(plan[1]), std::stod(square[1]), 10.0) << "the same time, the same place";
}
}  // namespace

namespace {
using perseus::FrontierPlotData;
using perseus::testing::count;
using perseus::PlotPoint;

// Session 24's trial of the pictures.
// - A one-point frontier without plan dots drew an empty plot (a polyline of one point), and its
//   legend promised "dots: plans written".
TEST(Render, AOnePointFrontierWithoutPlansHasAMarker) {
  FrontierPlotData d;
  d.frontier = {{"", 2.0, 5000.0}};
  const std::string svg = perseus::render_frontier_svg(d);
  EXPECT_NE(svg.find("<circle class=\"frontier-point\""), std::string::npos) << svg;
  EXPECT_EQ(svg.find("dots:"), std::string::npos) << "no plans were passed";
}

// - `perseus report --points` shifted the colours of the built-in series: ZeusGlobal's triangles
//   turned pink and a user's point took ZeusGlobal's green. Built-in series have their method's
//   colour; a user's point gets one no method uses.
TEST(Render, NamedPointsDoNotChangeTheBuiltInColours) {
  FrontierPlotData d;
  d.frontier = {{"", 3.0, 6000}, {"", 2.8, 6400}};
  d.candidates = {{"ZeusGlobal", {{"c0", 2.9, 6600}}, perseus::method_color("zeus_global")},
                  {"ZeusPerStage", {{"c0", 2.95, 6500}}, perseus::method_color("zeus_per_stage")}};
  d.baselines = {{"EnvPipe", 2.85, 6300, perseus::method_color("envpipe")}};
  const std::string without = perseus::render_frontier_svg(d);
  d.baselines.push_back({"measured", 2.9, 6250});
  d.baselines.push_back({"measured 2", 2.7, 6450});
  const std::string with = perseus::render_frontier_svg(d);
  for (const char* m : {"zeus_global", "zeus_per_stage", "envpipe"}) {
    const std::string c = "\"" + perseus::method_color(m) + "\"";
    EXPECT_EQ(count(without, c), count(with, c)) << m;  // the same markers in that colour
  }
  std::vector<std::string> user_fills;
  const std::regex diamond("class=\"baseline\"[^>]*fill=\"(#[0-9a-f]{6})\"[^>]*><title>measured");
  for (auto it = std::sregex_iterator(with.begin(), with.end(), diamond); it != std::sregex_iterator(); ++it)
    user_fills.push_back((*it)[1]);
  ASSERT_EQ(user_fills.size(), 2u);
  EXPECT_NE(user_fills[0], user_fills[1]);
  for (const auto& f : user_fills)
    for (const char* m : {"perseus", "all_max", "zeus_global", "zeus_per_stage", "envpipe"})
      EXPECT_NE(f, perseus::method_color(m)) << m;
}

// - EnvPipe's label and all-max's were printed over each other when the plans coincide, and the
//   opaque diamond hid the all-max square and the plan under it.
TEST(Render, LabelsOfCoincidingPointsDoNotOverlap) {
  FrontierPlotData d;
  d.frontier = {{"", 2.0, 500}, {"", 3.0, 400}};
  d.all_max = PlotPoint{"all-max frequency", 2.0, 500};
  d.baselines = {{"EnvPipe", 2.0, 500}};
  const std::string svg = perseus::render_frontier_svg(d);
  std::vector<double> ys;
  const std::regex label("<text class=\"point-label\" x=\"[0-9.]+\" y=\"([0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label); it != std::sregex_iterator(); ++it)
    ys.push_back(std::stod((*it)[1]));
  ASSERT_EQ(ys.size(), 2u);
  EXPECT_GE(std::abs(ys[0] - ys[1]), 12.0) << svg;
  EXPECT_EQ(count(svg, "class=\"label-leader\""), 1u) << "the moved label points to its marker";
  EXPECT_LT(svg.find("class=\"baseline\""), svg.find("class=\"allmax\"")) << "the square is drawn on top";
  EXPECT_NE(svg.find("fill-opacity=\"0.75\""), std::string::npos);
}

// - The frontier and all-max kept their own copies of the methods' colours, and the bound's dark
//   green was hard to tell from ZeusPerStage's; more than four user points repeated colours.
TEST(Render, BuiltInSeriesUseTheMethodColoursAndEightUserPointsDiffer) {
  FrontierPlotData d;
  d.frontier = {{"", 3.0, 6000}, {"", 2.0, 7000}};
  d.lower_bound = {{"", 3.0, 5900}, {"", 2.0, 6900}};
  d.all_max = PlotPoint{"all-max frequency", 2.0, 7500};
  for (int i = 0; i < 8; ++i) d.baselines.push_back({fmt::format("mine {}", i), 2.1 + 0.1 * i, 6500 + 10 * i});
  const std::string svg = perseus::render_frontier_svg(d);
  EXPECT_NE(svg.find("class=\"frontier\" points=\"" ), std::string::npos);
  EXPECT_TRUE(std::regex_search(svg, std::regex("class=\"frontier\" [^>]*stroke=\"" + perseus::method_color("perseus") + "\"")));
  EXPECT_TRUE(std::regex_search(svg, std::regex("class=\"allmax\" [^>]*fill=\"" + perseus::method_color("all_max") + "\"")));
  std::smatch bound;
  ASSERT_TRUE(std::regex_search(svg, bound, std::regex("class=\"lower-bound\" [^>]*stroke=\"(#[0-9a-f]{6})\"")));
  std::set<std::string> fills;
  const std::regex diamond("class=\"baseline\"[^>]*fill=\"(#[0-9a-f]{6})\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), diamond); it != std::sregex_iterator(); ++it)
    fills.insert((*it)[1]);
  EXPECT_EQ(fills.size(), 8u) << "eight user points, eight colours";
  for (const char* m : {"perseus", "all_max", "zeus_global", "zeus_per_stage", "envpipe"}) {
    EXPECT_EQ(fills.count(perseus::method_color(m)), 0u) << m;
    // The bound's colour is far from every method's (sum of channel differences, 0..765).
    const std::string c = perseus::method_color(m);
    int distance = 0;
    for (int k = 0; k < 3; ++k)
      distance += std::abs(std::stoi(bound[1].str().substr(1 + 2 * k, 2), nullptr, 16) - std::stoi(c.substr(1 + 2 * k, 2), nullptr, 16));
    EXPECT_GT(distance, 150) << m;  // the old dark green: 62 from ZeusPerStage
  }
}

// - A user's point under the legend (top right) was hidden: the legend takes the corner that
//   covers the fewest markers.
TEST(Render, TheLegendMovesOffThePoints) {
  FrontierPlotData d;
  d.frontier = {{"", 2.0, 500}, {"", 3.0, 400}};
  const auto legend_x = [](const std::string& svg) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(svg, m, std::regex("<g class=\"legend\"><rect x=\"([0-9.]+)\"")));
    return m.empty() ? 0.0 : std::stod(m[1]);
  };
  const double free_corner = legend_x(perseus::render_frontier_svg(d));
  d.baselines = {{"under the legend", 3.0, 500}};  // the top right corner
  const double moved = legend_x(perseus::render_frontier_svg(d));
  EXPECT_GT(free_corner, 400.0) << "top right when it is free";
  EXPECT_LT(moved, 200.0) << "another corner when a point is there";
}

// - Times and energies of a µs-scale profile all read "0.0004 s, 0.4 J".
TEST(Render, QuantitiesKeepFourSignificantDigits) {
  using perseus::joules_text;
  using perseus::seconds_text;
  EXPECT_EQ(seconds_text(2.836511), "2.8365");
  EXPECT_EQ(seconds_text(0.1), "0.1000");
  EXPECT_EQ(seconds_text(0.0003525), "0.0003525");
  EXPECT_EQ(seconds_text(3.525e-05), "3.525e-05");
  EXPECT_EQ(seconds_text(0), "0");
  EXPECT_EQ(joules_text(7339.04), "7339.0");
  EXPECT_EQ(joules_text(0.4478), "0.4478");
  EXPECT_EQ(joules_text(12.345), "12.35");
  EXPECT_EQ(perseus::method_display_name("zeus_per_stage"), "ZeusPerStage");
  EXPECT_EQ(perseus::method_display_name("mine"), "mine");
  EXPECT_EQ(perseus::method_color("mine"), "");
}
}  // namespace
