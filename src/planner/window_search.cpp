// Large-neighbourhood search over windows of a plan, each window's exact subproblem solved by
// COIN-OR CBC (see window_search.hpp).
#include "window_search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

#include <CbcEventHandler.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#include <fmt/core.h>

#include "plan_improve.hpp"

namespace perseus::detail {

namespace {

/// Ends CBC's search at the next node once `stop` returns true.
class StopHandler final : public CbcEventHandler {
 public:
  explicit StopHandler(const std::function<bool()>* stop) : stop_(stop) {}
  CbcAction event(CbcEvent which) override {
    if ((which == node || which == treeStatus || which == solution || which == heuristicSolution) && stop_ &&
        *stop_ && (*stop_)())
      return CbcEventHandler::stop;
    return noAction;
  }
  CbcEventHandler* clone() const override { return new StopHandler(*this); }

 private:
  const std::function<bool()>* stop_;
};

int no_callback(CbcModel*, int) { return 0; }

}  // namespace

WindowSearch::WindowSearch(const Dag& dag, const std::vector<const Candidates*>& cands, double p_block_w,
                           WindowSearchConfig config)
    : dag_(dag), cands_(cands), p_block_w_(p_block_w), config_(config) {
  config_.window_ops = std::clamp(config_.window_ops, 1, std::max(1, dag.num_ops()));
}

double WindowSearch::energy_at(const std::vector<std::uint16_t>& choice, double deadline_s) const {
  const int n = dag_.num_ops();
  std::vector<double> time(n);
  double energy = 0, busy = 0;
  for (int i = 0; i < n; ++i) {
    const OperatingPoint& p = cands_[i]->points[choice[i]];
    time[i] = p.time_s;
    energy += p.energy_j;
    busy += p.time_s;
  }
  const double T = compute_timeline(dag_, time).time_s;
  if (!(T <= deadline_s)) return std::numeric_limits<double>::infinity();
  return energy + p_block_w_ * (dag_.num_ranks() * deadline_s - busy);
}

std::vector<std::vector<int>> WindowSearch::windows(const std::vector<std::uint16_t>& choice) const {
  const int n = dag_.num_ops();
  const int w = config_.window_ops;
  std::vector<std::vector<int>> out;
  std::set<std::vector<int>> seen;
  auto add = [&](std::vector<int> ops) {
    std::sort(ops.begin(), ops.end());
    if (!ops.empty() && seen.insert(ops).second) out.push_back(std::move(ops));
  };
  // Slices of the incumbent's schedule: ops by the middle of their run, w at a time, half
  // overlapping (consecutive work on every rank).
  std::vector<double> time(n);
  for (int i = 0; i < n; ++i) time[i] = cands_[i]->points[choice[i]].time_s;
  const Timeline tl = compute_timeline(dag_, time);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return tl.start_s[a] + tl.end_s[a] < tl.start_s[b] + tl.end_s[b];
  });
  const int stride = std::max(1, w / 2);
  for (int first = 0; first < n; first += stride) {
    add(std::vector<int>(order.begin() + first, order.begin() + std::min(n, first + w)));
    if (first + w >= n) break;
  }
  // Blocks of consecutive microbatches across all stages, and of adjacent stage pairs.
  const int stages = std::max(1, dag_.num_stages()), mbs = std::max(1, dag_.num_microbatches());
  const int per_cell = std::max(1, n / (stages * mbs));  // ops per (stage, microbatch)
  for (const int span : {stages, std::min(stages, 2)}) {
    const int mb_span = std::clamp(w / (per_cell * span), 1, mbs);
    for (int s0 = 0; s0 + span <= stages; s0 += span == stages ? stages : 1) {
      for (int m0 = 0; m0 < mbs; m0 += std::max(1, mb_span / 2)) {
        std::vector<int> ops;
        for (int i = 0; i < n; ++i) {
          const Computation& c = dag_.op(i);
          if (c.stage >= s0 && c.stage < s0 + span && c.microbatch >= m0 && c.microbatch < m0 + mb_span) ops.push_back(i);
        }
        add(std::move(ops));
        if (m0 + mb_span >= mbs) break;
      }
    }
  }
  return out;
}

