// `perseus report`: the HTML page of an optimize folder, its errors, and the CLI.
#include <sys/wait.h>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <tuple>
#include <sstream>

#include <nlohmann/json.hpp>

#include "perseus/emulate.hpp"
#include "perseus/error.hpp"
#include "perseus/optimize.hpp"
#include "perseus/baselines.hpp"
#include "perseus/plan_files.hpp"
#include "perseus/schedule.hpp"
#include "perseus/schedule_io.hpp"
#include "perseus/plan.hpp"
#include "perseus/render.hpp"
#include "test_util.hpp"
#include "xml_check.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;
using testing::count;
using testing::slurp;
using testing::TempDir;

/// A small optimize folder: 2 stages, 3 microbatches, three frequencies; `schedule` a name or
/// (as `"csv"`) the 1F1B schedule written to tmp/s.csv first.
struct Job {
  TempDir tmp;
  std::string profile, out;
  explicit Job(const std::string& schedule = "1f1b") {
    Profile p = testing::uniform_profile(2, {{1410, 0.10, 30}, {1200, 0.12, 27}, {1005, 0.16, 25}},
                                         {{1410, 0.20, 80}, {1200, 0.24, 70}, {1005, 0.30, 65}});
    profile = (tmp.path() / "profile.csv").string();
    write_profile_csv(p, profile);
    OptimizeConfig cfg;
    cfg.profile_path = profile;
    cfg.problem.schedule = schedule;
    if (schedule == "csv") {
      cfg.problem.schedule = (tmp.path() / "s.csv").string();
      write_schedule_csv(make_1f1b(2, 3), cfg.problem.schedule);
    }
    cfg.problem.num_ranks = 2;
    cfg.problem.microbatches = 3;
    cfg.problem.p_block_w = 40;
    cfg.unit_time_s = 0.01;
    cfg.out_dir = (tmp.path() / "out").string();
    run_optimize(cfg);
    out = cfg.out_dir;
  }
};

std::string report_error(const std::string& dir, const ReportOptions& opt = {}) {
  try {
    write_report(dir, opt);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Report, SelfContainedPageWithAllSections) {
  Job job;
  std::ofstream(fs::path(job.out) / "emulation.csv")
      << "method,slowdown,chosen_time_s,cluster_energy_j,intrinsic_saving_pct,extrinsic_saving_pct,total_saving_pct\n"
         "Perseus,1.2,0.95,123456.7,10.123,5.5,15.62\nEnvPipe,1.2,0.80,130000,8,0,8\nZeus,1.0,0.85,130000,8,0,8\n";
  std::ofstream(fs::path(job.out) / "emulation.json")
      << R"({"pipelines": 4, "stages": 2, "microbatches": 3, "tp": 8, "time_scale": 10.0, "t_min_s": 0.8})";
  const auto points = job.tmp.write("points.csv", "name,time_s,energy_j\nZeusGlobal,1.0,250\n");
  ReportOptions opt;
  opt.write_svgs = true;
  opt.points_csv = points;
  opt.reference_csv = job.tmp.write("ref.csv", "time,energy\n1.2,200\n0.9,240\n");
  const std::string path = write_report(job.out, opt);
  EXPECT_EQ(path, (fs::path(job.out) / "report.html").string());
  const std::string html = slurp(path);
  EXPECT_EQ(testing::xml_problem(html, (job.tmp.path() / "r.xml").string()), "");
  // Self-contained: no scripts, no external resources.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(std::regex_search(html, std::regex("(href|url)\\(?=?\"?https?:")), false);
  // 1 frontier plot + 2 timelines + 2 histograms.
  EXPECT_EQ(count(html, "<svg "), 5u);
  EXPECT_EQ(count(html, "class=\"op forward\""), 2u * 2 * 3);
  EXPECT_NE(html.find("Fastest plan (plan "), std::string::npos);
  EXPECT_NE(html.find("Lowest-energy plan written (plan 0)"), std::string::npos);
  EXPECT_NE(html.find("average power (W)"), std::string::npos);  // profile found: power colours
  // The two timelines do not share SVG ids.
  EXPECT_NE(html.find("id=\"fast-hatch-b\""), std::string::npos);
  EXPECT_NE(html.find("id=\"green-hatch-b\""), std::string::npos);
  // Summary values from summary.json, emulation table, baseline and reference.
  const std::string summary = slurp(fs::path(job.out) / "summary.json");
  const std::smatch m = [&] {
    std::smatch mm;
    std::regex_search(summary, mm, std::regex("\"t_min_s\": ([0-9.e+-]+)"));
    return mm;
  }();
  ASSERT_FALSE(m.empty());
  EXPECT_NE(html.find(fmt::format("<td>{:.4f}</td>", std::stod(m[1].str()))), std::string::npos);
  EXPECT_NE(html.find("<th>total_saving_pct</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>15.62</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>123456.7</td>"), std::string::npos);
  // Inputs that did not apply to 1F1B are not listed.
  EXPECT_NE(html.find("<td>inputs.microbatches</td>"), std::string::npos);
  EXPECT_EQ(html.find("inputs.backward_input_fraction"), std::string::npos);
  EXPECT_EQ(html.find("inputs.chunks"), std::string::npos);
  // Emulation: shape and scaling stated; the row slower than its straggler (0.85 s > 1.0 × 0.8 s) flagged.
  EXPECT_NE(html.find("4 data-parallel pipelines (one of them the straggler) of 2 stages × TP 8 = 16 GPUs each, 64 "
                      "GPUs in all; time scale 10."),
            std::string::npos);
  EXPECT_NE(html.find("(T_min = 0.8000 s here is 0.08000 s unscaled)"), std::string::npos);
  EXPECT_EQ(count(html, "<td>slows the cluster by 6.25%</td>"), 1u);
  EXPECT_EQ(count(html, "slows the cluster by"), 1u);
  EXPECT_NE(html.find("ZeusGlobal"), std::string::npos);
  EXPECT_NE(html.find("reference: ref.csv"), std::string::npos);
  for (const char* f : {"frontier.svg", "timeline_fastest.svg", "timeline_lowest_energy.svg"}) {
    const std::string svg = slurp(fs::path(job.out) / f);
    EXPECT_EQ(svg.rfind("<svg ", 0), 0u) << f;
    EXPECT_NE(html.find(svg), std::string::npos) << f << " is the picture inlined in the report";
  }
  // Atomic write leaves no temporary file.
  for (const auto& e : fs::directory_iterator(job.out))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST(Report, PlanPointsMatchFrontierCsvRows) {
  Job job;
  const std::string html = slurp(write_report(job.out));
  EXPECT_EQ(html.find("Emulation"), std::string::npos);  // no emulation.csv: no table
  const auto rows = load_plot_points_csv((fs::path(job.out) / "frontier.csv").string());
  std::size_t plans = 0;
  for (const auto& e : fs::directory_iterator(fs::path(job.out) / "plans")) plans += e.path().extension() == ".json";
  const std::regex circ("<circle class=\"plan\"[^>]*><title>plan ([0-9]+): ([0-9.]+) s, ([0-9.]+) J</title>");
  std::size_t n = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), circ); it != std::sregex_iterator(); ++it, ++n) {
    const auto& row = rows.at(std::stoul((*it)[1].str()));
    EXPECT_EQ((*it)[2].str(), fmt::format("{:.4f}", row.time_s));
    EXPECT_EQ((*it)[3].str(), fmt::format("{:.1f}", row.energy_j));
  }
  EXPECT_EQ(n, plans);
}

