// `perseus emulate`: energy savings of Perseus and the baselines with a straggler pipeline.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "perseus/emulation_report.hpp"
#include "option_checks.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/emulate.hpp"
#include "perseus/error.hpp"
#include "perseus/input_file.hpp"

namespace perseus::cli {

namespace {

/// The factors of every --slowdown value (comma-separated lists), in order. Throws
/// CLI::ValidationError (exit 2) for an empty item, a value outside [1, 100] or one given twice.
std::vector<double> parse_slowdowns(const std::vector<std::string>& lists) {
  std::vector<double> out;
  const CLI::Validator in_range = number_in(1, 100);
  for (const std::string& list : lists) {
    std::size_t begin = 0;
    for (int item = 1;; ++item) {
      const std::size_t end = std::min(list.find(',', begin), list.size());
      std::string text = list.substr(begin, end - begin);
      if (text.empty()) {
        throw CLI::ValidationError("--slowdown", fmt::format("item {} of '{}' is empty; expected factors in [1, 100] "
                                                             "separated by single commas, e.g. 1.05,1.1",
                                                             item, list));
      }
      if (const std::string why = in_range(text); !why.empty()) throw CLI::ValidationError("--slowdown", why);
      const double s = std::stod(text);
      if (std::find(out.begin(), out.end(), s) != out.end()) {
        throw CLI::ValidationError("--slowdown", fmt::format("{} is given twice (each factor is one row per method)", text));
      }
      out.push_back(s);
      if (end == list.size()) break;
      begin = end + 1;
    }
  }
  return out;
}

}  // namespace

void register_emulate(CLI::App& app) {
  auto cfg = std::make_shared<EmulationConfig>();
  CLI::App* cmd = app.add_subcommand(
      "emulate", "Emulate data-parallel pipelines with one straggler: energy of Perseus vs EnvPipe, Zeus and all-max");
  cmd->add_option("--profile", cfg->profile_path, "Profile CSV: stage,instruction,frequency,time,energy")
      ->required()
      ->check(non_empty_path("a profile CSV file"))
      ->check(CLI::ExistingFile);
  cmd->add_option("--stages", cfg->num_ranks, "GPUs (pipeline stages) per pipeline")->required()->check(integer_in(1, 1 << 20));
  cmd->add_option("--microbatches", cfg->microbatches, "Microbatches per iteration")->required()->check(integer_in(1, 1 << 20));
  auto* pipes = cmd->add_option("--pipelines", cfg->pipelines, "Data-parallel pipelines (one is the straggler)")
                    ->check(integer_in(2, 100'000'000, "one pipeline is the straggler and the others adapt to it; "
                                                       "for one pipeline use perseus optimize"));
  auto* batch = cmd->add_option("--global-batch", cfg->global_batch,
                                "Microbatches per global batch; pipelines = global batch / microbatches (>= 2)")
                    ->check(integer_in(1, 1 << 30));
  pipes->excludes(batch);
  cmd->add_option("--p2p-power", cfg->p_block_w, "P2P blocking power P_block of one GPU, W")
      ->required()
      ->check(number_in(0, 1e5, "W"));
  cmd->add_option("--tp", cfg->tp_degree, "Tensor-parallel degree: GPUs per stage (scales energy and blocking power)")
      ->capture_default_str()
      ->check(integer_in(1, 1'000'000));
  cmd->add_option("--time-scale", cfg->time_scale,
                  "Scale profile times (and energies) by this factor: the profile covers 1/X of a stage's layers")
      ->capture_default_str()
      ->check(positive_number_up_to(1e6));
  cmd->add_option("--unit-time", cfg->unit_time_s, "Planner time quantum, s")
      ->capture_default_str()
      ->check(number_in(kMinUnitTimeS, kMaxUnitTimeS, "s"));
  // Split here, not by CLI11's delimiter, which drops empty items: "1.05,,1.2" is a typo.
  auto slowdown_lists = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--slowdown", *slowdown_lists,
                  "Straggler slowdown factors, comma separated (e.g. 1.05,1.1,1.2; 1 = no straggler)")
      ->type_name("FLOAT:NUMBER in [1, 100]")
      ->required();
  auto out = std::make_shared<std::string>();
  cmd->add_option("--out", *out,
                  "Output folder: emulation.csv, emulation.json (and emulation.html) replace an earlier emulate "
                  "output atomically; a folder with other files is refused, except perseus optimize's output "
                  "folder, where they are added for perseus report")
      ->required()
      ->check(non_empty_path("an output folder"));
  auto report = std::make_shared<bool>(false);
  cmd->add_flag("--report", *report,
                "Also write OUT/emulation.html: total and extrinsic saving vs slowdown per method (self-contained HTML)");
  cmd->callback([cfg, out, pipes, batch, report, slowdown_lists] {
    cfg->p_block_w += 0.0;  // "-0" is zero: never a negative zero in the output
    cfg->slowdowns = parse_slowdowns(*slowdown_lists);
    if (pipes->count() == 0 && batch->count() == 0) {
      throw CLI::RequiredError("--pipelines or --global-batch");
    }
    // --pipelines/--global-batch/--microbatches that do not give >= 2 whole pipelines: a usage
    // error (exit status 2) like the range checks above.
    try {
      emulation_pipelines(*cfg);
    } catch (const InputError& e) {
      throw CLI::ValidationError(e.phrased(flag_for_field));
    }
    keep_stream_input(cfg->profile_path, "profile");  // a pipe or /dev/stdin: read once, its text kept
    // The output folder is checked before the emulation runs (minutes on large inputs).
    check_emulation_folder(*out, cfg.get());
    const EmulationResult res = run_emulation(*cfg);
    for (const std::string& w : res.warnings) fmt::print(stderr, "perseus: warning: {}\n", w);
    fmt::print("{} pipelines x {} GPUs ({} stages x TP {}), time scale {} (times and energies below are scaled), "
               "T_min = {:.4f} s ({:.4f} s unscaled), Perseus frontier {} plans ({:.3f} s)\n",
               res.num_pipelines, cfg->num_ranks * cfg->tp_degree, cfg->num_ranks, cfg->tp_degree, cfg->time_scale,
               res.t_min_s, res.t_min_s / cfg->time_scale, res.frontier_size, res.solve_time_s);
    fmt::print("{:<15} {:>8} {:>11} {:>10} {:>16} {:>10} {:>10} {:>10} {:>10}\n", "method", "slowdown", "iter_time_s",
               "chosen_s", "cluster_energy_J", "pipe_sav%", "intr_sav%", "extr_sav%", "total_sav%");
    // A saving that rounds to zero prints as 0.00, not -0.00 (session 32's trial).
    const auto pct = [](double v) { return std::round(v * 100) == 0 ? 0.0 : v; };
    for (const EmulationRow& r : res.rows) {
      // A method whose plan is slower than the straggler makes the whole cluster slower: say so.
      const std::string slows =
          r.iteration_time_s > r.straggler_time_s * (1 + 1e-9)
              ? fmt::format("  <- slows the cluster by {:.2f}%", 100 * (r.iteration_time_s / r.straggler_time_s - 1))
              : "";
      fmt::print("{:<15} {:>8.3f} {:>11.3f} {:>10.3f} {:>16.1f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}{}\n", r.method,
                 r.slowdown, r.iteration_time_s, r.chosen_time_s, r.cluster_energy_j, pct(r.pipeline_saving_pct),
                 pct(r.intrinsic_saving_pct), pct(r.extrinsic_saving_pct), pct(r.total_saving_pct), slows);
    }
    std::optional<std::string> html;
    if (*report) {
      const EmulationReportInputs in{cfg->profile_path, cfg->num_ranks, cfg->microbatches, cfg->tp_degree,
                                     cfg->time_scale, cfg->p_block_w};
      html = emulation_report_html(res, in);
    }
    write_emulation_outputs(res, *cfg, *out, html);  // an earlier run's files do not survive
    fmt::print("wrote {}/emulation.csv and emulation.json (shape and scaling)\n", terminal_safe(*out));
    if (html) fmt::print("wrote {}/emulation.html\n", terminal_safe(*out));
  });
}

}  // namespace perseus::cli
