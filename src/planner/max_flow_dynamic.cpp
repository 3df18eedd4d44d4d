// Dynamic Boykov–Kolmogorov max-flow (see the header). The tree code follows Kolmogorov's
// maxflow-v3 (maxflow_init, maxflow_reuse_trees_init, augment, process_*_orphan) with one
// change: "residual > 0" is "residual > eps_augment" throughout.
#include "max_flow_dynamic.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace perseus::detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kInfiniteDist = std::numeric_limits<int>::max() / 2;
}  // namespace

void DynamicMaxFlow::init(int num_nodes, const std::vector<std::pair<int, int>>& arcs, int source, int sink,
                          const std::function<void()>& checkpoint) {
  auto check = [&] {
    if (checkpoint) checkpoint();
  };
  n_ = num_nodes;
  s_ = source;
  t_ = sink;
  const std::size_t m = arcs.size();
  cap_.assign(m, 0.0);
  res_.assign(2 * m, 0.0);
  check();
  head_.assign(2 * m, -1);
  term_node_.assign(m, -1);
  from_source_.assign(m, 0);
  first_.assign(static_cast<std::size_t>(n_) + 1, 0);
  tfirst_.assign(static_cast<std::size_t>(n_) + 1, 0);
  for (std::size_t k = 0; k < m; ++k) {
    const auto [u, v] = arcs[k];
    if (u == t_ || v == s_ || (u == s_ && v == t_)) throw std::invalid_argument("DynamicMaxFlow: arc into s or out of t");
    if (u == s_ || v == t_) {
      term_node_[k] = u == s_ ? v : u;
      from_source_[k] = u == s_;
      ++tfirst_[term_node_[k] + 1];
    } else {
      ++first_[u + 1];
      ++first_[v + 1];
    }
  }
  check();
  for (int v = 0; v < n_; ++v) first_[v + 1] += first_[v], tfirst_[v + 1] += tfirst_[v];
  adj_.resize(first_[n_]);
  tadj_.resize(tfirst_[n_]);
  std::vector<int> pos(first_.begin(), first_.end() - 1), tpos(tfirst_.begin(), tfirst_.end() - 1);
  for (std::size_t k = 0; k < m; ++k) {
    const auto [u, v] = arcs[k];
    if (term_node_[k] >= 0) {
      tadj_[tpos[term_node_[k]]++] = static_cast<int>(k);
      continue;
    }
    head_[2 * k] = v;
    head_[2 * k + 1] = u;
    adj_[pos[u]++] = static_cast<int>(2 * k);
    adj_[pos[v]++] = static_cast<int>(2 * k + 1);
  }
  check();
  tr_.assign(n_, 0.0);
  parent_.assign(n_, kNone);
  ts_.assign(n_, 0);
  dist_.assign(n_, 0);
  is_sink_.assign(n_, 0);
  in_queue_.assign(n_, 0);
  marked_.assign(n_, 0);
  seen_.assign(n_, 0);
  queue_.clear();
  queue_head_ = 0;
  changed_.clear();
  orphans_.clear();
  time_ = 0;
  first_solve_ = true;
}

void DynamicMaxFlow::mark(int x) {
  if (!marked_[x]) {
    marked_[x] = 1;
    changed_.push_back(x);
  }
}

void DynamicMaxFlow::set_capacity(int k, double capacity) {
  cap_[k] = capacity;
  if (const int x = term_node_[k]; x >= 0) {
    mark(x);
    return;
  }
  // n-link: a flow above the new capacity is lowered to it; the imbalance this leaves at
  // both ends goes into their tr() when they are updated (reparametrization).
  double& flow = res_[2 * k + 1];
  if (flow > capacity) flow = capacity;
  res_[2 * k] = capacity - flow;  // +inf stays +inf
  mark(head_[2 * k + 1]);
  mark(head_[2 * k]);
}

