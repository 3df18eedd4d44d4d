// `perseus report`: one self-contained HTML page for an optimize output folder.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/baselines.hpp"
#include "perseus/emulate.hpp"
#include "perseus/error.hpp"
#include "perseus/input_file.hpp"
#include "perseus/input_limits.hpp"
#include "perseus/profile_transform.hpp"
#include "perseus/render.hpp"
#include "perseus/schedule.hpp"
#include "perseus/schedule_io.hpp"
#include "perseus/json_input.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/plan.hpp"
#include "perseus/plan_files.hpp"
#include "perseus/problem.hpp"
#include "render_csv.hpp"
#include "render_svg.hpp"

namespace perseus {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& path, const char* what) { return load_json_file(path.string(), what); }

const json& field(const json& obj, const std::string& source, const std::string& prefix, const char* name) {
  if (!obj.is_object() || !obj.contains(name)) {
    throw InputError(fmt::format("{}: missing field '{}{}'", source, prefix, name));
  }
  return obj.at(name);
}

double number(const json& obj, const std::string& source, const std::string& prefix, const char* name) {
  const json& v = field(obj, source, prefix, name);
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    throw InputError(fmt::format("{}: field '{}{}': expected a finite number, got {}", source, prefix, name, describe_json_value(v)));
  }
  return v.get<double>();
}

/// number() within [lo, hi] (a hand-edited summary.json with t_min_s -1 would draw nonsense axes).
double number_in(const json& obj, const std::string& source, const std::string& prefix, const char* name, double lo,
                 double hi) {
  const double v = number(obj, source, prefix, name);
  if (v < lo || v > hi) {
    throw InputError(fmt::format("{}: field '{}{}': expected a number in [{}, {}], got {}", source, prefix, name, lo, hi, v));
  }
  return v;
}

long integer(const json& obj, const std::string& source, const std::string& prefix, const char* name) {
  const json& v = field(obj, source, prefix, name);
  if (!v.is_number_integer()) {
    throw InputError(fmt::format("{}: field '{}{}': expected an integer, got {}", source, prefix, name, describe_json_value(v)));
  }
  return v.get<long>();
}

std::string text(const json& obj, const std::string& source, const std::string& prefix, const char* name) {
  const json& v = field(obj, source, prefix, name);
  if (!v.is_string()) {
    throw InputError(fmt::format("{}: field '{}{}': expected a string, got {}", source, prefix, name, describe_json_value(v)));
  }
  return v.get<std::string>();
}

/// Reads plans/plan_NNNNN.json into a FrequencyPlan on `dag`: with the profile, times and
/// energies come from it (and must agree with the file's time_s and energy_j); without, durations come
/// from start_s/end_s and energies are 0.
FrequencyPlan load_plan(const fs::path& path, const Dag& dag, const Profile* profile, double p_block_w) {
  const std::string src = path.string();
  const json j = read_json(path, "plan file");
  const double file_time_s = number(j, src, "", "time_s");
  std::vector<double> dur;
  std::vector<int> freq = plan_frequencies_from_json(j, dag, src, &dur);
  if (!profile) {
    return evaluate_durations(dag, std::move(freq), std::move(dur), std::vector<double>(dag.num_ops(), 0.0), p_block_w);
  }
  FrequencyPlan plan;
  try {
    plan = evaluate_plan(dag, *profile, std::move(freq), p_block_w);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: does not match the profile {}: {}", src, profile->source, e.what()));
  }
  if (std::abs(plan.timeline.time_s - file_time_s) > 1e-6 * file_time_s + 1e-9) {
    throw InputError(
        fmt::format("{}: field 'time_s' is {} s but the profile {} gives {} s for this plan; was the "
                    "profile changed? Pass the profile used by optimize with --profile",
                    src, file_time_s, profile->source, plan.timeline.time_s));
  }
  // Energies too: a profile with the same times but other energies would draw the baselines
  // from it beside the plans' own numbers (summary.json, frontier.csv).
  if (const auto e = j.find("energy_j"); e != j.end() && e->is_number()) {
    const double file_energy_j = e->get<double>();
    if (std::abs(plan.total_energy_j() - file_energy_j) > 1e-6 * std::abs(file_energy_j) + 1e-9) {
      throw InputError(fmt::format(
          "{}: field 'energy_j' is {} J but the profile {} gives {} J for this plan; was the profile changed? Pass the "
          "profile used by optimize with --profile",
          src, file_energy_j, profile->source, plan.total_energy_j()));
    }
  }
  return plan;
}

/// The job's schedule (resolve_schedule()): a generator name, or for a schedule CSV the
/// folder's schedule.csv (optimize's copy), else the file named (as given, or relative to the folder).
Schedule report_schedule(const std::string& name, long stages, long microbatches, long chunks, const fs::path& dir,
                         const std::string& ss) {
  ProblemSpec spec;
  const auto names = schedule_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) {
    // The ranges `perseus optimize` takes (--stages, --microbatches, --chunks).
    for (const auto& [field, value, max] : {std::tuple{"stages", stages, 1L << 20},
                                            std::tuple{"microbatches", microbatches, 1L << 20},
                                            std::tuple{"chunks", chunks, 1L << 20}}) {
      if (value < 1 || value > max)
        throw InputError(fmt::format("{}: field 'inputs.{}': expected an integer in [1, {}], got {}", ss, field, max,
                                     value));
    }
    spec.schedule = name;
    spec.num_ranks = static_cast<int>(stages);
    spec.microbatches = static_cast<int>(microbatches);
    spec.chunks = static_cast<int>(chunks);
    try {
      return resolve_schedule(spec);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: inputs: {}", ss, e.what()));
    }
  }
  std::error_code ec;
  // optimize's copy first: the schedule that was planned, even if the file it was read from has
  // changed since (or another file of that name is in the current folder), or was a stream
  // (`--schedule /dev/stdin`, `<(cmd)`). A bare word that is no schedule name is an error.
  const bool path_like = name.ends_with(".csv") || name.find('/') != std::string::npos || fs::is_regular_file(name, ec);
  if (path_like && fs::is_regular_file(dir / "schedule.csv", ec))
    spec.schedule = (dir / "schedule.csv").string();
  else if (fs::is_regular_file(name, ec)) spec.schedule = name;
  else if (fs::path(name).is_relative() && fs::is_regular_file(dir / name, ec)) spec.schedule = (dir / name).string();
  else
    throw InputError(
        fmt::format("{}: field 'inputs.schedule': {} is neither a schedule name nor a readable schedule "
                    "CSV file",
                    ss, quote_input(name)));
  return resolve_schedule(spec);
}