TEST(Report, FrontierPlotShowsTheBoundAndTheBaselinesPlans) {
  Job job;  // certified planner (the default): frontier.csv has lower_bound_j
  std::string html = slurp(write_report(job.out));
  EXPECT_EQ(count(html, "<polyline class=\"lower-bound\""), 1u);
  EXPECT_NE(html.find("certified lower bound (no plan below)"), std::string::npos);
  EXPECT_NE(html.find("The dotted line is the certified lower bound"), std::string::npos);
  EXPECT_EQ(html.find("No lower bound was computed"), std::string::npos);
  // ZeusGlobal's all-1410 MHz candidate is the all-max plan; EnvPipe is a named diamond.
  EXPECT_NE(html.find("ZeusGlobal candidates (one clock for all GPUs): candidate 0 (1410 MHz)"), std::string::npos);
  EXPECT_EQ(html.find("on stage 0"), std::string::npos) << "a tooltip names all of a plan's clocks, not stage 0's";
  EXPECT_GE(count(html, "ZeusPerStage candidates (one clock per stage): candidate"), 1u);
  EXPECT_NE(html.find("<title>EnvPipe: "), std::string::npos);
  // Every candidate is drawn inside the plot's time range, or counted in the note.
  const std::size_t drawn = count(html, "<polygon class=\"candidate\"");
  std::smatch m;
  const std::size_t left_out =
      std::regex_search(html, m, std::regex("([0-9]+) baseline plan\\(s\\) slower")) ? std::stoul(m[1]) : 0;
  EXPECT_EQ(drawn + left_out, 3u + 3u);  // ZeusGlobal and ZeusPerStage: one candidate per clock (3); EnvPipe drawn above
  // Graph-cut folders have no bound: no dotted line.
  std::string csv = slurp(fs::path(job.out) / "frontier.csv");
  csv = std::regex_replace(csv, std::regex(",[0-9.e+-]+\n"), ",0\n");
  std::ofstream(fs::path(job.out) / "frontier.csv") << csv;
  html = slurp(write_report(job.out));
  EXPECT_EQ(count(html, "class=\"lower-bound\""), 0u);
  // ... and the text says so instead of describing a dotted line.
  EXPECT_EQ(html.find("The dotted line is the certified lower bound"), std::string::npos);
  EXPECT_NE(html.find("No lower bound was computed for this frontier"), std::string::npos);
}

