// `perseus report --job`: reading a job export, the decisions timeline, the page, its errors and the CLI.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/error.hpp"
#include "perseus/job_report.hpp"
#include "test_util.hpp"
#include "xml_check.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;
using testing::count;
using testing::slurp;
using nlohmann::json;
using testing::TempDir;

/// An export shaped like GET /v1/jobs/{id} (docs/http-api.md): 4 pipelines, frontier of 3 plans
/// (plan 2 = T_min), pipeline 2 detected as a straggler at +10 s, verified at +14 s (pipeline 3
/// reverted), re-planned at +15 s, cleared at +30 s.
json sample_export() {
  const double c = 1.7e9;
  json j = {{"job_id", "job-abc"},
            {"name", "gpt3"},
            {"status", "ready"},
            {"created_s", c},
            {"last_activity_s", c + 40},
            {"spec", {{"dp", 4}, {"pp", 2}}},
            {"frontier", {{"num_points", 3}, {"fastest_index", 2}, {"points", {{1.30, 900.0}, {1.20, 950.0}, {1.00, 1100.0}}}}},
            {"pipelines", json::array()},
            {"decisions_total", 4}};
  for (int d = 0; d < 4; ++d) j["pipelines"].push_back({{"pipeline", d}, {"plan_index", 2}});
  j["decisions"] = {
      {{"id", 1}, {"time_s", c + 10}, {"action", "straggler_set"}, {"origin", "detected"}, {"pipeline", 2},
       {"target_time_s", 1.2}, {"slowdown", 1.2}, {"stragglers", {2}}, {"pipeline_plans", {1, 1, 2, 1}},
       {"predicted_saving_j_per_iteration", 450.0}},
      {{"id", 2}, {"time_s", c + 14}, {"action", "verification"}, {"origin", "verification"}, {"verifies", 1},
       {"verdicts",
        {{{"pipeline", 0}, {"verdict", "verified"}, {"predicted_time_s", 1.2}, {"measured_time_s", 1.21},
          {"straggler_time_s", 1.2}, {"new_target_time_s", nullptr}, {"predicted_saving_j_per_iteration", 150.0},
          {"measured_saving_j_per_iteration", 149.0}},
         {{"pipeline", 3}, {"verdict", "reverted"}, {"predicted_time_s", 1.2}, {"measured_time_s", 1.0},
          {"straggler_time_s", 1.2}, {"new_target_time_s", nullptr}, {"predicted_saving_j_per_iteration", 150.0},
          {"measured_saving_j_per_iteration", -3.0}}}},
       {"predicted_saving_j_per_iteration", 300.0}, {"measured_saving_j_per_iteration", 146.0}},
      {{"id", 3}, {"time_s", c + 15}, {"action", "replanned"}, {"origin", "verification"}, {"pipeline", nullptr},
       {"target_time_s", 1.2}, {"stragglers", {2}}, {"pipeline_plans", {1, 1, 2, 2}}},
      {{"id", 4}, {"time_s", c + 30}, {"action", "straggler_cleared"}, {"origin", "detected"}, {"pipeline", 2},
       {"target_time_s", nullptr}, {"stragglers", json::array()}, {"pipeline_plans", {2, 2, 2, 2}}}};
  return j;
}

std::string write(const TempDir& tmp, const json& j, const std::string& name = "job.json") {
  const std::string path = (tmp.path() / name).string();
  std::ofstream(path) << j.dump();
  return path;
}

TEST(JobExport, ReadsDecisionsRelativeToCreation) {
  TempDir tmp;
  const JobExport job = load_job_export(write(tmp, sample_export()));
  EXPECT_EQ(job.pipelines, 4);
  EXPECT_EQ(job.stages, 2);
  ASSERT_EQ(job.frontier.size(), 3u);
  EXPECT_EQ(job.fastest_index, 2);
  ASSERT_EQ(job.decisions.size(), 4u);
  EXPECT_DOUBLE_EQ(job.decisions[0].time_s, 10);
  EXPECT_DOUBLE_EQ(job.last_activity_s, 40);
  EXPECT_EQ(job.decisions[0].pipeline, 2);
  EXPECT_EQ(job.decisions[0].pipeline_plans, (std::vector<int>{1, 1, 2, 1}));
  ASSERT_EQ(job.decisions[1].verdicts.size(), 2u);
  EXPECT_EQ(job.decisions[1].verdicts[1].verdict, "reverted");
  EXPECT_EQ(job.decisions[1].verifies, 1);
  EXPECT_FALSE(job.decisions[2].pipeline.has_value());
  EXPECT_FALSE(job.decisions[3].target_time_s.has_value());
}