bool WindowSearch::solve_window(const std::vector<int>& free_ops, std::vector<std::uint16_t>& choice,
                                double deadline_s, const std::function<bool()>& stop) {
  const int n = dag_.num_ops();
  // Columns: s_0..s_{n-1}, then x_ik for the free ops' allowed candidates.
  std::vector<int> first_x(n, -1), lo_k(n, 0), hi_k(n, 0);
  std::vector<double> col_lb(n, 0.0), col_ub(n, deadline_s), obj(n, 0.0);
  auto eff = [&](int i, int k) {
    const OperatingPoint& p = cands_[i]->points[k];
    return p.energy_j - p_block_w_ * p.time_s;
  };
  int cols = n;
  for (int i : free_ops) {
    const int m = static_cast<int>(cands_[i]->points.size());
    lo_k[i] = config_.radius < 0 ? 0 : std::max(0, choice[i] - config_.radius);
    hi_k[i] = config_.radius < 0 ? m - 1 : std::min(m - 1, choice[i] + config_.radius);
    first_x[i] = cols;
    for (int k = lo_k[i]; k <= hi_k[i]; ++k) {
      col_lb.push_back(0);
      col_ub.push_back(1);
      obj.push_back(eff(i, k) - eff(i, choice[i]));  // gain over the incumbent: its value is 0
      ++cols;
    }
  }
  // Start-time bounds: earliest start and latest start with every free op at its fastest
  // allowed candidate (valid for every feasible plan; they help CBC's presolve).
  std::vector<double> fast(n);
  for (int i = 0; i < n; ++i) fast[i] = cands_[i]->points[first_x[i] >= 0 ? lo_k[i] : choice[i]].time_s;
  std::vector<double> es(n, 0.0), ls(n, 0.0);
  const auto& topo = dag_.topological_order();
  for (int v : topo)
    for (int u : dag_.predecessors(v)) es[v] = std::max(es[v], es[u] + fast[u]);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const int v = *it;
    double lf = deadline_s;
    for (int w : dag_.successors(v)) lf = std::min(lf, ls[w]);
    ls[v] = lf - fast[v];
  }
  const double slack = 1e-9 * deadline_s;  // rounding: ES = LS on a path exactly as long as the deadline
  for (int i = 0; i < n; ++i) {
    col_lb[i] = std::max(0.0, es[i] - slack);
    col_ub[i] = std::max(es[i], ls[i]) + slack;
  }
  // Rows.
  std::vector<int> row_idx, col_idx;
  std::vector<double> elem, row_lb, row_ub;
  int rows = 0;
  auto duration_terms = [&](int i, double sign) {  // sign × d_i into the current row; returns the constant part
    if (first_x[i] < 0) return sign * cands_[i]->points[choice[i]].time_s;
    for (int k = lo_k[i]; k <= hi_k[i]; ++k) {
      row_idx.push_back(rows);
      col_idx.push_back(first_x[i] + k - lo_k[i]);
      elem.push_back(sign * cands_[i]->points[k].time_s);
    }
    return 0.0;
  };
  for (int i = 0; i < n; ++i) {
    for (int j : dag_.successors(i)) {  // s_j − s_i − d_i ≥ 0
      row_idx.insert(row_idx.end(), {rows, rows});
      col_idx.insert(col_idx.end(), {j, i});
      elem.insert(elem.end(), {1.0, -1.0});
      const double c = duration_terms(i, -1.0);
      row_lb.push_back(-c);
      row_ub.push_back(COIN_DBL_MAX);
      ++rows;
    }
    if (dag_.successors(i).empty()) {  // s_i + d_i ≤ τ
      row_idx.push_back(rows);
      col_idx.push_back(i);
      elem.push_back(1.0);
      const double c = duration_terms(i, 1.0);
      row_lb.push_back(-COIN_DBL_MAX);
      row_ub.push_back(deadline_s - c);
      ++rows;
    }
  }
  for (int i : free_ops) {  // Σ_k x_ik = 1
    for (int k = lo_k[i]; k <= hi_k[i]; ++k) {
      row_idx.push_back(rows);
      col_idx.push_back(first_x[i] + k - lo_k[i]);
      elem.push_back(1.0);
    }
    row_lb.push_back(1.0);
    row_ub.push_back(1.0);
    ++rows;
  }
  const CoinPackedMatrix matrix(false, row_idx.data(), col_idx.data(), elem.data(),
                                static_cast<CoinBigIndex>(elem.size()));
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(), row_ub.data());
  for (int c = n; c < cols; ++c) solver.setInteger(c);
  const double before = energy_at(choice, deadline_s);
  if (const char* w = std::getenv("PERSEUS_LNS_WRITE")) solver.writeLp(w);
  CbcModel model(solver);
  StopHandler handler(&stop);
  model.passInEventHandler(&handler);
  model.messageHandler()->setLogLevel(0);
  CbcSolverUsefulData data;
  data.noPrinting_ = true;
  data.useSignalHandler_ = false;
  CbcMain0(model, data);
  // Only plans better than the incumbent (objective 0) by a relative 1e-9 are of interest.
  const std::string cutoff = fmt::format("{:.17g}", -1e-9 * std::abs(before));
  const std::string seconds = fmt::format("{:.6g}", config_.window_time_s);
  const char* argv[] = {"perseus", "-log", "0", "-cutoff", cutoff.c_str(), "-sec", seconds.c_str(), "-solve", "-quit"};
  CbcMain1(static_cast<int>(std::size(argv)), argv, model, no_callback, data);
  const double* x = model.bestSolution();
  if (std::getenv("PERSEUS_LNS_DEBUG3") && !x) std::fprintf(stderr, "no solution: status %d secondary %d infeasible %d\n", model.status(), model.secondaryStatus(), model.isProvenInfeasible());
  if (std::getenv("PERSEUS_LNS_DEBUG2")) {
    std::fprintf(stderr, "window %zu ops, %d cols, %d rows: status %d, sols %d, obj %.4f, nodes %d, %.3f s\n", free_ops.size(), cols, rows,
                 model.status(), model.getSolutionCount(), x ? model.getObjValue() : 0.0, model.getNodeCount(), model.getCurrentSeconds());
  }
  if (std::getenv("PERSEUS_LNS_DEBUG3")) std::fprintf(stderr, "x %p count %d status %d sec %d inf %d\n", (const void*)x, model.getSolutionCount(), model.status(), model.secondaryStatus(), model.isProvenInfeasible());
  // CBC may leave the solution of a problem its preprocessing solved without counting it:
  // any x it returns is rounded and judged by the profile below.
  if (x == nullptr) return false;
  std::vector<std::uint16_t> next = choice;
  for (int i : free_ops) {
    int best = lo_k[i];
    for (int k = lo_k[i]; k <= hi_k[i]; ++k)
      if (x[first_x[i] + k - lo_k[i]] > x[first_x[i] + best - lo_k[i]]) best = k;
    next[i] = static_cast<std::uint16_t>(best);
  }
  // Slack left by the held ops is filled up to the deadline (never raises energy), unless
  // that would cross it (fill_slack's relative 1e-12 tolerance).
  std::vector<std::uint16_t> filled = next;
  std::vector<double> scratch, latest;
  fill_slack(dag_, cands_, filled, scratch, latest, deadline_s);
  const double e_filled = energy_at(filled, deadline_s), e_next = energy_at(next, deadline_s);
  const double after = std::min(e_filled, e_next);
  if (std::getenv("PERSEUS_LNS_DEBUG3")) {
    std::vector<double> tt(n);
    for (int i = 0; i < n; ++i) tt[i] = cands_[i]->points[next[i]].time_s;
    std::fprintf(stderr, "before %.9g after %.9g  T-tau %.3g obj %.6g\n", before, after, compute_timeline(dag_, tt).time_s - deadline_s, model.getObjValue());
  }
  if (!(after < before)) return false;
  choice = e_filled <= e_next ? std::move(filled) : std::move(next);
  return true;
}