// tr(x) = cs − ct − (n-link flow out − in), recomputed from the arcs in a fixed order.
void DynamicMaxFlow::update_terminal_caps(int x) {
  double cs = 0, ct = 0;
  for (int i = tfirst_[x]; i < tfirst_[x + 1]; ++i) {
    const int k = tadj_[i];
    (from_source_[k] ? cs : ct) += cap_[k];
  }
  double out = 0;
  for (int i = first_[x]; i < first_[x + 1]; ++i) {
    const int a = adj_[i];
    out += (a & 1) ? -res_[a] : res_[a ^ 1];
  }
  if (cs == kInf && ct == kInf) {
    infinite_tlinks_ = true;  // s -> x -> t carries an infinite flow
    tr_[x] = 0;
    return;
  }
  tr_[x] = (cs - ct) - out;
}

int DynamicMaxFlow::next_active() {
  // FIFO: queue_[queue_head_..] are the active nodes; the consumed prefix is dropped once it
  // is half the vector, so the queue holds O(active nodes), not every activation of a solve.
  if (queue_head_ > 1024 && 2 * queue_head_ > queue_.size()) {
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_));
    queue_head_ = 0;
  }
  while (queue_head_ < queue_.size()) {
    const int x = queue_[queue_head_++];
    in_queue_[x] = 0;
    if (parent_[x] != kNone) return x;  // a node in the queue is active iff it has a parent
  }
  queue_.clear();
  queue_head_ = 0;
  return -1;
}

// Kolmogorov's maxflow_reuse_trees_init (maxflow_init on the first solve, where every node
// with a t-link residual is marked): each changed node with a t-link residual becomes a
// child of that terminal (switching trees orphans its children there); one without is
// orphaned; all become active.
void DynamicMaxFlow::reuse_trees() {
  ++time_;
  const double thr = thr_;
  for (int i : changed_) {
    marked_[i] = 0;
    update_terminal_caps(i);
  }
  for (int i : changed_) {
    set_active(i);
    const double r = tr_[i];
    if (!(std::abs(r) > thr)) {
      if (parent_[i] != kNone && parent_[i] != kOrphan) set_orphan(i);
      continue;
    }
    const bool to_source = r > 0;
    // A free node, or one changing trees, orphans its children there and activates the
    // neighbours of the other tree it has a residual to (an orphan queued by a neighbour
    // processed before it keeps its tree and is a terminal child now: no orphan left).
    if (parent_[i] == kNone || (is_sink_[i] != 0) == to_source) {
      is_sink_[i] = !to_source;
      for (int e = first_[i]; e < first_[i + 1]; ++e) {
        const int a = adj_[e];
        const int j = head_[a];
        if (parent_[j] == (a ^ 1)) set_orphan(j);
        // Also an orphan just made: if it is adopted in its tree, it must grow toward i.
        if (parent_[j] != kNone && (is_sink_[j] != 0) == to_source && res_[to_source ? a : a ^ 1] > thr) set_active(j);
      }
    }
    parent_[i] = kTerminal;
    ts_[i] = time_;
    dist_[i] = 1;
  }
  changed_.clear();
  adopt_orphans();
}

bool DynamicMaxFlow::augment(int meet) {
  // meet: residual arc from a source-tree node to a sink-tree node.
  const double thr = thr_;
  double* const res = res_.data();
  const int* const head = head_.data();
  const int* const parent = parent_.data();
  double b = res[meet];
  long long len = 1;
  int i = head[meet ^ 1];
  for (int a; (a = parent[i]) != kTerminal; i = head[a], ++len) b = std::min(b, res[a ^ 1]);
  const int sroot = i;
  b = std::min(b, tr_[sroot]);
  i = head[meet];
  for (int a; (a = parent[i]) != kTerminal; i = head[a], ++len) b = std::min(b, res[a]);
  const int troot = i;
  b = std::min(b, -tr_[troot]);
  if (b == kInf) return false;
  ++counters_.augmenting_paths;
  counters_.augmenting_arcs += len;
  res[meet ^ 1] += b;
  res[meet] -= b;
  for (i = head[meet ^ 1];;) {
    const int a = parent[i];
    if (a == kTerminal) break;
    res[a] += b;
    res[a ^ 1] -= b;
    if (res[a ^ 1] <= thr) set_orphan(i);
    i = head[a];
  }
  tr_[sroot] -= b;
  if (tr_[sroot] <= thr) set_orphan(sroot);
  for (i = head[meet];;) {
    const int a = parent[i];
    if (a == kTerminal) break;
    res[a ^ 1] += b;
    res[a] -= b;
    if (res[a] <= thr) set_orphan(i);
    i = head[a];
  }
  tr_[troot] += b;
  if (tr_[troot] >= -thr) set_orphan(troot);
  return true;
}

