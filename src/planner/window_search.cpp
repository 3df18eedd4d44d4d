// Large-neighbourhood search over windows of a plan, each window's exact subproblem solved by
// COIN-OR CBC (see window_search.hpp).
#include "window_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

#include <fmt/core.h>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include "cbc_driver.hpp"
#include "plan_improve.hpp"

namespace perseus::detail {

WindowSearch::WindowSearch(const Dag& dag, const std::vector<const Candidates*>& cands, double p_block_w,
                           WindowSearchConfig config)
    : dag_(dag), cands_(cands), p_block_w_(p_block_w), config_(config) {
  config_.window_ops = std::clamp(config_.window_ops, 1, std::max(1, dag.num_ops()));
  config_.window_nodes = std::max(0, config_.window_nodes);
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
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return tl.start_s[a] + tl.end_s[a] < tl.start_s[b] + tl.end_s[b]; });
  for (int first = 0; first < n; first += std::max(1, w / 2)) {
    add(std::vector<int>(order.begin() + first, order.begin() + std::min(n, first + w)));
    if (first + w >= n) break;
  }
  const int stages = std::max(1, dag_.num_stages()), mbs = std::max(1, dag_.num_microbatches());
  // Blocks of consecutive microbatches across all stages, and of adjacent stage pairs.
  const int per_cell = std::max(1, n / (stages * mbs));  // ops per (stage, microbatch)
  for (const int span : {stages, std::min(stages, 2)}) {
    const int mb_span = std::clamp(w / (per_cell * span), 1, mbs);
    for (int s0 = 0; s0 + span <= stages; s0 += span == stages ? stages : 1) {
      for (int m0 = 0; m0 < mbs; m0 += std::max(1, mb_span / 2)) {
        std::vector<int> ops;
        for (int i = 0; i < n; ++i) {
          const Computation& c = dag_.op(i);
          if (c.stage >= s0 && c.stage < s0 + span && c.microbatch >= m0 && c.microbatch < m0 + mb_span)
            ops.push_back(i);
        }
        add(std::move(ops));
        if (m0 + mb_span >= mbs) break;
      }
    }
  }
  return out;
}

