// Dinic's max-flow (Dinic 1970) on a compact residual graph with double capacities.
// Used by MinCut when PlannerOptions::min_cut_engine is MinCutEngine::kDinic: on the critical
// DAGs of the planner (short augmenting paths, small flows) it measured several times
// faster than LEMON's Preflow; see docs/performance.md.
#include "min_cut_dinic.hpp"

#include <algorithm>
#include <limits>

namespace perseus::detail {

void Dinic::reset(int num_nodes) {
  n_ = num_nodes;
  from_.clear();
  to_.clear();
  cap_.clear();
  csr_ready_ = false;
}

void Dinic::add_arc(int from, int to, double capacity) {
  from_.push_back(from);
  to_.push_back(to);
  cap_.push_back(capacity);
  from_.push_back(to);
  to_.push_back(from);
  cap_.push_back(0.0);
  csr_ready_ = false;
}

void Dinic::build_csr() {
  if (csr_ready_) return;
  first_.assign(static_cast<std::size_t>(n_) + 1, 0);
  for (int v : from_) ++first_[v + 1];
  for (int v = 0; v < n_; ++v) first_[v + 1] += first_[v];
  adj_.resize(from_.size());
  iter_.assign(first_.begin(), first_.end() - 1);
  for (int a = 0; a < static_cast<int>(from_.size()); ++a) adj_[iter_[from_[a]]++] = a;
  csr_ready_ = true;
}

double Dinic::push_short_paths(int s, int t, double eps) {
  build_csr();
  double flow = 0;
  auto push = [&](int a, int b, int c, double d) {
    for (int x : {a, b, c}) {
      if (x < 0) continue;
      cap_[x] -= d;
      cap_[x ^ 1] += d;
    }
    flow += d;
  };
  for (int i = first_[s]; i < first_[s + 1]; ++i) {
    const int a = adj_[i];
    const int x = to_[a];
    if (x == t) {
      if (cap_[a] > eps) push(a, -1, -1, cap_[a]);
      continue;
    }
    for (int j = first_[x]; j < first_[x + 1] && cap_[a] > eps; ++j) {
      const int b = adj_[j];
      const int y = to_[b];
      if (cap_[b] <= eps || y == s) continue;
      if (y == t) {
        push(a, b, -1, std::min(cap_[a], cap_[b]));
        continue;
      }
      for (int k = first_[y]; k < first_[y + 1] && cap_[a] > eps && cap_[b] > eps; ++k) {
        const int c = adj_[k];
        if (to_[c] == t && cap_[c] > eps) push(a, b, c, std::min({cap_[a], cap_[b], cap_[c]}));
      }
    }
  }
  return flow;
}

bool Dinic::bfs(int s, int t, double eps) {
  level_.assign(n_, -1);
  queue_.clear();
  queue_.push_back(s);
  level_[s] = 0;
  for (std::size_t h = 0; h < queue_.size(); ++h) {
    const int v = queue_[h];
    for (int i = first_[v]; i < first_[v + 1]; ++i) {
      const int a = adj_[i];
      if (cap_[a] > eps && level_[to_[a]] < 0) {
        level_[to_[a]] = level_[v] + 1;
        if (to_[a] == t) return true;  // deeper levels cannot be on a shortest path
        queue_.push_back(to_[a]);
      }
    }
  }
  return level_[t] >= 0;
}

// One augmenting path in the level graph (iterative DFS with current-arc pointers).
double Dinic::augment(int s, int t, double eps) {
  stack_.clear();
  int v = s;
  while (true) {
    if (v == t) {
      double d = std::numeric_limits<double>::infinity();
      for (int a : stack_) d = std::min(d, cap_[a]);
      for (int a : stack_) {
        cap_[a] -= d;
        cap_[a ^ 1] += d;
      }
      return d;
    }
    int& i = iter_[v];
    for (; i < first_[v + 1]; ++i) {
      const int a = adj_[i];
      if (cap_[a] > eps && level_[to_[a]] == level_[v] + 1) break;
    }
    if (i < first_[v + 1]) {
      const int a = adj_[i];
      stack_.push_back(a);
      v = to_[a];
    } else {
      level_[v] = -1;  // dead end for this phase
      if (stack_.empty()) return 0.0;
      v = from_[stack_.back()];
      stack_.pop_back();
      ++iter_[v];
    }
  }
}

double Dinic::max_flow(int s, int t, double eps) {
  build_csr();
  double flow = 0;
  while (bfs(s, t, eps)) {
    iter_.assign(first_.begin(), first_.end() - 1);
    while (true) {
      const double f = augment(s, t, eps);
      if (f <= eps) break;
      flow += f;
    }
  }
  return flow;
}

void Dinic::reachable_from(int s, double eps, std::vector<char>& seen) {
  build_csr();
  seen.assign(n_, 0);
  queue_.clear();
  queue_.push_back(s);
  seen[s] = 1;
  for (std::size_t h = 0; h < queue_.size(); ++h) {
    const int v = queue_[h];
    for (int i = first_[v]; i < first_[v + 1]; ++i) {
      const int a = adj_[i];
      if (cap_[a] > eps && !seen[to_[a]]) {
        seen[to_[a]] = 1;
        queue_.push_back(to_[a]);
      }
    }
  }
}

}  // namespace perseus::detail
