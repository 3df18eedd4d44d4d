// The polish stage's whole-DAG solve on hull vertices (WindowSearch::improve_whole_dag_on_hull(),
// window_search.hpp).
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/core.h>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include "cbc_driver.hpp"
#include "plan_improve.hpp"
#include "window_search.hpp"

namespace perseus::detail {

bool WindowSearch::improve_whole_dag_on_hull(std::vector<std::uint16_t>& choice, double deadline_s, int max_nodes,
                                             const std::function<bool()>& stop) {
  check_plan(choice, deadline_s);
  if (max_nodes < 0) throw std::invalid_argument(fmt::format("max_nodes must be >= 0, got {}", max_nodes));
  const int n = dag_.num_ops();
  const HullVertices hull(cands_, p_block_w_);
  // Columns: x_ik (op i at its k-th hull vertex), then d_i, then s_i (as the bench's LP file
  // orders them: CBC's heuristics follow column order).
  std::vector<int> first_x(n + 1, 0);
  for (int i = 0; i < n; ++i) first_x[i + 1] = first_x[i] + static_cast<int>(hull.of_op[i]->size());
  const int nx = first_x[n], d0 = nx, s0 = nx + n, cols = nx + 2 * n;
  std::vector<double> col_lb(cols, 0.0), col_ub(cols, COIN_DBL_MAX), obj(cols, 0.0);
  for (int i = 0; i < n; ++i) {
    const auto& list = *hull.of_op[i];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const OperatingPoint& p = cands_[i]->points[list[k]];
      obj[first_x[i] + k] = p.energy_j - p_block_w_ * p.time_s;
      col_ub[first_x[i] + k] = 1.0;
    }
  }
  std::vector<int> row_idx, col_idx;
  std::vector<double> elem, row_lb, row_ub;
  int rows = 0;
  auto add_row = [&](std::initializer_list<std::pair<int, double>> terms, double lb, double ub) {
    for (const auto& [c, v] : terms) {
      row_idx.push_back(rows);
      col_idx.push_back(c);
      elem.push_back(v);
    }
    row_lb.push_back(lb);
    row_ub.push_back(ub);
    ++rows;
  };
  for (int i = 0; i < n; ++i) {
    const auto& list = *hull.of_op[i];
    for (std::size_t k = 0; k < list.size(); ++k) {  // pick_i: Σ_k x_ik = 1
      row_idx.push_back(rows);
      col_idx.push_back(first_x[i] + static_cast<int>(k));
      elem.push_back(1.0);
    }
    row_lb.push_back(1.0);
    row_ub.push_back(1.0);
    ++rows;
    for (std::size_t k = 0; k < list.size(); ++k) {  // dur_i: d_i − Σ_k t_ik x_ik = 0
      row_idx.push_back(rows);
      col_idx.push_back(first_x[i] + static_cast<int>(k));
      elem.push_back(-cands_[i]->points[list[k]].time_s);
    }
    row_idx.push_back(rows);
    col_idx.push_back(d0 + i);
    elem.push_back(1.0);
    row_lb.push_back(0.0);
    row_ub.push_back(0.0);
    ++rows;
    for (int j : dag_.successors(i)) add_row({{s0 + j, 1.0}, {s0 + i, -1.0}, {d0 + i, -1.0}}, 0.0, COIN_DBL_MAX);
    add_row({{s0 + i, 1.0}, {d0 + i, 1.0}}, -COIN_DBL_MAX, deadline_s);
  }
  const CoinPackedMatrix matrix(false, row_idx.data(), col_idx.data(), elem.data(),
                                static_cast<CoinBigIndex>(elem.size()));
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(), row_ub.data());
  for (int c = 0; c < nx; ++c) solver.setInteger(c);
  const std::vector<double> x =
      solve_with_cbc(solver, {"-maxNodes", std::to_string(max_nodes), "-feas", "off", "-rins", "off"}, stop);
  if (x.empty()) return false;
  std::vector<std::uint16_t> next(n);
  for (int i = 0; i < n; ++i) {
    const auto& list = *hull.of_op[i];
    std::size_t best = 0;
    for (std::size_t k = 1; k < list.size(); ++k)
      if (x[first_x[i] + k] > x[first_x[i] + best]) best = k;
    next[i] = list[best];
  }
  return keep_if_better(std::move(next), choice, deadline_s);
}

}  // namespace perseus::detail
