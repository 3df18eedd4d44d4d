// The frontier solve: option checks, the graph-cut walk with a point per plan, the LP stage
// (certify.cpp) and the final filter. See frontier_builder.hpp.
#include "frontier_builder.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <thread>
#include <condition_variable>
#include <mutex>

#include <fmt/core.h>

#include "frontier_filter.hpp"
#include "perseus/error.hpp"

namespace perseus {

using detail::pareto_filter;
using detail::RunningFront;

void check_polish_solves(int n) {
  if (n < 0 || n > kMaxPolishSolves)
    throw InputError("polish_solves", fmt::format("must be in [0, {}] (0: none), got {}", kMaxPolishSolves, n));
}

const PlannerOptions& FrontierBuilder::validated(const PlannerOptions& opt) {
  // Bounds keep every sum finite and the tables small (documented in PlannerOptions). Each
  // error names its PlannerOptions field, which the front ends phrase as their option.
  if (!(opt.unit_time_s >= kMinUnitTimeS && opt.unit_time_s <= kMaxUnitTimeS)) {
    throw InputError("unit_time_s", fmt::format("must be in [1e-7, 10] s, got {}", opt.unit_time_s));
  }
  if (!(opt.p_block_w >= 0 && opt.p_block_w <= kMaxBlockingPowerW)) {
    throw InputError("p_block_w", fmt::format("must be in [0, {:g}] W, got {}", kMaxBlockingPowerW, opt.p_block_w));
  }
  if (opt.mode != PlannerMode::kGraphCut && opt.mode != PlannerMode::kCertified) {
    throw InputError("mode", fmt::format("{} is not a known planner mode", static_cast<int>(opt.mode)));
  }
  if (!parse_min_cut_engine(to_string(opt.min_cut_engine))) {
    throw InputError("min_cut_engine", fmt::format("{} is not a known engine", static_cast<int>(opt.min_cut_engine)));
  }
  if (!parse_bound_method(to_string(opt.bound_method))) {
    throw InputError("bound_method", fmt::format("{} is not a known method", static_cast<int>(opt.bound_method)));
  }
  if (opt.max_lp_solves < 1 || opt.max_lp_solves > 100000) {
    throw InputError("max_lp_solves", fmt::format("must be in [1, 100000], got {}", opt.max_lp_solves));
  }
  if (opt.local_search_moves < 0 || opt.local_search_moves > 1'000'000) {
    throw InputError("local_search_moves", fmt::format("must be in [0, 1000000], got {}", opt.local_search_moves));
  }
  if (!(opt.refine_gap_pct >= 0)) {
    throw InputError("refine_gap_pct", fmt::format("must be >= 0 %, got {}", opt.refine_gap_pct));
  }
  if (std::isnan(opt.time_budget_s) || opt.time_budget_s > 1e9) {
    throw InputError("time_budget_s", fmt::format("must be in [0, 1e9] s (< 0: none), got {}", opt.time_budget_s));
  }
  if (!(opt.polish_time_s >= 0 && opt.polish_time_s <= 86400)) {
    throw InputError("polish_time_s", fmt::format("must be in [0, 86400] s, got {}", opt.polish_time_s));
  }
  check_polish_solves(opt.polish_solves);
  if (opt.max_points < 0 || opt.max_points > 1'000'000'000) {
    throw InputError("max_points", fmt::format("must be in [1, 1e9] (0: none), got {}", opt.max_points));
  }
  if (opt.threads < 1 || opt.threads > 1024) {
    throw InputError("threads", fmt::format("must be in [1, 1024], got {}", opt.threads));
  }
  return opt;
}

namespace {
const Dag& non_null(const std::shared_ptr<const Dag>& dag) {
  if (!dag) throw std::invalid_argument("solve_frontier: the DAG is null");
  return *dag;
}
}  // namespace

FrontierBuilder::FrontierBuilder(std::shared_ptr<const Dag> dag, const Profile& profile, const PlannerOptions& opt)
    : opt_(validated(opt)),
      profile_(profile),
      csr_(non_null(dag)),
      costs_(*dag, profile, opt.unit_time_s, opt.p_block_w, opt.mode == PlannerMode::kCertified),
      op_raw_(costs_.op_points()),
      evaluator_(csr_, dag->num_ranks(), costs_.op_candidates(), opt.p_block_w, opt.reclaim_slack),
      walk_(csr_, costs_, opt.min_cut_engine) {
  f_.dag_ = std::move(dag);
  f_.p_block_w = opt.p_block_w;
  f_.unit_time_s = opt.unit_time_s;
  f_.reclaim_ = opt.reclaim_slack;
  f_.candidates_ = costs_.candidates();
  f_.op_candidates_ = costs_.op_candidates();
}

void FrontierBuilder::record_point(std::int64_t step, const std::vector<std::uint16_t>& choice, double tighten_to_s) {
  FrontierPoint p;
  p.step = step;
  p.tightened_to_s = tighten_to_s;
  if (tighten_to_s > 0) {
    p.energy_before_reclaim_j = f_.make_plan(choice, false, tighten_to_s).total_energy_j();
    const FrequencyPlan plan = f_.make_plan(choice, f_.reclaim_, tighten_to_s);
    p.time_s = plan.timeline.time_s;
    p.energy_j = plan.total_energy_j();
  } else {
    evaluator_.evaluate(choice, p.energy_before_reclaim_j, p.time_s, p.energy_j);
  }
  raw_points_.push_back({p, step < 0});
}

void FrontierBuilder::keep_at_most_max_points(std::vector<FrontierPoint>& kept) {
  const auto k = static_cast<std::size_t>(opt_.max_points);
  if (k == 0 || kept.size() <= k) return;
  const std::size_t n = kept.size();
  std::vector<FrontierPoint> spread;
  for (std::size_t j = 0; j < k; ++j) spread.push_back(kept[k == 1 ? 0 : (j * (n - 1) + (k - 1) / 2) / (k - 1)]);
  if (!f_.partial()) {
    f_.stop_reason = Frontier::StopReason::kMaxPoints;
    f_.partial_detail = fmt::format("the solve found {} frontier points; {} of them are kept (max points), spread evenly "
                                    "from the slowest to the fastest", n, k);
  }
  kept = std::move(spread);
}

void FrontierBuilder::report(SolveStage stage, double fraction, const std::stop_token& stop,
                             std::atomic<double>* beside, double& last) const {
  fraction = std::clamp(fraction, 0.0, 1.0);
  if (stop.stop_possible()) {  // beside the walk: the solve's thread reports it
    if (beside != nullptr) beside->store(fraction, std::memory_order_relaxed);
    return;
  }
  if (!opt_.progress || fraction == last || (fraction < 1 && last >= 0 && fraction - last < 0.01)) return;
  last = fraction;
  opt_.progress(stage, fraction);
}

Frontier FrontierBuilder::run() {
  start_ = std::chrono::steady_clock::now();
  const auto t0 = start_;
  const Dag& dag = *f_.dag_;
  const int n = dag.num_ops();
  f_.start_choice_ = walk_.choice();
  f_.step_end_.push_back(0);
  // T_min in units: every op at its fastest candidate (for progress reporting).
  const std::int64_t t_min_units = walk_.fastest_units();
  const std::int64_t t_max_units = walk_.iteration_units();
  throw_if_cancelled();  // each phase before the walk costs seconds on the largest DAGs
  record_point(0, walk_.choice());
  throw_if_cancelled();
  std::int64_t step = 0;
  double walk_reported = -1;
  report(SolveStage::kGraphCutWalk, 0, {}, nullptr, walk_reported);
  // User bounds (PlannerOptions::time_budget_s, max_points): the walk stops early and the
  // frontier found so far is returned, marked partial.
  const double pipe_w = opt_.mode == PlannerMode::kCertified ? opt_.p_block_w * dag.num_ranks() : 0.0;
  RunningFront front;
  FrontierPoint all_max;  // for the count: the all-max plan joins the frontier at the end
  if (opt_.max_points > 0) {
    evaluator_.evaluate(std::vector<std::uint16_t>(n, 0), all_max.energy_before_reclaim_j, all_max.time_s,
                        all_max.energy_j);
    front.add(raw_points_.back().first.time_s, raw_points_.back().first.energy_j - pipe_w * raw_points_.back().first.time_s);
  }
  // threads >= 2 (kCertified): the bound stage's first part runs beside the walk, from the
  // all-max plan's time (T_min unless a graph-cut plan is faster; certify() checks): the LP
  // stage's sampling, or the whole hull walk.
  Beside beside;
  std::exception_ptr beside_error;
  std::atomic<double> beside_fraction{0};  // its progress (PlannerOptions::progress)
  std::mutex beside_mutex;
  std::condition_variable beside_cv;
  bool beside_done = false;    // under beside_mutex
  std::jthread beside_thread;  // declared last: joined (after a stop request) before the rest goes
  const bool beside_lp = resolve_bound_method(opt_.bound_method, n) == BoundMethod::kLp;
  if (opt_.mode == PlannerMode::kCertified && opt_.threads >= 2 && opt_.max_points == 0 && !over_time_budget()) {
    FrontierPoint fastest;
    evaluator_.evaluate(std::vector<std::uint16_t>(n, 0), fastest.energy_before_reclaim_j, fastest.time_s,
                        fastest.energy_j);
    beside_thread = std::jthread([&, t_lo = fastest.time_s](std::stop_token stop) {
      try {
        const auto s0 = std::chrono::steady_clock::now();
        if (beside_lp) {
          beside.lp = std::make_unique<LpStage>(*f_.dag_, op_raw_, opt_, t_lo);
          beside.lp->stop = std::move(stop);
          beside.lp->fraction = &beside_fraction;
          lp_sample(*beside.lp);
          beside.lp->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
        } else {
          beside.hull = std::make_unique<HullWalkStage>();
          beside.hull->t_end = 2 * t_lo;
          beside.hull->stop = std::move(stop);
          beside.hull->fraction = &beside_fraction;
          hull_walk(*beside.hull);
        }
      } catch (...) {
        beside_error = std::current_exception();
      }
      {
        const std::lock_guard lock(beside_mutex);
        beside_done = true;
      }
      beside_cv.notify_all();
    });
  }
  auto stop_walk = [&] {
    if (over_time_budget()) {
      f_.stop_reason = Frontier::StopReason::kTimeBudget;
    } else if (opt_.max_points > 0 &&
               front.size_with(all_max.time_s, all_max.energy_j - pipe_w * all_max.time_s) >=
                   static_cast<std::size_t>(opt_.max_points)) {
      f_.stop_reason = Frontier::StopReason::kMaxPoints;
    } else {
      return false;
    }
    const double done = t_max_units > t_min_units ? static_cast<double>(t_max_units - walk_.iteration_units()) /
                                                         static_cast<double>(t_max_units - t_min_units)
                                                   : 1.0;
    const std::string jump = f_.stop_reason == Frontier::StopReason::kMaxPoints && opt_.max_points == 1
                                 ? std::string("the frontier is one plan, at the all-max plan's time")
                                 : fmt::format("the frontier jumps from T = {:.6g} s to the all-max plan",
                                               raw_points_.back().first.time_s);
    f_.partial_detail = fmt::format(
        "{} reached after {} graph-cut step{}, {:.1f} % of the T_max -> T_min range; {}{}",
        f_.stop_reason == Frontier::StopReason::kTimeBudget
            ? fmt::format("time budget of {} s", opt_.time_budget_s)
            : fmt::format("{} frontier point{} (max points)", opt_.max_points, opt_.max_points == 1 ? "" : "s"),
        step, step == 1 ? "" : "s", 100 * done, jump,
        opt_.mode == PlannerMode::kCertified ? "; the LP stage (lower bound, LP-rounded plans) was skipped" : "");
    return true;
  };
  // The min-cut network: seconds on the largest DAGs, with cancellation polled inside.
  if (!over_time_budget()) walk_.prepare([this] { throw_if_cancelled(); });
  throw_if_cancelled();
  while (!stop_walk() && walk_.step()) {
    ++step;
    throw_if_cancelled();
    const bool changed = walk_.update_choice(f_.changes_);
    f_.step_end_.push_back(f_.changes_.size());
    // Same plan as the previous step (!changed): the same point, which the Pareto filter
    // below would drop as a duplicate of the earlier one anyway.
    if (changed) {
      record_point(step, walk_.choice());
      if (opt_.max_points > 0) {
        const FrontierPoint& p = raw_points_.back().first;
        front.add(p.time_s, p.energy_j - pipe_w * p.time_s);
      }
    }
    report(SolveStage::kGraphCutWalk,
           t_max_units > t_min_units ? static_cast<double>(t_max_units - walk_.iteration_units()) /
                                           static_cast<double>(t_max_units - t_min_units)
                                     : 1.0,
           {}, nullptr, walk_reported);
  }
  if (!f_.partial()) report(SolveStage::kGraphCutWalk, 1, {}, nullptr, walk_reported);
  f_.num_steps = step;
  // The all-max plan is a candidate too, so T_min is never slower than it; and the last
  // graph-cut plan tightened to the all-max time (quantization can leave it a little slower).
  {
    std::vector<std::uint16_t> fastest(n, 0);
    record_point(-1, fastest);
    record_point(step, walk_.choice(), raw_points_.back().first.time_s);
  }
  if (beside_thread.joinable()) {
    // Waiting for the stage beside the walk: report its progress and poll cancellation here,
    // on the solve's thread (the stage never calls the user's hooks itself).
    const SolveStage stage = beside_lp ? SolveStage::kLpSolves : SolveStage::kHullWalk;
    double reported = -1;
    std::unique_lock lock(beside_mutex);
    while (!beside_cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return beside_done; })) {
      throw_if_cancelled();
      report(stage, beside_fraction.load(std::memory_order_relaxed), {}, nullptr, reported);
    }
    lock.unlock();
    beside_thread.join();
    if (beside_error) std::rethrow_exception(beside_error);
    if (beside.lp) beside.lp->reported = reported;
    if (beside.hull) beside.hull->reported = reported;
  }
  std::vector<FrontierPoint> kept;
  if (opt_.mode == PlannerMode::kCertified && !f_.partial()) {
    certify(std::move(beside));
    polish();  // PlannerOptions::polish_time_s (window_polish.cpp)
    kept = pareto_filter(raw_points_, pipe_w, kFrontierDominanceRelTol);
    keep_at_most_max_points(kept);
    // Keep only the stored plans that survived, renumbered.
    std::vector<std::vector<std::uint16_t>> stored;
    for (auto& p : kept) {
      if (p.stored_plan < 0) continue;
      stored.push_back(std::move(stored_[p.stored_plan]));
      p.stored_plan = static_cast<std::int32_t>(stored.size() - 1);
    }
    f_.stored_plans_ = std::move(stored);
    stored_.clear();
    for (auto& p : kept) p.lower_bound_j = f_.lower_bound_at(p.time_s);
  } else {
    kept = pareto_filter(raw_points_, pipe_w, kFrontierDominanceRelTol);
    keep_at_most_max_points(kept);
  }
  std::reverse(kept.begin(), kept.end());  // slowest first
  f_.points_ = std::move(kept);
  if (!f_.points_.empty()) {
    const auto& fastest = f_.points_.back();
    f_.reclaimed_energy_j = fastest.energy_before_reclaim_j - fastest.energy_j;
  }
  f_.num_max_flows = walk_.num_max_flows();
  f_.max_flow_work = walk_.max_flow_work();
  f_.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(f_);
}

}  // namespace perseus
