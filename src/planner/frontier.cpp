// The iteration time–energy Pareto frontier: the Frontier's queries and plan replay, the
// Pareto filter of operating points, and solve_frontier(). The solve itself is layered in
// private files (docs/architecture.md, "The planner's files"): frontier_builder (options, the
// walk's points, final filter), graph_cut_walk (Phillips–Dessouky steps), cut_solver with
// warm_cut_solver / cold_cut_solver (one min-cut facade, four engines), critical_network and
// critical_path (the network's one description, CPM), cost_model, plan_evaluator, certify
// (the LP stage), frontier_filter.
#include "perseus/frontier.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>

#include "frontier_builder.hpp"
#include "plan_improve.hpp"

namespace perseus {

std::vector<OperatingPoint> pareto_points(const std::vector<OperatingPoint>& points, double p_block_w) {
  std::vector<OperatingPoint> sorted = points;
  auto cost = [p_block_w](const OperatingPoint& p) { return p.energy_j - p_block_w * p.time_s; };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const OperatingPoint& a, const OperatingPoint& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : cost(a) < cost(b);
  });
  std::vector<OperatingPoint> front;
  double best_energy = std::numeric_limits<double>::infinity();
  for (const auto& p : sorted) {
    // Time ascending: keep p only if it uses strictly less energy than every faster point.
    if (cost(p) < best_energy) {
      if (!front.empty() && front.back().time_s == p.time_s) continue;  // same time, more energy
      front.push_back(p);
      best_energy = cost(p);
    }
  }
  return front;
}

namespace {

}  // namespace

const char* to_string(Frontier::StopReason reason) {
  switch (reason) {
    case Frontier::StopReason::kTimeBudget: return "time_budget";
    case Frontier::StopReason::kMaxPoints: return "max_points";
    case Frontier::StopReason::kComplete: break;
  }
  return "complete";
}

FrequencyPlan Frontier::make_plan(const std::vector<std::uint16_t>& choice_in, bool reclaim, double tighten_to_s) const {
  const Dag& dag = *dag_;
  const int n = dag.num_ops();
  std::vector<std::uint16_t> choice = choice_in;
  if (tighten_to_s > 0) detail::tighten(dag, op_candidates_, choice, tighten_to_s);
  if (reclaim) {
    std::vector<double> scratch(n), ls(n);
    detail::fill_slack(dag, op_candidates_, choice, scratch, ls);
  }
  std::vector<int> freq(n);
  std::vector<double> time(n), energy(n);
  for (int i = 0; i < n; ++i) {
    const OperatingPoint& p = op_candidates_[i]->points[choice[i]];
    freq[i] = p.freq_mhz;
    time[i] = p.time_s;
    energy[i] = p.energy_j;
  }
  return evaluate_durations(dag, std::move(freq), std::move(time), std::move(energy), p_block_w);
}

void Frontier::for_each_plan(const std::vector<std::size_t>& indices,
                             const std::function<void(std::size_t, const FrequencyPlan&)>& fn, int threads) const {
  std::vector<std::size_t> order = indices;
  for (std::size_t i : order)
    if (i >= points_.size()) throw std::out_of_range(fmt::format("frontier has {} points, asked for {}", points_.size(), i));
  // Replay steps in increasing order; the all-max point (step -1) needs no replay.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return points_[a].step < points_[b].step; });
  const std::size_t workers = static_cast<std::size_t>(std::max(1, threads));
  // Batches of 2 x workers choice snapshots bound the memory; each batch is evaluated by
  // `workers` threads (the plan of index i depends only on its snapshot).
  const std::size_t batch = workers == 1 ? 1 : 2 * workers;
  std::vector<std::vector<std::uint16_t>> snapshots(batch);
  std::vector<std::size_t> batch_index(batch);
  auto evaluate = [&](std::size_t slot) {
    const std::size_t i = batch_index[slot];
    // Stored plans were slack-filled when found; evaluated as they are.
    fn(i, make_plan(snapshots[slot], reclaim_ && points_[i].stored_plan < 0, points_[i].tightened_to_s));
  };
  std::vector<std::uint16_t> choice = start_choice_;
  std::int64_t at = 0;
  for (std::size_t first = 0; first < order.size(); first += batch) {
    const std::size_t count = std::min(batch, order.size() - first);
    for (std::size_t slot = 0; slot < count; ++slot) {
      const std::size_t i = order[first + slot];
      const std::int64_t step = points_[i].step;
      batch_index[slot] = i;
      if (points_[i].stored_plan >= 0) {
        snapshots[slot] = stored_plans_[points_[i].stored_plan];
        continue;
      }
      if (step < 0) {
        snapshots[slot].assign(choice.size(), 0);
        continue;
      }
      for (; at < step; ++at) {
        for (std::size_t k = step_end_[at]; k < step_end_[at + 1]; ++k) choice[changes_[k].first] = changes_[k].second;
      }
      snapshots[slot] = choice;
    }
    if (workers == 1) {
      for (std::size_t slot = 0; slot < count; ++slot) evaluate(slot);
      continue;
    }
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
      for (std::size_t slot; (slot = next.fetch_add(1)) < count;) {
        try {
          evaluate(slot);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
          next = count;  // stop handing out work
        }
      }
    };
    {
      std::vector<std::jthread> pool;
      for (std::size_t w = 1; w < std::min(workers, count); ++w) pool.emplace_back(work);
      work();
    }  // joins
    if (error) std::rethrow_exception(error);
  }
}