TEST(JobExport, TimelineShowsEveryDecisionAndStragglerSpan) {
  TempDir tmp;
  const JobExport job = load_job_export(write(tmp, sample_export()));
  const std::string svg = render_decisions_svg(job);
  EXPECT_EQ(testing::xml_problem(svg, (tmp.path() / "d.xml").string()), "");
  EXPECT_EQ(count(svg, "class=\"marker straggler_set\""), 1u);
  EXPECT_EQ(count(svg, "class=\"marker straggler_cleared\""), 1u);
  EXPECT_EQ(count(svg, "class=\"marker replanned\""), 4u);  // one per pipeline row
  EXPECT_EQ(count(svg, "class=\"marker verification verified\""), 1u);
  EXPECT_EQ(count(svg, "class=\"marker verification reverted\""), 1u);
  // Pipeline 2 is a straggler from 10 to 30 s: one hatched band, and its tooltip says so.
  EXPECT_EQ(count(svg, "class=\"band straggler\""), 1u);
  EXPECT_NE(svg.find("pipeline 2, 10.00–30.00 s: plan 2: T = 1.0000 s (straggler)"), std::string::npos) << svg;
  // Pipeline 3: T_min plan, then plan 1 (T' = 1.2 s), reverted to plan 2 at the re-plan, then cleared.
  EXPECT_NE(svg.find("pipeline 3, 0.00–10.00 s: plan 2: T = 1.0000 s"), std::string::npos);
  EXPECT_NE(svg.find("pipeline 3, 10.00–15.00 s: plan 1: T = 1.2000 s"), std::string::npos);
  EXPECT_NE(svg.find("pipeline 3, 15.00–42.00 s: plan 2"), std::string::npos);
  // Pipeline 0 keeps plan 1 from 10 s until the clearance at 30 s.
  EXPECT_NE(svg.find("pipeline 0, 10.00–30.00 s: plan 1: T = 1.2000 s"), std::string::npos);
  EXPECT_EQ(svg.find("plan unknown"), std::string::npos);
}

TEST(JobExport, DeclaredStragglerIsHollowAndDroppedHistoryIsUnknown) {
  TempDir tmp;
  json j = sample_export();
  j["decisions"][0]["origin"] = "declared";
  j["decisions_total"] = 9;  // 5 older decisions were dropped by the server
  const JobExport job = load_job_export(write(tmp, j));
  const std::string svg = render_decisions_svg(job);
  EXPECT_NE(svg.find("fill=\"#ffffff\" stroke=\"#d62728\""), std::string::npos);
  EXPECT_NE(svg.find("pipeline 1, 0.00–10.00 s: plan unknown"), std::string::npos);
  const std::string page = slurp(write_job_report(write(tmp, j, "job2.json")));
  EXPECT_NE(page.find("Only the last 4 of 9 decisions"), std::string::npos);
}

TEST(JobExport, PageIsSelfContainedAndListsEveryDecision) {
  TempDir tmp;
  const std::string path = write(tmp, sample_export());
  const std::string out = write_job_report(path);
  EXPECT_EQ(out, (tmp.path() / "job.html").string());
  const std::string html = slurp(out);
  EXPECT_EQ(testing::xml_problem(html, (tmp.path() / "p.xml").string()), "");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://www.w3.org/2000/svg\" href"), std::string::npos);
  EXPECT_NE(html.find("Perseus job: gpt3 (job-abc)"), std::string::npos);
  EXPECT_EQ(count(html, "<tr><td>"), 4u + 8u);  // 4 decisions + 8 summary rows
  EXPECT_NE(html.find("pipeline 3 reverted (1.0000 s measured, 1.2000 s predicted)"), std::string::npos);
  EXPECT_NE(html.find("<td>146.0</td>"), std::string::npos);  // measured saving of the verification
  EXPECT_EQ(count(html, "<circle class=\"plan\""), 2u);     // plans 1 and 2 were run
}

