// `perseus emulate --report`: the line plot, the page, its errors and the CLI flag.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "perseus/emulation_report.hpp"
#include "perseus/error.hpp"
#include "test_util.hpp"
#include "xml_check.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;
using testing::count;
using testing::slurp;

TEST(LinePlot, OneMarkerPerFinitePointAndALegendEntryPerSeries) {
  LinePlotData d;
  d.title = "saving <vs> slowdown";
  d.x_label = "slowdown";
  d.y_label = "saving (%)";
  d.series = {{"perseus", {{1.0, 15}, {1.2, 27}, {1.5, NAN}}}, {"envpipe & co", {{1.0, 14}, {1.2, -2}}}};
  const std::string svg = render_line_plot_svg(d);
  testing::TempDir tmp;
  EXPECT_EQ(testing::xml_problem(svg, (tmp.path() / "l.xml").string()), "");
  EXPECT_EQ(count(svg, "<circle class=\"point\""), 4u);  // the NaN point is skipped
  EXPECT_EQ(count(svg, "<g class=\"series\">"), 2u);
  EXPECT_NE(svg.find("<title>perseus: 1.2, 27</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("envpipe &amp; co"), std::string::npos);
  EXPECT_NE(svg.find("saving &lt;vs&gt; slowdown"), std::string::npos);
  d.series = {{"nothing", {{NAN, 1}}}};
  EXPECT_THROW(render_line_plot_svg(d), InputError);
  d.series.clear();
  EXPECT_THROW(render_line_plot_svg(d), InputError);
}

EmulationResult small_result() {
  EmulationResult r;
  r.num_pipelines = 4;
  r.t_min_s = 2.8;
  r.frontier_size = 10;
  for (double s : {1.0, 1.2}) {
    for (const char* m : {"perseus", "zeus_global", "all_max"}) {
      EmulationRow row;
      row.method = m;
      row.slowdown = s;
      row.total_saving_pct = std::string(m) == "all_max" ? 0 : 10 * s;
      row.extrinsic_saving_pct = s - 1;
      r.rows.push_back(row);
    }
  }
  return r;
}

TEST(EmulationReport, PageHasBothPlotsAndEveryRow) {
  testing::TempDir tmp;
  const std::string path = write_emulation_report(small_result(), {"prof.csv", 8, 12, 2, 10, 83.64}, tmp.path().string());
  EXPECT_EQ(path, (tmp.path() / "emulation.html").string());
  const std::string html = slurp(path);
  EXPECT_EQ(testing::xml_problem(html, (tmp.path() / "p.xml").string()), "");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(count(html, "<svg "), 2u);
  EXPECT_EQ(count(html, "<g class=\"series\">"), 4u);  // 2 plots × (perseus, zeus_global); all_max is the reference
  EXPECT_EQ(count(html, "<tr><td style=\"text-align:left\">"), 6u);
  EXPECT_NE(html.find("4 data-parallel pipelines × 16 GPUs (8 stages × TP 2)"), std::string::npos);
  EXPECT_NE(html.find("time scale 10"), std::string::npos);
}

TEST(EmulationReport, ErrorsLeaveNothing) {
  testing::TempDir tmp;
  EXPECT_THROW(write_emulation_report(EmulationResult{}, {}, tmp.path().string()), InputError);
  EXPECT_THROW(write_emulation_report(small_result(), {}, (tmp.path() / "missing" / "dir").string()), InputError);
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(EmulateCli, ReportFlagWritesThePage) {
  testing::TempDir tmp;
  const std::string dir = (tmp.path() / "emu").string();
  const auto r = testing::run("emulate --profile " + testing::test_data("emulation/stage_profile_gpt3-175b_a100_sxm.csv") +
                              " --stages 8 --microbatches 12 --pipelines 4 --p2p-power 83.64 --unit-time 0.01 "
                              "--slowdown 1,1.1,1.2 --out " + dir + " --report");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + dir + "/emulation.html"), std::string::npos) << r.output;
  const std::string html = slurp(dir + "/emulation.html");
  // perseus, envpipe, zeus_global, zeus_per_stage in both plots, one point per slowdown each.
  EXPECT_EQ(count(html, "<g class=\"series\">"), 8u);
  EXPECT_EQ(count(html, "<circle class=\"point\""), 8u * 3);
}

}  // namespace
}  // namespace perseus
