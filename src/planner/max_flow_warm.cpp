// Warm-started Dinic max-flow for the planner's per-step networks (see the header).
#include "max_flow_warm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace perseus::detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

void WarmMaxFlow::init(int num_nodes, const std::vector<std::pair<int, int>>& arcs, int source, int sink,
                       const std::function<void()>& checkpoint) {
  n_ = num_nodes;
  s_ = source;
  t_ = sink;
  const std::size_t m = arcs.size();
  head_.resize(2 * m);
  res_.assign(2 * m, 0.0);
  cap_.assign(m, 0.0);
  if (checkpoint) checkpoint();
  first_.assign(static_cast<std::size_t>(n_) + 1, 0);
  for (const auto& [u, v] : arcs) {
    ++first_[u + 1];
    ++first_[v + 1];
  }
  for (int v = 0; v < n_; ++v) first_[v + 1] += first_[v];
  adj_.resize(2 * m);
  std::vector<int> pos(first_.begin(), first_.end() - 1);
  for (std::size_t k = 0; k < m; ++k) {
    const auto [u, v] = arcs[k];
    head_[2 * k] = v;
    head_[2 * k + 1] = u;
    adj_[pos[u]++] = static_cast<int>(2 * k);
    adj_[pos[v]++] = static_cast<int>(2 * k + 1);
  }
  if (checkpoint) checkpoint();
  level_.assign(n_, -1);
  iter_.assign(n_, 0);
  src_arcs_.clear();
  src_sorted_ = 0;
  src_in_.assign(m, 0);
  src_dirty_ = false;
}

void WarmMaxFlow::compact_source_arcs() {
  if (!src_dirty_) return;
  // Drop the arcs whose capacity went to 0; the sorted prefix stays sorted, so only the arcs
  // appended since the last compaction need sorting, then one merge.
  std::size_t kept = 0, sorted_kept = 0;
  for (std::size_t i = 0; i < src_arcs_.size(); ++i) {
    const int r = src_arcs_[i];
    if (cap_[r / 2] > 0) {
      src_arcs_[kept++] = r;
    } else {
      src_in_[r / 2] = 0;
    }
    if (i + 1 == src_sorted_) sorted_kept = kept;
  }
  src_arcs_.resize(kept);
  const auto mid = src_arcs_.begin() + static_cast<std::ptrdiff_t>(sorted_kept);
  std::sort(mid, src_arcs_.end());
  std::inplace_merge(src_arcs_.begin(), mid, src_arcs_.end());
  src_sorted_ = kept;
  src_dirty_ = false;
}

// Removes `amount` of flow through arc k along flow paths s ~> tail(k) and head(k) ~> t.
void WarmMaxFlow::cancel(int k, double amount) {
  const int fwd = 2 * k;
  for (int round = 0; round < 1000 && amount > 0 && res_[fwd + 1] > 0; ++round) {
    // Path back to s: follow reverse residuals (= flow on arcs entering the node).
    stack_.clear();
    double d = std::min(amount, res_[fwd + 1]);
    bool ok = true;
    for (int x = head_[fwd + 1]; x != s_ && ok;) {
      int best = -1;  // reverse arc of the arc entering x with the most flow
      for (int i = first_[x]; i < first_[x + 1]; ++i) {
        const int r = adj_[i];
        if ((r & 1) && res_[r] > 0 && (best < 0 || res_[r] > res_[best])) best = r;
      }
      ok = best >= 0;
      if (ok) {
        stack_.push_back(best);
        d = std::min(d, res_[best]);
        x = head_[best];
      }
    }
    for (int x = head_[fwd]; x != t_ && ok;) {
      int best = -1;  // the arc leaving x with the most flow
      for (int i = first_[x]; i < first_[x + 1]; ++i) {
        const int r = adj_[i];
        if (!(r & 1) && res_[r + 1] > 0 && (best < 0 || res_[r + 1] > res_[best + 1])) best = r;
      }
      ok = best >= 0;
      if (ok) {
        stack_.push_back(best + 1);
        d = std::min(d, res_[best + 1]);
        x = head_[best];
      }
    }
    if (!ok || !(d > 0)) {
      // Rounding left no flow path: drop the remainder (at rounding level).
      res_[fwd] += std::min(amount, res_[fwd + 1]);
      res_[fwd + 1] -= std::min(amount, res_[fwd + 1]);
      return;
    }
    stack_.push_back(fwd + 1);
    ++counters_.cancelled_paths;
    for (int r : stack_) {  // r is a reverse residual: flow on r^1 decreases
      res_[r] -= d;
      res_[r ^ 1] += d;
    }
    amount -= d;
  }
}

