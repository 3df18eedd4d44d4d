// `perseus emulate --report`: saving vs straggler slowdown per method, one HTML page.
#include <filesystem>
#include <algorithm>
#include <map>

#include "perseus/emulation_report.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "render_svg.hpp"

namespace perseus {

namespace fs = std::filesystem;

namespace {

/// One series per method (first-seen order) of (slowdown, field) points.
std::vector<LineSeries> per_method(const std::vector<EmulationRow>& rows, double EmulationRow::*field,
                                   bool skip_reference) {
  std::vector<LineSeries> out;
  std::map<std::string, std::size_t> index;
  for (const auto& r : rows) {
    if (skip_reference && r.method == "all_max") continue;
    auto [it, added] = index.emplace(r.method, out.size());
    if (added) out.push_back({method_display_name(r.method), {}, method_color(r.method)});
    out[it->second].points.emplace_back(r.slowdown, r.*field);
  }
  // Lines join the points by slowdown, whatever order --slowdown gave them in.
  for (auto& s : out) std::sort(s.points.begin(), s.points.end());
  return out;
}

}  // namespace

std::string emulation_report_html(const EmulationResult& res, const EmulationReportInputs& in) {
  if (res.rows.empty()) throw InputError("emulation report: no rows to draw");
  const std::string name = fs::path(in.profile).filename().string();
  std::string h = render_detail::html_page_open("Perseus emulation: " + name);
  h += fmt::format(
      "<p class=\"note\">{} data-parallel pipelines × {} GPUs ({} stages × TP {}), {} microbatches, P_block = {} W "
      "per GPU, time scale {} (times and energies below are scaled). One pipeline is the straggler, slowed by the "
      "factor on the x axis; T_min = {} s (scaled); Perseus frontier of {} plans.</p>\n",
      res.num_pipelines, in.num_ranks * in.tp_degree, in.num_ranks, in.tp_degree, in.microbatches, in.p_block_w,
      in.time_scale, seconds_text(res.t_min_s), res.frontier_size);

  if (!res.warnings.empty()) {
    h += "<p class=\"note\"><b>Read with care:</b></p>\n<ul>\n";
    for (const auto& w : res.warnings) h += "<li>" + xml_escape(w) + "</li>\n";
    h += "</ul>\n";
  }
  LinePlotData total;
  total.title = "Total saving vs all-max with the same straggler";
  total.x_label = "straggler slowdown factor";
  total.y_label = "cluster energy saving (%)";
  total.x_floor = 1;  // slowdown factors are >= 1
  total.series = per_method(res.rows, &EmulationRow::total_saving_pct, true);
  LinePlotData extrinsic = total;
  extrinsic.title = "Extrinsic saving: adapting to the straggler vs not adapting";
  extrinsic.series = per_method(res.rows, &EmulationRow::extrinsic_saving_pct, true);
  h += "<h2>Saving vs slowdown</h2>\n<p class=\"note\">Every method except all-max (the reference, 0 %). Higher is "
       "better; hover a point for its value. Model and methods: docs/baselines.md.</p>\n";
  h += "<figure>" + render_line_plot_svg(total) + "</figure>\n";
  h += "<figure>" + render_line_plot_svg(extrinsic) + "</figure>\n";

  h += "<h2>Every row</h2>\n<table class=\"data\"><thead><tr><th>method</th><th>slowdown</th>"
       "<th>iteration time (s)</th><th>chosen T (s)</th><th>cluster energy (J)</th><th>pipeline saving (%)</th>"
       "<th>intrinsic saving (%)</th><th>extrinsic saving (%)</th><th>total saving (%)</th></tr></thead><tbody>\n";
  for (const auto& r : res.rows) {
    h += fmt::format(
        "<tr><td style=\"text-align:left\">{}</td><td>{:.3f}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td></tr>\n",
        xml_escape(method_display_name(r.method)), r.slowdown, seconds_text(r.iteration_time_s),
        seconds_text(r.chosen_time_s), joules_text(r.cluster_energy_j),
        r.pipeline_saving_pct, r.intrinsic_saving_pct, r.extrinsic_saving_pct, r.total_saving_pct);
  }
  h += "</tbody></table>\n<p class=\"note\">Written by perseus emulate --report.</p>\n</body>\n</html>\n";
  return h;
}

std::string write_emulation_report(const EmulationResult& res, const EmulationReportInputs& in,
                                   const std::string& out_dir) {
  const fs::path out = fs::path(out_dir) / "emulation.html";
  write_file_atomically(out, emulation_report_html(res, in));
  return out.string();
}

}  // namespace perseus