// Session 24's trial: the report planned EnvPipe at the default 1 ms quantum whatever the run's
// --unit-time, so on a profile of 10-30 µs computations planned at 1 µs it drew EnvPipe on the
// all-max plan (0 % saving; `perseus emulate` gave it 6 %). Every time and energy also read
// "0.0000 s" / "0.0 J".
TEST(Report, EnvPipeUsesTheRunsTimeUnitAndSmallValuesAreReadable) {
  TempDir tmp;
  const Profile p = testing::uniform_profile(2, {{1410, 10e-6, 3e-3}, {1200, 12e-6, 2.7e-3}, {1005, 16e-6, 2.5e-3}},
                                             {{1410, 20e-6, 8e-3}, {1200, 24e-6, 7e-3}, {1005, 30e-6, 6.5e-3}});
  const std::string profile = (tmp.path() / "profile.csv").string();
  write_profile_csv(p, profile);
  OptimizeConfig cfg;
  cfg.profile_path = profile;
  cfg.problem.num_ranks = 2;
  cfg.problem.microbatches = 3;
  cfg.problem.p_block_w = 40;
  cfg.unit_time_s = 1e-6;
  cfg.out_dir = (tmp.path() / "out").string();
  run_optimize(cfg);
  const std::string html = slurp(write_report(cfg.out_dir));
  const Dag dag = Dag::build(make_1f1b(2, 3));
  const FrequencyPlan env = envpipe_plan(dag, p, 40, EnvPipeOptions{.unit_time_s = 1e-6}).plan;
  const FrequencyPlan allmax = all_max_plan(dag, p, 40);
  ASSERT_LT(env.total_energy_j(), allmax.total_energy_j() * 0.999) << "EnvPipe saves here at 1 µs";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex("<title>EnvPipe: ([0-9.e-]+) s, ([0-9.e-]+) J</title>"))) << html;
  EXPECT_NEAR(std::stod(m[1]), env.timeline.time_s, 1e-3 * env.timeline.time_s);
  EXPECT_NEAR(std::stod(m[2]), env.total_energy_j(), 1e-3 * env.total_energy_j());
  EXPECT_EQ(html.find("0.0000 s"), std::string::npos);
  EXPECT_EQ(html.find(">0.0000<"), std::string::npos);
}

// The folder stores the profile as planned (profile.csv): the report keeps power colours when
// the input profile moved (issue 22). Without the copy and the input: frequency, a note and a warning.
TEST(Report, WithoutTheProfileBoxesShowFrequency) {
  Job job;
  fs::rename(job.profile, job.profile + ".moved");
  std::vector<std::string> warnings;
  ReportOptions warn;
  warn.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  EXPECT_NE(slurp(write_report(job.out, warn)).find("average power (W)"), std::string::npos);
  EXPECT_TRUE(warnings.empty());
  fs::remove(fs::path(job.out) / "profile.csv");  // a folder written before the copy existed
  const std::string html = slurp(write_report(job.out, warn));
  EXPECT_NE(html.find("was not found (the folder holds no profile.csv, and the path is relative to where optimize "
                      "ran), so boxes are coloured by SM frequency"),
            std::string::npos);
  EXPECT_NE(html.find("SM frequency (MHz)"), std::string::npos);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("coloured by SM frequency"), std::string::npos);
  // --profile brings power back.
  ReportOptions opt;
  opt.profile_path = job.profile + ".moved";
  EXPECT_NE(slurp(write_report(job.out, opt)).find("average power (W)"), std::string::npos);
  opt.profile_path = job.profile + ".nope";
  EXPECT_NE(report_error(job.out, opt).find("profile_path " + opt.profile_path + ": cannot read"), std::string::npos);
}

// The user trial: optimize with a relative profile path, report run from another folder.
TEST(ReportCli, ReportFromAnotherFolderKeepsPowerColours) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "work");
  fs::copy_file(testing::test_data("cases/llama_a100_4st.csv"), tmp.path() / "work" / "llama.csv");
  const std::string bin = PERSEUS_BINARY;
  // Relative profile and schedule CSV paths: the report finds the folder's copies.
  const std::string cmd = "cd " + (tmp.path() / "work").string() + " && " + bin +
                          " schedule --stages 4 --microbatches 8 --out s.csv > /dev/null && " + bin +
                          " optimize --quiet --profile llama.csv --schedule s.csv --p2p-power 75 "
                          "--out ../out > /dev/null && cd / && " + bin + " report " + (tmp.path() / "out").string() +
                          " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  ASSERT_EQ(WEXITSTATUS(::pclose(p)), 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  const std::string html = slurp(tmp.path() / "out" / "report.html");
  EXPECT_NE(html.find("average power (W)"), std::string::npos);
  EXPECT_EQ(html.find("coloured by SM frequency"), std::string::npos);
}

