// `perseus validate`: predict the iteration time of plans measured on real GPUs and report the error.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "option_checks.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/validation.hpp"

namespace perseus::cli {

void register_validate(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto markdown = std::make_shared<std::string>();
  auto per_plan = std::make_shared<bool>(false);
  auto p2p_latency = std::make_shared<double>(0.0);
  CLI::App* cmd = app.add_subcommand(
      "validate", "Predict measured real-GPU plans' iteration times with the DAG simulator and report the error");
  cmd->add_option("--real-gpu", *dirs,
                  "Workload folders (e.g. tests/data/real_gpu/<workload>), each holding info.json {pp, "
                  "num_microbatches}, time_profile.csv (stage,instruction,frequency,time), perseus_frontier.csv "
                  "(plan,time_s,all_max_frequency) and perseus_plans.csv (plan,stage,order,instruction,microbatch,"
                  "frequency_mhz); docs/validation.md, \"Folder format\"")
      ->required()
      ->check(non_empty_path("a workload folder"))
      ->check(CLI::ExistingDirectory);
  auto force = std::make_shared<bool>(false);
  CLI::Option* markdown_opt =
      cmd->add_option("--markdown", *markdown,
                      "Also write the summary table to this Markdown file (written atomically; an existing file is "
                      "kept unless --force)")
          ->check(non_empty_path("a Markdown file"));
  cmd->add_flag("--force", *force, "Replace an existing --markdown file")->needs(markdown_opt);
  cmd->add_flag("--per-plan", *per_plan, "Print every plan's measured and predicted time");
  cmd->add_option("--p2p-latency", *p2p_latency,
                  "Blocking P2P send time, s, in the overhead model (as `perseus optimize --p2p-latency`); the "
                  "per-computation overhead is calibrated on top of it")
      ->capture_default_str()
      ->check(number_in(0, 3600, "s"));
  cmd->callback([dirs, markdown, per_plan, p2p_latency, force] {
    if (!markdown->empty()) {  // before the work
      check_output_file(*markdown, *force, "markdown");
      namespace fs = std::filesystem;
      std::error_code ec;
      const fs::path parent = fs::path(*markdown).parent_path();
      if (!parent.empty() && !fs::is_directory(parent, ec)) {
        throw InputError("markdown", fmt::format("{}: the folder {} does not exist", *markdown, parent.string()));
      }
      for (const auto& d : *dirs)
        for (const char* input : {"info.json", "time_profile.csv", "perseus_frontier.csv", "perseus_plans.csv"})
          if (fs::equivalent(*markdown, fs::path(d) / input, ec)) {
            throw InputError("markdown", fmt::format("{} is {}/{}, an input of this run; give another file",
                                                     *markdown, d, input));
          }
    }
    for (std::size_t i = 0; i < dirs->size(); ++i)
      for (std::size_t j = 0; j < i; ++j) {
        std::error_code ec;
        if (std::filesystem::equivalent((*dirs)[i], (*dirs)[j], ec)) {
          throw InputError("real_gpu", fmt::format("{} and {} are the same folder: each workload once, please",
                                                   quote_input((*dirs)[j]), quote_input((*dirs)[i])));
        }
      }
    std::vector<RealGpuValidation> results;
    for (const auto& d : *dirs) results.push_back(validate_real_gpu(d, {}, *p2p_latency));
    for (const auto& r : results)
      for (const auto& w : r.warnings) fmt::print(stderr, "warning: {}\n", w);
    if (*per_plan) {
      fmt::print("workload,plan,all_max,measured_s,dag_s,predicted_s,error_pct,model_s,model_error_pct\n");
      for (const auto& r : results) {
        for (const auto& p : r.plans) {
          fmt::print("{},{},{},{:.6f},{:.6f},{:.6f},{:.3f},{:.6f},{:.3f}\n", r.workload, p.plan, p.all_max ? 1 : 0,
                     p.measured_time_s, p.dag_time_s, p.predicted_time_s, p.error_pct, p.model_time_s,
                     p.model_error_pct);
        }
      }
    }
    const std::string md = validation_markdown(results);
    fmt::print("{}", md);
    if (!markdown->empty()) write_file_atomically(*markdown, md);
  });
}

}  // namespace perseus::cli
