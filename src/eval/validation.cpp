// Real-GPU check: simulate measured plans with time_profile.csv and compare with measured times.
#include "perseus/validation.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "csv_fields.hpp"
#include "csv_header.hpp"
#include "perseus/error.hpp"
#include "perseus/problem.hpp"
#include "perseus/schedule.hpp"

namespace perseus {

namespace fs = std::filesystem;

namespace {

template <int N>
using Reader = io::CSVReader<N, io::trim_chars<' ', '\t', '\r'>, io::no_quote_escape<','>>;

struct Where {
  const std::string& file;
  int line;
};

[[noreturn]] void fail(const Where& w, std::string_view field, const std::string& what) {
  csv::fail(w.file, w.line, field, what);
}

double to_double(const Where& w, std::string_view field, const char* text) {
  return csv::to_double(w.file, w.line, field, text);
}

int to_int(const Where& w, std::string_view field, const char* text) {
  const std::string_view s(text);
  int v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) fail(w, field, fmt::format("expected an integer, got '{}'", s));
  return v;
}

InstructionKind to_kind(const Where& w, const char* text) {
  const auto k = parse_instruction_kind(text);
  if (!k) fail(w, "instruction", fmt::format("expected forward or backward, got '{}'", text));
  return *k;
}

constexpr const char* kFolderFormat =
    "a workload folder holds info.json, time_profile.csv, perseus_frontier.csv and perseus_plans.csv; "
    "docs/validation.md, \"Folder format\"";

// Opens `path` and reads its header; returns the required columns, comma separated (for messages).
template <int N, class... Cols>
std::string open_csv(std::unique_ptr<Reader<N>>& reader, const std::string& path, Cols... cols) {
  if (!fs::exists(path)) throw InputError(fmt::format("{}: file not found ({})", path, kFolderFormat));
  std::string columns;
  ((columns += (columns.empty() ? "" : ",") + std::string(cols)), ...);
  try {
    reader = std::make_unique<Reader<N>>(path);
    reader->read_header(io::ignore_extra_column, cols...);
  } catch (const io::error::base& e) {
    csv::throw_header_error(e, path, csv::read_head(path), columns);
  }
  return columns;
}

template <class R, class... Ptrs>
bool next_row(R& reader, const std::string& path, std::string_view columns, Ptrs&... ptrs) {
  try {
    return reader.read_row(ptrs...);
  } catch (const io::error::base& e) {
    csv::throw_row_error(e, path, columns);
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

RealGpuValidation validate_real_gpu(const std::string& dir, const SimulationOptions& options) {
  RealGpuValidation out;
  out.workload = fs::path(dir).lexically_normal().filename().string();
  if (out.workload.empty()) out.workload = fs::path(dir).lexically_normal().parent_path().filename().string();

  const std::string info_path = (fs::path(dir) / "info.json").string();
  {
    std::ifstream in(info_path);
    if (!in) throw InputError(fmt::format("{}: file not found or unreadable ({})", info_path, kFolderFormat));
    nlohmann::json info;
    try {
      info = nlohmann::json::parse(in);
      out.num_ranks = info.at("pp").get<int>();
      out.microbatches = info.at("num_microbatches").get<int>();
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{}: expected integer fields 'pp' and 'num_microbatches': {}", info_path, e.what()));
    }
    if (out.num_ranks < 1 || out.microbatches < 1) {
      throw InputError(fmt::format("{}: 'pp' and 'num_microbatches' must be >= 1", info_path));
    }
  }
  ProblemSpec spec;  // the artifact's runs are 1F1B, one stage per GPU
  spec.num_ranks = out.num_ranks;
  spec.microbatches = out.microbatches;
  const Dag dag = Dag::build(resolve_schedule(spec));
  const int n = dag.num_ops();

  // time_profile.csv: (stage, kind, freq) -> mean time.
  std::map<std::tuple<int, int, int>, double> profile;
  {
    const std::string path = (fs::path(dir) / "time_profile.csv").string();
    std::unique_ptr<Reader<4>> r;
    const std::string cols = open_csv<4>(r, path, "stage", "instruction", "frequency", "time");
    char *st = nullptr, *in = nullptr, *fr = nullptr, *tm = nullptr;
    while (next_row(*r, path, cols, st, in, fr, tm)) {
      const Where w{path, static_cast<int>(r->get_file_line())};
      const double t = to_double(w, "time", tm);
      if (t <= 0) fail(w, "time", fmt::format("expected a duration > 0 s, got {}", t));
      profile[{to_int(w, "stage", st), static_cast<int>(to_kind(w, in)), to_int(w, "frequency", fr)}] = t;
    }
  }
  // perseus_frontier.csv: measured times.
  std::map<int, std::pair<double, bool>> measured;
  {
    const std::string path = (fs::path(dir) / "perseus_frontier.csv").string();
    std::unique_ptr<Reader<3>> r;
    const std::string cols = open_csv<3>(r, path, "plan", "time_s", "all_max_frequency");
    char *pl = nullptr, *tm = nullptr, *am = nullptr;
    while (next_row(*r, path, cols, pl, tm, am)) {
      const Where w{path, static_cast<int>(r->get_file_line())};
      const double t = to_double(w, "time_s", tm);
      if (t <= 0) fail(w, "time_s", fmt::format("expected an iteration time > 0 s, got {}", t));
      measured[to_int(w, "plan", pl)] = {t, to_int(w, "all_max_frequency", am) != 0};
    }
  }
  // perseus_plans.csv: per-plan frequencies, checked against our 1F1B order.
  std::map<int, std::vector<int>> freqs;
  {
    const std::string path = (fs::path(dir) / "perseus_plans.csv").string();
    std::unique_ptr<Reader<6>> r;
    const std::string cols = open_csv<6>(r, path, "plan", "stage", "order", "instruction", "microbatch", "frequency_mhz");
    char *pl = nullptr, *st = nullptr, *od = nullptr, *in = nullptr, *mb = nullptr, *fr = nullptr;
    while (next_row(*r, path, cols, pl, st, od, in, mb, fr)) {
      const Where w{path, static_cast<int>(r->get_file_line())};
      const int plan = to_int(w, "plan", pl);
      const Computation c{to_int(w, "stage", st), to_int(w, "microbatch", mb), to_kind(w, in)};
      const int op = (c.stage >= 0 && c.stage < out.num_ranks && c.microbatch >= 0 && c.microbatch < out.microbatches)
                         ? dag.find(c)
                         : -1;
      if (op < 0) {
        fail(w, "stage", fmt::format("stage {} {} microbatch {} is not in the {}-stage, {}-microbatch 1F1B schedule",
                                     c.stage, to_string(c.kind), c.microbatch, out.num_ranks, out.microbatches));
      }
      const int order = to_int(w, "order", od);
      const auto& rank_ops = dag.rank_ops(dag.rank_of(op));
      const auto pos = std::find(rank_ops.begin(), rank_ops.end(), op) - rank_ops.begin();
      if (order != pos) {
        fail(w, "order", fmt::format("stage {} {} microbatch {} is at position {} in our 1F1B order, the file says {}",
                                     c.stage, to_string(c.kind), c.microbatch, pos, order));
      }
      auto& f = freqs[plan];
      if (f.empty()) f.assign(n, 0);
      f[op] = to_int(w, "frequency_mhz", fr);
      if (!profile.count({c.stage, static_cast<int>(c.kind), f[op]})) {
        fail(w, "frequency_mhz", fmt::format("{} MHz is not in time_profile.csv for stage {} {}", f[op], c.stage,
                                             to_string(c.kind)));
      }
    }
  }
  for (auto& [plan, f] : freqs) {
    const auto m = measured.find(plan);
    if (m == measured.end()) {
      throw InputError(fmt::format("{}/perseus_frontier.csv: no measured time for plan {}", dir, plan));
    }
    std::vector<double> time(n);
    for (int i = 0; i < n; ++i) {
      if (f[i] == 0) {
        const Computation& c = dag.op(i);
        throw InputError(fmt::format("{}/perseus_plans.csv: plan {} has no row for stage {} {} microbatch {}", dir, plan,
                                     c.stage, to_string(c.kind), c.microbatch));
      }
      time[i] = profile.at({dag.op(i).stage, static_cast<int>(dag.op(i).kind), f[i]});
    }
    const FrequencyPlan fp = evaluate_durations(dag, f, std::move(time), std::vector<double>(n, 0.0), 0.0);
    RealPlanCheck chk;
    chk.plan = plan;
    chk.all_max = m->second.second;
    chk.measured_time_s = m->second.first;
    chk.dag_time_s = simulate(dag, fp, 0.0, options).time_s;
    out.plans.push_back(chk);
  }
  std::vector<double> gaps;
  for (const auto& p : out.plans) {
    if (p.all_max) gaps.push_back(p.measured_time_s - p.dag_time_s);
  }
  if (!gaps.empty()) {
    double sum = 0;
    for (double g : gaps) sum += g;
    out.overhead_s = sum / static_cast<double>(gaps.size());
  }
  std::vector<double> abs_err, dag_err;
  for (auto& p : out.plans) {
    p.predicted_time_s = p.dag_time_s + out.overhead_s;
    p.error_pct = 100.0 * (p.predicted_time_s - p.measured_time_s) / p.measured_time_s;
    p.dag_error_pct = 100.0 * (p.dag_time_s - p.measured_time_s) / p.measured_time_s;
    if (!p.all_max) {
      abs_err.push_back(std::abs(p.error_pct));
      dag_err.push_back(p.dag_error_pct);
    }
  }
  out.median_abs_error_pct = median(abs_err);
  out.max_abs_error_pct = abs_err.empty() ? 0 : *std::max_element(abs_err.begin(), abs_err.end());
  out.median_dag_error_pct = median(dag_err);
  return out;
}

double overall_median_abs_error_pct(const std::vector<RealGpuValidation>& results) {
  std::vector<double> all;
  for (const auto& r : results) {
    for (const auto& p : r.plans) {
      if (!p.all_max) all.push_back(std::abs(p.error_pct));
    }
  }
  return median(all);
}

std::string validation_markdown(const std::vector<RealGpuValidation>& results) {
  std::string md =
      "| workload | stages | microbatches | plans scored | overhead (s) | median DAG-only error (%) | median \\|error\\| (%) "
      "| max \\|error\\| (%) |\n|---|---|---|---|---|---|---|---|\n";
  std::size_t total = 0;
  for (const auto& r : results) {
    const auto scored = static_cast<std::size_t>(std::count_if(r.plans.begin(), r.plans.end(), [](const auto& p) { return !p.all_max; }));
    total += scored;
    md += fmt::format("| {} | {} | {} | {} | {:.3f} | {:+.2f} | {:.2f} | {:.2f} |\n", r.workload, r.num_ranks, r.microbatches,
                      scored, r.overhead_s, r.median_dag_error_pct, r.median_abs_error_pct, r.max_abs_error_pct);
  }
  md += fmt::format("| **all** | | | {} | | | **{:.2f}** | |\n", total, overall_median_abs_error_pct(results));
  return md;
}

}  // namespace perseus
