// JobModel: schedule/DAG/profile preparation, precomputed plan parsing, plan rendering.
#include "perseus/server/job_model.hpp"

#include "perseus/quick_plan.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>

#include <set>

#include <fmt/compile.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/error.hpp"
#include "perseus/input_limits.hpp"
#include "perseus/plan.hpp"
#include "perseus/plan_files.hpp"
#include "perseus/problem.hpp"
#include "perseus/schedule.hpp"
#include "perseus/zeus_plan_file.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

std::string number_json(double x) {
  if (!std::isfinite(x)) return "null";
  return json(x).dump();
}

bool is_compute(std::string_view name) { return parse_instruction_kind(name).has_value(); }

/// Per-op frequencies from a Zeus plan: the outer list is per pp rank (stage for 1 chunk);
/// compute entries are consumed in the rank's execution order, other names are skipped.
std::vector<int> plan_from_zeus(const JobModel& m, const JobSpec& spec, const ZeusPlan& z, std::size_t idx) {
  const Dag& dag = *m.dag;
  if (z.size() != static_cast<std::size_t>(spec.pp))
    throw InputError(fmt::format("zeus_plans[{}]: has {} stage lists, the job has pp = {}", idx, z.size(), spec.pp));
  std::vector<int> freq(dag.num_ops(), 0);
  for (int r = 0; r < spec.pp; ++r) {
    const auto& ops = dag.rank_ops(r);
    std::size_t k = 0;
    for (const auto& e : z[r]) {
      if (e.instruction && !is_compute(*e.instruction)) continue;  // load, p2p, step, ...
      if (k >= ops.size())
        throw InputError(fmt::format("zeus_plans[{}]: stage {} has more than the {} computations of the schedule",
                                     idx, r, ops.size()));
      const auto kind = dag.op(ops[k]).kind;
      if (e.instruction && *e.instruction != to_string(kind))
        throw InputError(fmt::format("zeus_plans[{}]: stage {} entry {} is \"{}\", the schedule runs \"{}\" there", idx,
                                     r, k, *e.instruction, to_string(kind)));
      freq[ops[k++]] = e.freq_mhz;
    }
    if (k != ops.size())
      throw InputError(fmt::format("zeus_plans[{}]: stage {} has {} computations, the schedule has {}", idx, r, k,
                                   ops.size()));
  }
  return freq;
}

PlanPoint evaluate(const JobModel& m, const JobSpec& spec, const std::vector<int>& freq) {
  const FrequencyPlan p = evaluate_plan(*m.dag, *m.profile, freq, spec.p_block_w);
  return {p.timeline.time_s, p.total_energy_j()};
}

}  // namespace

std::shared_ptr<const ServedPlan> render_plan(const Dag& dag, int plan_index, PlanPoint point,
                                              std::vector<int> freq_mhz) {
  auto p = std::make_shared<ServedPlan>();
  p->plan_index = plan_index;
  p->point = point;
  p->time_json = number_json(point.time_s);
  p->energy_json = number_json(point.energy_j);
  // Written straight into two reused buffers with compiled formats (a temporary string per
  // computation made this half of a restart with a job of a million computations;
  // bench/server_big_job.sh).
  fmt::memory_buffer ins, zeus;
  for (int r = 0; r < dag.num_ranks(); ++r) {
    ins.clear();
    zeus.clear();
    auto ins_out = std::back_inserter(ins);
    auto zeus_out = std::back_inserter(zeus);
    char sep = '[';
    for (int op : dag.rank_ops(r)) {
      const Computation& c = dag.op(op);
      const std::string_view name = to_string(c.kind);
      fmt::format_to(ins_out, FMT_COMPILE("{}{{\"instruction\":\"{}\",\"stage\":{},\"microbatch\":{},\"freq_mhz\":{}}}"),
                     sep, name, c.stage, c.microbatch, freq_mhz[op]);
      fmt::format_to(zeus_out, FMT_COMPILE("{}[\"{}\",{}]"), sep, name, freq_mhz[op]);
      sep = ',';
    }
    if (sep == '[') ins.push_back('['), zeus.push_back('[');  // a rank without computations
    ins.push_back(']');
    zeus.push_back(']');
    p->rank_instructions_json.emplace_back(ins.data(), ins.size());
    p->rank_zeus_json.emplace_back(zeus.data(), zeus.size());
  }
  p->freq_mhz = std::move(freq_mhz);
  return p;
}

