// `perseus report DIR`: one self-contained HTML page (summary, frontier plot, timelines,
// frequency histograms, emulation table) for an `optimize` output folder.
#include <memory>
#include <string>

#include <fmt/core.h>

#include "commands.hpp"
#include "perseus/render.hpp"

namespace perseus::cli {

void register_report(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto opt = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write DIR/report.html: summary, frontier plot, pipeline timelines (self-contained HTML, no JavaScript)");
  cmd->add_option("DIR", *dir, "Output folder of `perseus optimize` (holds summary.json)")->required();
  cmd->add_option("--profile", opt->profile_path,
                  "Profile CSV to take computation power from (default: DIR/profile.csv, the profile optimize "
                  "planned with; else summary.json's inputs.profile)");
  cmd->add_option("--reference", opt->reference_csv,
                  "Reference frontier CSV (columns time,energy or time_s,energy_j), drawn as a dashed line");
  cmd->add_option("--reference-label", opt->reference_label, "Legend text of the reference frontier");
  cmd->add_option("--points", opt->points_csv,
                  "Extra labelled points CSV (columns name,time_s,energy_j), e.g. ZeusGlobal/EnvPipe baselines");
  cmd->add_flag("--svg", opt->write_svgs,
                "Also write frontier.svg, timeline_fastest.svg and timeline_lowest_energy.svg into DIR");
  cmd->callback([dir, opt] {
    opt->on_warning = [](const std::string& w) { fmt::print(stderr, "perseus report: warning: {}\n", w); };
    fmt::print("wrote {}\n", write_report(*dir, *opt));
  });
}

}  // namespace perseus::cli