TEST(ReportErrors, BadFolderAndSummary) {
  TempDir tmp;
  EXPECT_NE(report_error((tmp.path() / "nope").string()).find("nope: not a folder"), std::string::npos);
  EXPECT_EQ(report_error(""), "the folder path is empty (expected the output folder of `perseus optimize`)");
  EXPECT_NE(report_error(tmp.path().string()).find("summary.json: missing"), std::string::npos);
  tmp.write("summary.json", "{\"t_min_s\": 1,");
  auto e = report_error(tmp.path().string());
  EXPECT_NE(e.find("summary.json:1: malformed JSON at column 14"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(tmp.path() / "report.html"));

  Job job;
  const fs::path sum = fs::path(job.out) / "summary.json";
  const std::string good = slurp(sum);
  // Each edit of a good summary.json (pattern -> replacement) and the error it must give; the
  // last two are hand-edited numbers outside their ranges, named rather than drawn.
  const std::tuple<const char*, const char*, const char*> edits[] = {
      {"\"stages\": 2", "\"stages\": \"two\"", "field 'inputs.stages': expected an integer, got 'two'"},
      // Each size named with optimize's range (it said "must be positive" of three positive numbers).
      {"\"stages\": 2", "\"stages\": 1000000000", "field 'inputs.stages': expected an integer in [1, 1048576], got 1000000000"},
      {"\"microbatches\": 3", "\"microbatches\": 0", "field 'inputs.microbatches': expected an integer in [1, 1048576], got 0"},
      {"\"t_min_s\"", "\"t_minimum\"", "summary.json: missing field 't_min_s'"},
      {"\"schedule\": \"1f1b\"", "\"schedule\": \"zigzag\"", "field 'inputs.schedule': 'zigzag' is neither a schedule name"},
      {"\"microbatches\": 3", "\"microbatches\": 4", "ranks[0] must list 8 computations, as the schedule runs on that rank"},
      {"\"t_min_s\": [0-9.e+-]+", "\"t_min_s\": -1", "field 't_min_s': expected a number in [0, 10000000], got -1"},
      {"\"p2p_power_w\": [0-9.e+-]+", "\"p2p_power_w\": -5",
       "field 'inputs.p2p_power_w': expected a number in [0, 100000], got -5"},
      // Session 24: EnvPipe is planned at the run's unit; a hand-edited one is checked first.
      {"\"unit_time_s\": [0-9.e+-]+", "\"unit_time_s\": -1",
       "field 'inputs.unit_time_s': expected a number in [1e-07, 10], got -1"},
  };
  for (const auto& [pattern, replacement, expected] : edits) {
    std::ofstream(sum) << std::regex_replace(good, std::regex(pattern), replacement);
    e = report_error(job.out);
    EXPECT_NE(e.find(expected), std::string::npos) << pattern << ": " << e;
  }
  EXPECT_FALSE(fs::exists(fs::path(job.out) / "report.html"));
}

TEST(ReportErrors, PlanFileProblems) {
  Job job;
  fs::path plan;
  for (const auto& e : fs::directory_iterator(fs::path(job.out) / "plans"))
    if (plan.empty() || e.path() > plan) plan = e.path();  // the T_min plan, which the report draws
  const std::string good = slurp(plan);
  std::ofstream(plan) << std::regex_replace(good, std::regex("\"frequency_mhz\": [0-9]+"), "\"frequency_mhz\": 1234",
                                            std::regex_constants::format_first_only);
  auto e = report_error(job.out);
  EXPECT_NE(e.find(plan.filename().string() + ": does not match the profile"), std::string::npos) << e;
  std::ofstream(plan) << std::regex_replace(good, std::regex("\"instruction\": \"forward\""),
                                            "\"instruction\": \"sideways\"", std::regex_constants::format_first_only);
  e = report_error(job.out);
  EXPECT_NE(e.find(plan.filename().string() + ": ranks[0][0]: unknown instruction 'sideways'"), std::string::npos) << e;
  {
    auto j = nlohmann::json::parse(good);
    j["ranks"][1]["instructions"][2].erase("end_s");
    std::ofstream(plan) << j.dump(1);
  }
  e = report_error(job.out);
  EXPECT_NE(e.find("ranks[1][2]: \"start_s\" and \"end_s\" must be numbers (s) with end_s > start_s"),
            std::string::npos) << e;
  {
    auto j = nlohmann::json::parse(good);
    j["time_s"] = 99.0;
    std::ofstream(plan) << j.dump(1);
  }
  e = report_error(job.out);
  EXPECT_NE(e.find("field 'time_s' is 99 s, but row"), std::string::npos) << e;  // every plan file is checked
  {  // the same times with other energies: the profile (or the file) was changed
    auto j = nlohmann::json::parse(good);
    j["energy_j"] = j["energy_j"].get<double>() + 40.0;
    std::ofstream(plan) << j.dump(1);
  }
  e = report_error(job.out);
  EXPECT_NE(e.find(plan.filename().string() + ": field 'energy_j' is "), std::string::npos) << e;
  EXPECT_NE(e.find("was the profile changed?"), std::string::npos) << e;
  std::ofstream(plan) << "[1, 2";
  e = report_error(job.out);
  EXPECT_NE(e.find(plan.filename().string() + ":1: field '[2]': malformed JSON at column 5"), std::string::npos) << e;
  EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
}

// The T_min plan's file removed: the report draws the fastest plan it has and says it is not T_min.
TEST(Report, AMissingTminPlanFileIsSaid) {
  Job job;
  fs::path last;
  for (const auto& e : fs::directory_iterator(fs::path(job.out) / "plans"))
    if (last.empty() || e.path() > last) last = e.path();
  write_report(job.out);
  EXPECT_NE(slurp(fs::path(job.out) / "report.html").find("Fastest plan (plan "), std::string::npos);
  fs::remove(last);
  write_report(job.out);
  const std::string html = slurp(fs::path(job.out) / "report.html");
  EXPECT_NE(html.find("Fastest written plan (the T_min plan, plan "), std::string::npos);
  EXPECT_EQ(html.find("Fastest plan (plan "), std::string::npos);
}

TEST(ReportErrors, FrontierCsvFromAnotherRunIsRefused) {
  Job job;
  const fs::path csv = fs::path(job.out) / "frontier.csv";
  const std::string good = slurp(csv);
  // A row fewer than summary.json's num_plans.
  std::ofstream(csv) << good.substr(0, good.rfind('\n', good.size() - 2) + 1);
  auto e = report_error(job.out);
  EXPECT_NE(e.find("frontier.csv: "), std::string::npos) << e;
  EXPECT_NE(e.find("but " + (fs::path(job.out) / "summary.json").string() + " says num_plans"), std::string::npos) << e;
  // The fastest plan's row with another time.
  std::string last = good.substr(good.rfind('\n', good.size() - 2) + 1);
  const std::string head = good.substr(0, good.size() - last.size());
  const auto comma = last.find(',');
  last = last.substr(0, comma) + ",9" + last.substr(last.find(',', comma + 1));
  std::ofstream(csv) << head + last;
  e = report_error(job.out);
  EXPECT_NE(e.find("field 't_min_s' is "), std::string::npos) << e;
  EXPECT_NE(e.find("last (T_min) row says T = 9; are both from the same `perseus optimize` run?"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(fs::path(job.out) / "report.html"));
}

// The headline numbers are cross-checked (a hand-edited summary.json or frontier.csv was shown
// as given; only row counts and plan times were checked): summary vs the frontier's first and
// last rows, the saving vs its energies, and each drawn plan's energy vs its row.
TEST(ReportErrors, HandEditedEnergiesAreRefused) {
  Job job;
  const fs::path sp = fs::path(job.out) / "summary.json", csv = fs::path(job.out) / "frontier.csv";
  const std::string summary = slurp(sp), frontier = slurp(csv);
  const auto edit_summary = [&](const char* field, double value) {
    nlohmann::json j = nlohmann::json::parse(summary);
    j[field] = value;
    std::ofstream(sp) << j.dump(2);
  };
  const nlohmann::json s = nlohmann::json::parse(summary);
  edit_summary("energy_at_t_min_j", s["energy_at_t_min_j"].get<double>() * 0.9);
  std::string e = report_error(job.out);
  EXPECT_NE(e.find("field 'energy_at_t_min_j' is "), std::string::npos) << e;
  EXPECT_NE(e.find("frontier.csv's last (T_min) row says E = "), std::string::npos) << e;
  edit_summary("t_max_s", s["t_max_s"].get<double>() + 1);
  e = report_error(job.out);
  EXPECT_NE(e.find("field 't_max_s' is "), std::string::npos) << e;
  EXPECT_NE(e.find("first (slowest) row says T = "), std::string::npos) << e;
  edit_summary("intrinsic_saving_pct", s["intrinsic_saving_pct"].get<double>() + 5);
  e = report_error(job.out);
  EXPECT_NE(e.find("field 'intrinsic_saving_pct' is "), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(fs::path(job.out) / "report.html"));
  // The T_min row and summary edited alike: the plan file's energy (from the profile) disagrees.
  std::string last = frontier.substr(frontier.rfind('\n', frontier.size() - 2) + 1);
  const std::string head = frontier.substr(0, frontier.size() - last.size());
  const auto c2 = last.find(',', last.find(',') + 1), c3 = last.find(',', c2 + 1);
  last = last.substr(0, c2 + 1) + "1.5" + last.substr(c3);
  std::ofstream(csv) << head + last;
  nlohmann::json j = s;
  j["energy_at_t_min_j"] = 1.5;
  j["intrinsic_saving_pct"] = 100 * (j["allmax_energy_j"].get<double>() - 1.5) / j["allmax_energy_j"].get<double>();
  std::ofstream(sp) << j.dump(2);
  e = report_error(job.out);
  EXPECT_NE(e.find("says E = 1.5 J; are both from the same `perseus optimize` run?"), std::string::npos) << e;
  std::ofstream(sp) << summary;
  std::ofstream(csv) << frontier;
  // allmax_time_s moved: the all-max plan of the profile says otherwise.
  edit_summary("allmax_time_s", s["allmax_time_s"].get<double>() * 0.9);
  e = report_error(job.out);
  EXPECT_NE(e.find("fields 'allmax_time_s', 'allmax_energy_j' are "), std::string::npos) << e;
  std::ofstream(sp) << summary;
  // A middle row's time: the frontier is no longer strictly decreasing in time.
  std::vector<std::string> rows;
  {
    std::istringstream in(frontier);
    for (std::string line; std::getline(in, line);) rows.push_back(line);
  }
  ASSERT_GT(rows.size(), 4u);
  const std::size_t mid = rows.size() / 2;  // rows[0] is the header
  std::string edited = rows[mid].substr(0, rows[mid].find(',')) + ",99" + rows[mid].substr(rows[mid].find(',', rows[mid].find(',') + 1));
  std::string text;
  for (std::size_t k = 0; k < rows.size(); ++k) text += (k == mid ? edited : rows[k]) + "\n";
  std::ofstream(csv) << text;
  e = report_error(job.out);
  EXPECT_NE(e.find("s, not below row "), std::string::npos) << e;
  // A row's lower bound above its own energy (no plan beats its bound), or negative (session 31's trial).
  for (const char* bound : {"99999", "-1"}) {
    const std::string& row = rows[mid];
    text.clear();
    for (std::size_t k = 0; k < rows.size(); ++k) text += (k == mid ? row.substr(0, row.rfind(',') + 1) + bound : rows[k]) + "\n";
    std::ofstream(csv) << text;
    e = report_error(job.out);
    EXPECT_NE(e.find(fmt::format("frontier.csv:{}: field 'lower_bound_j': {} J is ", mid + 1, bound)), std::string::npos) << e;
  }
  std::ofstream(csv) << frontier;
  // A plan file of garbage, or a plan copied under another number, though neither is drawn.
  std::vector<fs::path> plans;
  for (const auto& f : fs::directory_iterator(fs::path(job.out) / "plans"))
    if (f.path().extension() == ".json") plans.push_back(f.path());
  std::sort(plans.begin(), plans.end());
  ASSERT_GE(plans.size(), 3u);
  const std::string second = slurp(plans[1]);
  std::ofstream(plans[1]) << "not json";
  e = report_error(job.out);
  EXPECT_NE(e.find(plans[1].filename().string()), std::string::npos) << e;
  std::ofstream(plans[1]) << slurp(plans[2]);
  e = report_error(job.out);
  EXPECT_NE(e.find("but the file is named for plan"), std::string::npos) << e;
  std::ofstream(plans[1]) << second;
  EXPECT_EQ(report_error(job.out), "") << "the folder as written is fine";
}

// --points adds named points beside the built-in baselines (EnvPipe stays), and a file
// without a name column (e.g. a profile CSV, which has time and energy) is refused.
TEST(Report, PointsAddNamedBaselines) {
  Job job;
  ReportOptions opt;
  opt.points_csv = job.tmp.write("pts.csv", "name,time_s,energy_j\nmine,0.9,300\n");
  const std::string html = slurp(write_report(job.out, opt));
  EXPECT_NE(html.find("<title>EnvPipe: "), std::string::npos);
  EXPECT_NE(html.find("<title>mine: "), std::string::npos);
  opt.points_csv = job.tmp.write("unnamed.csv", "time_s,energy_j\n0.9,300\n");
  EXPECT_NE(report_error(job.out, opt).find("missing column 'name' (or 'method', 'label'), each point's name"),
            std::string::npos);
  // A frontier.csv (points named by plan number) belongs in --reference (session 26's trial:
  // one label per plan, piled on each other).
  opt.points_csv = (fs::path(job.out) / "frontier.csv").string();
  EXPECT_NE(report_error(job.out, opt).find("a whole frontier is drawn with --reference"), std::string::npos)
      << report_error(job.out, opt);
  // A profile given by mistake, as --points or --reference: each asks for what it takes (--points
  // suggested a frontier.csv, which it then refuses; session 27's trial).
  opt.points_csv = job.profile;
  EXPECT_NE(report_error(job.out, opt).find("this is a profile (stage, instruction, ... columns), not iteration "
                                            "points; give named points (name,time_s,energy_j)"),
            std::string::npos)
      << report_error(job.out, opt);
  opt.points_csv.clear();
  opt.reference_csv = (fs::path(job.out).parent_path() / "header_only.csv").string();
  std::ofstream(opt.reference_csv) << "time_s,energy_j\n";
  EXPECT_NE(report_error(job.out, opt).find("header_only.csv: has a header but no rows; expected at least one point"),
            std::string::npos)
      << report_error(job.out, opt);
  opt.reference_csv = job.profile;
  EXPECT_NE(report_error(job.out, opt).find("not iteration points; give a frontier CSV (time_s,energy_j"),
            std::string::npos)
      << report_error(job.out, opt);
}

// A schedule CSV planned by optimize: the report uses the folder's copy (schedule.csv), even
// when the file it was read from has changed since.
TEST(Report, UsesTheFoldersScheduleCopy) {
  Job job("csv");
  write_schedule_csv(make_gpipe(2, 3), (job.tmp.path() / "s.csv").string());  // the user's file changes afterwards
  EXPECT_EQ(report_error(job.out), "");
}

// An emulation.json of another pipeline beside the frontier (a folder assembled by hand) is
// refused: the page would show the two as one run.
TEST(ReportErrors, EmulationOfAnotherPipelineIsRefused) {
  Job job;
  std::ofstream(fs::path(job.out) / "emulation.csv")
      << "method,slowdown,chosen_time_s,cluster_energy_j,intrinsic_saving_pct,extrinsic_saving_pct,total_saving_pct\n";
  std::ofstream(fs::path(job.out) / "emulation.json")
      << R"({"pipelines": 2, "stages": 4, "microbatches": 8, "tp": 1, "time_scale": 1, "t_min_s": 1.3})";
  const std::string e = report_error(job.out);
  EXPECT_NE(e.find("an emulation of 4 stages x 8 microbatches (1f1b), but"), std::string::npos) << e;
  EXPECT_NE(e.find("run of 2 stages x 3 microbatches: the two are from different runs"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(fs::path(job.out) / "report.html"));
  // The same pipeline with another P_block, unit or profile (T_min) is another run too.
  const double t_min = nlohmann::json::parse(slurp(fs::path(job.out) / "summary.json"))["t_min_s"].get<double>();
  auto emulation = [&](double p_block, double unit, double t) {
    nlohmann::json j = {{"pipelines", 2},     {"stages", 2},       {"microbatches", 3},       {"tp", 1},
                        {"time_scale", 1.0},  {"p2p_power_w", p_block}, {"unit_time_s", unit}, {"t_min_s", t},
                        {"t_min_unscaled_s", t}};
    std::ofstream(fs::path(job.out) / "emulation.json") << j.dump();
    return report_error(job.out);
  };
  EXPECT_EQ(emulation(40, 0.01, t_min), "");
  EXPECT_NE(emulation(83.64, 0.01, t_min).find("an emulation with P_block 83.64 W vs this run's 40 W"), std::string::npos);
  EXPECT_NE(emulation(40, 0.001, t_min).find("time unit 0.001 s vs this run's 0.01 s"), std::string::npos);
  EXPECT_NE(emulation(40, 0.01, 1.1 * t_min).find("(another profile?)"), std::string::npos);
}

// An emulation.csv that perseus emulate did not write (another header, a bad row) is refused
// with its line and field: the page would show it as this run's emulation.
/// emulation.json of the pipeline Job plans (perseus emulate writes both files); `digest` is
/// written as its csv_digest unless empty (emulation.json files before session 21 have none).
void write_matching_emulation_json(const std::string& out, const std::string& digest = "") {
  const double t_min = nlohmann::json::parse(slurp(fs::path(out) / "summary.json"))["t_min_s"].get<double>();
  nlohmann::json j = {{"pipelines", 2},    {"stages", 2},         {"microbatches", 3},  {"tp", 1},
                      {"time_scale", 1.0}, {"p2p_power_w", 40},   {"unit_time_s", 0.01}, {"t_min_s", t_min},
                      {"t_min_unscaled_s", t_min}};
  if (!digest.empty()) j["csv_digest"] = digest;
  std::ofstream(fs::path(out) / "emulation.json") << j.dump();
}

// Session 21's trial: an emulation.csv copied in from another run (beside this run's
// emulation.json), or one with no emulation.json at all, was shown under this run's header.
TEST(ReportErrors, AnEmulationCsvOfAnotherRunOrAloneIsRefused) {
  Job job;
  const fs::path csv = fs::path(job.out) / "emulation.csv";
  const std::string text = std::string(kEmulationCsvHeader) + "\nperseus,1.1,1,2,3,4,5\n";
  std::ofstream(csv) << text;
  std::string e = report_error(job.out);
  EXPECT_NE(e.find("emulation.csv: has no emulation.json beside it (perseus emulate writes both)"), std::string::npos)
      << e;
  write_matching_emulation_json(job.out, emulation_csv_digest(text));
  EXPECT_EQ(report_error(job.out), "");
  fs::remove(fs::path(job.out) / "report.html");
  std::ofstream(csv) << std::string(kEmulationCsvHeader) << "\nperseus,1.1,1,2,3,4,6\n";  // another run's
  e = report_error(job.out);
  EXPECT_NE(e.find("is not the emulation.csv that"), std::string::npos) << e;
  EXPECT_NE(e.find("(field 'csv_digest' differs): the two are from different runs"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(fs::path(job.out) / "report.html"));
  write_matching_emulation_json(job.out);  // an older emulation.json, without csv_digest: as before
  EXPECT_EQ(report_error(job.out), "");
  EXPECT_EQ(emulation_csv_digest(""), "fnv1a64:cbf29ce484222325");  // FNV-1a's offset basis
}

TEST(ReportErrors, EmulationCsvNotWrittenByEmulateIsRefused) {
  Job job;
  write_matching_emulation_json(job.out);
  const fs::path csv = fs::path(job.out) / "emulation.csv";
  const std::string header(kEmulationCsvHeader);
  std::ofstream(csv) << "method,slowdown\nperseus,1.1\n";
  std::string e = report_error(job.out);
  EXPECT_NE(e.find("emulation.csv:1: expected the header of perseus emulate's emulation.csv"), std::string::npos) << e;
  std::ofstream(csv) << header << "\nperseus,1.1,1,2,3,4,5\nzeus,1.1,1,2,oops,4,5\n";
  e = report_error(job.out);
  EXPECT_NE(e.find("emulation.csv:3: field 'intrinsic_saving_pct': expected a finite number, got 'oops'"),
            std::string::npos)
      << e;
  std::ofstream(csv) << header << "\n,1.1,1,2,3,4,5\n";
  e = report_error(job.out);
  EXPECT_NE(e.find("emulation.csv:2: field 'method': expected a method's name"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(fs::path(job.out) / "report.html"));
  std::ofstream(csv) << header << "\nperseus,1.1,1,2,3,4,5\n";
  EXPECT_EQ(report_error(job.out), "");
  // Values outside what emulate writes drew negative times and "inf%" (fresh-user fuzzing,
  // session 20): refused with the line and field.
  for (const auto& [row, expected] : std::vector<std::pair<std::string, std::string>>{
           {"perseus,1.1,-0.382,2,3,4,5", "emulation.csv:2: field 'chosen_time_s': expected a number in (0, 1e+07], got -0.382"},
           {"perseus,1.1,1e308,2,3,4,5", "field 'chosen_time_s': expected a number in (0, 1e+07], got 1e308"},
           {"perseus,1.1,1,-371.27,3,4,5", "field 'cluster_energy_j': expected a number in [0, 1e+18], got -371.27"},
           {"perseus,0.5,1,2,3,4,5", "field 'slowdown': expected a number in [1, 100], got 0.5"}}) {
    std::ofstream(csv) << header << "\n" << row << "\n";
    e = report_error(job.out);
    EXPECT_NE(e.find(expected), std::string::npos) << row << ": " << e;
  }
  std::ofstream(csv) << header << "\nperseus,1.1,1,2,3,4,5\n";
  const fs::path json_path = fs::path(job.out) / "emulation.json";
  for (const auto& [fields, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"("time_scale": 0, "t_min_s": 0.8)", "field 'time_scale': expected a number in (0, 1e+06], got 0"},
           {R"("time_scale": 10, "t_min_s": -0.0)", "field 't_min_s': expected a time in (0, 1e+07] s"},
           {R"("time_scale": 1e-320, "t_min_s": 0.8)", "field 't_min_s': expected a time in (0, 1e+07] s, also when unscaled"},
           {R"("time_scale": 10, "t_min_s": 0.8, "tp": 0)", "fields 'pipelines', 'stages', 'tp': expected integers"}}) {
    std::ofstream(json_path) << R"({"pipelines": 4, "stages": 2, "microbatches": 3, )"
                             << (fields.find("\"tp\"") == std::string::npos ? R"("tp": 8, )" : "") << fields << "}";
    e = report_error(job.out);
    EXPECT_NE(e.find(expected), std::string::npos) << fields << ": " << e;
  }
  fs::remove(json_path);
  // frontier.csv's plan numbers: 'Infinity' and -4.5 were shown as plans.
  const fs::path frontier = fs::path(job.out) / "frontier.csv";
  const std::string good = slurp(frontier.string());
  std::string bad = good;
  bad.replace(bad.find("\n0,") + 1, 1, "-4.5");
  std::ofstream(frontier) << bad;
  e = report_error(job.out);
  EXPECT_NE(e.find("frontier.csv:2: field 'plan': expected a plan number (an integer >= 0), got '-4.5'"),
            std::string::npos)
      << e;
}

/// A plan of `dag` with every computation at 1410 MHz, 0.1 s and 10 J (P_block 40 W).
FrequencyPlan uniform_plan(const Dag& dag) {
  return evaluate_durations(dag, std::vector<int>(dag.num_ops(), 1410), std::vector<double>(dag.num_ops(), 0.1),
                            std::vector<double>(dag.num_ops(), 10.0), 40);
}

// A plan file lists each rank's computations in execution order: read against another
// schedule with the same computations (1F1B's plan, GPipe's DAG) it is refused.
TEST(PlanFiles, PlanOfAnotherScheduleIsRefused) {
  const Dag f1b = Dag::build(make_1f1b(2, 3)), gpipe = Dag::build(make_gpipe(2, 3));
  const FrequencyPlan plan = uniform_plan(f1b);
  const nlohmann::json j = plan_json(f1b, plan, 0);
  EXPECT_EQ(plan_frequencies_from_json(j, f1b, "plan.json"), plan.freq_mhz);
  try {
    (void)plan_frequencies_from_json(j, gpipe, "plan.json");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the plan is for another schedule"), std::string::npos) << e.what();
  }
}

// - A plan file naming a computation twice was refused as "another schedule's plan"; it is a
//   repeat, and the message says which computation is listed twice and which one is missing.
TEST(PlanFiles, ARepeatedEntryInAPlanFileIsNamedAsARepeat) {
  const Dag dag = Dag::build(make_1f1b(2, 3));
  const FrequencyPlan plan = uniform_plan(dag);
  nlohmann::json j = plan_json(dag, plan, 0);
  auto& ins = j["ranks"][0]["instructions"];
  ins[1] = ins[0];  // rank 0: its first computation twice, its second one missing
  try {
    (void)plan_frequencies_from_json(j, dag, "plan.json");
    ADD_FAILURE();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ranks[0][1]: forward of microbatch 0 on stage 0 is listed twice (also at ranks[0][0]), and "
                        "the list lacks forward of microbatch 1 on stage 0"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find("another schedule"), std::string::npos) << what;
  }
}

// Both clock spellings in one entry (one was served, the other described the plan), or a stage or
// microbatch beyond int, read with get<int>(), which wraps: 2^32 named stage 0, a
// real computation, and the plan was accepted for it. Refused with the field's range.
TEST(PlanFiles, AmbiguousClockOrIndexBeyondIntIsRefused) {
  const Dag dag = Dag::build(make_1f1b(2, 3));
  const FrequencyPlan plan = uniform_plan(dag);
  const nlohmann::json good = plan_json(dag, plan, 0);
  ASSERT_EQ(plan_frequencies_from_json(good, dag, "plan.json"), plan.freq_mhz);
  {  // both spellings of the clock: one was served and the other described the plan
    nlohmann::json j = good;
    j["ranks"][0]["instructions"][0]["freq_mhz"] = 900;
    try {
      (void)plan_frequencies_from_json(j, dag, "plan.json");
      ADD_FAILURE() << "both clock fields accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("gives both \"freq_mhz\" and \"frequency_mhz\""), std::string::npos)
          << e.what();
    }
  }
  for (const char* field : {"stage", "microbatch"}) {
    for (const nlohmann::json& bad : {nlohmann::json(std::uint64_t{1} << 32), nlohmann::json(-1),
                                      nlohmann::json(std::uint64_t{1} << 63)}) {
      nlohmann::json j = good;
      j["ranks"][0]["instructions"][0][field] = bad;
      try {
        (void)plan_frequencies_from_json(j, dag, "plan.json");
        ADD_FAILURE() << field << " " << bad.dump();
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(fmt::format("\"{}\" must be an integer in [0, 2147483647], got {}",
                                                         field, bad.dump())),
                  std::string::npos)
            << e.what();
      }
    }
  }
}

