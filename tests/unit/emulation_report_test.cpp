// `perseus emulate --report`: the line plot, the page, its errors and the CLI flag; emulate's output folder.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "perseus/emulation_report.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
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
  // The hover text names the axes (it was "perseus: 1.2, 27": session 26's trial).
  EXPECT_NE(svg.find("<title>perseus: slowdown 1.2, saving (%) 27</title>"), std::string::npos) << svg;
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

TEST(LinePlot, TheXAxisNeverStartsBelowItsFloor) {
  // One slowdown of 1 was padded to 0.975-1.025: factors below 1 are not slowdowns (session 26's trial).
  LinePlotData d;
  d.x_label = "slowdown";
  d.y_label = "saving (%)";
  d.series = {{"perseus", {{1.0, 15}}}};
  EXPECT_NE(render_line_plot_svg(d).find("text-anchor=\"middle\">0.98<"), std::string::npos);  // no floor: padded
  d.x_floor = 1;
  const std::string svg = render_line_plot_svg(d);
  EXPECT_EQ(svg.find("text-anchor=\"middle\">0."), std::string::npos) << svg;
  EXPECT_NE(svg.find("text-anchor=\"middle\">1.00<"), std::string::npos) << svg;
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

TEST(EmulationReport, LinesJoinThePointsBySlowdownWhateverTheirOrder) {
  // --slowdown 1.5,1.01,1.3 drew lines back and forth in input order (session 26's trial).
  EmulationResult r = small_result();
  r.rows.clear();
  for (double s : {1.5, 1.01, 1.3}) {
    EmulationRow row;
    row.method = "perseus";
    row.slowdown = s;
    row.total_saving_pct = 10 * s;
    r.rows.push_back(row);
  }
  testing::TempDir tmp;
  const std::string html = slurp(write_emulation_report(r, {"prof.csv", 8, 12, 2, 10, 83.64}, tmp.path().string()));
  std::size_t lines = 0;
  for (std::size_t at = html.find("<polyline points=\""); at != std::string::npos;
       at = html.find("<polyline points=\"", at + 1)) {
    ++lines;
    const std::size_t from = at + std::string("<polyline points=\"").size();
    std::istringstream pts(html.substr(from, html.find('"', from) - from));
    std::vector<double> xs;
    for (std::string xy; pts >> xy;) xs.push_back(std::stod(xy.substr(0, xy.find(','))));
    ASSERT_EQ(xs.size(), 3u);
    EXPECT_TRUE(std::is_sorted(xs.begin(), xs.end())) << html.substr(at, 200);
  }
  EXPECT_EQ(lines, 2u);  // total and extrinsic saving
  EXPECT_LT(html.find(">1.5<"), std::string::npos);  // the table keeps every row
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


std::string emulate_args(const std::string& slowdowns, const std::string& out) {
  return "emulate --profile " + testing::test_data("emulation/stage_profile_gpt3-175b_a100_sxm.csv") +
         " --stages 8 --microbatches 12 --pipelines 4 --p2p-power 83.64 --unit-time 0.01 --slowdown " + slowdowns +
         " --out " + out;
}

/// The slowdown column of an emulation.csv, each factor once, in order.
std::vector<std::string> slowdowns_in(const std::string& csv_path) {
  std::istringstream in(slurp(csv_path));
  std::vector<std::string> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const auto a = line.find(','), b = line.find(',', a + 1);
    const std::string s = line.substr(a + 1, b - a - 1);
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

// A rerun replaces the whole folder: the emulation.html of an earlier run with --report does not
// survive a run without it (it would show slowdowns the new emulation.csv lacks).
TEST(EmulateCli, RerunWithoutReportLeavesNoStalePage) {
  testing::TempDir tmp;
  const std::string dir = (tmp.path() / "emu").string();
  const auto first = testing::run(emulate_args("1.05,1.1,1.2", dir) + " --report");
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_TRUE(fs::exists(dir + "/emulation.html"));
  const auto second = testing::run(emulate_args("1.05", dir));
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_EQ(second.output.find("emulation.html"), std::string::npos) << second.output;
  EXPECT_FALSE(fs::exists(dir + "/emulation.html"));
  EXPECT_EQ(slowdowns_in(dir + "/emulation.csv"), std::vector<std::string>{"1.05"});
  EXPECT_NE(slurp(dir + "/emulation.json").find("\"pipelines\": 4"), std::string::npos);
  // Nothing else is left beside the folder or in it (no temporary folder or file).
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path())) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"emu"});
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 3u);  // emulation.csv, emulation.json, .perseus-output
  // With --report again the page is back, for the new slowdowns only.
  const auto third = testing::run(emulate_args("1.3", dir) + " --report");
  ASSERT_EQ(third.status, 0) << third.output;
  const std::string html = slurp(dir + "/emulation.html");
  EXPECT_NE(html.find("<td>1.300</td>"), std::string::npos);
  EXPECT_EQ(html.find("<td>1.050</td>"), std::string::npos);
}

