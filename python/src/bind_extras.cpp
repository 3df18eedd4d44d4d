// Optional library parts, bound when the C++ library has them: the straggler emulation
// (perseus/emulate.hpp) and the SVG/HTML renderers (perseus/render.hpp).
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "perseus/dag.hpp"
#include "perseus/error.hpp"
#include "perseus/json_input.hpp"
#include "perseus/plan.hpp"
#include "perseus/plan_files.hpp"
#include "perseus/problem.hpp"
#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"
#ifdef PERSEUS_PY_HAVE_EMULATE
#include "perseus/emulate.hpp"
#endif
#ifdef PERSEUS_PY_HAVE_RENDER
#include "perseus/render.hpp"
#endif

namespace perseus::python {

namespace {

#ifdef PERSEUS_PY_HAVE_RENDER
/// The place ("ranks[0].instructions[3].frequency_mhz", below `path`) and value of the first
/// float in `obj` (dicts, lists and tuples, at most 8 levels) that is NaN or infinite; nullopt
/// when there is none.
std::optional<std::pair<std::string, double>> non_finite_at(const py::handle& obj, const std::string& path,
                                                            int depth = 0) {
  if (PyFloat_Check(obj.ptr())) {
    const double v = PyFloat_AsDouble(obj.ptr());
    return std::isfinite(v) ? std::nullopt : std::optional(std::pair{path, v});
  }
  if (depth >= 8) return std::nullopt;
  if (py::isinstance<py::dict>(obj)) {
    for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(obj)) {
      const std::string name = PyUnicode_Check(key.ptr()) && PyUnicode_AsUTF8(key.ptr()) != nullptr
                                   ? std::string(PyUnicode_AsUTF8(key.ptr()))
                                   : "?";
      PyErr_Clear();  // a key that is not UTF-8 text: named "?"
      if (auto r = non_finite_at(value, path.empty() ? name : path + "." + name, depth + 1)) return r;
    }
  } else if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    std::size_t i = 0;
    for (const auto& item : obj) {
      if (auto r = non_finite_at(item, fmt::format("{}[{}]", path, i++), depth + 1)) return r;
    }
  }
  return std::nullopt;
}

/// Rebuilds (DAG, evaluated plan) from a plan dict as optimize() returns it, through the
/// one plan JSON reader (plan_frequencies_from_json()) and the one problem assembly.
std::pair<Dag, FrequencyPlan> plan_from_dict(const Profile& profile, const py::dict& plan, const std::string& schedule,
                                              int microbatches, int chunks, double p2p_power_w) {
  if (!plan.contains("ranks")) throw InputError("plan: missing field \"ranks\" (expected a plan dict from optimize())");
  if (microbatches < 1) throw InputError("microbatches", fmt::format("must be >= 1, got {}", microbatches));
  // json.dumps would write NaN/Infinity, which the JSON reader refuses as malformed JSON: a
  // non-finite number is named by its place in the dict instead.
  if (const auto bad = non_finite_at(plan, ""))
    throw InputError("plan", fmt::format("has a non-finite number at {}: {} (expected finite numbers)", bad->first,
                                         bad->second));
  const nlohmann::json j =
      parse_json_text(py::module_::import("json").attr("dumps")(plan).cast<std::string>(), "plan");
  if (!j["ranks"].is_array() || j["ranks"].empty())
    throw InputError("plan", "\"ranks\" must be a non-empty list (one entry per GPU, as optimize()['plans'] gives)");
  ProblemSpec spec;
  spec.schedule = schedule;
  spec.num_ranks = static_cast<int>(j["ranks"].size());
  spec.microbatches = microbatches;
  spec.chunks = chunks;
  spec.p_block_w = p2p_power_w;
  Problem problem = make_problem(spec, profile);
  std::vector<int> freq = plan_frequencies_from_json(j, problem.dag, "plan");
  FrequencyPlan fp = evaluate_plan(problem.dag, problem.profile, std::move(freq), p2p_power_w);
  return {std::move(problem.dag), std::move(fp)};
}