std::optional<std::string> resolve_profile(const std::string& given, const fs::path& dir) {
  if (given.empty()) return std::nullopt;
  std::error_code ec;
  if (fs::is_regular_file(given, ec)) return given;
  const fs::path p(given);
  if (p.is_relative() && fs::is_regular_file(dir / p, ec)) return (dir / p).string();
  return std::nullopt;
}

/// The certified lower bound LB(T) of frontier.csv (column lower_bound_j; Planner 2.0), as
/// (time_s, LB) points; empty when the column is absent or all zero (graph-cut planner).
/// `frontier`: the file's (time, energy) rows. Throws InputError naming file, line and field
/// for a bound below 0 or above its own row's energy (no plan beats its bound: the file was
/// edited; a bound of 99,999 J beside a 160 J plan was drawn, session 31's trial).
std::vector<PlotPoint> lower_bound_points(const std::string& frontier_csv, const std::vector<PlotPoint>& frontier) {
  const auto t = render_detail::read_csv_table(frontier_csv);
  const int ct = t.column({"time_s", "time"}), cb = t.column({"lower_bound_j"});
  std::vector<PlotPoint> out;
  if (ct < 0 || cb < 0) return out;
  bool any = false;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const double lb = render_detail::csv_number(t, r, cb);
    const double e = r < frontier.size() ? frontier[r].energy_j : lb;  // 6 decimals printed: 1e-6 J of slack
    if (lb < 0 || lb > e + 1e-9 * e + 1e-6)
      throw InputError::in_file(frontier_csv, t.lines[r], "lower_bound_j",
                                fmt::format("{} J is {} (expected 0 <= bound <= the row's energy {} J: no plan beats "
                                            "its bound); was the file edited?",
                                            lb, lb < 0 ? "negative" : "above the row's energy", e));
    any |= lb > 0;
    out.push_back({fmt::format("bound {}", r), render_detail::csv_number(t, r, ct), lb});
  }
  if (!any) out.clear();
  return out;
}

/// Adds the baselines (docs/baselines.md), evaluated like the planner's plans, to the frontier
/// plot: ZeusGlobal and ZeusPerStage candidates and the EnvPipe plan, restricted to the plot's
/// time range (up to 5 % beyond the frontier's slowest plan, so very slow clocks do not squash
/// the frontier). Returns a note on what was left out or could not be computed.
/// unit_time_s: the run's time quantum, s, for EnvPipe's critical-path search (as `perseus
/// emulate` uses it; with the default 1 ms a profile of µs computations drew EnvPipe on the
/// all-max plan, session 24's trial).
std::string add_baselines(FrontierPlotData& fd, const Dag& dag, const Profile& profile, double p_block_w,
                          double unit_time_s) {
  double t_hi = 0;
  for (const auto& p : fd.frontier) t_hi = std::max(t_hi, p.time_s);
  t_hi *= 1.05;
  std::vector<std::string> notes;
  std::size_t beyond = 0;
  auto series = [&](const char* label, const std::vector<FrequencyPlan>& plans, const char* unit, const char* method) {
    PlotSeries ps{label, {}, method_color(method)};
    for (std::size_t i = 0; i < plans.size(); ++i) {
      const double t = plans[i].timeline.time_s;
      if (t > t_hi) {
        ++beyond;
        continue;
      }
      // The plan's clocks: one for ZeusGlobal, the stages' range for ZeusPerStage.
      const auto [lo, hi] = std::minmax_element(plans[i].freq_mhz.begin(), plans[i].freq_mhz.end());
      const std::string clocks = lo == plans[i].freq_mhz.end() ? ""
                                 : *lo == *hi                  ? fmt::format(" ({} MHz)", *lo)
                                                               : fmt::format(" ({}-{} MHz)", *lo, *hi);
      ps.points.push_back({fmt::format("{} {}{}", unit, i, clocks), t, plans[i].total_energy_j()});
    }
    if (!ps.points.empty()) fd.candidates.push_back(std::move(ps));
  };
  try {
    series("ZeusGlobal candidates (one clock for all GPUs)", zeus_global_candidates(dag, profile, p_block_w),
           "candidate", "zeus_global");
  } catch (const InputError& e) {
    notes.push_back(fmt::format("ZeusGlobal not shown: {}", e.what()));
  }
  try {
    series("ZeusPerStage candidates (one clock per stage)", zeus_per_stage_candidates(dag, profile, p_block_w),
           "candidate", "zeus_per_stage");
  } catch (const InputError& e) {
    notes.push_back(fmt::format("ZeusPerStage not shown: {}", e.what()));
  }
  try {
    const EnvPipeResult env = envpipe_plan(dag, profile, p_block_w, EnvPipeOptions{.unit_time_s = unit_time_s});
    if (env.plan.timeline.time_s <= t_hi) {
      fd.baselines.push_back({"EnvPipe", env.plan.timeline.time_s, env.plan.total_energy_j(), method_color("envpipe")});
    } else {
      ++beyond;
    }
  } catch (const InputError& e) {
    notes.push_back(fmt::format("EnvPipe not shown: {}", e.what()));
  }
  if (beyond > 0) {
    notes.push_back(fmt::format("{} baseline plan(s) slower than the frontier's slowest plan (+5 %) are not drawn.",
                                beyond));
  }
  std::string out;
  for (const auto& n : notes) out += (out.empty() ? "" : " ") + n;
  return out;
}