void WarmMaxFlow::set_capacity(int k, double capacity) {
  const double flow = res_[2 * k + 1];
  if (capacity < flow) {
    cancel(k, flow - capacity);
  }
  cap_[k] = capacity;
  res_[2 * k] = std::max(0.0, capacity - res_[2 * k + 1]);
  if (head_[2 * k + 1] == s_) {
    if (capacity > 0 && !src_in_[k]) {
      src_in_[k] = 1;
      src_arcs_.push_back(2 * k);
      src_dirty_ = true;
    } else if (capacity == 0 && src_in_[k]) {
      src_dirty_ = true;  // removed at the next compaction
    }
  }
}

bool WarmMaxFlow::push_short_paths(double eps) {
  for (const int* it = arcs_begin(s_); it != arcs_end(s_); ++it) {
    const int a = *it;
    if (a & 1) continue;
    const int x = head_[a];
    if (res_[a] <= eps) continue;
    for (int j = first_[x]; j < first_[x + 1] && res_[a] > eps; ++j) {
      const int b = adj_[j];
      const int y = head_[b];
      if ((b & 1) || res_[b] <= eps) continue;
      if (y == t_) {
        const double d = std::min(res_[a], res_[b]);
        if (d == kInf) return false;
        res_[a] -= d, res_[a ^ 1] += d, res_[b] -= d, res_[b ^ 1] += d;
        continue;
      }
      for (int k = first_[y]; k < first_[y + 1] && res_[a] > eps && res_[b] > eps; ++k) {
        const int c = adj_[k];
        if ((c & 1) || head_[c] != t_ || res_[c] <= eps) continue;
        const double d = std::min({res_[a], res_[b], res_[c]});
        if (d == kInf) return false;
        res_[a] -= d, res_[a ^ 1] += d, res_[b] -= d, res_[b ^ 1] += d, res_[c] -= d, res_[c ^ 1] += d;
      }
    }
  }
  return true;
}

bool WarmMaxFlow::bfs(double eps, double eps_band) {
  // Raw pointers: the stores into level_/queue_ would otherwise make the compiler reload
  // every vector's data pointer in the inner loop (measured: the loop's hottest loads).
  int* const level = level_.data();
  const int* const head = head_.data();
  const double* const res = res_.data();
  for (int v : queue_) level[v] = -1;  // the nodes the previous phase labelled
  level[t_] = -1;
  queue_.clear();
  queue_.push_back(s_);
  level[s_] = 0;
  bool band_seen = false;
  ++counters_.dinic_phases;
  for (std::size_t h = 0; h < queue_.size(); ++h) {
    const int v = queue_[h];
    ++counters_.bfs_nodes;
    const int next_level = level[v] + 1;
    for (const int *it = arcs_begin(v), *end = arcs_end(v); it != end; ++it) {
      const int r = *it;
      const double rr = res[r];
      if (rr > eps) {
        band_seen |= rr <= eps_band;
        const int w = head[r];
        if (level[w] < 0) {
          level[w] = next_level;
          if (w == t_) {
            band_seen_ = band_seen;
            return true;
          }
          queue_.push_back(w);
        }
      }
    }
  }
  band_seen_ = band_seen;
  return false;
}