// Like perseus optimize, emulate never replaces a folder holding a file it does not write:
// refused before the emulation runs (exit 1, naming the file), and nothing is touched.
TEST(EmulateCli, FolderWithAUsersFileIsRefusedAndKept) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "emu";
  ASSERT_EQ(testing::run(emulate_args("1.1", dir.string()) + " --report").status, 0);
  for (const fs::path& mine : {dir / "notes.txt", dir / "sub" / "emulation.csv"}) {
    fs::create_directories(mine.parent_path());
    std::ofstream(mine) << "keep me\n";
    const auto r = testing::run(emulate_args("1.2", dir.string()));
    EXPECT_EQ(r.status, 1) << r.output;
    const std::string rel = mine.lexically_relative(dir).generic_string();
    EXPECT_NE(r.output.find("--out " + dir.string() + ": folder holds '" + (rel == "notes.txt" ? rel : "sub") +
                            "', which this command does not write"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("zeus_per_stage"), std::string::npos) << "emulated before checking --out: " << r.output;
    EXPECT_EQ(slurp(mine), "keep me\n");
    EXPECT_TRUE(fs::exists(dir / "emulation.html"));  // the earlier run's files are untouched too
    EXPECT_EQ(slowdowns_in((dir / "emulation.csv").string()), std::vector<std::string>{"1.1"});
    fs::remove_all(mine.parent_path() == dir ? mine : mine.parent_path());
  }
}