using testing::run;

TEST(ReportCli, ReportCommandAndOptimizeFlag) {
  Job job;
  auto r = run("report " + job.out);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("report.html"), std::string::npos) << r.output;
  // A missing folder or input file is a usage error (exit 2), as `optimize --profile` is; a
  // folder without summary.json is bad input (exit 1).
  r = run("report " + (job.tmp.path() / "missing").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("DIR: Directory does not exist: " + (job.tmp.path() / "missing").string()),
            std::string::npos)
      << r.output;
  for (const char* opt : {"--profile", "--reference", "--points"}) {
    r = run("report " + job.out + " " + opt + " " + (job.tmp.path() / "missing.csv").string());
    EXPECT_EQ(r.status, 2) << opt << "\n" << r.output;
    EXPECT_NE(r.output.find(std::string(opt) + ": File does not exist"), std::string::npos) << r.output;
  }
  r = run("report --job " + (job.tmp.path() / "missing.json").string());
  EXPECT_EQ(r.status, 2) << r.output;
  r = run("report " + job.tmp.path().string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("summary.json: missing"), std::string::npos) << r.output;
  const std::string out2 = (job.tmp.path() / "o2").string();
  r = run("optimize --quiet --report --profile " + job.profile +
          " --stages 2 --microbatches 3 --p2p-power 40 "
          "--unit-time 0.01 --out " +
          out2);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(fs::path(out2) / "report.html")) << r.output;
}

}  // namespace
}  // namespace perseus