bool WarmMaxFlow::blocking_flow(double eps) {
  stack_.clear();
  int* const level = level_.data();
  int* const iter = iter_.data();
  const int* const head = head_.data();
  double* const res = res_.data();
  int v = s_;
  while (true) {
    if (v == t_) {
      double d = kInf;
      for (int r : stack_) d = std::min(d, res[r]);
      if (d == kInf) return false;
      ++counters_.augmenting_paths;
      counters_.augmenting_arcs += static_cast<long long>(stack_.size());
      for (int r : stack_) {
        res[r] -= d;
        res[r ^ 1] += d;
      }
      // Continue from the tail of the first arc the augmentation saturated: a restart from
      // s would walk the same unsaturated prefix (its arcs' iterators did not move).
      std::size_t k = 0;
      while (res[stack_[k]] > eps) ++k;
      v = head[stack_[k] ^ 1];
      stack_.resize(k);
      continue;
    }
    // iter[v]: offset of the next arc to try in v's list.
    const int* arcs = arcs_begin(v);
    const int len = static_cast<int>(arcs_end(v) - arcs);
    const int want = level[v] + 1;
    int i = iter[v];
    for (; i < len; ++i) {
      const int r = arcs[i];
      if (res[r] > eps && level[head[r]] == want) break;
    }
    iter[v] = i;
    if (i < len) {
      stack_.push_back(arcs[i]);
      v = head[arcs[i]];
    } else {
      level[v] = -1;
      if (stack_.empty()) return true;
      v = head[stack_.back() ^ 1];
      stack_.pop_back();
      ++iter[v];
    }
  }
}

bool WarmMaxFlow::reaches_sink(double eps, double eps_augment) {
  seen_.assign(n_, 0);
  char* const seen = seen_.data();
  const int* const head = head_.data();
  const double* const res = res_.data();
  std::vector<int>& queue = stack_;
  queue.clear();
  band_.clear();
  queue.push_back(s_);
  seen[s_] = 1;
  // Phase A: residuals > eps (the source side if no augmenting path is left).
  for (std::size_t h = 0; h < queue.size(); ++h) {
    const int v = queue[h];
    for (const int *it = arcs_begin(v), *end = arcs_end(v); it != end; ++it) {
      const int r = *it;
      const double rr = res[r];
      if (rr > eps) {
        const int w = head[r];
        if (!seen[w]) {
          if (w == t_) return true;
          seen[w] = 1;
          queue.push_back(w);
        }
      } else if (rr > eps_augment) {
        band_.push_back(r);
      }
    }
  }
  // Phase B: continue through residuals > eps_augment (marked 2, then unmarked).
  const std::size_t phase_b = queue.size();
  for (int r : band_) {
    const int w = head[r];
    if (!seen[w]) {
      if (w == t_) return true;
      seen[w] = 2;
      queue.push_back(w);
    }
  }
  for (std::size_t h = phase_b; h < queue.size(); ++h) {
    const int v = queue[h];
    for (const int *it = arcs_begin(v), *end = arcs_end(v); it != end; ++it) {
      const int r = *it;
      const int w = head[r];
      if (res[r] > eps_augment && !seen[w]) {
        if (w == t_) return true;
        seen[w] = 2;
        queue.push_back(w);
      }
    }
  }
  for (std::size_t h = phase_b; h < queue.size(); ++h) seen[queue[h]] = 0;
  return false;
}

bool WarmMaxFlow::maximize(double eps, double eps_augment) {
  ++counters_.searches;
  compact_source_arcs();
  if (!push_short_paths(eps_augment)) return false;
  // Usually the warm flow is already maximum: one search then proves it and gives the cut.
  if (!reaches_sink(eps, eps_augment)) return true;
  while (bfs(eps_augment, eps)) {
    for (int v : queue_) iter_[v] = 0;
    iter_[t_] = 0;
    if (!blocking_flow(eps_augment)) return false;
  }
  // Minimal source side: residual reachability from s with tolerance eps. The last BFS
  // above found the nodes reachable through residuals > eps_augment; if none of the arcs it
  // crossed had a residual in (eps_augment, eps], that is the same set, so reuse it.
  // Otherwise search again: t is unreachable now, so reaches_sink() leaves exactly that set.
  if (!band_seen_) {
    seen_.assign(n_, 0);
    for (int v : queue_) seen_[v] = 1;
  } else {
    reaches_sink(eps, eps_augment);
  }
  return true;
}

}  // namespace perseus::detail
