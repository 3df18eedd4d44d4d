// Real-GPU check: simulate measured plans with time_profile.csv and compare with measured times.
#include "perseus/validation.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "csv_fields.hpp"
#include "csv_header.hpp"
#include "perseus/error.hpp"
#include "perseus/input_limits.hpp"
#include "perseus/json_input.hpp"
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
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) fail(w, field, fmt::format("expected an integer, got {}", quote_input(s)));
  return v;
}

/// A plan number (column 'plan'): an integer >= 0, as `perseus optimize` numbers plans.
int plan_number(const Where& w, const char* text) {
  const int plan = to_int(w, "plan", text);
  if (plan < 0) fail(w, "plan", fmt::format("expected a plan number (an integer >= 0), got {}", plan));
  return plan;
}

InstructionKind to_kind(const Where& w, const char* text) {
  const auto k = parse_instruction_kind(text);
  if (!k) fail(w, "instruction", fmt::format("expected forward or backward, got {}", quote_input(text)));
  return *k;
}

constexpr const char* kFolderFormat =
    "a workload folder holds info.json, time_profile.csv, perseus_frontier.csv and perseus_plans.csv; "
    "docs/validation.md, \"Folder format\"";

// Opens a CSV and reads its header: the first N − optional columns are required, the last
// `optional` ones (e.g. dp_rank, tp_rank of a 3D run) may be absent (their fields stay null).
// Returns the required columns, comma separated (for messages).
template <int N, class... Cols>
std::string open_csv(std::unique_ptr<Reader<N>>& reader, const std::string& path, int optional, Cols... cols) {
  if (!fs::exists(path)) throw InputError(fmt::format("{}: file not found ({})", path, kFolderFormat));
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(fmt::format("{}: is a folder, not a CSV file ({})", path, kFolderFormat));
  if (std::ifstream probe(path); !probe) {  // the CSV reader would see an empty file
    throw InputError(fmt::format("{}: cannot read the file: {}", path, std::strerror(errno)));
  }
  // Text first, as every other CSV reader checks it: the CSV library cut a line at a NUL byte
  // without a word, and dumped binary headers (session 22's trial).
  csv::reject_non_text(csv::read_file(path), path);
  const std::string names[] = {cols...};
  std::string columns;
  for (int i = 0; i < N - optional; ++i) columns += (columns.empty() ? "" : ",") + names[i];
  try {
    reader = std::make_unique<Reader<N>>(path);
    reader->read_header(io::ignore_extra_column | io::ignore_missing_column, cols...);
  } catch (const io::error::base& e) {
    csv::throw_header_error(e, path, csv::read_head(path), columns);
  }
  for (int i = 0; i < N - optional; ++i) {
    if (!reader->has_column(names[i])) csv::throw_missing_column(names[i].c_str(), path, csv::read_head(path), columns);
  }
  return columns;
}

