// `perseus report DIR`: one self-contained HTML page (summary, frontier plot, timelines,
// frequency histograms, emulation table) for an `optimize` output folder.
// `perseus report --job JOB.json`: the same kind of page for a server job's straggler decisions.
// A missing input path is a usage error (exit 2), as in optimize, emulate and validate.
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/core.h>

#include "commands.hpp"
#include "perseus/error.hpp"
#include "option_checks.hpp"
#include "perseus/job_report.hpp"
#include "perseus/render.hpp"

namespace perseus::cli {

void register_report(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto job = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto opt = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write DIR/report.html: summary, frontier plot, pipeline timelines (self-contained HTML, no JavaScript); "
      "or, with --job, a page of a server job's straggler decisions");
  auto* dir_opt = cmd->add_option("DIR", *dir, "Output folder of `perseus optimize` (holds summary.json)")
                      ->check(non_empty_path("the output folder of perseus optimize"))
                      ->check(CLI::ExistingDirectory);
  auto* job_opt = cmd->add_option("--job", *job,
                                  "Export of a server job (the body of GET /v1/jobs/{id} saved to a file): write a "
                                  "page with its timeline of straggler decisions instead")
                      ->excludes(dir_opt)
                      ->check(non_empty_path("a job export file"))
                      ->check(CLI::ExistingFile);
  cmd->add_option("--out", *out, "With --job: the page to write (default: the export's path with .html)")
      ->needs(job_opt)
      ->check(non_empty_path("an output file"));
  auto* profile = cmd->add_option("--profile", opt->profile_path,
                                  "Profile CSV to take computation power from (default: DIR/profile.csv, the "
                                  "profile optimize planned with; else summary.json's inputs.profile)")
                      ->check(non_empty_path("a profile CSV file"))
                      ->check(CLI::ExistingFile);
  auto* reference = cmd->add_option("--reference", opt->reference_csv,
                                    "Reference frontier CSV (columns time,energy or time_s,energy_j), drawn as a dashed line")
                        ->check(non_empty_path("a reference frontier CSV file"))
                        ->check(CLI::ExistingFile);
  auto* label = cmd->add_option("--reference-label", opt->reference_label, "Legend text of the reference frontier");
  auto* points = cmd->add_option("--points", opt->points_csv,
                                 "Extra labelled points CSV (columns name,time_s,energy_j), e.g. ZeusGlobal/EnvPipe baselines")
                     ->check(non_empty_path("a points CSV file"))
                     ->check(CLI::ExistingFile);
  auto* svg = cmd->add_flag("--svg", opt->write_svgs,
                            "Also write frontier.svg, timeline_fastest.svg and timeline_lowest_energy.svg into DIR");
  for (auto* o : {profile, reference, label, points, svg}) o->needs(dir_opt);
  label->needs(reference);  // a legend text for no reference line would be dropped silently
  cmd->callback([dir, job, out, opt] {
    if (!job->empty()) {
      fmt::print("wrote {}\n", terminal_safe(write_job_report(*job, *out)));
    } else if (!dir->empty()) {
      opt->on_warning = [](const std::string& w) { fmt::print(stderr, "perseus report: warning: {}\n", w); };
      fmt::print("wrote {}\n", terminal_safe(write_report(*dir, *opt)));
      if (opt->write_svgs) {  // write_report() writes these three beside it
        for (const char* svg : {"frontier.svg", "timeline_fastest.svg", "timeline_lowest_energy.svg"})
          fmt::print("wrote {}\n", terminal_safe((std::filesystem::path(*dir) / svg).string()));
      }
    } else {
      throw CLI::RequiredError("DIR or --job");
    }
  });
}

}  // namespace perseus::cli