bool WindowSearch::solve_window(const std::vector<int>& free_ops, std::vector<std::uint16_t>& choice, double deadline_s,
                                const std::function<bool()>& stop) {
  const int n = dag_.num_ops();
  const int nf = static_cast<int>(free_ops.size());
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::vector<int> pos(n, -1);  // index of op i in free_ops, -1 when held
  for (int f = 0; f < nf; ++f) pos[free_ops[f]] = f;
  std::vector<double> dur(n);  // held ops' durations (free ops: their fastest allowed)
  std::vector<int> lo_k(nf), hi_k(nf);
  for (int f = 0; f < nf; ++f) {
    const int i = free_ops[f], m = static_cast<int>(cands_[i]->points.size());
    lo_k[f] = config_.radius < 0 ? 0 : std::max(0, choice[i] - config_.radius);
    hi_k[f] = config_.radius < 0 ? m - 1 : std::min(m - 1, choice[i] + config_.radius);
  }
  for (int i = 0; i < n; ++i) dur[i] = cands_[i]->points[pos[i] < 0 ? choice[i] : lo_k[pos[i]]].time_s;
  // The held ops are condensed away: a path of the DAG is a chain of free ops joined by paths
  // through held ops only, so the window's constraints are exactly
  //   s_a >= head_a,   s_a + d_a + tail_a <= τ,   s_b >= s_a + d_a + L_ab,
  // head/tail: the longest held-only path from a source to a / from a's end to a sink (0 when a
  // is a source / sink), L_ab: the longest held-only path from a's end to b's start. The column
  // bounds also use every op's earliest / latest start with the free ops at their fastest.
  const auto& topo = dag_.topological_order();
  std::vector<double> es(n, 0.0), ls(n, 0.0), head(n, kNone), tail(n, kNone);
  for (int v : topo) {
    if (dag_.predecessors(v).empty()) head[v] = 0;
    for (int u : dag_.predecessors(v)) {
      es[v] = std::max(es[v], es[u] + dur[u]);
      if (pos[u] < 0 && head[u] > kNone) head[v] = std::max(head[v], head[u] + dur[u]);
    }
  }
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const int v = *it;
    double lf = deadline_s;
    double after = dag_.successors(v).empty() ? 0.0 : kNone;  // held-only path from v's end to a sink
    for (int w : dag_.successors(v)) {
      lf = std::min(lf, ls[w]);
      if (pos[w] < 0 && tail[w] > kNone) after = std::max(after, tail[w]);
    }
    ls[v] = lf - dur[v];
    tail[v] = pos[v] < 0 ? (after > kNone ? after + dur[v] : kNone) : after;  // free ops: from their end
  }
  std::vector<double> link(static_cast<std::size_t>(nf) * nf, kNone);  // L_ab at [a * nf + b]
  std::vector<double> dist(n);
  for (int a = 0; a < nf; ++a) {
    std::fill(dist.begin(), dist.end(), kNone);
    dist[free_ops[a]] = 0;  // from a's end
    for (int v : topo) {
      if (dist[v] == kNone) continue;
      const double end = v == free_ops[a] ? 0.0 : dist[v] + dur[v];
      for (int w : dag_.successors(v)) {
        if (pos[w] >= 0) {
          link[a * nf + pos[w]] = std::max(link[a * nf + pos[w]], end);
        } else {
          dist[w] = std::max(dist[w], end);
        }
      }
    }
  }
  // A link implied by a chain through another free op c (at c's fastest) is redundant.
  for (int a = 0; a < nf; ++a)
    for (int b = 0; b < nf; ++b) {
      double& l = link[a * nf + b];
      if (l == kNone) continue;
      for (int c = 0; c < nf && l > kNone; ++c)
        if (c != a && c != b && link[a * nf + c] > kNone && link[c * nf + b] > kNone &&
            link[a * nf + c] + dur[free_ops[c]] + link[c * nf + b] >= l)
          l = kNone;
    }
  // Columns: s_a per free op, then x_ak per free op and allowed candidate.
  auto eff = [&](int i, int k) {
    const OperatingPoint& p = cands_[i]->points[k];
    return p.energy_j - p_block_w_ * p.time_s;
  };
  const double slack = 1e-9 * deadline_s;  // rounding: ES = LS on a path exactly as long as the deadline
  std::vector<double> col_lb, col_ub, obj;
  std::vector<int> first_x(nf);
  for (int f = 0; f < nf; ++f) {
    const int i = free_ops[f];
    col_lb.push_back(std::max(0.0, std::max(es[i], head[i]) - slack));
    col_ub.push_back(std::max(es[i], ls[i]) + slack);
    obj.push_back(0);
  }
  int cols = nf;
  for (int f = 0; f < nf; ++f) {
    const int i = free_ops[f];
    first_x[f] = cols;
    for (int k = lo_k[f]; k <= hi_k[f]; ++k) {
      col_lb.push_back(0);
      col_ub.push_back(1);
      obj.push_back(eff(i, k) - eff(i, choice[i]));  // gain over the incumbent: its value is 0
      ++cols;
    }
  }
  std::vector<int> row_idx, col_idx;
  std::vector<double> elem, row_lb, row_ub;
  int rows = 0;
  auto add_duration = [&](int f, double sign) {  // sign × d_a into the current row
    for (int k = lo_k[f]; k <= hi_k[f]; ++k) {
      row_idx.push_back(rows);
      col_idx.push_back(first_x[f] + k - lo_k[f]);
      elem.push_back(sign * cands_[free_ops[f]]->points[k].time_s);
    }
  };
  for (int a = 0; a < nf; ++a) {
    for (int b = 0; b < nf; ++b) {  // s_b − s_a − d_a >= L_ab
      if (link[a * nf + b] == kNone) continue;
      row_idx.insert(row_idx.end(), {rows, rows});
      col_idx.insert(col_idx.end(), {b, a});
      elem.insert(elem.end(), {1.0, -1.0});
      add_duration(a, -1.0);
      row_lb.push_back(link[a * nf + b]);
      row_ub.push_back(COIN_DBL_MAX);
      ++rows;
    }
    if (tail[free_ops[a]] > kNone) {  // s_a + d_a <= τ − tail_a
      row_idx.push_back(rows);
      col_idx.push_back(a);
      elem.push_back(1.0);
      add_duration(a, 1.0);
      row_lb.push_back(-COIN_DBL_MAX);
      row_ub.push_back(deadline_s - tail[free_ops[a]]);
      ++rows;
    }
  }
  for (int f = 0; f < nf; ++f) {  // Σ_k x_ak = 1
    for (int k = lo_k[f]; k <= hi_k[f]; ++k) {
      row_idx.push_back(rows);
      col_idx.push_back(first_x[f] + k - lo_k[f]);
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
  for (int c = nf; c < cols; ++c) solver.setInteger(c);
  const double before = energy_at(choice, deadline_s);
  // Only plans better than the incumbent (objective 0) by a relative 1e-9 are of interest.
  const std::string cutoff = fmt::format("{:.17g}", -1e-9 * std::abs(before));
  // A node count (the same work on any machine) or CBC's wall-clock seconds.
  const bool by_nodes = config_.window_nodes > 0;
  const std::string limit =
      by_nodes ? std::to_string(config_.window_nodes) : fmt::format("{:.6g}", config_.window_time_s);
  // The feasibility pump and RINS heuristics are off: their sub-branch-and-bound can abort the
  // process (an assertion in OsiClpSolverInterface::crunch() under CglPreProcess, CBC 2.10.8,
  // seen on the llama profile), and with the incumbent as cutoff they rarely matter.
  const std::vector<double> x = solve_with_cbc(
      solver, {"-cutoff", cutoff, by_nodes ? "-maxNodes" : "-sec", limit, "-feas", "off", "-rins", "off"}, stop);
  if (x.empty()) return false;
  std::vector<std::uint16_t> next = choice;
  for (int f = 0; f < nf; ++f) {
    int best = lo_k[f];
    for (int k = lo_k[f]; k <= hi_k[f]; ++k)
      if (x[first_x[f] + k - lo_k[f]] > x[first_x[f] + best - lo_k[f]]) best = k;
    next[free_ops[f]] = static_cast<std::uint16_t>(best);
  }
  return keep_if_better(std::move(next), choice, deadline_s);
}

bool WindowSearch::keep_if_better(std::vector<std::uint16_t> next, std::vector<std::uint16_t>& choice,
                                  double deadline_s) const {
  // Slack left by the held ops is filled up to the deadline (never raises energy), unless
  // that would cross it (fill_slack's relative 1e-12 tolerance).
  std::vector<std::uint16_t> filled = next;
  std::vector<double> scratch, latest;
  fill_slack(dag_, cands_, filled, scratch, latest, deadline_s);
  const double e_filled = energy_at(filled, deadline_s), e_next = energy_at(next, deadline_s);
  const double after = std::min(e_filled, e_next);
  if (!(after < energy_at(choice, deadline_s))) return false;
  choice = e_filled <= e_next ? std::move(filled) : std::move(next);
  return true;
}

void WindowSearch::check_plan(const std::vector<std::uint16_t>& choice, double deadline_s) const {
  if (static_cast<int>(choice.size()) != dag_.num_ops())
    throw std::invalid_argument(fmt::format("plan has {} ops, the DAG {}", choice.size(), dag_.num_ops()));
  for (int i = 0; i < dag_.num_ops(); ++i)
    if (choice[i] >= cands_[i]->points.size())
      throw std::invalid_argument(fmt::format("op {}: candidate {} out of range", i, choice[i]));
  if (!std::isfinite(energy_at(choice, deadline_s)))
    throw std::invalid_argument(fmt::format("plan is slower than the deadline {} s", deadline_s));
}

bool WindowSearch::improve(std::vector<std::uint16_t>& choice, double deadline_s, const std::function<bool()>& stop,
                           WindowSearchStats& stats, int max_windows) {
  check_plan(choice, deadline_s);
  bool any = false;
  std::size_t unimproved = 0;  // windows in a row that improved nothing
  for (int handed = 0;;) {
    const auto round = windows(choice);  // the time slices follow the incumbent
    for (const auto& window : round) {
      if (unimproved >= round.size()) return any;  // every window is optimal with the rest held
      if ((max_windows >= 0 && handed++ >= max_windows) || (stop && stop())) {
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