int JobModel::fastest_index() const {
  if (points.empty()) return -1;
  if (!times_known()) return static_cast<int>(points.size()) - 1;
  int best = 0;
  for (int i = 1; i < static_cast<int>(points.size()); ++i) {
    const auto& a = points[i];
    const auto& b = points[best];
    if (a.time_s < b.time_s || (a.time_s == b.time_s && a.energy_j < b.energy_j)) best = i;
  }
  return best;
}

int JobModel::lowest_energy_within(double deadline_s) const {
  return points.empty() ? fastest_index() : static_cast<int>(perseus::lowest_energy_within(points, pipe_block_w, deadline_s));
}

bool JobModel::times_known() const {
  for (const auto& p : points)
    if (!std::isfinite(p.time_s) || !std::isfinite(p.energy_j)) return false;
  return true;
}

void check_time_quantum(const Dag& dag, const Profile& profile, double unit_time_s) {
  std::set<std::pair<int, int>> seen;
  for (int i = 0; i < dag.num_ops(); ++i) {
    const Computation& c = dag.op(i);
    if (!seen.insert({c.stage, static_cast<int>(c.kind)}).second) continue;
    const auto pts = pareto_points(profile.points(c.stage, c.kind));
    if (pts.empty()) continue;  // the planner names the missing rows itself
    const double quanta = (pts.back().time_s - pts.front().time_s) / unit_time_s;
    if (quanta > kMaxQuantaPerComputation)
      throw InputError(fmt::format(
          "field \"unit_time_s\" = {} s is too small for this profile: stage {} {} spans {:.6g} s, {:.3g} quanta "
          "(the planner allows at most {:.0f}); use unit_time_s >= {:.3g}",
          unit_time_s, c.stage, to_string(c.kind), pts.back().time_s - pts.front().time_s, quanta,
          kMaxQuantaPerComputation, (pts.back().time_s - pts.front().time_s) / kMaxQuantaPerComputation));
  }
}

ProblemSpec problem_spec(const JobSpec& spec) {
  ProblemSpec p;
  p.schedule = spec.schedule;
  p.num_ranks = spec.pp;
  p.microbatches = spec.microbatches;
  p.chunks = spec.chunks;
  p.p_block_w = spec.p_block_w;
  p.overheads = {spec.p2p_latency_s, spec.op_overhead_s};
  return p;
}

std::string json_field_name(const std::string& field) {
  if (field == "num_ranks") return "\"pp\"";
  if (field == "p_block_w") return "\"p2p_power_w\"";
  if (field == "tp_degree") return "\"tp\"";
  if (field == "profile_path") return "\"profile_csv\"";
  return "\"" + field + "\"";
}