/// Points from a list of dicts with 'time_s' and 'energy_j' (numbers) and an optional label.
/// `what` names the keyword in errors: TypeError for a wrong type, InputError for a missing key.
/// `single`: `items` wraps one dict the caller gave (all_max), named without an index.
std::vector<PlotPoint> plot_points(const py::object& items, const char* label_key, const char* what,
                                   bool single = false) {
  std::vector<PlotPoint> out;
  if (items.is_none()) return out;
  if (!py::isinstance<py::iterable>(items) || py::isinstance<py::str>(items) || py::isinstance<py::dict>(items))
    throw py::type_error(fmt::format("{} must be a list of dicts with 'time_s' and 'energy_j'", what));
  std::size_t i = 0;
  for (const auto& it : items) {
    const std::string at = single ? std::string(what) : fmt::format("{}[{}]", what, i);
    if (!py::isinstance<py::dict>(it))
      throw py::type_error(fmt::format("{} must be a dict with 'time_s' and 'energy_j', got {}", at,
                                       py::repr(it).cast<std::string>().substr(0, 64)));
    auto d = py::reinterpret_borrow<py::dict>(it);
    PlotPoint p;
    p.label = d.contains(label_key) && !d[label_key].is_none() ? py::str(d[label_key]).cast<std::string>() : "";
    auto number = [&](const char* key) {
      if (!d.contains(key))
        throw InputError(what, single ? fmt::format("has no key '{}' (expected a dict with 'time_s' and 'energy_j')", key)
                                      : fmt::format("element {} has no key '{}' (expected dicts with 'time_s' and "
                                                    "'energy_j')", i, key));
      const py::object v = d[key];  // owned: a handle to the accessor's result dangled (dict subclasses)
      if (PyBool_Check(v.ptr()) || !PyNumber_Check(v.ptr()) || PyUnicode_Check(v.ptr()))
        throw py::type_error(fmt::format("{}['{}'] must be a number, got {}", at, key,
                                         py::repr(v).cast<std::string>().substr(0, 64)));
      py::object f = py::reinterpret_steal<py::object>(PyNumber_Float(v.ptr()));
      if (!f) throw py::error_already_set();
      return PyFloat_AsDouble(f.ptr());
    };
    p.time_s = number("time_s");
    p.energy_j = number("energy_j");
    out.push_back(std::move(p));
    ++i;
  }
  return out;
}
#endif

}  // namespace

void bind_extras(py::module_& m) {
#ifdef PERSEUS_PY_HAVE_EMULATE
  m.attr("HAVE_EMULATE") = true;
  m.def(
      "emulate",
      [](const py::object& profile, Strict<int> stages, Strict<int> microbatches, std::vector<Real> slowdowns,
         Strict<int> pipelines, Strict<int> global_batch, std::optional<Real> p2p_power_w, Strict<int> tp_degree,
         Real time_scale, Real unit_time_s) {
        if (!p2p_power_w) {  // as perseus.optimize and `perseus emulate --p2p-power` (required there)
          throw InputError("p2p_power_w", "is required: the power of a GPU blocked on P2P communication, W (P_block, "
                                          "as `perseus emulate --p2p-power`); a silent 0 W changes every plan");
        }
        EmulationConfig cfg;
        if (py::isinstance<Profile>(profile)) {  // a perseus.Profile, as optimize() takes
          cfg.profile = *profile.cast<std::shared_ptr<Profile>>();
          cfg.profile_path = cfg.profile->source;
        } else {
          cfg.profile_path = path_arg(profile, "profile");
        }
        cfg.num_ranks = stages.value;
        cfg.microbatches = microbatches.value;
        for (const Real& x : slowdowns) cfg.slowdowns.push_back(x.value);
        cfg.pipelines = pipelines.value;
        cfg.global_batch = global_batch.value;
        cfg.p_block_w = p2p_power_w->value;
        cfg.tp_degree = tp_degree.value;
        cfg.time_scale = time_scale.value;
        cfg.unit_time_s = unit_time_s.value;
        bool interrupted = false;  // a Python signal handler raised during the solve
        cfg.cancelled = python_signal_poll(interrupted);
        EmulationResult res;
        try {
          GilRelease release;
          res = run_emulation(cfg);
        } catch (const PlanningCancelled&) {
          if (!interrupted) throw;
        }
        if (interrupted) throw py::error_already_set();  // the handler's exception (GIL held again)
        py::list rows;
        for (const auto& r : res.rows) {
          py::dict d;
          d["method"] = r.method;
          d["slowdown"] = r.slowdown;
          d["straggler_time_s"] = r.straggler_time_s;
          d["iteration_time_s"] = r.iteration_time_s;
          d["chosen_time_s"] = r.chosen_time_s;
          d["pipeline_energy_j"] = r.pipeline_energy_j;
          d["straggler_energy_j"] = r.straggler_energy_j;
          d["cluster_energy_j"] = r.cluster_energy_j;
          d["pipeline_saving_pct"] = r.pipeline_saving_pct;
          d["intrinsic_saving_pct"] = r.intrinsic_saving_pct;
          d["extrinsic_saving_pct"] = r.extrinsic_saving_pct;
          d["total_saving_pct"] = r.total_saving_pct;
          rows.append(std::move(d));
        }
        py::dict out;
        out["num_pipelines"] = res.num_pipelines;
        out["t_min_s"] = res.t_min_s;
        out["frontier_size"] = res.frontier_size;
        out["solve_time_s"] = res.solve_time_s;
        out["envpipe_message"] = res.envpipe.message;
        py::list warnings;  // also raised as UserWarning, as optimize() does
        for (const auto& w : res.warnings) {
          warnings.append(w);
          if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), kWarnStackLevel) != 0) throw py::error_already_set();
        }
        out["warnings"] = std::move(warnings);
        out["rows"] = std::move(rows);
        return out;
      },
      py::arg("profile"), py::arg("stages"), py::arg("microbatches"), py::kw_only(), py::arg("slowdowns"),
      py::arg("pipelines") = 0, py::arg("global_batch") = 0, py::arg("p2p_power_w") = py::none(), py::arg("tp_degree") = 1,
      py::arg("time_scale") = 1.0, py::arg("unit_time_s") = 1e-3, R"doc(
