// `perseus report --job`: one self-contained HTML page for an export of GET /v1/jobs/{id}.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "perseus/error.hpp"
#include "perseus/job_report.hpp"
#include "perseus/output_folder.hpp"
#include "render_svg.hpp"

namespace perseus {

namespace fs = std::filesystem;

namespace {

std::string opt_fixed(const std::optional<double>& v, int decimals) {
  return v ? fmt::format("{:.{}f}", *v, decimals) : std::string("–");
}

std::string verdicts_text(const JobDecision& d) {
  std::string s;
  for (const auto& v : d.verdicts) {
    if (!s.empty()) s += "; ";
    s += fmt::format("pipeline {} {} ({:.4f} s measured, {:.4f} s predicted)", v.pipeline, v.verdict,
                     v.measured_time_s, v.predicted_time_s);
  }
  return s;
}

std::string decisions_table(const JobExport& job) {
  std::string h =
      "<table class=\"data\"><thead><tr><th>id</th><th>time (s)</th><th>action</th><th>origin</th><th>pipeline</th>"
      "<th>slowdown</th><th>T' (s)</th><th>stragglers after</th><th>predicted saving (J/iteration)</th>"
      "<th>measured saving (J/iteration)</th><th>verdicts</th></tr></thead><tbody>\n";
  for (const auto& d : job.decisions) {
    std::string strag;
    for (int p : d.stragglers) strag += (strag.empty() ? "" : ", ") + std::to_string(p);
    h += fmt::format(
        "<tr><td>{}</td><td>{:.2f}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td style=\"text-align:left\">{}</td></tr>\n",
        d.id, d.time_s, xml_escape(d.action), xml_escape(d.origin), d.pipeline ? std::to_string(*d.pipeline) : "–",
        opt_fixed(d.slowdown, 3), opt_fixed(d.target_time_s, 4), d.action == "verification" ? "" : strag,
        opt_fixed(d.predicted_saving_j, 1), opt_fixed(d.measured_saving_j, 1), xml_escape(verdicts_text(d)));
  }
  return h + "</tbody></table>\n";
}

/// True when `path` holds a page this command wrote (an earlier run's): html_page_open's first
/// line and a "Perseus job: " title within the first 4 KiB.
bool is_job_page(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.starts_with("<!DOCTYPE html>\n") && head.find("<title>Perseus job: ") != std::string::npos;
}

}  // namespace

std::string write_job_report(const std::string& job_export_path, const std::string& out_arg) {
  // The default page sits beside the export: not for a stream (/dev/stdin gave /dev/stdin.html,
  // written into /dev as root), which a path under /dev or /proc, or no regular file, is.
  std::error_code e0;
  if (out_arg.empty() && (job_export_path.starts_with("/dev/") || job_export_path.starts_with("/proc/") ||
                          !fs::is_regular_file(job_export_path, e0))) {
    throw InputError(fmt::format("{}: not a regular file (a pipe or stream?): give --out for the page", job_export_path));
  }
  const JobExport job = load_job_export(job_export_path);
  const fs::path out = out_arg.empty() ? fs::path(job_export_path).replace_extension(".html") : fs::path(out_arg);
  std::error_code e1, e2;  // weakly_canonical resolves symlinks and works for files that do not exist yet
  if (fs::weakly_canonical(out, e1) == fs::weakly_canonical(job_export_path, e2)) {
    throw InputError(fmt::format("{}: the page would overwrite the job export it is drawn from; pass another --out",
                                 out.string()));
  }
  // Replace only a page an earlier run wrote, never a user's file (as optimize's output folder).
  if (fs::exists(out, e1)) {
    if (!fs::is_regular_file(out, e1)) {
      throw InputError(fmt::format("{}: exists and is not a file; pass another --out", out.string()));
    }
    if (!is_job_page(out)) {
      throw InputError(fmt::format("{}: exists and is not a page `perseus report --job` wrote; refusing to replace it "
                                   "(pass another --out, or move that file)",
                                   out.string()));
    }
  }
  const std::string title = job.name.empty() ? job.job_id : job.name + " (" + job.job_id + ")";

  std::string h = render_detail::html_page_open("Perseus job: " + title);
  h += fmt::format(
      "<p class=\"note\">{} pipeline(s) × {} stage(s), status {}; {} frontier plan(s). Energies are of one pipeline "
      "per iteration, as the server plans them.</p>\n",
      job.pipelines, job.stages, xml_escape(job.status.empty() ? "unknown" : job.status),
      job.frontier.empty() ? std::string("(points not exported)") : std::to_string(job.frontier.size()));

  std::map<std::string, int> by_action;
  for (const auto& d : job.decisions) ++by_action[d.action + " (" + d.origin + ")"];
  h += "<h2>Summary</h2>\n<table class=\"kv\"><tbody>\n";
  auto kv = [&](const std::string& k, const std::string& v) {
    h += "<tr><td>" + xml_escape(k) + "</td><td>" + xml_escape(v) + "</td></tr>\n";
  };
  kv("decisions taken", std::to_string(job.decisions_total));
  kv("decisions in this export", std::to_string(job.decisions.size()));
  for (const auto& [k, n] : by_action) kv("  " + k, std::to_string(n));
  if (!job.frontier.empty()) {
    const auto& f = job.frontier[job.fastest_index];
    kv("T_min plan: time (s)", fmt::format("{:.4f}", f.time_s));
    kv("T_min plan: energy (J)", fmt::format("{:.1f}", f.energy_j));
  }
  h += "</tbody></table>\n";

  h += "<h2>Straggler decisions over time</h2>\n";
  h += "<p class=\"note\">One row per data-parallel pipeline. The band's colour is the iteration time of the frontier "
       "plan the pipeline runs; red hatching marks a straggler. Markers are decisions: a straggler set (filled: "
       "detected from measurements, hollow: declared through the API) or cleared, a re-plan, and the verification "
       "of each switched pipeline. Hover for values.</p>\n";
  if (job.decisions_total > static_cast<std::int64_t>(job.decisions.size())) {
    h += fmt::format(
        "<p class=\"note\">Only the last {} of {} decisions are in the export (the server keeps a bounded history): "
        "plans before the first of them are unknown (grey).</p>\n",
        job.decisions.size(), job.decisions_total);
  }
  if (job.decisions.empty()) h += "<p class=\"note\">No straggler decision was taken: every pipeline ran the T_min plan.</p>\n";
  h += "<div class=\"scroll\">" + render_decisions_svg(job) + "</div>\n";

  if (!job.frontier.empty()) {
    h += "<h2>Iteration time–energy frontier</h2>\n";
    h += "<p class=\"note\">The job's frontier; dots are the plans its pipelines ran (hover for values).</p>\n";
    FrontierPlotData fd;
    fd.frontier = job.frontier;
    fd.plans_label = "plans the pipelines ran";
    std::set<int> used{job.fastest_index};
    for (int p : job.current_plans) used.insert(p);
    for (const auto& d : job.decisions)
      for (int p : d.pipeline_plans) used.insert(p);
    for (int p : used) fd.plans.push_back(job.frontier[p]);
    h += "<figure>" + render_frontier_svg(fd) + "</figure>\n";
  }

  h += "<h2>Decisions</h2>\n" + decisions_table(job);
  h += fmt::format("<p class=\"note\">Written by perseus report from {}.</p>\n</body>\n</html>\n",
                   xml_escape(fs::path(job_export_path).filename().string()));
  write_file_atomically(out, h);
  return out.string();
}

}  // namespace perseus