// An optional rank column (dp_rank/tp_rank): 0 when absent, else an integer in [0, count).
int rank_field(const Where& w, std::string_view field, const char* text, int count, std::string_view info_field) {
  if (text == nullptr) return 0;
  const int v = to_int(w, field, text);
  if (v < 0 || v >= count) {
    fail(w, field, fmt::format("expected 0..{} (info.json '{}' = {}), got {}", count - 1, info_field, count, v));
  }
  return v;
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

// The per-computation overhead o >= 0 at which the all-max plans' mean simulated time
// (model_time(i, o), non-decreasing in o) equals their mean measured time; 0 when there is no
// all-max plan or the DAG alone is not shorter. Bisection to 1e-12 relative.
template <class ModelTime>
double calibrate_op_overhead(const std::vector<RealPlanCheck>& plans, const ModelTime& model_time, const Dag& dag) {
  std::vector<std::size_t> all_max;
  double target = 0;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].all_max) {
      all_max.push_back(i);
      target += plans[i].measured_time_s;
    }
  }
  if (all_max.empty()) return 0;
  target /= static_cast<double>(all_max.size());
  const auto mean_time = [&](double o) {
    double sum = 0;
    for (std::size_t i : all_max) sum += model_time(i, o);
    return sum / static_cast<double>(all_max.size());
  };
  if (mean_time(0) >= target) return 0;
  // Every rank runs >= 1 computation, so T(o) >= o × (computations of the busiest rank).
  std::size_t ops = 1;
  for (int r = 0; r < dag.num_ranks(); ++r) ops = std::max(ops, dag.rank_ops(r).size());
  double lo = 0, hi = target / static_cast<double>(ops);
  for (int it = 0; it < 200 && hi - lo > 1e-12 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    (mean_time(mid) < target ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

RealGpuValidation validate_real_gpu(const std::string& dir, const SimulationOptions& options, double p2p_latency_s) {
  check_timeline_overheads({p2p_latency_s, 0.0});
  RealGpuValidation out;
  out.workload = fs::path(dir).lexically_normal().filename().string();
  if (out.workload.empty()) out.workload = fs::path(dir).lexically_normal().parent_path().filename().string();

  const std::string info_path = (fs::path(dir) / "info.json").string();
  {
    if (!fs::is_regular_file(info_path)) {
      throw InputError(fmt::format("{}: file not found or unreadable ({})", info_path, kFolderFormat));
    }
    const nlohmann::json info = load_json_file(info_path, "info.json");
    if (!info.is_object()) throw InputError(fmt::format("{}: expected a JSON object ({})", info_path, kFolderFormat));
    // An integer field in [1, 2^20]; `fallback` when absent (0: required).
    auto count = [&](const char* key, int fallback) {
      const auto it = info.find(key);
      if (it == info.end() && fallback > 0) return fallback;
      constexpr std::int64_t kMax = 1 << 20;
      if (it == info.end() || !it->is_number_integer() || it->get<std::int64_t>() < 1 ||
          (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(kMax)) ||
          it->get<std::int64_t>() > kMax) {
        throw InputError::in_file(info_path, 0, key,
                                  fmt::format("expected an integer in [1, {}]{}, got {}", kMax,
                                              fallback > 0 ? fmt::format(" (optional, default {})", fallback) : "",
                                              it == info.end() ? "nothing" : describe_json_value(*it)));
      }
      return static_cast<int>(it->get<std::int64_t>());
    };
    out.num_ranks = count("pp", 0);
    out.microbatches = count("num_microbatches", 0);
    out.dp = count("dp", 1);
    out.tp = count("tp", 1);
  }
  ProblemSpec spec;  // the artifact's runs are 1F1B, one stage per GPU
  spec.num_ranks = out.num_ranks;
  spec.microbatches = out.microbatches;
  const Schedule schedule = resolve_schedule(spec);
  const Dag dag = Dag::build(schedule);
  const int n = dag.num_ops();

  // time_profile.csv: (dp_rank, stage, kind, freq) -> mean time, the max over the stage's TP
  // GPUs (one clock per stage; the TP group's collectives make it run at its slowest GPU).
  // Without a dp_rank column the rows stand for every data-parallel replica (key dp = -1).
  std::map<std::tuple<int, int, int, int>, double> profile;
  {
    const std::string path = (fs::path(dir) / "time_profile.csv").string();
    std::unique_ptr<Reader<6>> r;
    const std::string cols = open_csv<6>(r, path, 2, "stage", "instruction", "frequency", "time", "dp_rank", "tp_rank");
    std::set<std::tuple<int, int, int, int, int>> seen;
    char *st = nullptr, *in = nullptr, *fr = nullptr, *tm = nullptr, *dpr = nullptr, *tpr = nullptr;
    while (next_row(*r, path, cols, st, in, fr, tm, dpr, tpr)) {
      const Where w{path, static_cast<int>(r->get_file_line())};
      const double t = to_double(w, "time", tm);
      if (!(t >= limits::kMinOpTimeS && t <= limits::kMaxOpTimeS))
        fail(w, "time", fmt::format("expected a duration in [{}, {}] s (one computation of one microbatch), got {}",
                                    limits::kMinOpTimeS, limits::kMaxOpTimeS, t));
      const int dp = dpr ? rank_field(w, "dp_rank", dpr, out.dp, "dp") : -1;
      const int tp = rank_field(w, "tp_rank", tpr, out.tp, "tp");
      const int stage = to_int(w, "stage", st), kind = static_cast<int>(to_kind(w, in)), f = to_int(w, "frequency", fr);
      if (stage < 0 || stage >= out.num_ranks) {
        fail(w, "stage", fmt::format("expected 0..{} (info.json 'pp' = {}), got {}", out.num_ranks - 1, out.num_ranks, stage));
      }
      if (f < 1 || f > limits::kMaxFrequencyMhz) {
        fail(w, "frequency", fmt::format("expected a clock in MHz (1..{}), got {}", limits::kMaxFrequencyMhz, f));
      }
      if (!seen.insert({dp, tp, stage, kind, f}).second) {
        fail(w, "frequency", fmt::format("duplicate row for stage {} {} at {} MHz (dp_rank {}, tp_rank {})", stage,
                                         to_string(static_cast<InstructionKind>(kind)), f, dp < 0 ? 0 : dp, tp));
      }
      double& slot = profile[{dp, stage, kind, f}];
      slot = std::max(slot, t);
    }
  }
  // Every stage has rows: with info.json's pp above the data's stages, the first error was a
  // schedule-order mismatch in perseus_plans.csv that named neither (session 32's trial).
  {
    std::set<int> stages;
    for (const auto& [key, t] : profile) stages.insert(std::get<1>(key));
    if (static_cast<int>(stages.size()) < out.num_ranks) {
      int missing = 0;
      while (stages.count(missing)) ++missing;
      throw InputError::in_file(info_path, 0, "pp",
                                fmt::format("info.json says {} stages, but time_profile.csv has no row for stage {} "
                                            "({} stage(s) have rows): is 'pp' right?",
                                            out.num_ranks, missing, stages.size()));
    }
  }
  std::map<std::tuple<int, int, int>, int> top_clock;  // (dp_rank or -1, stage, kind) -> highest MHz profiled
  for (const auto& [key, t] : profile) {
    int& top = top_clock[{std::get<0>(key), std::get<1>(key), std::get<2>(key)}];
    top = std::max(top, std::get<3>(key));
  }
  const auto profiled = [&](int dp, int stage, InstructionKind kind, int f) -> const double* {
    for (int d : {dp, -1}) {
      const auto it = profile.find({d, stage, static_cast<int>(kind), f});
      if (it != profile.end()) return &it->second;
    }
    return nullptr;
  };
  // perseus_frontier.csv: measured times.
  std::map<int, std::pair<double, bool>> measured;
  std::map<int, int> measured_line;  // plan -> its line in perseus_frontier.csv
  const std::string frontier_path = (fs::path(dir) / "perseus_frontier.csv").string();
  {
    const std::string& path = frontier_path;
    std::unique_ptr<Reader<3>> r;
    const std::string cols = open_csv<3>(r, path, 0, "plan", "time_s", "all_max_frequency");
    char *pl = nullptr, *tm = nullptr, *am = nullptr;
    while (next_row(*r, path, cols, pl, tm, am)) {
      const Where w{path, static_cast<int>(r->get_file_line())};
      const double t = to_double(w, "time_s", tm);
      // At least one computation's shortest time: a subnormal 4.9e-324 s printed as 0 s with an
      // error of inf %.
      if (!(t >= limits::kMinOpTimeS && t <= limits::kMaxIterationTimeS))
        fail(w, "time_s", fmt::format("expected an iteration time in [{}, {}] s, got {}", limits::kMinOpTimeS,
                                      limits::kMaxIterationTimeS, t));
      const int plan = plan_number(w, pl);
      const int flag = to_int(w, "all_max_frequency", am);
      if (flag != 0 && flag != 1) fail(w, "all_max_frequency", fmt::format("expected 0 or 1, got {}", flag));
      if (const auto [it, fresh] = measured_line.emplace(plan, w.line); !fresh)
        fail(w, "plan", fmt::format("duplicate row for plan {} (first on line {})", plan, it->second));
      measured[plan] = {t, flag == 1};
    }
  }
  // perseus_plans.csv: per-plan, per-replica frequencies, checked against our 1F1B order. The
  // rows of one computation on a stage's TP GPUs must agree (one clock per stage).
  const int replicas = out.dp;  // without a dp_rank column, replica 0's plan stands for all
  std::map<int, std::vector<std::vector<int>>> freqs;  // plan -> [dp][op] MHz
  std::map<int, int> plan_first_line;                   // plan -> its first line in perseus_plans.csv
  bool per_replica = false;
  const std::string plans_path = (fs::path(dir) / "perseus_plans.csv").string();
  {
    const std::string& path = plans_path;
    std::unique_ptr<Reader<8>> r;
    const std::string cols = open_csv<8>(r, path, 2, "plan", "stage", "order", "instruction", "microbatch",
                                         "frequency_mhz", "dp_rank", "tp_rank");
    per_replica = r->has_column("dp_rank");
    std::map<std::tuple<int, int, int, int>, int> plan_row_line;  // (plan, dp, tp, op) -> first line
    char *pl = nullptr, *st = nullptr, *od = nullptr, *in = nullptr, *mb = nullptr, *fr = nullptr, *dpr = nullptr,
         *tpr = nullptr;
    while (next_row(*r, path, cols, pl, st, od, in, mb, fr, dpr, tpr)) {
      const Where w{path, static_cast<int>(r->get_file_line())};
      const int plan = plan_number(w, pl);
      plan_first_line.emplace(plan, w.line);
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
      const int dp = rank_field(w, "dp_rank", dpr, out.dp, "dp");
      const int tp = rank_field(w, "tp_rank", tpr, out.tp, "tp");
      if (const auto [it, fresh] = plan_row_line.emplace(std::make_tuple(plan, dp, tp, op), w.line); !fresh) {
        fail(w, "plan", fmt::format("duplicate row for plan {} stage {} {} microbatch {}{} (first on line {})", plan,
                                    c.stage, to_string(c.kind), c.microbatch,
                                    out.dp > 1 || out.tp > 1 ? fmt::format(" (dp_rank {}, tp_rank {})", dp, tp) : "",
                                    it->second));
      }
      auto& f = freqs[plan];
      if (f.empty()) f.assign(per_replica ? replicas : 1, std::vector<int>(n, 0));
      const int mhz = to_int(w, "frequency_mhz", fr);
      int& slot = f[dp][op];
      if (slot != 0 && slot != mhz) {
        fail(w, "frequency_mhz", fmt::format("plan {} runs stage {} {} microbatch {} at {} MHz on tp_rank {} but at {} MHz "
                                             "on another GPU of the stage (one clock per stage across its TP GPUs)",
                                             plan, c.stage, to_string(c.kind), c.microbatch, mhz, tp, slot));
      }
      slot = mhz;
      if (!profiled(per_replica ? dp : -1, c.stage, c.kind, mhz)) {
        fail(w, "frequency_mhz", fmt::format("{} MHz is not in time_profile.csv for stage {} {}", mhz, c.stage,
                                             to_string(c.kind)));
      }
    }
  }
  if (freqs.empty()) {
    throw InputError(fmt::format("{}/perseus_plans.csv: no plans (the file has no rows below its header); expected the "
                                 "frequencies of at least one measured plan ({})",
                                 dir, kFolderFormat));
  }
  for (const auto& [plan, line] : measured_line) {  // a measured time without its plan would be dropped silently
    if (!freqs.count(plan)) {
      fail(Where{frontier_path, line}, "plan", fmt::format("plan {} has no rows in perseus_plans.csv", plan));
    }
  }
  // Per plan and replica: profiled durations. The iteration of a data-parallel job is its
  // slowest replica's (they meet at the gradient all-reduce, which is not in the DAG).
  std::vector<std::vector<std::vector<double>>> plan_times;  // [plan in out.plans order][dp][op]
  std::vector<std::vector<std::vector<int>>> plan_freqs;
  const auto replica_max = [&](std::size_t i, const std::vector<double>& extra) {
    double t = 0;
    for (std::size_t d = 0; d < plan_times[i].size(); ++d) {
      std::vector<double> time = plan_times[i][d];
      for (int op = 0; op < n; ++op) time[op] += extra[op];
      const FrequencyPlan fp = evaluate_durations(dag, plan_freqs[i][d], std::move(time), std::vector<double>(n, 0.0), 0.0);
      t = std::max(t, simulate(dag, fp, 0.0, options).time_s);
    }
    return t;
  };
  for (auto& [plan, f] : freqs) {
    const auto m = measured.find(plan);
    if (m == measured.end()) {
      fail(Where{plans_path, plan_first_line.at(plan)}, "plan",
           fmt::format("plan {} has no measured time in perseus_frontier.csv", plan));
    }
    std::vector<std::vector<double>> times;
    for (std::size_t d = 0; d < f.size(); ++d) {
      std::vector<double> time(n);
      for (int i = 0; i < n; ++i) {
        const Computation& c = dag.op(i);
        if (f[d][i] == 0) {
          throw InputError(fmt::format("{}/perseus_plans.csv: plan {} has no row for stage {} {} microbatch {}{}", dir,
                                       plan, c.stage, to_string(c.kind), c.microbatch,
                                       per_replica ? fmt::format(" (dp_rank {})", d) : std::string()));
        }
        time[i] = *profiled(per_replica ? static_cast<int>(d) : -1, c.stage, c.kind, f[d][i]);
      }
      times.push_back(std::move(time));
    }
    plan_times.push_back(std::move(times));
    plan_freqs.push_back(f);
    // A plan flagged all-max calibrates the overhead: every computation must run at the
    // highest clock time_profile.csv has for its stage and kind.
    if (m->second.second) {
      for (std::size_t d = 0; d < f.size(); ++d)
        for (int i = 0; i < n; ++i) {
          const Computation& c = dag.op(i);
          int top = 0;
          for (const int kd : {per_replica ? static_cast<int>(d) : -1, -1})
            if (const auto it = top_clock.find({kd, c.stage, static_cast<int>(c.kind)}); it != top_clock.end())
              top = std::max(top, it->second);
          if (f[d][i] != top)
            fail(Where{frontier_path, measured_line[plan]}, "all_max_frequency",
                 fmt::format("plan {} is flagged all-max but runs stage {} {} microbatch {}{} at {} MHz, not the "
                             "highest profiled clock {} MHz",
                             plan, c.stage, to_string(c.kind), c.microbatch,
                             per_replica ? fmt::format(" (dp_rank {})", d) : std::string(), f[d][i], top));
        }
    }
    RealPlanCheck chk;
    chk.plan = plan;
    chk.all_max = m->second.second;
    chk.measured_time_s = m->second.first;
    chk.dag_time_s = replica_max(plan_times.size() - 1, std::vector<double>(n, 0.0));
    // A measured iteration faster than half the plan's own computations (time_profile.csv), or
    // slower than 1000 times them, is not a measurement of this plan (a unit mistake, another
    // run): it gave a negative "constant" overhead and errors of 6.9e8 % as results (session
    // 21's trial). Overheads only lengthen an iteration; a real profile is not 2x off.
    if (chk.measured_time_s < kMinMeasuredOverDagTime * chk.dag_time_s ||
        chk.measured_time_s > kMaxMeasuredOverDagTime * chk.dag_time_s)
      fail(Where{frontier_path, measured_line[plan]}, "time_s",
           fmt::format("plan {} measured {:.6g} s, but its computations alone take {:.6g} s by time_profile.csv: "
                       "expected a time in [{:g}, {:g}] x that (a time in other units, or of another plan?)",
                       plan, chk.measured_time_s, chk.dag_time_s, kMinMeasuredOverDagTime, kMaxMeasuredOverDagTime));
    out.plans.push_back(chk);
  }
  // Both ways to account for what the DAG leaves out are calibrated on the all-max plans and
  // judged on the others: without either kind there is nothing to calibrate or to score.
  const auto all_max_plans = std::count_if(out.plans.begin(), out.plans.end(), [](const auto& p) { return p.all_max; });
  if (all_max_plans == 0) {
    throw InputError(fmt::format("{}: no plan is flagged all_max_frequency = 1, so the overheads cannot be calibrated "
                                 "(the all-max warm-up runs, plans 0 and 1 in the artifact's folders; {})",
                                 frontier_path, kFolderFormat));
  }
  if (static_cast<std::size_t>(all_max_plans) == out.plans.size()) {
    throw InputError(fmt::format("{}: every measured plan is flagged all_max_frequency = 1, so no plan is left to "
                                 "score ({})",
                                 frontier_path, kFolderFormat));
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
  // Overhead model: simulated time of plan i with every computation lengthened by its overhead.
  out.overheads.p2p_latency_s = p2p_latency_s;
  const auto model_time = [&](std::size_t i, double op_overhead_s) {
    const TimelineOverheads o{p2p_latency_s, op_overhead_s};
    std::vector<double> extra(n);
    for (int op = 0; op < n; ++op) extra[op] = timeline_overhead_s(schedule, dag.op(op).stage, dag.op(op).kind, o);
    return replica_max(i, extra);
  };
  out.overheads.op_overhead_s = calibrate_op_overhead(out.plans, model_time, dag);
  if (out.overheads.op_overhead_s == 0 && p2p_latency_s > 0) {
    double simulated = 0, measured_mean = 0;
    for (std::size_t i = 0; i < out.plans.size(); ++i)
      if (out.plans[i].all_max) simulated += model_time(i, 0), measured_mean += out.plans[i].measured_time_s;
    if (simulated >= measured_mean) {
      out.warnings.push_back(fmt::format(
          "{}: with a P2P latency of {} s alone the all-max plans' mean simulated time ({:.6g} s) is already at or "
          "above their mean measured time ({:.6g} s): the per-computation overhead is 0 and the overhead model "
          "overestimates every plan; a smaller --p2p-latency fits this workload",
          out.workload, p2p_latency_s, simulated / static_cast<double>(all_max_plans),
          measured_mean / static_cast<double>(all_max_plans)));
    }
  }
  std::vector<double> abs_err, dag_err, model_err, abs_model_err;
  for (std::size_t i = 0; i < out.plans.size(); ++i) {
    auto& p = out.plans[i];
    p.predicted_time_s = p.dag_time_s + out.overhead_s;
    p.error_pct = 100.0 * (p.predicted_time_s - p.measured_time_s) / p.measured_time_s;
    p.dag_error_pct = 100.0 * (p.dag_time_s - p.measured_time_s) / p.measured_time_s;
    p.model_time_s = model_time(i, out.overheads.op_overhead_s);
    p.model_error_pct = 100.0 * (p.model_time_s - p.measured_time_s) / p.measured_time_s;
    if (!p.all_max) {
      abs_err.push_back(std::abs(p.error_pct));
      dag_err.push_back(p.dag_error_pct);
      model_err.push_back(p.model_error_pct);
      abs_model_err.push_back(std::abs(p.model_error_pct));
    }
  }
  out.median_abs_error_pct = median(abs_err);
  out.max_abs_error_pct = abs_err.empty() ? 0 : *std::max_element(abs_err.begin(), abs_err.end());
  out.median_dag_error_pct = median(dag_err);
  out.median_model_error_pct = median(model_err);
  out.median_abs_model_error_pct = median(abs_model_err);
  out.max_abs_model_error_pct = abs_model_err.empty() ? 0 : *std::max_element(abs_model_err.begin(), abs_model_err.end());
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

double overall_median_abs_model_error_pct(const std::vector<RealGpuValidation>& results) {
  std::vector<double> all;
  for (const auto& r : results) {
    for (const auto& p : r.plans) {
      if (!p.all_max) all.push_back(std::abs(p.model_error_pct));
    }
  }
  return median(all);
}

std::string validation_markdown(const std::vector<RealGpuValidation>& results) {
  std::string md =
      "| workload | stages | microbatches | plans scored | median DAG-only error (%) | constant (s) | median \\|error\\| (%) "
      "| max \\|error\\| (%) | per-computation overhead (ms) | median error, no constant (%) | median \\|error\\| (%) "
      "| max \\|error\\| (%) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::size_t total = 0;
  for (const auto& r : results) {
    const auto scored = static_cast<std::size_t>(std::count_if(r.plans.begin(), r.plans.end(), [](const auto& p) { return !p.all_max; }));
    total += scored;
    md += fmt::format("| {} | {} | {} | {} | {:+.2f} | {:.3f} | {:.2f} | {:.2f} | {:.2f} | {:+.2f} | {:.2f} | {:.2f} |\n",
                      r.workload, r.num_ranks, r.microbatches, scored, r.median_dag_error_pct, r.overhead_s,
                      r.median_abs_error_pct, r.max_abs_error_pct, 1e3 * r.overheads.op_overhead_s,
                      r.median_model_error_pct, r.median_abs_model_error_pct, r.max_abs_model_error_pct);
  }
  md += fmt::format("| **all** | | | {} | | | **{:.2f}** | | | | **{:.2f}** | |\n", total,
                    overall_median_abs_error_pct(results), overall_median_abs_model_error_pct(results));
  return md;
}

}  // namespace perseus