void DynamicMaxFlow::adopt_orphans() {
  for (std::size_t h = 0; h < orphans_.size(); ++h) {
    const int i = orphans_[h];
    if (parent_[i] != kOrphan) continue;
    ++counters_.orphans;
    process_orphan(i);
  }
  orphans_.clear();
}

// A new parent for orphan i of the source tree (sink tree): a neighbour j of the same tree
// with residual j -> i (i -> j) whose path to its terminal passes no orphan, the one closest
// to the terminal (TS/DIST marks cache the distances, as in maxflow-v3). Without one, i is
// freed: its children become orphans and the neighbours that could regrow it are activated.
void DynamicMaxFlow::process_orphan(int i) {
  // Raw pointers: set_orphan()/set_active() push into vectors, the rest are plain loads/stores.
  const double thr = thr_;
  const double* const res = res_.data();
  const int* const head = head_.data();
  const int* const adj = adj_.data();
  int* const parent = parent_.data();
  const char* const is_sink = is_sink_.data();
  int* const ts = ts_.data();
  int* const dist = dist_.data();
  const char sink = is_sink[i];
  const int flip = sink ? 0 : 1;  // residual j -> i is a0 ^ 1 (source tree) or i -> j is a0 (sink tree)
  const int first = first_[i], last = first_[i + 1];
  int best = -1, d_min = kInfiniteDist;
  for (int e = first; e < last; ++e) {
    const int a0 = adj[e];
    if (!(res[a0 ^ flip] > thr)) continue;
    int j = head[a0];
    if (is_sink[j] != sink || parent[j] == kNone) continue;
    int d = 0;
    while (true) {
      if (ts[j] == time_) {
        d += dist[j];
        break;
      }
      const int a = parent[j];
      ++d;
      if (a == kTerminal) {
        ts[j] = time_;
        dist[j] = 1;
        break;
      }
      if (a == kOrphan) {
        d = kInfiniteDist;
        break;
      }
      j = head[a];
    }
    if (d < kInfiniteDist) {
      if (d < d_min) best = a0, d_min = d;
      for (j = head[a0]; ts[j] != time_; j = head[parent[j]]) {
        ts[j] = time_;
        dist[j] = d--;
      }
    }
  }
  if (best >= 0) {
    parent[i] = best;
    ts[i] = time_;
    dist[i] = d_min + 1;
    return;
  }
  parent[i] = kNone;
  for (int e = first; e < last; ++e) {
    const int a0 = adj[e];
    const int j = head[a0];
    const int a = parent[j];
    if (is_sink[j] != sink || a == kNone) continue;
    if (res[a0 ^ flip] > thr) set_active(j);
    if (a != kTerminal && a != kOrphan && head[a] == i) set_orphan(j);
  }
}