std::string cell_text(const std::string& column, const std::string& value) {
  double v = 0;
  std::istringstream is(value);
  if (!(is >> v) || !is.eof() || !std::isfinite(v)) return xml_escape(value);
  auto ends = [&](std::string_view suffix) {
    return column.size() >= suffix.size() && column.compare(column.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends("_pct")) return fmt::format("{:.2f}", v);
  if (ends("_s")) return seconds_text(v);
  if (ends("_j")) return joules_text(v);
  if (ends("_w")) return fmt::format("{:.1f}", v);
  return xml_escape(value);
}

std::string html_table(const render_detail::CsvTable& t) {
  std::string s = "<table class=\"data\"><thead><tr>";
  for (const auto& h : t.header) s += "<th>" + xml_escape(h) + "</th>";
  s += "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    s += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) s += "<td>" + cell_text(t.header[i], row[i]) + "</td>";
    s += "</tr>\n";
  }
  return s + "</tbody></table>\n";
}

/// The Emulation section: the cluster's shape and scaling (emulation.json), the table of
/// emulation.csv, and a note on every row whose plan is slower than the straggler
/// (chosen_time_s > slowdown × T_min): that method makes the whole cluster slower.
std::string emulation_section(const fs::path& csv_path, const fs::path& json_path) {
  std::string h = "<h2>Emulation: energy savings at scale</h2>\n";
  render_detail::CsvTable t = render_detail::read_csv_table(csv_path.string());
  // Only what perseus emulate writes is shown as its result: its header, a method name and
  // finite numbers in every row.
  std::string header;
  for (const auto& c : t.header) header += (header.empty() ? "" : ",") + c;
  if (header != kEmulationCsvHeader)
    throw InputError(fmt::format("{}:1: expected the header of perseus emulate's emulation.csv ({}), got {} (re-run "
                                 "perseus emulate into this folder, or remove emulation.csv/.json)",
                                 csv_path.string(), kEmulationCsvHeader, quote_input(header)));
  // Each column within what perseus emulate writes (a hand-edited -0.38 s or 1e308 s drew
  // negative times and "inf%"): slowdown [1, 100], chosen time (0, max], energy [0, 1e18] J,
  // savings [-1e6, 100] %.
  struct Range {
    double lo, hi;
    bool lo_open;
  };
  const Range ranges[] = {{1, 100, false},   {0, limits::kMaxIterationTimeS, true}, {0, 1e18, false},
                          {-1e6, 100, false}, {-1e6, 100, false},                     {-1e6, 100, false}};
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    if (t.rows[i][0].empty())
      throw InputError(fmt::format("{}:{}: field 'method': expected a method's name, got an empty field",
                                   csv_path.string(), t.lines[i]));
    for (std::size_t c = 1; c < t.header.size(); ++c) {
      const double v = render_detail::csv_number(t, i, static_cast<int>(c));
      const Range& r = ranges[c - 1];
      if (v > r.hi || (r.lo_open ? !(v > r.lo) : v < r.lo))
        throw InputError(fmt::format("{}:{}: field '{}': expected a number in {}{:g}, {:g}], got {}", csv_path.string(),
                                     t.lines[i], t.header[c], r.lo_open ? "(" : "[", r.lo, r.hi, t.rows[i][c]));
    }
  }
  std::optional<double> t_min_s;
  std::error_code ec;
  // perseus emulate writes emulation.json and emulation.csv together; a CSV alone, or one
  // copied in from another run, was shown under this run's numbers (session 21's trial).
  if (!fs::exists(json_path, ec))
    throw InputError(fmt::format("{}: has no emulation.json beside it (perseus emulate writes both): it cannot be "
                                 "tied to this run; re-run perseus emulate into this folder, or remove emulation.csv",
                                 csv_path.string()));
  {
    const std::string js = json_path.string();
    const json e = read_json(json_path, "emulation");
    if (e.contains("csv_digest")) {  // emulation.json files before session 21 have none
      const std::string want = e["csv_digest"].is_string() ? e["csv_digest"].get<std::string>() : "";
      if (want != emulation_csv_digest(read_input_file(csv_path.string(), "emulation CSV")))
        throw InputError(fmt::format("{}: is not the emulation.csv that {} was written with (field 'csv_digest' "
                                     "differs): the two are from different runs; re-run perseus emulate into this "
                                     "folder, or remove emulation.csv/.json",
                                     csv_path.string(), js));
    }
    const long pipelines = integer(e, js, "", "pipelines"), stages = integer(e, js, "", "stages");
    const long tp = integer(e, js, "", "tp");
    const double scale = number(e, js, "", "time_scale");
    t_min_s = number(e, js, "", "t_min_s");
    // emulate's own ranges (a time scale of 0 printed "inf s unscaled", a T_min of -0 "-inf%").
    if (pipelines < 1 || stages < 1 || tp < 1 || tp > 1'000'000)
      throw InputError(fmt::format("{}: fields 'pipelines', 'stages', 'tp': expected integers >= 1 (tp <= 1000000), "
                                   "got {}, {}, {}",
                                   js, pipelines, stages, tp));
    if (!(scale > 0 && scale <= 1e6))
      throw InputError(fmt::format("{}: field 'time_scale': expected a number in (0, 1e+06], got {}", js, scale));
    if (!(*t_min_s > 0 && *t_min_s <= limits::kMaxIterationTimeS && *t_min_s / scale <= limits::kMaxIterationTimeS))
      throw InputError(fmt::format("{}: field 't_min_s': expected a time in (0, {:g}] s, also when unscaled, got {}", js,
                                   limits::kMaxIterationTimeS, *t_min_s));
    h += fmt::format(
        "<p class=\"note\">From emulation.csv (perseus emulate): {} data-parallel pipelines (one of them the "
        "straggler) of {} stages × TP {} = {} GPUs each, {} GPUs in all; time scale {}. Times and energies in this "
        "table are of that scaled cluster (T_min = {} s here is {} s unscaled), not of the one pipeline "
        "in the Summary above. Savings in % do not depend on the scaling.</p>\n",
        pipelines, stages, tp, stages * tp, pipelines * stages * tp, scale, seconds_text(*t_min_s),
        seconds_text(*t_min_s / scale));
  }
  const int c_slow = t.column({"slowdown"}), c_chosen = t.column({"chosen_time_s"});
  if (t_min_s && c_slow >= 0 && c_chosen >= 0) {
    t.header.push_back("note");
    int flagged = 0;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const double straggler_s = render_detail::csv_number(t, i, c_slow) * *t_min_s;
      const double chosen_s = render_detail::csv_number(t, i, c_chosen);
      std::string note;
      if (chosen_s > straggler_s + 1e-6 * std::max(1.0, straggler_s)) {  // emulation.csv prints 6 decimals
        note = fmt::format("slows the cluster by {:.2f}%", 100 * (chosen_s / straggler_s - 1));
        ++flagged;
      }
      t.rows[i].push_back(note);
    }
    if (flagged > 0) {
      h += "<p class=\"note\">A row noted \"slows the cluster\" runs a plan slower than the straggler (slowdown × "
           "T_min): every pipeline, the straggler included, then waits for it, so that method's cluster is slower "
           "than Perseus's and its energy is compared at a longer iteration time.</p>\n";
    }
  }
  for (auto& row : t.rows) row[0] = method_display_name(row[0]);  // as on emulation.html: "ZeusPerStage"
  return h + html_table(t);
}


}  // namespace

