// Planner bindings: profiles, schedules and the frontier (perseus.optimize), as plain Python
// types (lists, dicts, floats). Heavy work runs without the GIL.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "perseus/baselines.hpp"
#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/frontier.hpp"
#include "perseus/optimize.hpp"
#include "perseus/plan.hpp"
#include "perseus/plan_files.hpp"
#include "perseus/problem.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"
#include "perseus/timeline_overheads.hpp"

namespace perseus::python {

namespace {

InstructionKind kind_arg(const std::string& name) {
  if (auto k = parse_instruction_kind(name)) return *k;
  throw InputError(fmt::format(
      "instruction must be one of \"forward\", \"backward\", \"backward_input\", \"backward_weight\"; got \"{}\"",
      name));
}

/// A stage argument of a Profile accessor: in [0, num_stages), else InputError naming it (a
/// stage the profile does not have is a caller's mistake, not an empty list).
void check_stage_arg(const Profile& p, int stage) {
  if (stage < 0 || stage >= p.num_stages())
    throw InputError("stage", fmt::format("must be in [0, {}) for this profile ({} stage{}), got {}", p.num_stages(),
                                          p.num_stages(), p.num_stages() == 1 ? "" : "s", stage));
}

/// A plan as the dict of plan_NNNNN.json, through the one plan JSON writer (plan_json()).
py::dict plan_dict(const Dag& dag, const FrequencyPlan& plan, std::optional<std::size_t> index) {
  return py::module_::import("json").attr("loads")(plan_json(dag, plan, index).dump());
}

py::dict schedule_dict(const Schedule& s) {
  py::list ranks;
  for (const auto& order : s.order) {
    py::list instrs;
    for (const Computation& c : order) {
      py::dict d;
      d["instruction"] = std::string(to_string(c.kind));
      d["stage"] = c.stage;
      d["microbatch"] = c.microbatch;
      instrs.append(std::move(d));
    }
    ranks.append(std::move(instrs));
  }
  py::dict out;
  out["name"] = s.name;
  out["num_stages"] = s.num_stages;
  out["num_microbatches"] = s.num_microbatches;
  out["stage_rank"] = s.stage_rank;
  out["split_backward"] = s.split_backward;
  out["ranks"] = std::move(ranks);
  return out;
}

/// Which plans optimize() returns: "sampled" (default), "all", "none", or indices.
std::vector<std::size_t> plan_selection(const py::object& plans, std::size_t n, int sample) {
  if (plans.is_none()) return {};
  if (py::isinstance<py::str>(plans)) {
    const auto s = plans.cast<std::string>();
    if (s == "sampled") return sample_plan_indices(n, sample);
    if (s == "all") {
      std::vector<std::size_t> all(n);
      for (std::size_t i = 0; i < n; ++i) all[i] = i;
      return all;
    }
    if (s == "none") return {};
    if (s == "fastest") return n ? std::vector<std::size_t>{n - 1} : std::vector<std::size_t>{};
    throw InputError("plans", fmt::format("must be \"sampled\", \"all\", \"fastest\", \"none\" or a list of plan "
                                          "indices; got {}",
                                          quote_input(s)));
  }
  // Indices count from the slowest plan (0) to the fastest (n - 1). Negative indices are refused,
  // not taken from the end as Python lists would: plan -1 is the server's all-max baseline
  // (docs/http-api.md), and a silent wrap-around would pick a plan nobody asked for.
  std::vector<std::size_t> out;
  // Bytes iterate as ints (b"8" was plan 56) and a dict as its keys: neither is a list of indices.
  if (!py::isinstance<py::iterable>(plans) || py::isinstance<py::bytes>(plans) || py::isinstance<py::bytearray>(plans) ||
      py::isinstance<py::dict>(plans)) {
    throw py::type_error(fmt::format(
        "plans must be \"sampled\", \"all\", \"fastest\", \"none\" or a list of int plan indices; got {}",
        py::repr(plans).cast<std::string>().substr(0, 64)));
  }
  for (const auto& item : plans) {
    const std::string text = py::repr(item).cast<std::string>().substr(0, 64);
    // A Python int or a numpy integer (anything with __index__), never a bool or a float.
    py::object index;
    if (!is_bool_like(item.ptr()) && !PyFloat_Check(item.ptr())) {
      index = py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr()));
      if (!index) PyErr_Clear();
    }
    if (!index) {
      throw py::type_error(fmt::format(
          "plans must be \"sampled\", \"all\", \"fastest\", \"none\" or a list of int plan indices; got {}", text));
    }
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow < 0 || (overflow == 0 && i < 0)) {
      throw InputError("plans", fmt::format("indices must be >= 0 (0 = the slowest plan, {} = the fastest; plans="
                                            "\"fastest\" for the fastest), got {}",
                                            n == 0 ? 0 : n - 1, text));
    }
    if (overflow > 0 || static_cast<unsigned long long>(i) >= n)
      throw py::index_error(fmt::format("plan index {} out of range: the frontier has {} plans (0..{})", text, n,
                                        n == 0 ? 0 : n - 1));
    out.push_back(static_cast<std::size_t>(i));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void check_finite(double v, const char* name, bool allow_zero) {
  if (!std::isfinite(v) || v < 0 || (!allow_zero && v == 0))
    throw InputError(name, fmt::format("must be a finite number {} 0, got {}", allow_zero ? ">=" : ">", v));
}

}  // namespace