// In perseus optimize's output folder (for perseus report's Emulation table) emulate adds its
// files and keeps optimize's; a rerun without --report removes its earlier page there too. A
// user's file in that folder is refused as anywhere else, and so is an emulation of another
// pipeline (the report would show the two as one run).
TEST(EmulateCli, AddsToAnOptimizeFolderWithoutStalePage) {
  testing::TempDir tmp;
  const std::string dir = (tmp.path() / "opt").string();
  const std::string other = (tmp.path() / "other").string();
  const auto opt = testing::run("optimize --quiet --profile " +
                                testing::test_data("emulation/stage_profile_gpt3-175b_a100_sxm.csv") +
                                " --stages 8 --microbatches 12 --p2p-power 83.64 --unit-time 0.01 --sample 2 --out " + dir);
  ASSERT_EQ(opt.status, 0) << opt.output;
  const auto llama = testing::run("optimize --quiet --profile " + testing::test_data("cases/llama_a100_4st.csv") +
                                  " --stages 4 --microbatches 4 --p2p-power 75 --unit-time 0.01 --out " + other);
  ASSERT_EQ(llama.status, 0) << llama.output;
  const auto mismatch = testing::run(emulate_args("1.05", other));
  EXPECT_EQ(mismatch.status, 1) << mismatch.output;
  EXPECT_NE(mismatch.output.find("holds a perseus optimize run of another pipeline"), std::string::npos) << mismatch.output;
  EXPECT_FALSE(fs::exists(other + "/emulation.csv"));
  // The same pipeline planned otherwise (another planner, a partial frontier) is refused too:
  // the report showed a Summary and an Emulation table of two frontiers (session 27's trial).
  for (const char* planned : {"--planner graph-cut", "--max-points 3"}) {
    const std::string folder = (tmp.path() / "planned").string();
    fs::remove_all(folder);
    const std::string profile = testing::test_data("emulation/stage_profile_gpt3-175b_a100_sxm.csv");
    ASSERT_EQ(testing::run("optimize --quiet --profile " + profile + " --stages 8 --microbatches 12 --p2p-power 83.64 --unit-time 0.01 " + planned + " --out " +
                           folder).status,
              0);
    const auto r = testing::run(emulate_args("1.05", folder));
    EXPECT_EQ(r.status, 1) << planned << ": " << r.output;
    const std::string how = planned[2] == 'p' ? "planner \"graph-cut\"" : "a partial frontier ('max_points')";
    EXPECT_NE(r.output.find("holds a perseus optimize run of this pipeline planned with " + how),
              std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(folder + "/emulation.csv"));
    // A hand-edited flag of another type is no crash (an internal error) but read as "not partial".
    if (planned[2] == 'm') {
      std::string text = testing::slurp(folder + "/summary.json");
      text = std::regex_replace(text, std::regex(R"("partial": true)"), R"("partial": "yes")");
      text = std::regex_replace(text, std::regex(R"("partial_reason": "[a-z_]*")"), R"("partial_reason": 5)");
      std::ofstream(folder + "/summary.json") << text;
      const auto edited = testing::run(emulate_args("1.05", folder));
      EXPECT_EQ(edited.status, 0) << edited.output;
    }
  }
  ASSERT_EQ(testing::run(emulate_args("1.05,1.2", dir) + " --report").status, 0);
  EXPECT_TRUE(fs::exists(dir + "/emulation.html"));
  const auto again = testing::run(emulate_args("1.05", dir));
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_FALSE(fs::exists(dir + "/emulation.html"));
  EXPECT_EQ(slowdowns_in(dir + "/emulation.csv"), std::vector<std::string>{"1.05"});
  for (const char* f : {"summary.json", "frontier.csv", "profile.csv", "schedule.csv", "plans"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / f)) << f;
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  std::ofstream(dir + "/plans/notes.txt") << "mine\n";
  const auto refused = testing::run(emulate_args("1.2", dir));
  EXPECT_EQ(refused.status, 1) << refused.output;
  EXPECT_NE(refused.output.find("folder holds 'plans/notes.txt'"), std::string::npos) << refused.output;
  EXPECT_EQ(slowdowns_in(dir + "/emulation.csv"), std::vector<std::string>{"1.05"});
}