std::string write_report(const std::string& dir_arg, const ReportOptions& opt) {
  const fs::path dir(dir_arg);
  std::error_code ec;
  if (dir_arg.empty())  // ": not a folder" named nothing (perseus.write_report(''), session 31's trial)
    throw InputError("the folder path is empty (expected the output folder of `perseus optimize`)");
  if (!fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("{}: not a folder (expected the output folder of `perseus optimize`)", dir_arg));
  }
  const fs::path summary_path = dir / "summary.json";
  if (!fs::exists(summary_path, ec)) {
    throw InputError(
        fmt::format("{}: missing; {} is not the output folder of `perseus optimize`", summary_path.string(), dir_arg));
  }
  const std::string ss = summary_path.string();
  const json sum = read_json(summary_path, "summary");
  const json& in = field(sum, ss, "", "inputs");
  const std::string ip = "inputs.";
  const std::string profile_given = opt.profile_path.empty() ? text(in, ss, ip, "profile") : opt.profile_path;
  const long stages = integer(in, ss, ip, "stages");
  const long microbatches = integer(in, ss, ip, "microbatches");
  const std::string schedule_name = text(in, ss, ip, "schedule");
  // null: a schedule CSV with an uneven placement (its schedule.csv says it all).
  const long chunks = in.contains("chunks") && !in["chunks"].is_null() ? integer(in, ss, ip, "chunks") : 1;
  constexpr double kTimeS = limits::kMaxIterationTimeS, kEnergyJ = 1e18;
  const double p_block_w = number_in(in, ss, ip, "p2p_power_w", 0, limits::kMaxPBlockW);
  const double t_min_s = number_in(sum, ss, "", "t_min_s", 0, kTimeS);
  const double e_t_min_j = number_in(sum, ss, "", "energy_at_t_min_j", 0, kEnergyJ);
  const double t_max_s = number_in(sum, ss, "", "t_max_s", t_min_s, kTimeS);
  const double e_t_max_j = number_in(sum, ss, "", "energy_at_t_max_j", 0, kEnergyJ);
  const double allmax_t = number_in(sum, ss, "", "allmax_time_s", 0, kTimeS);
  const double allmax_e = number_in(sum, ss, "", "allmax_energy_j", 0, kEnergyJ);
  const double saving = number_in(sum, ss, "", "intrinsic_saving_pct", -1e6, 100);
  const long num_plans = integer(sum, ss, "", "num_plans");
  if (num_plans < 1) throw InputError(fmt::format("{}: field 'num_plans': expected >= 1, got {}", ss, num_plans));
  // An emulation beside the frontier (perseus emulate into this folder) is shown as part of
  // this run: it must be of this pipeline (emulate checks it; a folder assembled by hand may not be).
  if (const fs::path ej = dir / "emulation.json"; fs::exists(ej, ec)) {
    const std::string es = ej.string();
    const json e = read_json(ej, "emulation");
    const long e_stages = integer(e, es, "", "stages"), e_mbs = integer(e, es, "", "microbatches");
    if (e_stages != stages || e_mbs != microbatches || schedule_name != "1f1b") {
      throw InputError(fmt::format("{}: an emulation of {} stages x {} microbatches (1f1b), but {} is a {} run of {} "
                                   "stages x {} microbatches: the two are from different runs (re-run perseus emulate "
                                   "with this folder's pipeline, or remove emulation.csv/.json)",
                                   es, e_stages, e_mbs, ss, quote_input(schedule_name), stages, microbatches));
    }
    // The same pipeline is not enough: P_block, the time unit and the profile change every number
    // (the profile shows in T_min, which the emulation records unscaled).
    const auto differs = [](double a, double b, double rel) { return std::abs(a - b) > rel * std::max(std::abs(a), std::abs(b)); };
    // (Each compared where both files have it: older emulation.json files lack some.)
    const auto both = [&](const char* name) { return e.contains(name) && in.contains(name); };
    const bool overheads = (in.contains("p2p_latency_s") && number(in, ss, ip, "p2p_latency_s") != 0) ||
                           (in.contains("op_overhead_s") && number(in, ss, ip, "op_overhead_s") != 0);
    std::string why;
    if (both("p2p_power_w") && differs(number(e, es, "", "p2p_power_w"), p_block_w, 1e-12)) {
      why = fmt::format("P_block {} W vs this run's {} W", number(e, es, "", "p2p_power_w"), p_block_w);
    } else if (both("unit_time_s") && differs(number(e, es, "", "unit_time_s"), number(in, ss, ip, "unit_time_s"), 1e-12)) {
      why = fmt::format("time unit {} s vs this run's {} s", number(e, es, "", "unit_time_s"),
                        number(in, ss, ip, "unit_time_s"));
    } else if (e.contains("t_min_unscaled_s") && !overheads &&  // emulate models no timeline overheads
               differs(number(e, es, "", "t_min_unscaled_s"), t_min_s, 1e-9)) {
      why = fmt::format("T_min {} s vs this run's {} s (another profile?)", number(e, es, "", "t_min_unscaled_s"), t_min_s);
    }
    if (!why.empty()) {
      throw InputError(fmt::format("{}: an emulation with {}: the two are from different runs (re-run perseus emulate "
                                   "with this folder's inputs, or remove emulation.csv/.json)",
                                   es, why));
    }
  }
  Schedule schedule = report_schedule(schedule_name, stages, microbatches, chunks, dir, ss);

  std::optional<Profile> profile;
  std::string profile_note;
  std::optional<Dag> problem_dag;
  // The profile: --profile, else the copy optimize stored in the folder (the profile as
  // planned), else summary.json's inputs.profile (folders written before the copy existed).
  std::optional<std::string> profile_file;
  bool planned_copy = false;  // the copy already holds the timeline overheads (added once, by optimize)
  if (!opt.profile_path.empty()) {
    profile_file = resolve_profile(opt.profile_path, dir);
  } else if (fs::is_regular_file(dir / "profile.csv", ec)) {
    profile_file = (dir / "profile.csv").string();
    planned_copy = true;
  } else {
    profile_file = resolve_profile(profile_given, dir);
  }
  if (const auto& p = profile_file) {
    ProblemSpec spec;
    spec.backward_input_fraction =
        in.contains("backward_input_fraction") ? number(in, ss, ip, "backward_input_fraction") : 0.5;
    spec.p_block_w = p_block_w;
    // Written by optimize only when set (docs/validation.md): the plans' durations include them.
    if (in.contains("p2p_latency_s") && !planned_copy) spec.overheads.p2p_latency_s = number(in, ss, ip, "p2p_latency_s");
    if (in.contains("op_overhead_s") && !planned_copy) spec.overheads.op_overhead_s = number(in, ss, ip, "op_overhead_s");
    Problem problem = make_problem(spec, schedule, load_profile_csv(*p));
    profile = std::move(problem.profile);
    problem_dag = std::move(problem.dag);
  } else if (!opt.profile_path.empty()) {
    const bool folder = fs::is_directory(opt.profile_path, ec);
    throw InputError("profile_path",
                     fmt::format("{}: cannot read the file: {}", opt.profile_path,
                                 folder ? "it is a folder, not a file"
                                        : "no such file (a relative path is looked up in the current folder, then in DIR)"));
  } else {
    profile_note = fmt::format(
        "The profile {} was not found (the folder holds no profile.csv, and the path is relative to where optimize "
        "ran), so boxes are coloured by SM frequency instead of power (pass --profile to show power).",
        profile_given);
    if (opt.on_warning) opt.on_warning(profile_note);
  }
  const Dag dag = problem_dag ? std::move(*problem_dag) : Dag::build(schedule);

  // Frontier and written plans.
  const fs::path frontier_csv = dir / "frontier.csv";
  std::vector<PlotPoint> frontier = load_plot_points_csv(frontier_csv.string());
  if (frontier.empty()) throw InputError(fmt::format("{}: no frontier points", frontier_csv.string()));
  if (static_cast<long>(frontier.size()) != num_plans) {
    throw InputError(fmt::format("{}: {} plans, but {} says num_plans {}; are both from the same `perseus optimize` run?",
                                 frontier_csv.string(), frontier.size(), ss, num_plans));
  }
  // The headline numbers must be the frontier's (a hand-edited summary.json or frontier.csv was
  // shown as given): T_min and its energy are the last row, the slowest plan the first, and the
  // saving follows from the energies. frontier.csv has 9 decimals of time and 6 of energy.
  const auto off = [](double a, double b, double abs_tol) {
    return std::abs(a - b) > 1e-9 * std::max(std::abs(a), std::abs(b)) + abs_tol;
  };
  for (const auto& [name, value, row, what] :
       {std::tuple{"t_min_s", t_min_s, frontier.back().time_s, "T"}, {"energy_at_t_min_j", e_t_min_j, frontier.back().energy_j, "E"},
        {"t_max_s", t_max_s, frontier.front().time_s, "T"}, {"energy_at_t_max_j", e_t_max_j, frontier.front().energy_j, "E"}}) {
    if (off(value, row, std::string_view(what) == "T" ? 1e-9 : 1e-6)) {
      const bool fastest = std::string_view(name).find("min") != std::string_view::npos;
      throw InputError(fmt::format("{}: field '{}' is {} but {}'s {} row says {} = {}; are both from the same `perseus "
                                   "optimize` run?",
                                   ss, name, value, frontier_csv.string(), fastest ? "last (T_min)" : "first (slowest)",
                                   what, row));
    }
  }
  // frontier.csv is slowest first, time strictly decreasing (a row's time edited broke it unseen).
  for (std::size_t k = 1; k < frontier.size(); ++k) {
    if (!(frontier[k].time_s < frontier[k - 1].time_s)) {
      throw InputError(fmt::format("{}: row {} has T = {} s, not below row {}'s {} s (perseus optimize writes the "
                                   "slowest plan first, time strictly decreasing); was it edited?",
                                   frontier_csv.string(), k, frontier[k].time_s, k - 1, frontier[k - 1].time_s));
    }
  }
  if (allmax_e > 0 && std::abs(100 * (allmax_e - e_t_min_j) / allmax_e - saving) > 1e-6) {
    throw InputError(fmt::format("{}: field 'intrinsic_saving_pct' is {} but its energies give {} (100 x (allmax_energy_j "
                                 "- energy_at_t_min_j) / allmax_energy_j)",
                                 ss, saving, 100 * (allmax_e - e_t_min_j) / allmax_e));
  }
  std::map<long, fs::path> plan_files;  // frontier index -> file
  if (fs::is_directory(dir / "plans", ec)) {
    for (const auto& e : fs::directory_iterator(dir / "plans")) {
      const std::string name = e.path().filename().string();
      if (name.size() == 15 && name.starts_with("plan_") && name.ends_with(".json")) {
        const std::string digits = name.substr(5, 5);
        if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          plan_files[std::stol(digits)] = e.path();
        }
      }
    }
  }
  if (plan_files.empty()) throw InputError(fmt::format("{}: no plans/plan_NNNNN.json files", dir_arg));
  FrontierPlotData fd;
  for (auto& p : frontier) p.label = "plan " + p.label;
  for (const auto& [idx, path] : plan_files) {
    if (idx >= 0 && static_cast<std::size_t>(idx) < frontier.size()) fd.plans.push_back(frontier[idx]);
  }
  // T_min: the fastest written plan; lowest energy: the written plan with the least energy.
  const long fast_idx = plan_files.rbegin()->first;
  // The T_min plan is the frontier's last; a folder whose file of it is missing (removed, or
  // not written) draws the fastest one it has, and says which.
  const std::string fastest_title =
      fast_idx == num_plans - 1 ? std::string("Fastest plan")
                                : fmt::format("Fastest written plan (the T_min plan, plan {}, has no file)", num_plans - 1);
  long green_idx = plan_files.begin()->first;
  for (const auto& [idx, path] : plan_files) {
    if (static_cast<std::size_t>(idx) < frontier.size() && static_cast<std::size_t>(green_idx) < frontier.size() &&
        frontier[idx].energy_j < frontier[green_idx].energy_j) {
      green_idx = idx;
    }
  }
  const Profile* prof = profile ? &*profile : nullptr;
  // Every plan file is the row it is filed under (its own "plan" index and time): garbage, or a
  // plan copied to another number, was accepted unless it happened to be drawn.
  for (const auto& [idx, path] : plan_files) {
    const std::string src = path.string();
    const json j = read_json(path, "plan file");
    const long own = integer(j, src, "", "plan");
    if (own != idx) {
      throw InputError(fmt::format("{}: field 'plan' is {}, but the file is named for plan {}; was it copied or "
                                   "renamed?",
                                   src, own, idx));
    }
    if (static_cast<std::size_t>(idx) < frontier.size()) {
      const double t = number(j, src, "", "time_s"), row_t = frontier[idx].time_s;
      if (std::abs(t - row_t) > 1e-6 * std::max(row_t, t) + 1e-9) {
        throw InputError(fmt::format("{}: field 'time_s' is {} s, but row {} of {} says T = {} s; are both from the "
                                     "same `perseus optimize` run?",
                                     src, t, idx, frontier_csv.string(), row_t));
      }
    }
  }
  const FrequencyPlan fast = load_plan(plan_files[fast_idx], dag, prof, p_block_w);
  const FrequencyPlan green = load_plan(plan_files[green_idx], dag, prof, p_block_w);
  // The all-max baseline drawn is the profile's (a hand-edited allmax_time_s moved it).
  if (prof != nullptr) {
    const FrequencyPlan am = all_max_plan(dag, *prof, p_block_w);
    if (std::abs(am.timeline.time_s - allmax_t) > 1e-6 * std::max(allmax_t, am.timeline.time_s) + 1e-9 ||
        std::abs(am.total_energy_j() - allmax_e) > 1e-6 * std::max(allmax_e, am.total_energy_j()) + 1e-6) {
      throw InputError(fmt::format("{}: fields 'allmax_time_s', 'allmax_energy_j' are {} s, {} J, but the profile {} "
                                   "gives {} s, {} J for the all-max plan; was either changed?",
                                   ss, allmax_t, allmax_e, prof->source, am.timeline.time_s, am.total_energy_j()));
    }
  }
  // The plans drawn must be the frontier rows they are named after.
  for (const auto& [idx, plan] : {std::pair<long, const FrequencyPlan*>{fast_idx, &fast}, {green_idx, &green}}) {
    if (static_cast<std::size_t>(idx) >= frontier.size()) {
      throw InputError(fmt::format("{}: plan {} is beyond {}'s {} rows; are both from the same `perseus optimize` run?",
                                   plan_files[idx].string(), idx, frontier_csv.string(), frontier.size()));
    }
    const double row_t = frontier[idx].time_s, t = plan->timeline.time_s;
    if (std::abs(t - row_t) > 1e-6 * std::max(row_t, t) + 1e-9) {
      throw InputError(fmt::format("{}: T = {} s, but row {} of {} says T = {} s; are both from the same `perseus "
                                   "optimize` run?",
                                   plan_files[idx].string(), t, idx, frontier_csv.string(), row_t));
    }
    const double row_e = frontier[idx].energy_j, e = plan->total_energy_j();  // (0 without a profile)
    if (prof != nullptr && std::abs(e - row_e) > 1e-6 * std::max(std::abs(row_e), std::abs(e)) + 1e-5) {
      throw InputError(fmt::format("{}: E = {} J, but row {} of {} says E = {} J; are both from the same `perseus "
                                   "optimize` run?",
                                   plan_files[idx].string(), e, idx, frontier_csv.string(), row_e));
    }
  }

  fd.frontier = frontier;
  fd.lower_bound = lower_bound_points(frontier_csv.string(), frontier);
  fd.all_max = PlotPoint{"all-max frequency", allmax_t, allmax_e};
  std::string baselines_note;
  if (profile) {
    // inputs.unit_time_s is absent from summaries written before it was recorded: 1 ms then.
    const double unit_time_s = in.contains("unit_time_s") ? number_in(in, ss, ip, "unit_time_s", 1e-7, 10)
                                                          : EnvPipeOptions{}.unit_time_s;
    baselines_note = add_baselines(fd, dag, *profile, p_block_w, unit_time_s);
  }
  if (!opt.points_csv.empty()) {  // the user's named points, beside the built-in baselines
    for (auto& pt : load_plot_points_csv(opt.points_csv, /*require_label=*/true)) fd.baselines.push_back(std::move(pt));
  }
  if (!opt.reference_csv.empty()) {
    fd.reference = load_plot_points_csv(opt.reference_csv);
    fd.reference_label = opt.reference_label.empty() ? "reference: " + fs::path(opt.reference_csv).filename().string()
                                                     : opt.reference_label;
  }

  // Timelines on one shared colour scale.
  TimelineOptions to;
  to.color_by = profile ? TimelineColor::kPower : TimelineColor::kFrequency;
  to.p_block_w = p_block_w;
  std::size_t ops_per_rank = 0;
  for (int r = 0; r < dag.num_ranks(); ++r) ops_per_rank = std::max(ops_per_rank, dag.rank_ops(r).size());
  to.width_px = std::clamp(80.0 + 14.0 * static_cast<double>(ops_per_rank), 1100.0, 4200.0);
  const auto r1 = timeline_color_range(fast, to), r2 = timeline_color_range(green, to);
  to.color_range = std::make_pair(std::min(r1.first, r2.first), std::max(r1.second, r2.second));
  to.time_end_s = std::max(fast.timeline.time_s, green.timeline.time_s);  // one time scale: lengths compare
  TimelineOptions to_fast = to, to_green = to;
  to_fast.id_prefix = "fast-";
  to_fast.title = fmt::format("{} (plan {}): T = {} s, E = {} J", fastest_title, fast_idx,
                              seconds_text(fast.timeline.time_s),
                              joules_text(fast.total_energy_j()));
  to_green.id_prefix = "green-";
  to_green.title = fmt::format("Lowest-energy plan written (plan {}): T = {} s, E = {} J", green_idx,
                               seconds_text(green.timeline.time_s),
                               joules_text(green.total_energy_j()));

  // Page.
  const std::string profile_name = fs::path(profile_given).filename().string();
  std::string h = render_detail::html_page_open("Perseus report: " + profile_name);
  h += fmt::format(
      "<p class=\"note\">{} GPUs, {} stage(s) per GPU, {} microbatches, schedule {}, P_block = {} W. "
      "Energies are of one pipeline (one GPU per rank), in the profile's units.</p>\n",
      dag.num_ranks(), dag.num_stages() / std::max(1, dag.num_ranks()), dag.num_microbatches(),
      xml_escape(schedule.name), p_block_w);

  if (sum.contains("approximations") && sum["approximations"].is_array()) {
    for (const auto& a : sum["approximations"]) {
      if (a.is_string()) h += "<p class=\"note\">Approximation: " + xml_escape(a.get<std::string>()) + "</p>\n";
    }
  }
  h += "<h2>Summary</h2>\n<div class=\"row\"><table class=\"kv\"><tbody>\n";
  auto kv = [&](const std::string& k, const std::string& v) {
    h += "<tr><td>" + xml_escape(k) + "</td><td>" + xml_escape(v) + "</td></tr>\n";
  };
  kv("T_min: fastest iteration time (s)", seconds_text(t_min_s));
  kv("energy at T_min (J)", joules_text(e_t_min_j));
  kv("all-max frequency: time (s)", seconds_text(allmax_t));
  kv("all-max frequency: energy (J)", joules_text(allmax_e));
  kv("intrinsic energy bloat removed at T_min (%)", fmt::format("{:.2f}", saving));
  kv("slowest plan: time (s)", seconds_text(t_max_s));
  kv("slowest plan: energy (J)", joules_text(e_t_max_j));
  if (sum.contains("reclaimed_energy_j"))
    kv("energy from slack reclamation at T_min (J)", joules_text(number(sum, ss, "", "reclaimed_energy_j")));
  kv("frontier plans", std::to_string(num_plans));
  kv("plan files written", std::to_string(plan_files.size()));
  if (sum.contains("num_steps")) kv("graph-cut steps", std::to_string(integer(sum, ss, "", "num_steps")));
  if (sum.contains("solve_time_s")) kv("solve time (s)", fmt::format("{:.3f}", number(sum, ss, "", "solve_time_s")));
  h += "</tbody></table>\n<table class=\"kv\"><tbody>\n";
  for (const auto& [k, v] : in.items()) {
    // Inputs that did not apply to this schedule are left out (they would suggest they did).
    if (k == "backward_input_fraction" && !schedule.split_backward) continue;
    if (k == "chunks" && dag.num_stages() == dag.num_ranks()) continue;
    kv("inputs." + k, v.is_string() ? v.get<std::string>() : v.is_structured() ? describe_json_value(v) : v.dump());
  }
  h += "</tbody></table></div>\n";

  h += "<h2>Iteration time–energy frontier</h2>\n";
  h += "<p class=\"note\">Every point of the line is a frequency plan; dots are the plans written to plans/ (hover "
       "for values). Lower and further left is better; the all-max square is what training runs at without "
       "Perseus. A plan's energy counts the GPUs blocking at P_block only until its own time, so the line can "
       "rise to the right: a slower plan is kept where it uses less energy than a faster one that then waits "
       "until the slower one's time (the plan Perseus picks for a straggler's deadline). " +
       std::string(fd.lower_bound.empty()
                       ? "No lower bound was computed for this frontier (graph-cut planner, or a solve stopped before "
                         "the bound stage). "
                       : "The dotted line is the certified lower bound: no plan of this profile and schedule with "
                         "that iteration time uses less energy. ") +
       "Triangles and diamonds are the baselines' plans (docs/baselines.md), evaluated exactly like Perseus's.</p>\n";
  if (!baselines_note.empty()) h += "<p class=\"note\">" + xml_escape(baselines_note) + "</p>\n";
  FrontierPlotOptions fo;
  const std::string frontier_svg = render_frontier_svg(fd, fo);
  h += "<figure>" + frontier_svg + "</figure>\n";

  h += "<h2>Pipeline timelines</h2>\n";
  h += fmt::format(
      "<p class=\"note\">One row per GPU; box colour = {}; background = idle/blocking time{}; red "
      "outline = one critical path. Labels F3/B3 = forward/backward of microbatch 3 (0-based){}, dropped "
      "when they do not fit. Hover a box for its frequency, time and power.</p>\n",
      profile ? "average power of the computation (energy/time)" : "SM frequency",
      profile ? " drawn at P_block on the same scale" : "",
      dag.num_stages() > dag.num_ranks() ? "; F3c1 = in the GPU's model chunk 1 (its stages in increasing order)" : "");
  if (!profile_note.empty()) h += "<p class=\"note\">" + xml_escape(profile_note) + "</p>\n";
  const std::string fast_svg = render_timeline_svg(dag, fast, to_fast);
  const std::string green_svg = render_timeline_svg(dag, green, to_green);
  h += "<div class=\"scroll\">" + fast_svg + "</div>\n";
  h += "<div class=\"scroll\">" + green_svg + "</div>\n";

  h += "<h2>Per-stage frequency histograms</h2>\n<div class=\"row\">\n";
  HistogramOptions ho;
  ho.width_px = 700;
  // One frequency axis for both: the profile's clocks (else both plans'), bars one clock step wide.
  if (profile) {
    for (int st = 0; st < profile->num_stages(); ++st)
      for (int k = 0; k < kNumInstructionKinds; ++k)
        for (const auto& pt : profile->points(st, static_cast<InstructionKind>(k))) ho.axis_clocks_mhz.push_back(pt.freq_mhz);
  } else {
    ho.axis_clocks_mhz = fast.freq_mhz;
    ho.axis_clocks_mhz.insert(ho.axis_clocks_mhz.end(), green.freq_mhz.begin(), green.freq_mhz.end());
  }
  ho.title = fmt::format("{} (plan {})", fastest_title, fast_idx);
  h += "<div>" + render_frequency_histogram_svg(dag, fast, ho) + "</div>\n";
  ho.title = fmt::format("Lowest-energy plan (plan {})", green_idx);
  h += "<div>" + render_frequency_histogram_svg(dag, green, ho) + "</div>\n</div>\n";

  const fs::path emu = dir / "emulation.csv";
  if (fs::exists(emu, ec)) h += emulation_section(emu, dir / "emulation.json");
  h += "<p class=\"note\">Written by perseus report from summary.json, frontier.csv and plans/ in this folder.</p>\n";
  h += "</body>\n</html>\n";

  const fs::path out = dir / "report.html";
  write_file_atomically(out, h);
  if (opt.write_svgs) {
    write_file_atomically(dir / "frontier.svg", frontier_svg);
    write_file_atomically(dir / "timeline_fastest.svg", fast_svg);
    write_file_atomically(dir / "timeline_lowest_energy.svg", green_svg);
  }
  return out.string();
}

}  // namespace perseus