bool DynamicMaxFlow::maximize(double eps, double eps_augment) {
  ++counters_.searches;
  thr_ = eps_augment;
  if (first_solve_) {
    // maxflow_init: every node starts free; those with a t-link residual join a tree below.
    for (int x = 0; x < n_; ++x)
      if (x != s_ && x != t_) mark(x);
    first_solve_ = false;
  }
  infinite_tlinks_ = false;
  reuse_trees();
  if (infinite_tlinks_) {
    drop_trees();
    return false;
  }
  int current = -1;
  while (true) {
    int i = current;
    if (i >= 0) {
      in_queue_[i] = 0;
      if (parent_[i] == kNone) i = -1;
    }
    if (i < 0 && (i = next_active()) < 0) break;
    ++counters_.grown_nodes;
    const int meet = grow(i);
    ++time_;
    if (meet >= 0) {
      in_queue_[i] = 1;  // keeps growing from i after the augmentation
      current = i;
      if (!augment(meet)) {
        drop_trees();
        return false;
      }
      adopt_orphans();
    } else {
      current = -1;
    }
  }
  // The source tree is the residual reachability with eps_augment; it is the one with eps
  // unless some tree arc's residual is in (eps_augment, eps].
  cut_searched_ = false;
  if (eps > thr_) {
    for (int x = 0; x < n_ && !cut_searched_; ++x) {
      const int p = parent_[x];
      if (p == kNone || is_sink_[x]) continue;
      const double r = p == kTerminal ? tr_[x] : res_[p ^ 1];
      if (r <= eps) search_cut(eps);
    }
  }
  return true;
}

// Grows active node i's tree into its free neighbours (maxflow-v3's growth step); returns
// the residual arc from the source tree to the sink tree it met, or -1.
int DynamicMaxFlow::grow(int i) {
  // Raw pointers: stores into parent_/ts_/dist_ would otherwise reload every data pointer.
  const double thr = thr_;
  const double* const res = res_.data();
  const int* const head = head_.data();
  const int* const adj = adj_.data();
  int* const parent = parent_.data();
  char* const is_sink = is_sink_.data();
  int* const ts = ts_.data();
  int* const dist = dist_.data();
  const char sink = is_sink[i];
  const int flip = sink ? 1 : 0;  // the residual i -> j is arc a (source tree) or j -> i is a ^ 1 (sink tree)
  const int ts_i = ts[i], dist_i = dist[i];
  for (int e = first_[i], end = first_[i + 1]; e < end; ++e) {
    const int a = adj[e];
    if (!(res[a ^ flip] > thr)) continue;
    const int j = head[a];
    if (parent[j] == kNone) {
      is_sink[j] = sink;
      parent[j] = a ^ 1;
      ts[j] = ts_i;
      dist[j] = dist_i + 1;
      set_active(j);
    } else if (is_sink[j] != sink) {
      return a ^ flip;
    } else if (ts[j] <= ts_i && dist[j] > dist_i) {
      parent[j] = a ^ 1;
      ts[j] = ts_i;
      dist[j] = dist_i + 1;
    }
  }
  return -1;
}

// After an infinite path: the trees are dropped (the pseudo-flow is kept), so the next
// solve starts like the first.
void DynamicMaxFlow::drop_trees() {
  std::fill(parent_.begin(), parent_.end(), kNone);
  std::fill(in_queue_.begin(), in_queue_.end(), 0);
  std::fill(marked_.begin(), marked_.end(), 0);
  queue_.clear();
  queue_head_ = 0;
  changed_.clear();
  orphans_.clear();
  first_solve_ = true;
}

// The minimal source side with tolerance eps, searched afresh: from the nodes with a
// t-link residual > eps from s, through n-link residuals > eps.
void DynamicMaxFlow::search_cut(double eps) {
  ++counters_.cut_searches;
  cut_searched_ = true;
  std::fill(seen_.begin(), seen_.end(), 0);
  seen_[s_] = 1;
  bfs_.clear();
  for (int x = 0; x < n_; ++x) {
    if (x != s_ && x != t_ && tr_[x] > eps) {
      seen_[x] = 1;
      bfs_.push_back(x);
    }
  }
  for (std::size_t h = 0; h < bfs_.size(); ++h) {
    const int v = bfs_[h];
    for (int e = first_[v]; e < first_[v + 1]; ++e) {
      const int a = adj_[e];
      const int w = head_[a];
      if (res_[a] > eps && !seen_[w]) {
        seen_[w] = 1;
        bfs_.push_back(w);
      }
    }
  }
}

}  // namespace perseus::detail