Straggler emulation (Perseus SOSP'24 §3.2, §6.3): data-parallel pipelines, one of them
`slowdown` times slower, for Perseus and the baselines (envpipe: EnvPipe, Choi et al. ATC'23;
zeus_global, zeus_per_stage: Zeus, NSDI'23, as ZeusGlobal/ZeusPerStage of Perseus §6.1;
all_max: every computation at its highest clock). profile: a profile CSV path (str, bytes or
os.PathLike) or a perseus.Profile (as optimize() takes); stages: GPUs per pipeline (1F1B);
microbatches per iteration (>= 1); slowdowns: factors in [1, 100], distinct, at least one;
pipelines (>= 2), or global_batch (microbatches, a multiple of `microbatches`; pipelines =
global_batch / microbatches, >= 2; both given: they must agree); p2p_power_w: P_block, W, in
[0, 1e5] (required, as the CLI's --p2p-power); tp_degree (1..1e6) and time_scale (a factor in
(0, 1e6]) scale the profile (times s, energy J); unit_time_s: planner (and EnvPipe) time
quantum, s, in [1e-7, 10].
Returns {'num_pipelines', 't_min_s', 'frontier_size', 'solve_time_s', 'envpipe_message', 'warnings'
(implausible profile units as optimize() warns, then EnvPipe's message when it did not converge;
each also raised as UserWarning),
'rows': [{'method', 'slowdown', 'straggler_time_s', 'iteration_time_s', 'chosen_time_s',
'pipeline_energy_j', 'straggler_energy_j', 'cluster_energy_j', 'pipeline_saving_pct',
'intrinsic_saving_pct', 'extrinsic_saving_pct', 'total_saving_pct'}]} (ordered by slowdown,
then method). Row fields (times scaled s, energies scaled J): straggler_time_s T' = slowdown x
T_min; chosen_time_s: T of the plan the other pipelines run; iteration_time_s: max(T',
chosen_time_s); pipeline_energy_j: one non-straggler pipeline, blocking until the iteration
ends; straggler_energy_j: the straggler pipeline; cluster_energy_j: all pipelines;
pipeline_saving_pct: a non-straggler pipeline vs all-max's, %; intrinsic_saving_pct: the
no-straggler plan vs all-max's, %; extrinsic_saving_pct: the cluster vs the same method not
adapting to the straggler, %; total_saving_pct: the cluster vs all-max with the same
straggler, %.
Raises perseus.InputError on bad inputs (also when EnvPipe hits its iteration cap: use a
coarser unit_time_s), TypeError on wrong types, KeyboardInterrupt on Ctrl-C during the solve.)doc");
#else
  m.attr("HAVE_EMULATE") = false;
#endif

