// Baselines: all-max checks, ZeusGlobal, ZeusPerStage (EnvPipe is in baselines_envpipe.cpp).
#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "perseus/baselines.hpp"
#include "perseus/error.hpp"

namespace perseus {

namespace {

// (stage, kind) pairs used by the DAG, in a fixed order.
std::vector<std::pair<int, InstructionKind>> used_kinds(const Dag& dag) {
  std::set<std::pair<int, int>> seen;
  for (int i = 0; i < dag.num_ops(); ++i) seen.emplace(dag.op(i).stage, static_cast<int>(dag.op(i).kind));
  std::vector<std::pair<int, InstructionKind>> out;
  for (const auto& [s, k] : seen) out.emplace_back(s, static_cast<InstructionKind>(k));
  return out;
}

void require_kinds(const Dag& dag, const Profile& profile) {
  for (const auto& [s, k] : used_kinds(dag)) {
    if (!profile.has(s, k)) {
      // A zero-bubble profile (backward split into I and W) under a schedule with whole backwards
      // (the default 1f1b): say so, as `perseus emulate` does (session 31's trial).
      const bool split = k == InstructionKind::kBackward && (profile.has(s, InstructionKind::kBackwardInput) ||
                                                             profile.has(s, InstructionKind::kBackwardWeight));
      throw InputError(fmt::format("profile {}: no rows for stage {} {}{}", profile.source, s, to_string(k),
                                   split ? ", which the schedule needs: the profile splits the backward into "
                                           "backward_input/backward_weight rows; plan the zero-bubble schedule "
                                           "(--schedule zb-h1) or add backward rows (the full backward at each clock)"
                                         : ""));
    }
  }
}

// Frequencies shared by the given (stage, kind) pairs, highest first.
std::vector<int> shared_frequencies(const Profile& profile, const std::vector<std::pair<int, InstructionKind>>& kinds) {
  std::vector<int> out;
  if (kinds.empty()) return out;
  for (const auto& p : profile.points(kinds[0].first, kinds[0].second)) {
    const bool everywhere = std::all_of(kinds.begin(), kinds.end(), [&](const auto& sk) {
      return profile.find(sk.first, sk.second, p.freq_mhz) != nullptr;
    });
    if (everywhere) out.push_back(p.freq_mhz);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

FrequencyPlan pick(std::vector<FrequencyPlan> plans, int ranks, double p_block_w, std::optional<double> target) {
  const std::size_t i = target ? lowest_energy_within(plans, ranks, p_block_w, *target) : lowest_energy(plans);
  return std::move(plans[i]);
}

}  // namespace

void require_max_frequency(const Dag& dag, const Profile& profile) {
  require_kinds(dag, profile);
  const int fmax = profile.max_freq_mhz();
  std::vector<std::string> missing;
  int common_max = fmax;  // the highest clock every computation has a row at or above
  for (const auto& [s, k] : used_kinds(dag)) {
    if (profile.find(s, k, fmax) == nullptr) {
      missing.push_back(fmt::format("stage {} {} (its highest is {} MHz)", s, to_string(k), profile.max_freq_mhz(s, k)));
      common_max = std::min(common_max, profile.max_freq_mhz(s, k));
    }
  }
  if (missing.empty()) return;
  std::string list = missing.front();
  for (std::size_t i = 1; i < missing.size() && i < 4; ++i) list += ", " + missing[i];
  if (missing.size() > 4) list += fmt::format(", and {} more", missing.size() - 4);
  throw InputError(fmt::format(
      "profile {}: field 'frequency': {} has no row at the profile's maximum frequency {} MHz; the all-max "
      "baseline runs every computation at one maximum clock, so profile the missing computations at {} MHz, "
      "or remove the rows above {} MHz so the maximum is a clock every computation has",
      profile.source, list, fmax, fmax, common_max));
}

std::vector<int> common_frequencies(const Dag& dag, const Profile& profile) {
  return shared_frequencies(profile, used_kinds(dag));
}

double energy_at_deadline(const FrequencyPlan& plan, int num_ranks, double p_block_w, double deadline_s) {
  return energy_until({plan.timeline.time_s, plan.total_energy_j()}, p_block_w * num_ranks, deadline_s);
}

std::size_t lowest_energy_within(const std::vector<FrequencyPlan>& plans, int num_ranks, double p_block_w,
                                 double deadline_s) {
  std::vector<TimeEnergy> points;
  points.reserve(plans.size());
  for (const FrequencyPlan& p : plans) points.push_back({p.timeline.time_s, p.total_energy_j()});
  return perseus::lowest_energy_within(points, p_block_w * num_ranks, deadline_s);
}

std::size_t lowest_energy(const std::vector<FrequencyPlan>& plans) {
  if (plans.empty()) throw std::invalid_argument("lowest_energy: no plans");
  std::size_t best = 0;
  for (std::size_t i = 1; i < plans.size(); ++i) {
    if (plans[i].total_energy_j() < plans[best].total_energy_j()) best = i;
  }
  return best;
}

std::vector<FrequencyPlan> zeus_global_candidates(const Dag& dag, const Profile& profile, double p_block_w) {
  require_kinds(dag, profile);
  const std::vector<int> freqs = common_frequencies(dag, profile);
  if (freqs.empty()) {
    throw InputError(fmt::format(
        "profile {}: field 'frequency': no frequency is profiled for every stage and instruction; ZeusGlobal "
        "needs one clock that all computations can run at",
        profile.source));
  }
  std::vector<FrequencyPlan> out;
  out.reserve(freqs.size());
  for (int f : freqs) out.push_back(evaluate_plan(dag, profile, std::vector<int>(dag.num_ops(), f), p_block_w));
  return out;
}

FrequencyPlan zeus_global_plan(const Dag& dag, const Profile& profile, double p_block_w,
                               std::optional<double> target_time_s) {
  return pick(zeus_global_candidates(dag, profile, p_block_w), dag.num_ranks(), p_block_w, target_time_s);
}

std::vector<FrequencyPlan> zeus_per_stage_candidates(const Dag& dag, const Profile& profile, double p_block_w) {
  require_kinds(dag, profile);
  const int stages = dag.num_stages();
  // Per stage: its frequencies (common to all its kinds) with total time and effective energy.
  struct Option {
    int freq_mhz;
    double time_s;
    double eff_energy_j;
  };
  std::vector<std::vector<Option>> options(stages);
  std::vector<std::vector<int>> stage_ops(stages);
  for (int i = 0; i < dag.num_ops(); ++i) stage_ops[dag.op(i).stage].push_back(i);
  for (int s = 0; s < stages; ++s) {
    std::vector<std::pair<int, InstructionKind>> kinds;
    for (int i : stage_ops[s]) {
      const std::pair<int, InstructionKind> sk{s, dag.op(i).kind};
      if (std::find(kinds.begin(), kinds.end(), sk) == kinds.end()) kinds.push_back(sk);
    }
    for (int f : shared_frequencies(profile, kinds)) {
      Option o{f, 0, 0};
      for (int i : stage_ops[s]) {
        const OperatingPoint* p = profile.find(s, dag.op(i).kind, f);
        o.time_s += p->time_s;
        o.eff_energy_j += p->energy_j - p_block_w * p->time_s;
      }
      options[s].push_back(o);
    }
    if (options[s].empty()) {
      throw InputError(fmt::format(
          "profile {}: field 'frequency': stage {} has no frequency profiled for all its instructions; "
          "ZeusPerStage needs one clock per stage",
          profile.source, s));
    }
  }
  // Heaviest stage: longest computation time at its highest frequency.
  int heavy = 0;
  for (int s = 1; s < stages; ++s) {
    if (options[s].front().time_s > options[heavy].front().time_s) heavy = s;
  }
  // Per stage, its options by time (ties: profile order) with the prefix's lowest effective
  // energy (ties: the first in profile order): each candidate then picks every other stage's
  // clock by a binary search, not a scan (O(F^2) per stage took minutes on profiles of tens of
  // thousands of clocks, session 32's trial). Same picks as the scan: the lowest effective
  // energy within the heavy stage's time, first in profile order, else the fastest.
  struct ByTime {
    std::vector<double> time_s;     // ascending
    std::vector<std::size_t> best;  // index into options[s] of the prefix's pick
  };
  std::vector<ByTime> by_time(stages);
  for (int s = 0; s < stages; ++s) {
    const auto& o = options[s];
    std::vector<std::size_t> order(o.size());
    for (std::size_t k = 0; k < o.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return o[a].time_s < o[b].time_s; });
    for (std::size_t k = 0; k < order.size(); ++k) {
      const std::size_t cand = order[k];
      std::size_t pick = cand;
      if (k > 0) {
        const std::size_t prev = by_time[s].best.back();
        if (o[prev].eff_energy_j < o[cand].eff_energy_j || (o[prev].eff_energy_j == o[cand].eff_energy_j && prev < cand))
          pick = prev;
      }
      by_time[s].time_s.push_back(o[cand].time_s);
      by_time[s].best.push_back(pick);
    }
  }
  std::vector<FrequencyPlan> out;
  for (const Option& h : options[heavy]) {
    std::vector<int> stage_freq(stages, 0);
    for (int s = 0; s < stages; ++s) {
      if (s == heavy) {
        stage_freq[s] = h.freq_mhz;
        continue;
      }
      const ByTime& b = by_time[s];
      const auto within = static_cast<std::size_t>(std::upper_bound(b.time_s.begin(), b.time_s.end(), h.time_s) - b.time_s.begin());
      // None within: the fastest (the first by time, which is the first in profile order among equals).
      stage_freq[s] = options[s][within > 0 ? b.best[within - 1] : b.best[0]].freq_mhz;
    }
    std::vector<int> freq(dag.num_ops());
    for (int i = 0; i < dag.num_ops(); ++i) freq[i] = stage_freq[dag.op(i).stage];
    out.push_back(evaluate_plan(dag, profile, std::move(freq), p_block_w));
  }
  return out;
}

FrequencyPlan zeus_per_stage_plan(const Dag& dag, const Profile& profile, double p_block_w,
                                  std::optional<double> target_time_s) {
  return pick(zeus_per_stage_candidates(dag, profile, p_block_w), dag.num_ranks(), p_block_w, target_time_s);
}

}  // namespace perseus