TEST(JobExport, NoDecisionsIsAPlainPage) {
  TempDir tmp;
  json j = sample_export();
  j["decisions"] = json::array();
  j["decisions_total"] = 0;
  const std::string html = slurp(write_job_report(write(tmp, j), (tmp.path() / "x.html").string()));
  EXPECT_NE(html.find("No straggler decision was taken"), std::string::npos);
  EXPECT_EQ(html.find("class=\"marker"), std::string::npos);
}

/// The error message of loading `j`, or "" when it loads.
std::string load_error(const json& j) {
  TempDir tmp;
  try {
    load_job_export(write(tmp, j));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JobExport, BadExportsNameFileAndField) {
  json j = sample_export();
  j.erase("created_s");
  EXPECT_NE(load_error(j).find("job.json: field 'created_s': missing"), std::string::npos) << load_error(j);
  j = sample_export();
  j["decisions"][1]["time_s"] = "soon";
  EXPECT_NE(load_error(j).find("field 'decisions[1].time_s': expected a finite number, got 'soon'"),
            std::string::npos);
  j = sample_export();
  j["decisions"][0]["pipeline_plans"] = {1, 1};
  EXPECT_NE(load_error(j).find("field 'decisions[0].pipeline_plans': expected one plan index per pipeline (4), got 2"),
            std::string::npos);
  j = sample_export();
  j["decisions"][0]["pipeline"] = 7;
  EXPECT_NE(load_error(j).find("field 'decisions[0].pipeline': expected an integer in [0, 3], got 7"),
            std::string::npos);
  j = sample_export();
  j["decisions"][3]["pipeline_plans"] = {2, 2, 2, 5};
  EXPECT_NE(load_error(j).find("'decisions[3].pipeline_plans[3]': expected an integer in [0, 2], got 5"),
            std::string::npos);
  // Indexes the page does not draw are checked too (session 27's trial: 99999 of 3 plans passed).
  j = sample_export();
  j["decisions"][0]["plan_index"] = 99999;
  EXPECT_NE(load_error(j).find("'decisions[0].plan_index': expected an integer in [0, 2], got 99999"),
            std::string::npos) << load_error(j);
  j = sample_export();
  j["decisions"][0]["fastest_plan_index"] = -1;
  EXPECT_NE(load_error(j).find("'decisions[0].fastest_plan_index': expected an integer in [0, 2], got -1"),
            std::string::npos) << load_error(j);
  j = sample_export();
  j["decisions"][1]["verdicts"][0].erase("measured_time_s");
  EXPECT_NE(load_error(j).find("'decisions[1].verdicts[0].measured_time_s': missing"), std::string::npos);
  j = sample_export();
  j["frontier"]["points"].erase(0);
  EXPECT_NE(load_error(j).find("'frontier.points': expected frontier.num_points = 3 points, got 2"),
            std::string::npos);
  j = sample_export();
  j["spec"]["dp"] = 0;
  EXPECT_NE(load_error(j).find("'spec.dp': expected an integer in [1, 65536], got 0"), std::string::npos);
  j = sample_export();
  j["pipelines"].erase(0);
  EXPECT_NE(load_error(j).find("'pipelines': expected spec.dp = 4 entries, got 3"), std::string::npos);
  // Decisions are replayed in order: reversed ones, or a created_s after them, were drawn
  // wrongly without a word (session 32's trial).
  j = sample_export();
  std::swap(j["decisions"][0], j["decisions"][1]);
  EXPECT_NE(load_error(j).find("'decisions[1].id': expected ids increasing, oldest first as the server exports them, got 1 after 2"),
            std::string::npos) << load_error(j);
  j = sample_export();
  j["decisions"][1]["time_s"] = j["decisions"][0]["time_s"].get<double>() - 2;
  EXPECT_NE(load_error(j).find("'decisions[1].time_s': is 2.000 s before the decision listed above it (id 1)"),
            std::string::npos) << load_error(j);
  j = sample_export();
  j["created_s"] = j["decisions"][3]["time_s"].get<double>() + 100;
  EXPECT_NE(load_error(j).find("'decisions[0].time_s': is 120.000 s before the job's created_s"), std::string::npos)
      << load_error(j);
  j = sample_export();
  j["pipelines"].erase(0);
  // A page of pipelines (the server lists at most 1,024 since session 32): fewer entries are
  // fine, more than the job has from pipelines_from on are not.
  j["pipelines_from"] = 1;
  j["pipelines_total"] = 4;
  EXPECT_EQ(load_error(j), "");
  j["pipelines_from"] = 2;
  EXPECT_NE(load_error(j).find("'pipelines': expected at most spec.dp - pipelines_from = 2 entries, got 3"),
            std::string::npos) << load_error(j);
  j["pipelines_from"] = 5;
  EXPECT_NE(load_error(j).find("'pipelines_from': expected an integer in [0, 4], got 5"), std::string::npos)
      << load_error(j);
  // Impossible values a hand-edited export can hold were drawn (T' = -5.0000 s): each is named
  // with its range (session 17's trial).
  for (const auto& [field, value, expected] : std::vector<std::tuple<json::json_pointer, json, std::string>>{
           {json::json_pointer("/decisions/0/target_time_s"), -5,
            "field 'decisions[0].target_time_s': expected a number in [0, 1000000000000] s, got -5"},
           {json::json_pointer("/decisions/0/time_s"), 1e308,
            "field 'decisions[0].time_s': expected a number in [0, 100000000000] s (Unix time), got 1e+308"},
           {json::json_pointer("/decisions/0/slowdown"), -1.0, "field 'decisions[0].slowdown': expected a number in [0, 1000000000000] x"},
           {json::json_pointer("/decisions/1/verdicts/0/measured_time_s"), 1e300,
            "field 'decisions[1].verdicts[0].measured_time_s': expected a number in [0, 1000000000000] s"},
           // What the server stores must read back: a slowdown derived from a declared iteration
           // time is not capped, a deadline may pass a plan's 1e7 s (session 17's review).
           {json::json_pointer("/decisions/0/slowdown"), 119047.6, ""},
           {json::json_pointer("/decisions/0/target_time_s"), 1.8e7, ""},
           {json::json_pointer("/frontier/points/1/1"), -950.0, "field 'frontier.points[1][1]': expected a number in [0, 1e+18] J"}}) {
    j = sample_export();
    j[field] = value;
    if (expected.empty()) EXPECT_EQ(load_error(j), "") << field.to_string();
    else EXPECT_NE(load_error(j).find(expected), std::string::npos) << load_error(j);
  }
  EXPECT_NE(load_error(json::array({1, 2})).find("job.json: expected a JSON object (the body of GET /v1/jobs/{id}), got an array"),
            std::string::npos) << load_error(json::array({1, 2}));
  EXPECT_EQ(load_error(sample_export()), "");

  TempDir tmp;
  const std::string bad = (tmp.path() / "bad.json").string();
  std::ofstream(bad) << "{\"job_id\": ";
  EXPECT_THROW(load_job_export(bad), InputError);
  EXPECT_THROW(load_job_export((tmp.path() / "missing.json").string()), InputError);
}

TEST(JobExport, UnwritablePageLeavesNothing) {
  TempDir tmp;
  const std::string path = write(tmp, sample_export());
  // The page never replaces the export it is drawn from (explicitly or by default: x.html).
  EXPECT_THROW(write_job_report(path, path), InputError);
  const std::string html_named = write(tmp, sample_export(), "export.html");
  EXPECT_THROW(write_job_report(html_named), InputError);
  EXPECT_NO_THROW(load_job_export(path));
  EXPECT_NO_THROW(load_job_export(html_named));
  EXPECT_THROW(write_job_report(path, (tmp.path() / "no-such-dir" / "x.html").string()), InputError);
  EXPECT_FALSE(fs::exists(tmp.path() / "no-such-dir"));
}

TEST(JobExport, PageReplacesOnlyAnEarlierPageNeverAUsersFile) {
  TempDir tmp;
  const std::string path = write(tmp, sample_export());
  const std::string page = (tmp.path() / "page.html").string();
  ASSERT_EQ(write_job_report(path, page), page);
  EXPECT_EQ(write_job_report(path, page), page);  // a rerun replaces its own page
  const std::string notes = (tmp.path() / "notes.txt").string();
  std::ofstream(notes) << "my notes\n";
  try {
    write_job_report(path, notes);
    ADD_FAILURE() << "a user's file was replaced";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a page `perseus report --job` wrote"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(notes), "my notes\n");
  // Another perseus page (e.g. optimize's report.html) is not this command's either.
  const std::string other = (tmp.path() / "report.html").string();
  std::ofstream(other) << "<!DOCTYPE html>\n<html><head><title>Perseus report: x</title></head></html>\n";
  EXPECT_THROW(write_job_report(path, other), InputError);
  try {
    write_job_report(path, tmp.path().string());
    ADD_FAILURE() << "a folder was accepted as the page";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exists and is not a file"), std::string::npos) << e.what();
  }
}

TEST(JobExport, UnreadableExportSaysWhy) {
  TempDir tmp;
  try {
    load_job_export(tmp.path().string());
    ADD_FAILURE() << "a folder was read as an export";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open the job export: it is a folder, not a file"), std::string::npos) << e.what();
  }
  try {
    write_job_report(write(tmp, sample_export()), (tmp.path() / "no-such-dir" / "x.html").string());
    ADD_FAILURE() << "wrote into a missing folder";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

TEST(JobReportCli, JobFlagWritesThePageAndMisuseIsAUsageError) {
  TempDir tmp;
  const std::string path = write(tmp, sample_export());
  const std::string out = (tmp.path() / "page.html").string();
  auto r = testing::run("report --job " + path + " --out " + out);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + out), std::string::npos);
  EXPECT_TRUE(fs::exists(out));
  EXPECT_EQ(testing::run("report").status, 2);
  EXPECT_EQ(testing::run("report " + tmp.path().string() + " --job " + path).status, 2);
  EXPECT_EQ(testing::run("report --out " + out).status, 2);
  EXPECT_EQ(testing::run("report --job " + path + " --svg").status, 2);
  // A legend text without the reference line it labels was dropped silently.
  const auto label = testing::run("report " + tmp.path().string() + " --reference-label x");
  EXPECT_EQ(label.status, 2) << label.output;
  EXPECT_NE(label.output.find("--reference"), std::string::npos) << label.output;
  json j = sample_export();
  j["decisions"][0]["slowdown"] = "fast";
  r = testing::run("report --job " + write(tmp, j, "bad.json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("bad.json: field 'decisions[0].slowdown': expected a finite number"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(tmp.path() / "bad.html"));
  // From a pipe (session 16's trial): the size check refused it ("Operation not supported"), and
  // without --out the page went to "/dev/stdin.html" (written into /dev as root).
  const std::string piped = (tmp.path() / "piped.html").string();
  const std::string pipe_cmd =
      "cat " + path + " | " + std::string(PERSEUS_BINARY) + " report --job /dev/stdin --out " + piped + " 2>&1";
  FILE* p = ::popen(pipe_cmd.c_str(), "r");
  std::string piped_out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) piped_out += buf.data();
  EXPECT_EQ(WEXITSTATUS(::pclose(p)), 0) << piped_out;
  EXPECT_TRUE(fs::exists(piped)) << piped_out;
  r = testing::run("report --job /dev/stdin < " + path);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("/dev/stdin: not a regular file (a pipe or stream?): give --out"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace perseus