#ifdef PERSEUS_PY_HAVE_RENDER
  m.attr("HAVE_RENDER") = true;
  m.def(
      "render_timeline_svg",
      [](const std::shared_ptr<Profile>& profile, const py::dict& plan, int microbatches, const py::object& schedule_arg,
         int chunks, std::optional<Real> p2p_power_arg, const std::string& color_by, const std::string& title) {
        const std::string schedule = path_arg(schedule_arg, "schedule");  // a name or a schedule CSV path
        TimelineOptions opt;
        if (color_by == "power") opt.color_by = TimelineColor::kPower;
        else if (color_by == "frequency") opt.color_by = TimelineColor::kFrequency;
        else throw InputError("color_by", fmt::format("must be \"power\" or \"frequency\", got \"{}\"", color_by));
        // Unset: idle time at 0 W, which is not what the GPUs drew (a colour bar stretched to 0
        // and "P_block 0.0 W", unlike the report's; session 24's trial): said so.
        const double p2p_power_w = p2p_power_arg ? p2p_power_arg->value : 0.0;
        if (!p2p_power_arg && opt.color_by == TimelineColor::kPower &&
            PyErr_WarnEx(PyExc_UserWarning,
                         "p2p_power_w not given: idle (blocking) time is drawn at 0 W and the plan's energy counts no "
                         "blocking; pass the P_block the plan was made with, as optimize(p2p_power_w=...)",
                         kWarnStackLevel) != 0) {
          throw py::error_already_set();
        }
        opt.p_block_w = p2p_power_w;
        opt.title = title;
        auto [dag, fp] = plan_from_dict(*profile, plan, schedule, microbatches, chunks, p2p_power_w);
        GilRelease release;
        return render_timeline_svg(dag, fp, opt);
      },
      py::arg("profile").none(false), py::arg("plan"), py::arg("microbatches"), py::kw_only(), py::arg("schedule") = "1f1b",
      py::arg("chunks") = 1, py::arg("p2p_power_w") = py::none(), py::arg("color_by") = "power", py::arg("title") = "",
      R"doc(
Pipeline timeline of a plan (a dict from optimize()['plans']) as an SVG document (str): one
row per GPU, one box per computation coloured by average power (W) or frequency (MHz).
The plan is re-evaluated with `profile` (a perseus.Profile); p2p_power_w: P_block in W, as
given to optimize() (omitted with color_by="power": a UserWarning, and idle time drawn at 0 W).
microbatches (>= 1), schedule (a schedule_names() entry or a schedule CSV path) and chunks
(stages per GPU): as given to optimize() for this plan; the plan's GPUs are its "ranks".
color_by: "power" or "frequency". title: drawn above the chart ("" = none).
Raises perseus.InputError when the plan does not match the schedule or the profile, lacks
"ranks" (or it is not a non-empty list), holds a non-finite number, or color_by is another name.)doc");
  m.def(
      "render_frontier_svg",
      [](const py::object& frontier, const py::object& plans, const py::object& all_max, const std::string& title) {
        FrontierPlotData data;
        data.frontier = plot_points(frontier, "plan", "frontier");
        data.plans = plot_points(plans, "plan", "plans");
        if (!all_max.is_none()) {
          py::list one;
          one.append(all_max);
          auto p = plot_points(one, "label", "all_max", /*single=*/true);
          p[0].label = "all-max";
          data.all_max = p[0];
        }
        FrontierPlotOptions opt;
        opt.title = title;
        GilRelease release;
        return render_frontier_svg(data, opt);
      },
      py::arg("frontier").none(false), py::kw_only(), py::arg("plans") = py::none(), py::arg("all_max") = py::none(),
      py::arg("title") = "", R"doc(
Iteration time (s) vs energy (J) plot as an SVG document (str). frontier: optimize()['frontier']
(dicts with 'time_s', 'energy_j'); plans: dots (e.g. optimize()['plans']); all_max: the
baseline plan dict; title: drawn above the plot ("" = none). Raises TypeError when frontier or
plans is not a list (or tuple) of dicts, all_max is not a dict, or a 'time_s'/'energy_j' is not a number;
perseus.InputError when an entry lacks 'time_s' or 'energy_j', or no point is finite.)doc");
  m.def(
      "write_report",
      [](const py::object& dir) {
        const std::string d = path_arg(dir, "dir");
        GilRelease release;
        return write_report(d);
      },
      py::arg("dir"),
      "Writes DIR/report.html for a `perseus optimize` output folder; returns its path. Raises "
      "perseus.InputError when the folder, summary.json or the plans are missing or malformed.");
#else
  m.attr("HAVE_RENDER") = false;
#endif
}

}  // namespace perseus::python
