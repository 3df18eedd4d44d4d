// EnvPipe (ATC'23) baseline as run by the Perseus artifact (an evaluation baseline of Perseus,
// SOSP'24 §6.1), with its accounting slips fixed (see docs/baselines.md).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/core.h>

#include "perseus/baselines.hpp"
#include "perseus/error.hpp"

namespace perseus {

namespace {

// Python's float floor division t // u (reference §2.1), so quantized times match the artifact.
long python_floordiv(double t, double u) {
  const double mod = std::fmod(t, u);
  const double div = (t - mod) / u;
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1.0;
  return static_cast<long>(fl);
}

struct KindTable {
  std::map<int, OperatingPoint> by_freq;  // every profiled frequency
  int slowest_candidate_mhz = 0;          // hard-Pareto candidate with the largest quantized time
};

// Hard Pareto filter (noise factor 1) and per-quantum dedup as the artifact does (§2.2, §9 step 1).
int slowest_candidate(const std::vector<OperatingPoint>& points, double unit_s) {
  std::vector<OperatingPoint> keep;
  for (const auto& o : points) {
    const bool dominated = std::any_of(points.begin(), points.end(), [&](const OperatingPoint& x) {
      return x.time_s < o.time_s && x.energy_j < o.energy_j;
    });
    if (!dominated) keep.push_back(o);
  }
  // Per quantum keep the most energy-hungry option; then the slowest quantum wins.
  std::stable_sort(keep.begin(), keep.end(), [](const auto& a, const auto& b) { return a.energy_j > b.energy_j; });
  std::map<long, int> by_q;
  for (const auto& o : keep) by_q.emplace(python_floordiv(o.time_s, unit_s), o.freq_mhz);
  return by_q.rbegin()->second;
}

}  // namespace

EnvPipeResult envpipe_plan(const Dag& dag, const Profile& profile, double p_block_w, const EnvPipeOptions& options) {
  if (!(options.unit_time_s > 0) || !std::isfinite(options.unit_time_s)) {
    throw InputError(fmt::format("EnvPipe: unit time must be > 0 s, got {}", options.unit_time_s));
  }
  if (options.max_iterations < 1) {
    throw InputError(fmt::format("EnvPipe: iteration cap must be >= 1, got {}", options.max_iterations));
  }
  require_max_frequency(dag, profile);
  const int fmax = profile.max_freq_mhz();
  const double u = options.unit_time_s;
  const int n = dag.num_ops();
  const int last_stage = dag.num_stages() - 1;
  const int last_mb = dag.num_microbatches() - 1;

  // Tables per (stage, kind).
  std::map<std::pair<int, int>, KindTable> tables;
  for (int i = 0; i < n; ++i) {
    const Computation& c = dag.op(i);
    auto [it, inserted] = tables.try_emplace({c.stage, static_cast<int>(c.kind)});
    if (!inserted) continue;
    for (const auto& p : profile.points(c.stage, c.kind)) it->second.by_freq.emplace(p.freq_mhz, p);
    it->second.slowest_candidate_mhz = slowest_candidate(profile.points(c.stage, c.kind), u);
  }
  auto table = [&](int op) -> const KindTable& {
    return tables.at({dag.op(op).stage, static_cast<int>(dag.op(op).kind)});
  };

  std::vector<bool> envelope(n);
  std::vector<int> knob(n);
  std::vector<long> q(n);
  auto set_knob = [&](int op, int f) {
    knob[op] = f;
    q[op] = python_floordiv(table(op).by_freq.at(f).time_s, u);
  };
  for (int i = 0; i < n; ++i) {
    const Computation& c = dag.op(i);
    const bool backward = c.kind != InstructionKind::kForward;
    envelope[i] = c.stage == last_stage || (c.kind == InstructionKind::kForward && c.microbatch == 0) ||
                  (backward && c.microbatch == last_mb);
    set_knob(i, envelope[i] ? fmax : table(i).slowest_candidate_mhz);
  }

  EnvPipeResult result;
  std::vector<long> es(n), lf(n);
  const auto& topo = dag.topological_order();
  std::vector<int> path;
  for (int it = 1;; ++it) {
    // (a) Critical path method on the quantized durations; follow the first critical path.
    long t_units = 0;
    for (int v : topo) {
      long s = 0;
      for (int p : dag.predecessors(v)) s = std::max(s, es[p] + q[p]);
      es[v] = s;
      t_units = std::max(t_units, s + q[v]);
    }
    for (auto r = topo.rbegin(); r != topo.rend(); ++r) {
      long f = t_units;
      for (int w : dag.successors(*r)) f = std::min(f, lf[w] - q[w]);
      lf[*r] = f;
    }
    auto critical = [&](int v) { return es[v] + q[v] == lf[v]; };
    path.clear();
    int v = -1;
    for (int s : topo) {
      if (dag.predecessors(s).empty() && es[s] == 0 && critical(s)) {
        v = s;
        break;
      }
    }
    while (v >= 0) {
      path.push_back(v);
      int next = -1;
      for (int w : dag.successors(v)) {
        if (critical(w) && es[w] == es[v] + q[v]) {
          next = w;
          break;
        }
      }
      v = next;
    }
    // (b) EnvPipe's logged iteration time: real times along that path.
    result.path_time_s = 0;
    for (int op : path) result.path_time_s += table(op).by_freq.at(knob[op]).time_s;
    result.iterations = it;
    // (e) Converged when only envelope computations are critical on that path.
    if (std::all_of(path.begin(), path.end(), [&](int op) { return envelope[op]; })) break;
    // (c) Raise the lowest frequencies on the path by one profiled step.
    int f_min = fmax;
    for (int op : path) f_min = std::min(f_min, knob[op]);
    bool changed = false;
    for (int op : path) {
      if (knob[op] != f_min) continue;
      const auto& freqs = table(op).by_freq;
      const auto up = freqs.upper_bound(knob[op]);
      if (up == freqs.end() || up->first > fmax) continue;
      set_knob(op, up->first);
      changed = true;
    }
    if (!changed) {
      const auto blocker = std::find_if(path.begin(), path.end(), [&](int op) { return !envelope[op]; });
      const Computation& c = dag.op(*blocker);
      result.status = EnvPipeStatus::kStuck;
      result.message = fmt::format(
          "EnvPipe stopped after {} iterations: every computation on its critical path already runs at the "
          "maximum frequency {} MHz, but the path still includes stage {} {} of microbatch {}, which is outside "
          "the envelope (the original implementation loops forever here)",
          it, fmax, c.stage, to_string(c.kind), c.microbatch);
      break;
    }
    if (it >= options.max_iterations) {
      result.status = EnvPipeStatus::kIterationCap;
      std::size_t clocks = 0;
      for (const auto& [key, t] : tables) clocks = std::max(clocks, t.by_freq.size());
      result.message = fmt::format(
          "EnvPipe did not converge within {} iterations: its critical path still has computations outside the "
          "envelope, and it raises them by one profiled clock per iteration (this profile has up to {} clocks per "
          "computation; unit time {} s); its plan at that point is the one reported",
          options.max_iterations, clocks, u);
      break;
    }
  }
  // Re-force the envelope (a no-op here: envelope computations never leave the max frequency).
  for (int i = 0; i < n; ++i) {
    if (envelope[i]) knob[i] = fmax;
  }
  result.plan = evaluate_plan(dag, profile, std::move(knob), p_block_w);
  return result;
}

}  // namespace perseus