void bind_planner(py::module_& m) {
  py::class_<Profile, std::shared_ptr<Profile>>(m, "Profile", R"doc(
Time/energy profile: for each (stage, instruction) the measured operating points
(frequency MHz, time s, energy J of ONE microbatch on ONE GPU). Source: Perseus (SOSP'24) §4.1.
Create with perseus.load_profile() or perseus.parse_profile().)doc")
      // Profile.__new__(Profile) would give an object whose C++ profile was never built (every
      // method then read garbage or crashed): refused. Instances from load_profile() /
      // parse_profile() are made by pybind11 directly, not through __new__.
      .def_static(
          "__new__",
          [](const py::args&, const py::kwargs&) -> py::object {
            throw py::type_error("perseus.Profile cannot be created directly; use perseus.load_profile(path) or "
                                 "perseus.parse_profile(text)");
          },
          "Refused: use perseus.load_profile() or perseus.parse_profile().")
      .def_property_readonly("num_stages", &Profile::num_stages, "Number of stages (max stage id + 1).")
      .def_readonly("source", &Profile::source, "Where the profile came from (file path or a description).")
      .def("has",
           [](const Profile& p, Strict<int> stage, const std::string& instr) { return p.has(stage.value, kind_arg(instr)); },
           py::arg("stage"), py::arg("instruction"),
           "True when the profile has a point for (stage, instruction). Raises InputError for an unknown "
           "instruction name.")
      .def(
          "points",
          [](const Profile& p, Strict<int> stage_arg, const std::string& instr) {
            const int stage = stage_arg.value;  // an int, never a bool
            check_stage_arg(p, stage);
            py::list out;
            for (const auto& pt : p.points(stage, kind_arg(instr))) {
              py::dict d;
              d["freq_mhz"] = pt.freq_mhz;
              d["time_s"] = pt.time_s;
              d["energy_j"] = pt.energy_j;
              out.append(std::move(d));
            }
            return out;
          },
          py::arg("stage"), py::arg("instruction"),
          "Operating points of (stage, instruction) as [{'freq_mhz', 'time_s', 'energy_j'}], highest "
          "frequency first; [] when the stage has no such rows. Raises InputError for an unknown instruction "
          "name or a stage outside [0, num_stages).")
      .def(
          "max_freq_mhz",
          [](const Profile& p, std::optional<Strict<int>> stage_arg,
             std::optional<std::string> instr) -> std::optional<int> {
            const std::optional<int> stage = strict_value(stage_arg);
            if (!stage && !instr) return p.max_freq_mhz();
            if (!stage || !instr) throw InputError("max_freq_mhz: give both stage and instruction, or neither");
            check_stage_arg(p, *stage);
            const InstructionKind kind = kind_arg(*instr);
            if (!p.has(*stage, kind)) return std::nullopt;  // no such rows: unknown, not 0 MHz
            return p.max_freq_mhz(*stage, kind);
          },
          py::arg("stage") = py::none(), py::arg("instruction") = py::none(),
          "Highest frequency, MHz: of (stage, instruction) (None when the stage has no such rows), or of the "
          "whole profile. Raises InputError for a stage outside [0, num_stages).")
      .def(
          "rows",
          [](const Profile& p) {
            py::list out;
            for (int s = 0; s < p.num_stages(); ++s)
              for (int k = 0; k < kNumInstructionKinds; ++k)
                for (const auto& pt : p.points(s, static_cast<InstructionKind>(k))) {
                  py::dict d;
                  d["stage"] = s;
                  d["instruction"] = std::string(to_string(static_cast<InstructionKind>(k)));
                  d["freq_mhz"] = pt.freq_mhz;
                  d["time_s"] = pt.time_s;
                  d["energy_j"] = pt.energy_j;
                  out.append(std::move(d));
                }
            return out;
          },
          "All points as dicts {'stage', 'instruction', 'freq_mhz', 'time_s', 'energy_j'}, by stage "
          "ascending, then instruction (forward, backward, backward_input, backward_weight), then "
          "frequency, highest first.")
      .def(
          "write_csv", [](const Profile& p, const py::object& path) { write_profile_csv(p, path_arg(path, "path")); },
          py::arg("path"),
          "Writes the profile CSV (stage,instruction,frequency,time,energy). Raises InputError when the "
          "file cannot be written.")
      .def("__repr__", [](const Profile& p) {
        return fmt::format("<perseus.Profile {} stages from {}>", p.num_stages(), p.source);
      });
  own_new_only(m.attr("Profile"), false);  // pybind11_object.__new__(Profile) too

  m.def(
      "load_profile",
      [](const py::object& path, std::optional<Strict<int>> expected_stages) {
        const std::string p = path_arg(path, "path");
        const std::optional<int> stages = strict_value(expected_stages);
        GilRelease release;
        return std::make_shared<Profile>(load_profile_csv(p, stages));
      },
      py::arg("path"), py::arg("expected_stages") = py::none(), R"doc(
Reads a profile CSV with columns stage,instruction,frequency,time,energy (any order; extra
columns ignored). Units: frequency MHz, time s, energy J per microbatch on one GPU.
expected_stages: when given, the profile must have exactly that many stages.
Raises perseus.InputError naming file, line and field (unreadable file, missing column, bad
number, time <= 0, energy < 0, unknown instruction, duplicate rows, missing stages).)doc");

  m.def(
      "parse_profile",
      [](const py::object& text_obj, const py::object& source_obj, std::optional<Strict<int>> expected_stages) {
        const std::string text = text_arg(text_obj, "text"), source_name = text_arg(source_obj, "source_name");
        const std::optional<int> stages = strict_value(expected_stages);
        GilRelease release;
        return std::make_shared<Profile>(parse_profile_csv(text, source_name, stages));
      },
      py::arg("text"), py::arg("source_name") = "<string>", py::arg("expected_stages") = py::none(),
      "Same as load_profile() for CSV text in memory; source_name appears in error messages.");

  m.def(
      "profile_unit_warnings",
      [](const Profile& profile, Real p2p_power_w) {
        check_finite(p2p_power_w.value, "p_block_w", true);
        return profile_unit_warnings(profile, p2p_power_w.value);
      },
      py::arg("profile"), py::arg("p2p_power_w"), R"doc(
Warnings about a profile's units, as `perseus optimize` prints them: operating points whose
energy/time is outside 1..3000 W per GPU (time in ms? energy in kJ?), at most 5 then a count,
and P_block (p2p_power_w, W) above the lowest computation power (P_block in mW?). A list of
str, empty when plausible. optimize() raises the same as UserWarning (strict=True: InputError).
Raises perseus.InputError for a negative or non-finite p2p_power_w.)doc");

  m.def("schedule_names", &schedule_names, "Names accepted by schedule() and optimize(schedule=...).");

  m.def(
      "schedule",
      [](const std::string& name, Strict<int> stages, Strict<int> microbatches, Strict<int> chunks) {
        return schedule_dict(make_schedule(name, stages.value, microbatches.value, chunks.value));
      },
      py::arg("name"), py::arg("stages"), py::arg("microbatches"), py::arg("chunks") = 1, R"doc(
The per-GPU execution order of a pipeline schedule (e.g. "1f1b": DeepSpeed/Megatron
synchronous 1F1B). stages: GPUs in the pipeline; chunks: stages per GPU (interleaved).
Sources: "1f1b" PipeDream-Flush (Narayanan et al., PipeDream-2BW, 2021); "gpipe" Huang et al.
(NeurIPS'19); "interleaved-1f1b" Megatron-LM (Narayanan et al., SC'21); "zb-h1" Zero Bubble
Pipeline Parallelism (Qi et al., ICLR'24).
Returns {'name', 'num_stages', 'num_microbatches', 'stage_rank': [rank per stage],
'split_backward', 'ranks': [[{'instruction', 'stage', 'microbatch'}, ...] per rank]}.
Raises perseus.InputError on an unknown name, sizes < 1, chunks != 1 for "1f1b", "gpipe" or
"zb-h1", "interleaved-1f1b" microbatches not a multiple of stages, or more than 2^20
(stage, microbatch) pairs (stages x chunks x microbatches).)doc");

  m.def(
      "optimize",
      [](const py::object& profile_arg, std::optional<Strict<int>> stages_arg,
         std::optional<Strict<int>> microbatches_arg, const py::object& schedule_arg,
         std::optional<Strict<int>> chunks_arg, std::optional<Real> p2p_power_arg, std::optional<Real> backward_input_fraction_arg,
         Real unit_time_arg, bool reclaim_slack, const py::object& plans, Strict<int> sample_arg,
         Strict<int> threads_arg, std::optional<Real> time_budget_arg,
         std::optional<Strict<std::int64_t>> max_points_arg, Real op_overhead_arg, Real p2p_latency_arg,
         Real polish_arg, Strict<int> polish_solves_arg, Strict<int> max_lp_solves_arg, const std::string& planner,
         const std::string& bound,
         bool strict) {
        auto opt_value = [](const auto& a) { return a ? std::optional(a->value) : std::nullopt; };
        // Real: a number but never a bool (unit_time_s=True would silently be 1 s).
        const double backward_input_fraction = backward_input_fraction_arg ? backward_input_fraction_arg->value : 0.5,
                     unit_time_s = unit_time_arg.value,
                     op_overhead_s = op_overhead_arg.value, p2p_latency_s = p2p_latency_arg.value,
                     polish_s = polish_arg.value;
        const std::optional<double> time_budget_s = opt_value(time_budget_arg);
        const std::optional<int> stages = opt_value(stages_arg), microbatches = opt_value(microbatches_arg),
                                 chunks = opt_value(chunks_arg);
        const std::optional<std::int64_t> max_points = opt_value(max_points_arg);
        const int sample = sample_arg.value, max_lp_solves = max_lp_solves_arg.value,
                  polish_solves = polish_solves_arg.value;
        const int threads = threads_arg.value;  // checked by optimize() (OptimizeConfig::threads)
        if (!p2p_power_arg) {
          throw InputError("p2p_power_w", "is required: the power of a GPU blocked on P2P communication, W (P_block, "
                                          "as `perseus optimize --p2p-power`); a silent 0 W changes every plan");
        }
        // None means "not given" (from a schedule file); 0 is a value, and a wrong one.
        if (stages && *stages < 1) throw InputError("num_ranks", fmt::format("must be >= 1, got {}", *stages));
        if (microbatches && *microbatches < 1) {
          throw InputError("microbatches", fmt::format("must be >= 1, got {}", *microbatches));
        }
        if (chunks && *chunks < 1) throw InputError("chunks", fmt::format("must be >= 1, got {}", *chunks));
        const double p2p_power_w = p2p_power_arg->value;
        check_finite(p2p_power_w, "p_block_w", true);
        check_finite(unit_time_s, "unit_time_s", false);
        // The planner's ranges, named by keyword here (the library's messages name no field).
        if (!(unit_time_s >= 1e-7 && unit_time_s <= 10)) {
          throw InputError("unit_time_s", fmt::format("must be in [1e-7, 10] s, got {}", unit_time_s));
        }
        if (!(backward_input_fraction > 0 && backward_input_fraction < 1)) {
          throw InputError("backward_input_fraction", fmt::format("must be in (0, 1), got {}", backward_input_fraction));
        }
        if (time_budget_s && !(*time_budget_s >= 0 && *time_budget_s <= 1e9)) {
          throw InputError("time_budget_s", fmt::format("must be in [0, 1e9] s or None, got {}", *time_budget_s));
        }
        if (max_points && (*max_points < 1 || *max_points > 1'000'000'000)) {
          throw InputError("max_points", fmt::format("must be in [1, 1e9] or None, got {}", *max_points));
        }
        const std::optional<PlannerMode> planner_mode = parse_planner_mode(planner);
        if (!planner_mode) {
          throw InputError("planner", fmt::format("must be 'certified' or 'graph-cut', got '{}'", planner));
        }
        const std::optional<BoundMethod> bound_method = parse_bound_method(bound);
        if (!bound_method) {
          throw InputError("bound", fmt::format("must be 'auto', 'lp' or 'hull-walk', got '{}'", bound));
        }
        if (max_lp_solves < 1 || max_lp_solves > 100000) {
          throw InputError("max_lp_solves", fmt::format("must be in [1, 100000], got {}", max_lp_solves));
        }
        if (!(polish_s >= 0 && polish_s <= 86400)) {
          throw InputError("polish_s", fmt::format("must be in [0, 86400] s (0: none), got {}", polish_s));
        }
        check_polish_solves(polish_solves);
        // As `perseus optimize`: keywords that cannot act on a graph-cut solve are accepted but said so.
        if (*planner_mode == PlannerMode::kGraphCut) {
          for (const auto& [set, name] : {std::pair{max_lp_solves != PlannerOptions{}.max_lp_solves, "max_lp_solves"},
                                          {polish_s > 0, "polish_s"}, {polish_solves > 0, "polish_solves"},
                                          {*bound_method != BoundMethod::kAuto, "bound"}}) {
            if (set && PyErr_WarnEx(PyExc_UserWarning,
                                    fmt::format("{} has no effect with planner='graph-cut' (it computes no bound)", name)
                                        .c_str(),
                                    kWarnStackLevel) != 0) {
              throw py::error_already_set();  // warnings turned into errors (-W error)
            }
          }
        }
        // The one problem assembly (perseus/problem.hpp): the same schedules (names or a CSV
        // file) and profile fitting as `perseus optimize` and the server.
        ProblemSpec spec;
        spec.schedule = path_arg(schedule_arg, "schedule");  // a name or a schedule CSV path
        spec.num_ranks = stages.value_or(0);
        spec.microbatches = microbatches.value_or(0);
        spec.chunks = chunks.value_or(1);
        spec.chunks_given = chunks.has_value();  // chunks=1 with a 2-chunk schedule file is refused
        spec.backward_input_fraction = backward_input_fraction;
        spec.p_block_w = p2p_power_w;
        spec.overheads = {p2p_latency_s, op_overhead_s};
        check_timeline_overheads(spec.overheads);  // InputError naming the keyword, before any file is read
        std::optional<Problem> problem;
        if (py::isinstance<Profile>(profile_arg)) {
          const auto profile = profile_arg.cast<std::shared_ptr<Profile>>();
          GilRelease release;
          problem.emplace(make_problem(spec, *profile));
        } else {
          if (profile_arg.is_none()) throw py::type_error("profile must be a perseus.Profile or a CSV path, got None");
          const std::string path = path_arg(profile_arg, "profile");
          GilRelease release;
          problem.emplace(load_problem(spec, path));
        }
        // Implausible units (the CLI's warnings, --strict): before the solve, where they matter.
        if (strict && !problem->unit_warnings.empty()) {
          std::string text;
          for (const auto& w : problem->unit_warnings) text += w + "\n";
          throw InputError("profile", text + "(strict=True: implausible units are errors)");
        }
        for (const auto& w : problem->unit_warnings)
          if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), kWarnStackLevel) != 0) throw py::error_already_set();
        // As `perseus optimize --backward-input-fraction`: a value that cannot act is said so.
        if (backward_input_fraction_arg &&
            std::none_of(problem->approximations.begin(), problem->approximations.end(),
                         [](const std::string& a) { return a.find("backward split") != std::string::npos; }) &&
            PyErr_WarnEx(PyExc_UserWarning,
                         "backward_input_fraction had no effect: the schedule does not split the backward into I and "
                         "W, or the profile has backward_input/backward_weight rows",
                         kWarnStackLevel) != 0) {
          throw py::error_already_set();
        }
        // The one optimize job (perseus/optimize.hpp): options check, solve, all-max baseline
        // and summary as `perseus optimize`; the strict rule and unit warnings ran above.
        OptimizeConfig cfg;
        cfg.unit_time_s = unit_time_s;
        cfg.reclaim_slack = reclaim_slack;
        cfg.planner_mode = *planner_mode;
        cfg.bound_method = *bound_method;
        cfg.threads = threads;
        cfg.time_budget_s = time_budget_s.value_or(-1.0);
        cfg.max_points = max_points.value_or(0);
        cfg.polish_s = polish_s;
        cfg.polish_solves = polish_solves;
        cfg.max_lp_solves = max_lp_solves;
        cfg.sample = sample;
        bool interrupted = false;  // a Python signal handler raised during the solve
        cfg.cancelled = python_signal_poll(interrupted);  // Ctrl-C: re-raised below
        const std::size_t num_unit_warnings = problem->unit_warnings.size();
        std::optional<OptimizeResult> res;
        {
          GilRelease release;
          try {
            res.emplace(optimize(std::move(*problem), cfg));
          } catch (const PlanningCancelled&) {
            if (!interrupted) throw;
          }
        }
        if (interrupted) throw py::error_already_set();  // the handler's exception (GIL held again)
        const Dag& dag = res->problem.dag;
        const Frontier& front = res->frontier;
        const OptimizeSummary& sum = res->summary;
        const auto& pts = front.points();
        const auto indices = plan_selection(plans, pts.size(), sample);
        std::vector<std::optional<FrequencyPlan>> plan_at(indices.size());  // by position in `indices`
        {
          GilRelease release;
          // `indices` is sorted and distinct: each call fills its own slot, so threads need no lock.
          const int plan_threads = resolved_threads(threads);  // as optimize() resolved it for the solve
          front.for_each_plan(
              indices,
              [&](std::size_t i, const FrequencyPlan& p) {
                plan_at[std::lower_bound(indices.begin(), indices.end(), i) - indices.begin()] = p;
              },
              plan_threads);
        }
        py::list frontier;
        for (std::size_t i = 0; i < pts.size(); ++i) {
          py::dict d;
          d["plan"] = i;
          d["time_s"] = pts[i].time_s;
          d["energy_j"] = pts[i].energy_j;
          d["energy_before_reclaim_j"] = pts[i].energy_before_reclaim_j;
          d["step"] = pts[i].step;
          d["lower_bound_j"] = pts[i].lower_bound_j;
          frontier.append(std::move(d));
        }
        py::list plan_list;
        for (std::size_t k = 0; k < indices.size(); ++k) plan_list.append(plan_dict(dag, *plan_at[k], indices[k]));
        // None without a bound (graph-cut planner, or stopped before the bound stage), as summary.json's null.
        const auto bound_or_none = [&](double v) { return sum.has_lower_bound ? py::object(py::float_(v)) : py::object(py::none()); };
        py::dict summary;
        summary["t_min_s"] = sum.t_min_s;
        summary["energy_at_t_min_j"] = sum.energy_at_t_min_j;
        summary["t_max_s"] = sum.t_max_s;
        summary["energy_at_t_max_j"] = sum.energy_at_t_max_j;
        summary["allmax_time_s"] = sum.allmax_time_s;
        summary["allmax_energy_j"] = sum.allmax_energy_j;
        summary["intrinsic_saving_pct"] = sum.intrinsic_saving_pct;
        summary["saving_at_allmax_time_pct"] = sum.saving_at_allmax_time_pct;
        summary["reclaimed_energy_j"] = sum.reclaimed_energy_j;
        summary["num_plans"] = sum.num_plans;
        summary["num_steps"] = sum.num_steps;
        summary["solve_time_s"] = sum.solve_time_s;
        summary["num_ops"] = dag.num_ops();
        summary["lower_bound_at_t_min_j"] = bound_or_none(sum.lower_bound_at_t_min_j);
        summary["max_optimality_gap_pct"] = bound_or_none(sum.max_optimality_gap_pct);
        summary["max_deadline_gap_pct"] = bound_or_none(sum.max_deadline_gap_pct);
        summary["num_lp_solves"] = sum.num_lp_solves;
        summary["num_hull_walk_steps"] = front.num_hull_walk_steps;
        // As summary.json: the method that ran, None for the graph-cut planner.
        summary["bound_method"] = sum.bound_method == BoundMethod::kAuto ? py::object(py::none())
                                                                          : py::object(py::str(to_string(sum.bound_method)));
        summary["partial"] = sum.partial;
        summary["partial_reason"] = sum.partial_reason;
        summary["partial_detail"] = sum.partial_detail;
        summary["op_overhead_s"] = op_overhead_s;
        summary["p2p_latency_s"] = p2p_latency_s;
        summary["polish_s"] = polish_s;
        summary["polish_solves"] = polish_solves;
        summary["num_polished_points"] = front.num_polished_points;
        summary["max_lp_solves"] = max_lp_solves;
        py::dict out;
        out["frontier"] = std::move(frontier);
        out["plans"] = std::move(plan_list);
        out["all_max"] = plan_dict(dag, res->all_max, std::nullopt);
        out["summary"] = summary;
        out["schedule"] = schedule_dict(res->problem.schedule);
        py::list approximations;
        for (const auto& a : sum.approximations) approximations.append(a);
        summary["approximations"] = std::move(approximations);
        py::list warnings;  // also raised as UserWarning, where a notebook shows them
        for (std::size_t k = 0; k < sum.warnings.size(); ++k) {
          warnings.append(sum.warnings[k]);
          // The unit warnings were raised before the solve; the time-unit ones (unit_time_warnings()) now.
          if (k >= num_unit_warnings &&
              PyErr_WarnEx(PyExc_UserWarning, (sum.warnings[k] + " (unit_time_s)").c_str(), kWarnStackLevel) != 0)
            throw py::error_already_set();
        }
        summary["warnings"] = std::move(warnings);
        return out;
      },
      py::arg("profile"), py::arg("stages") = py::none(), py::arg("microbatches") = py::none(), py::kw_only(),
      py::arg("schedule") = "1f1b", py::arg("chunks") = py::none(), py::arg("p2p_power_w") = py::none(),
      py::arg("backward_input_fraction") = py::none(), py::arg("unit_time_s") = 1e-3,
      py::arg("reclaim_slack").noconvert() = true, py::arg("plans") = "sampled", py::arg("sample") = 0, py::arg("threads") = 1,
      py::arg("time_budget_s") = py::none(), py::arg("max_points") = py::none(), py::arg("op_overhead_s") = 0.0,
      py::arg("p2p_latency_s") = 0.0, py::arg("polish_s") = 0.0, py::arg("polish_solves") = 0, py::arg("max_lp_solves") = PlannerOptions{}.max_lp_solves,
      py::arg("planner") = "certified", py::arg("bound") = "auto", py::arg("strict").noconvert() = false,
      R"doc(
Computes the iteration time-energy Pareto frontier of one pipeline (Perseus SOSP'24 §4.2).

profile: a perseus.Profile or a CSV path: one stage per schedule stage (stages x chunks), or
one per GPU (then split evenly over each GPU's chunks); a split-backward schedule (zb-h1) on a
profile without backward_input/backward_weight rows gets its backward split by
backward_input_fraction (default None: 0.5; both approximations are listed in
summary['approximations']; a value given where no backward is split is a UserWarning).
stages: GPUs in the pipeline; microbatches: per iteration (both >= 1; required for a schedule
name; for a schedule file None takes the file's, a value must match it); schedule: a
schedule_names() entry or the path of a schedule CSV (torch.distributed.pipelining action
list, docs/schedules.md), exactly as `perseus optimize --schedule`. chunks: stages per GPU
(>= 1; None: 1 for a schedule name, the file's for a schedule file; a value must match the file).
p2p_power_w: P_block, power of a GPU blocked on communication, W (>= 0; required, as the CLI's
--p2p-power: InputError when missing).
unit_time_s: planner time quantum, s (1e-7..10). reclaim_slack: lower the clocks of ops with slack
(Perseus §4.2).
plans: which frequency plans to return: "sampled" (every `sample`-th from the slowest plus the
fastest; sample=0 means at most 100; a negative sample is an InputError), "all", "fastest",
"none" or a list of indices 0..N-1 from the slowest (returned sorted, without repeats; a
negative index is an InputError, not counted from the end; >= N an IndexError). threads: threads of the solve (the LP stage or hull walk beside the graph cut) and of
evaluating plans (1..1024; 0 = one per hardware thread); the result does not depend on it.
time_budget_s: stop the solve after this many seconds (0..1e9, None: no budget); max_points: stop
once the frontier has this many plans (1..1e9, None: no limit). A bounded solve returns the
frontier found so far with summary['partial'] True, summary['partial_reason'] 'time_budget' or
'max_points' and summary['partial_detail'] saying how far it got (InputError on bad values).
op_overhead_s: per-computation overhead, s (host dispatch, clock setting), added to every
computation's time (its GPU waits at p2p_power_w meanwhile); p2p_latency_s: blocking P2P send
time, s, added to every computation that sends to another GPU. Both finite, in [0, 3600] s
(InputError naming the keyword otherwise), default 0 = the paper's computation-only model;
exactly `perseus optimize --op-overhead/--p2p-latency` (TimelineOverheads, docs/validation.md:
calibrate op_overhead_s with `perseus validate` on all-max runs). summary['op_overhead_s'] and
summary['p2p_latency_s'] echo them.
polish_s: seconds of polish with COIN-OR CBC on the frontier's plans furthest from the lower
bound, at the deadlines between them and at the all-max time (whole-DAG MILPs on pipelines of up
to 512 computations, then windows of computations re-solved exactly with the other clocks held;
a plan is replaced only when it is better at its deadline and not slower); 0..86400,
default 0 (none), as `perseus optimize --polish` (InputError otherwise). summary['polish_s']
echoes it, summary['num_polished_points'] counts the plans it improved.
polish_solves: the polish's budget as a count of CBC solves instead of (or besides) seconds,
0..1000000, default 0 (none), as `perseus optimize --polish-solves`: each window solve is then
limited by branch-and-bound nodes, so the plans are the same on any machine and under any load
(unless polish_s runs out first). summary['polish_solves'] echoes it.
max_lp_solves: certified planner: LP solves at most (the LP bound's, or the refinement after the hull
walk up to 2,048 computations), 1..100000 (InputError otherwise), default 400 (the planner also caps them at max(40, 320000 /
computations)); fewer is faster with a slightly looser frontier and bound, as `perseus optimize
--max-lp-solves` (docs/planner2.md). summary['max_lp_solves'] echoes it, summary['num_lp_solves'] counts them.
planner: 'certified' (default: graph cut, certified lower bound, LP-rounded plans into the straggler
regime) or 'graph-cut' (the paper's algorithm only: no bound), as `perseus optimize --planner`.
bound: 'auto' (default: 'hull-walk' from 256 computations; below, 'lp', adding the hull walk where the
LP stage leaves a gap above 0.5 %), 'lp' or 'hull-walk', how the certified planner gets its bound, as
`perseus optimize --bound`; summary['bound_method'] says which ran. Other names: InputError.
Implausible profile units (an operating point's energy/time outside 1..3000 W; P_block above a
computation's power, e.g. given in mW) are raised as UserWarning before the solve and listed in
summary['warnings'] (perseus.profile_unit_warnings); strict=True makes them an InputError (field
'profile'), as `perseus optimize --strict`.

Returns a dict of plain Python types:
  'frontier': [{'plan', 'time_s', 'energy_j', 'energy_before_reclaim_j', 'step', 'lower_bound_j'}], slowest
              first (time strictly decreasing; energy at the point's own time rises toward T_min except in
              the straggler regime, where a slower plan may draw more in total yet less at any deadline
              it meets: the frontier is Pareto in (T, E - P_block x GPUs x T), docs/planner2.md);
              'step': the graph-cut step that produced the plan (0 = the slowest), -1 for the all-max
              plan and the certified planner's LP/hull-walk/polish plans; 'energy_before_reclaim_j':
              energy_j before slack reclamation; 'lower_bound_j': certified lower bound, 0.0 without one;
  'plans':    [{'plan', 'time_s', 'energy_j', 'compute_energy_j', 'blocking_energy_j',
               'ranks': [{'rank', 'instructions': [{'instruction', 'stage', 'microbatch',
               'frequency_mhz', 'start_s', 'end_s'}]}]}] (the plan_NNNNN.json format);
  'all_max':  the all-max-frequency baseline plan (same format, 'plan': None);
  'summary':  {'t_min_s', 'energy_at_t_min_j', 't_max_s', 'energy_at_t_max_j', 'allmax_time_s',
               'allmax_energy_j', 'intrinsic_saving_pct', 'saving_at_allmax_time_pct', 'reclaimed_energy_j',
               'num_plans', 'num_steps', 'solve_time_s', 'num_ops', 'lower_bound_at_t_min_j',
               'max_optimality_gap_pct', 'max_deadline_gap_pct' (these three None without a bound:
               planner='graph-cut' or a solve stopped before the bound stage), 'num_lp_solves',
               'num_hull_walk_steps', 'bound_method' ('lp' or 'hull-walk': by DAG size, docs/planner2.md; 'lp' also
               when auto added the hull walk below 256 computations, then num_hull_walk_steps > 0;
               None with planner='graph-cut' or a solve stopped before the bound stage),
               'partial', 'partial_reason', 'partial_detail', 'op_overhead_s', 'p2p_latency_s', 'polish_s',
               'polish_solves', 'num_polished_points', 'max_lp_solves', 'approximations', 'warnings'};
  'schedule': as returned by schedule().
Times in s, energies in J (one pipeline, one iteration), frequencies in MHz.
Raises perseus.InputError for a bad profile, sizes (0 included), schedule name or option value,
or a negative plan index; IndexError for a plan index past the frontier; TypeError for a plan
index that is not an int; KeyboardInterrupt on Ctrl-C during the solve.)doc");
}

}  // namespace perseus::python