JobModel prepare_model(const JobSpec& spec, const std::string& profile_csv) {
  JobModel m;
  // Names only: the server never opens a path a client sends.
  const auto names = schedule_names();
  if (std::find(names.begin(), names.end(), spec.schedule) == names.end())
    throw InputError("schedule", fmt::format("\"{}\" is not a schedule name", spec.schedule));
  const ProblemSpec ps = problem_spec(spec);
  const std::string& csv = profile_csv.empty() ? spec.profile_csv : profile_csv;
  if (!csv.empty()) {
    // The same assembly as `perseus optimize`: a per-GPU profile is fitted to chunked /
    // split-backward schedules.
    Problem problem = make_problem(ps, parse_profile_csv(csv, "profile_csv"));
    m.schedule = std::make_shared<const Schedule>(std::move(problem.schedule));
    m.dag = std::make_shared<const Dag>(std::move(problem.dag));
    m.profile = std::make_shared<const Profile>(std::move(problem.profile));
    m.warnings = std::move(problem.unit_warnings);
  } else {
    m.schedule = std::make_shared<const Schedule>(resolve_schedule(ps));
    m.dag = std::make_shared<const Dag>(Dag::build(*m.schedule));
  }
  m.pipe_block_w = spec.p_block_w * m.dag->num_ranks();
  if (m.dag->num_ranks() != spec.pp)
    throw InputError(fmt::format("schedule {} has {} ranks, expected pp = {}", spec.schedule, m.dag->num_ranks(), spec.pp));
  if (m.profile && spec.source != PlanSource::kPlans && spec.source != PlanSource::kZeusPlans)
    check_time_quantum(*m.dag, *m.profile, spec.unit_time_s);
  if (spec.source == PlanSource::kPlans) {
    for (std::size_t i = 0; i < spec.plans.size(); ++i) {
      const json& p = spec.plans[i];
      m.explicit_plans.push_back(plan_frequencies_from_json(p, *m.dag, fmt::format("plans[{}]", i)));
      PlanPoint pt{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
      if (m.profile) pt = evaluate(m, spec, m.explicit_plans.back());
      // The ranges of a measured iteration (POST .../measurements): a plan is a prediction of one.
      auto num = [&](const char* key, double lo, double hi, const char* range, double& out) {
        auto it = p.find(key);
        if (it == p.end() || it->is_null()) return;
        const double v = it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
        if (!(v >= lo && v <= hi))
          throw InputError(fmt::format("field \"plans[{}].{}\" must be a number in {}, got {}", i, key, range,
                                       it->is_number() ? fmt::format("{}", v) : it->dump()));
        out = v;
      };
      num("time_s", 1e-9, limits::kMaxIterationTimeS, "[1e-9, 1e7] s (an iteration takes time)", pt.time_s);
      num("energy_j", 0.0, 1e13, "[0, 1e13] J", pt.energy_j);
      if (!std::isfinite(pt.time_s) || !std::isfinite(pt.energy_j))
        throw InputError(fmt::format("plans[{}]: \"time_s\" and \"energy_j\" are required (or give profile_csv)", i));
      m.points.push_back(pt);
    }
  } else if (spec.source == PlanSource::kZeusPlans) {
    for (std::size_t i = 0; i < spec.zeus_plans.size(); ++i) {
      const ZeusPlan z = parse_zeus_plan(spec.zeus_plans[i], fmt::format("zeus_plans[{}]", i));
      m.explicit_plans.push_back(plan_from_zeus(m, spec, z, i));
      PlanPoint pt{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
      if (m.profile) pt = evaluate(m, spec, m.explicit_plans.back());
      m.points.push_back(pt);
    }
  } else if (spec.source == PlanSource::kProfile && !m.profile) {
    throw InputError("profile_csv is empty");
  }
  return m;
}

std::shared_ptr<const Frontier> solve_model_frontier(const JobModel& model, const JobSpec& spec,
                                                     std::function<bool()> cancelled, bool budgeted) {
  if (!model.profile) throw InputError("the job has no profile to plan from");
  PlannerOptions opt;
  opt.cancelled = std::move(cancelled);
  opt.time_budget_s = budgeted ? spec.planning_budget_s : -1.0;
  opt.p_block_w = spec.p_block_w;
  opt.unit_time_s = spec.unit_time_s;
  return std::make_shared<const Frontier>(solve_frontier(model.dag, *model.profile, opt));
}

std::vector<PlanPoint> frontier_points(const Frontier& frontier) {
  std::vector<PlanPoint> out;
  out.reserve(frontier.size());
  for (const auto& p : frontier.points()) out.push_back({p.time_s, p.energy_j});
  return out;
}

std::vector<int> all_max_freqs(const JobModel& model, const JobSpec& spec) {
  if (!model.profile) throw InputError("the job has no profile");
  return all_max_plan(*model.dag, *model.profile, spec.p_block_w).freq_mhz;
}

std::shared_ptr<const ServedPlan> quick_plan(const JobModel& model, const JobSpec& spec) {
  if (!model.profile) throw InputError("the job has no profile");
  FrequencyPlan p = quick_fastest_plan(*model.dag, *model.profile, spec.p_block_w);
  const PlanPoint pt{p.timeline.time_s, p.total_energy_j()};
  return render_plan(*model.dag, kQuickPlanIndex, pt, std::move(p.freq_mhz));
}

std::string profile_csv_text(const std::vector<ProfileRow>& rows) {
  Profile profile;
  for (const auto& r : rows) profile.add(r.stage, r.kind, OperatingPoint{r.freq_mhz, r.time_s, r.energy_j});
  return format_profile_csv(profile);  // the one profile CSV writer
}

}  // namespace perseus::server