FrequencyPlan Frontier::plan(std::size_t i) const {
  FrequencyPlan out;
  for_each_plan({i}, [&](std::size_t, const FrequencyPlan& p) { out = p; });
  return out;
}

std::size_t Frontier::lowest_energy_within(double deadline_s) const {
  // Points are slowest first with energy_j − P_block R time_s increasing, so the first that
  // meets the deadline draws the least energy until it (blocking included).
  for (std::size_t i = 0; i < points_.size(); ++i)
    if (points_[i].time_s <= deadline_s) return i;
  return points_.empty() ? 0 : points_.size() - 1;
}

double Frontier::lower_bound_at(double deadline_s) const {
  if (tangents_.empty()) return 0;
  double best = -std::numeric_limits<double>::infinity();
  const double pipe_w = p_block_w * dag_->num_ranks();
  for (const Tangent& t : tangents_) {
    double v = t.bound_j + t.slope_j_per_s * (deadline_s - t.deadline_s);
    // LB − pipe_w × τ is non-increasing.
    if (t.deadline_s >= deadline_s) v = std::max(v, t.bound_j - pipe_w * (t.deadline_s - deadline_s));
    best = std::max(best, v);
  }
  // No energy is negative: where the lines fall below 0 (a profile whose blocking power exceeds
  // its computations' power makes effective energies negative), 0 is the better bound.
  return std::max(0.0, best);
}

// tangents_ are deadline ascending.
double Frontier::bound_end_s() const { return tangents_.empty() ? 0 : tangents_.back().deadline_s; }

double Frontier::max_optimality_gap_pct() const {
  double gap = 0;
  const double end = bound_end_s() * (1 + 1e-9);
  for (const auto& p : points_)
    if (p.lower_bound_j > 0 && p.time_s <= end)
      gap = std::max(gap, 100 * (p.energy_j - p.lower_bound_j) / p.lower_bound_j);
  return gap;
}

double Frontier::max_deadline_gap_pct() const {
  double gap = 0;
  if (tangents_.empty()) return 0;
  // points_ are slowest first: a deadline just below points_[i-1]'s time chooses points_[i].
  const double pipe_w = p_block_w * dag_->num_ranks();
  const double end = bound_end_s() * (1 + 1e-9);
  for (std::size_t i = 1; i < points_.size(); ++i) {
    const double deadline = points_[i - 1].time_s * (1 - 1e-12);
    if (deadline > end) continue;
    const double lb = lower_bound_at(deadline);
    const double at_deadline = points_[i].energy_j + pipe_w * (deadline - points_[i].time_s);
    if (lb > 0) gap = std::max(gap, 100 * (at_deadline - lb) / lb);
  }
  return gap;
}

const char* to_string(SolveStage stage) {
  switch (stage) {
    case SolveStage::kGraphCutWalk: return "graph-cut walk";
    case SolveStage::kHullWalk: return "lower bound: hull walk";
    case SolveStage::kLpSolves: return "lower bound: LP solves";
    case SolveStage::kPolish: return "window search";
  }
  return "?";
}

const char* to_string(PlannerMode mode) {
  return mode == PlannerMode::kGraphCut ? "graph-cut" : "certified";
}

std::optional<PlannerMode> parse_planner_mode(std::string_view name) {
  for (auto m : {PlannerMode::kCertified, PlannerMode::kGraphCut})
    if (name == to_string(m)) return m;
  return std::nullopt;
}

const char* to_string(BoundMethod method) {
  switch (method) {
    case BoundMethod::kAuto: return "auto";
    case BoundMethod::kLp: return "lp";
    case BoundMethod::kHullWalk: return "hull-walk";
  }
  return "unknown";
}

std::optional<BoundMethod> parse_bound_method(std::string_view name) {
  for (auto m : {BoundMethod::kAuto, BoundMethod::kLp, BoundMethod::kHullWalk})
    if (name == to_string(m)) return m;
  return std::nullopt;
}

BoundMethod resolve_bound_method(BoundMethod method, int num_ops) {
  if (method != BoundMethod::kAuto) return method;
  return num_ops < kHullWalkMinOps ? BoundMethod::kLp : BoundMethod::kHullWalk;
}

Frontier solve_frontier(const Dag& dag, const Profile& profile, const PlannerOptions& options) {
  return solve_frontier(std::make_shared<const Dag>(dag), profile, options);
}

Frontier solve_frontier(std::shared_ptr<const Dag> dag, const Profile& profile, const PlannerOptions& options) {
  FrontierBuilder builder(std::move(dag), profile, options);
  return builder.run();
}

}  // namespace perseus