bool WindowSearch::improve(std::vector<std::uint16_t>& choice, double deadline_s, const std::function<bool()>& stop,
                           WindowSearchStats& stats) {
  if (static_cast<int>(choice.size()) != dag_.num_ops())
    throw std::invalid_argument(fmt::format("plan has {} ops, the DAG {}", choice.size(), dag_.num_ops()));
  for (int i = 0; i < dag_.num_ops(); ++i)
    if (choice[i] >= cands_[i]->points.size())
      throw std::invalid_argument(fmt::format("op {}: candidate {} out of range", i, choice[i]));
  if (!std::isfinite(energy_at(choice, deadline_s)))
    throw std::invalid_argument(fmt::format("plan is slower than the deadline {} s", deadline_s));
  bool any = false;
  std::size_t unimproved = 0;  // windows in a row that improved nothing
  for (;;) {
    const auto round = windows(choice);  // the time slices follow the incumbent
    for (const auto& window : round) {
      if (unimproved >= round.size()) return any;
      if (stop && stop()) {
        stats.stopped = true;
        return any;
      }
      ++stats.windows;
      if (solve_window(window, choice, deadline_s, stop)) {
        ++stats.improved;
        any = true;
        unimproved = 0;
      } else {
        ++unimproved;
      }
    }
  }
}

}  // namespace perseus::detail