// An optimize run with timeline overheads stored the profile with them added: the refusal
// names the overhead (before, both pipelines were described the same way).
TEST(EmulateCli, AnOptimizeFolderWithOverheadsIsRefusedNamingThem) {
  testing::TempDir tmp;
  const std::string dir = (tmp.path() / "ovh").string();
  const auto opt = testing::run("optimize --quiet --profile " +
                                testing::test_data("emulation/stage_profile_gpt3-175b_a100_sxm.csv") +
                                " --stages 8 --microbatches 12 --p2p-power 83.64 --unit-time 0.01 --op-overhead 0.005 "
                                "--out " + dir);
  ASSERT_EQ(opt.status, 0) << opt.output;
  const auto r = testing::run(emulate_args("1.05", dir));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("planned with --op-overhead 0.005 s"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/emulation.csv"));
}

// The other pipeline's description quotes summary.json's values: a right-to-left override was
// printed raw and a 1 MB value whole (fresh-user fuzzing, session 20).
TEST(EmulateCli, AnotherPipelinesValuesAreQuotedEscapedAndShort) {
  testing::TempDir tmp;
  const std::string dir = (tmp.path() / "o").string();
  const auto opt = testing::run("optimize --quiet --profile " +
                                testing::test_data("emulation/stage_profile_gpt3-175b_a100_sxm.csv") +
                                " --stages 8 --microbatches 12 --p2p-power 83.64 --unit-time 0.01 --out " + dir);
  ASSERT_EQ(opt.status, 0) << opt.output;
  nlohmann::json summary = nlohmann::json::parse(slurp(dir + "/summary.json"));
  summary["inputs"]["schedule"] = "\u202e1f1b";
  summary["inputs"]["chunks"] = std::string(1 << 20, '7');
  std::ofstream(dir + "/summary.json") << summary.dump(2);
  const auto r = testing::run(emulate_args("1.05", dir));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("another pipeline (schedule \"\\u202e1f1b\", chunks '7777"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(1048576 bytes)"), std::string::npos) << r.output.substr(0, 400);
  EXPECT_LT(r.output.size(), 1000u);
}

TEST(EmulationFolder, NamesAndChecks) {
  EXPECT_TRUE(is_emulation_output("emulation.csv", false));
  EXPECT_TRUE(is_emulation_output("emulation.json", false));
  EXPECT_TRUE(is_emulation_output("emulation.html", false));
  EXPECT_FALSE(is_emulation_output("emulation.html", true));
  EXPECT_FALSE(is_emulation_output("sub/emulation.csv", false));
  EXPECT_FALSE(is_emulation_output("summary.json", false));
  testing::TempDir tmp;
  EXPECT_NO_THROW(check_emulation_folder((tmp.path() / "new" / "emu").string()));
  EXPECT_FALSE(fs::exists(tmp.path() / "new"));  // checking creates nothing
  EXPECT_TRUE(fs::is_empty(tmp.path())) << "the probe folder (session 26) is removed";
  const std::string file = tmp.write("f", "x");
  try {
    check_emulation_folder(file);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "out_dir");
    EXPECT_NE(std::string(e.what()).find("exists and is not a folder"), std::string::npos) << e.what();
  }
  // A folder of the user's files with emulate's names is refused: perseus did not write it (it
  // has no marker; session 22's trial saw a user's emulation.csv overwritten).
  const fs::path emu = tmp.path() / "emu";
  fs::create_directories(emu);
  std::ofstream(emu / "emulation.csv") << "x";
  try {
    check_emulation_folder(emu.string());
    ADD_FAILURE() << "a folder perseus did not write was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("folder was not written by perseus (it has no .perseus-output file"),
              std::string::npos)
        << e.what();
  }
  // One perseus wrote (its marker), with only emulate's files, or optimize's and emulate's
  // (summary.json), is accepted.
  std::ofstream(emu / kOutputFolderMarker) << "x";
  EXPECT_NO_THROW(check_emulation_folder(emu.string()));
  std::ofstream(emu / "frontier.csv") << "x";  // optimize's file without summary.json: not an optimize folder
  EXPECT_THROW(check_emulation_folder(emu.string()), InputError);
  std::ofstream(emu / "summary.json") << "{}";
  EXPECT_NO_THROW(check_emulation_folder(emu.string()));
  // The library writer: an emulate-only folder is replaced whole.
  std::ofstream(emu / "emulation.html") << "old";
  fs::remove(emu / "frontier.csv");
  fs::remove(emu / "summary.json");
  EmulationConfig cfg;
  cfg.time_scale = 1;
  write_emulation_outputs(small_result(), cfg, emu.string());
  EXPECT_FALSE(fs::exists(emu / "emulation.html"));
  write_emulation_outputs(small_result(), cfg, emu.string(), std::string("<html>page</html>"));
  EXPECT_EQ(slurp(emu / "emulation.html"), "<html>page</html>");
  EXPECT_THROW(write_emulation_outputs(small_result(), cfg, file), InputError);
}

}  // namespace
}  // namespace perseus
