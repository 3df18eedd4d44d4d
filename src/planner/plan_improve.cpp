// LP rounding and slack filling for the planner's second stage.
#include "plan_improve.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <random>
#include <unordered_map>

#include "lower_bound.hpp"

namespace perseus::detail {

void round_lp_schedule(const Dag& dag, const std::vector<const Candidates*>& cands, const std::vector<double>& start_s,
                       const std::vector<double>& duration_s, std::vector<std::uint16_t>& choice) {
  const int n = dag.num_ops();
  choice.assign(n, 0);
  std::vector<double> end(n, 0.0);
  for (int v : dag.topological_order()) {
    double start = 0;
    for (int u : dag.predecessors(v)) start = std::max(start, end[u]);
    const double lp_end = start_s[v] + duration_s[v];
    const double room = (lp_end - start) + 1e-9 * std::max(1e-3, lp_end);  // LP tolerance
    const auto& pts = cands[v]->points;
    std::size_t c = 0;
    while (c + 1 < pts.size() && pts[c + 1].time_s <= room) ++c;
    choice[v] = static_cast<std::uint16_t>(c);
    end[v] = start + pts[c].time_s;
  }
}

std::vector<std::uint16_t> hull_vertex_indices(const Candidates& c, double p_block_w) {
  // The candidates are time ascending with distinct times: the hull's points are found in order.
  std::vector<std::uint16_t> out;
  std::size_t k = 0;
  for (const OperatingPoint& v : lower_hull_effective(c.points, p_block_w)) {
    while (c.points[k].time_s != v.time_s) ++k;
    out.push_back(static_cast<std::uint16_t>(k));
  }
  return out;
}

HullVertices::HullVertices(const std::vector<const Candidates*>& cands, double p_block_w) {
  std::unordered_map<const Candidates*, std::size_t> seen;
  std::vector<std::size_t> index(cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i) {
    auto [it, fresh] = seen.try_emplace(cands[i], lists.size());
    if (fresh) lists.push_back(hull_vertex_indices(*cands[i], p_block_w));
    index[i] = it->second;
  }
  of_op.reserve(cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i) of_op.push_back(&lists[index[i]]);  // `lists` no longer grows
}

namespace {

/// Vertex rounding, step 1 (round_to_hull_vertices()).
void round_to_tangent_vertices(const Dag& dag, const std::vector<const Candidates*>& cands, const HullVertices& hull,
                               const std::vector<double>& duration_s, double horizon_s, VertexStart start_at,
                               std::vector<std::uint16_t>& choice) {
  const int n = dag.num_ops();
  const auto& topo = dag.topological_order();
  std::vector<double> lf(n), end(n);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    double f = horizon_s;
    for (int w : dag.successors(*it)) f = std::min(f, lf[w] - duration_s[w]);
    lf[*it] = f;
  }
  choice.assign(n, 0);
  // In topological order: the hull vertex just below the LP duration (a), or (kUpperWhereItFits)
  // the next one (b) when the op still finishes by its latest finish in the LP schedule. Every
  // op ends by that latest finish, so the plan meets the deadline: an op's predecessors end by
  // its LP latest start, and a is no slower than the LP duration.
  for (int v : topo) {
    double start = 0;
    for (int u : dag.predecessors(v)) start = std::max(start, end[u]);
    const auto& pts = cands[v]->points;
    const auto& list = *hull.of_op[v];
    const double tol = 1e-9 * std::max(1e-3, lf[v]);
    std::size_t ia = 0;
    while (ia + 1 < list.size() && pts[list[ia + 1]].time_s <= duration_s[v] + tol) ++ia;
    std::size_t c = list[ia];
    if (start_at == VertexStart::kUpperWhereItFits && ia + 1 < list.size() && start + pts[list[ia + 1]].time_s <= lf[v] + tol)
      c = list[ia + 1];
    else if (start + pts[c].time_s > lf[v] + tol)  // only by rounding error: the fastest fitting vertex
      for (std::uint16_t k : list) {
        if (k != list.front() && start + pts[k].time_s > lf[v] + tol) break;
        c = k;
      }
    choice[v] = static_cast<std::uint16_t>(c);
    end[v] = start + pts[c].time_s;
  }
}

/// Vertex rounding, step 2: moves of single ops to their next hull vertex, best effective
/// energy saved per second first, while the op's float (latest finish − earliest start) allows.
void fill_by_rate(const Dag& dag, const std::vector<const Candidates*>& cands, const HullVertices& hull,
                  double p_block_w, double horizon_s, std::vector<std::uint16_t>& choice) {
  const int n = dag.num_ops();
  const auto& topo = dag.topological_order();
  std::vector<double> dur(n), lf(n);
  for (int i = 0; i < n; ++i) dur[i] = cands[i]->points[choice[i]].time_s;
  Timeline tl = compute_timeline(dag, dur);
  std::vector<double>& es = tl.start_s;
  const double end = std::max(tl.time_s, horizon_s);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    double f = end;
    for (int w : dag.successors(*it)) f = std::min(f, lf[w] - dur[w]);
    lf[*it] = f;
  }
  auto eff = [&](int v, std::size_t c) { return cands[v]->points[c].energy_j - p_block_w * cands[v]->points[c].time_s; };
  // Moves to each op's next hull vertex, best saving per second first (ties: lower op id).
  // Slowing an op only shrinks the others' float, so a move that does not fit now never
  // will: it is dropped when it comes up.
  struct Move {
    double rate;
    int op;
    std::uint16_t to;
    bool operator<(const Move& o) const { return rate != o.rate ? rate < o.rate : op > o.op; }
  };
  std::priority_queue<Move> moves;
  auto push_next = [&](int i) {
    const auto& list = *hull.of_op[i];
    const auto next = std::upper_bound(list.begin(), list.end(), choice[i]);
    if (next == list.end()) return;
    const double t_next = cands[i]->points[*next].time_s;
    if (es[i] + t_next > lf[i] * (1 + 1e-12)) return;  // does not fit now, so never will
    const double rate = (eff(i, choice[i]) - eff(i, *next)) / (t_next - dur[i]);
    if (rate > 0) moves.push({rate, i, *next});
  };
  for (int i = 0; i < n; ++i) push_next(i);
  std::vector<int> work;
  while (!moves.empty()) {
    const Move m = moves.top();
    moves.pop();
    const double t_new = cands[m.op]->points[m.to].time_s;
    if (es[m.op] + t_new > lf[m.op] * (1 + 1e-12)) continue;
    choice[m.op] = m.to;
    dur[m.op] = t_new;
    // Earliest starts downstream and latest finishes upstream move by at most the change.
    work.assign(1, m.op);
    while (!work.empty()) {
      const int v = work.back();
      work.pop_back();
      for (int w : dag.successors(v)) {
        if (es[v] + dur[v] > es[w]) {
          es[w] = es[v] + dur[v];
          work.push_back(w);
        }
      }
    }
    work.assign(1, m.op);
    while (!work.empty()) {
      const int v = work.back();
      work.pop_back();
      for (int u : dag.predecessors(v)) {
        if (lf[v] - dur[v] < lf[u]) {
          lf[u] = lf[v] - dur[v];
          work.push_back(u);
        }
      }
    }
    push_next(m.op);
  }
}

}  // namespace

void round_to_hull_vertices(const Dag& dag, const std::vector<const Candidates*>& cands, const HullVertices& hull,
                            double p_block_w, const std::vector<double>& duration_s, double horizon_s,
                            VertexStart start_at, std::vector<std::uint16_t>& choice,
                            std::vector<double>& scratch_time, std::vector<double>& latest_start) {
  round_to_tangent_vertices(dag, cands, hull, duration_s, horizon_s, start_at, choice);
  fill_by_rate(dag, cands, hull, p_block_w, horizon_s, choice);
  fill_slack(dag, cands, choice, scratch_time, latest_start, horizon_s);
}

bool ruin_and_recreate(const Dag& dag, const std::vector<const Candidates*>& cands, const HullVertices& hull,
                       double p_block_w, double horizon_s, std::vector<std::uint16_t>& choice, int rounds,
                       int patience, int max_ruin, unsigned seed, int* tries) {
  const int n = dag.num_ops();
  if (tries != nullptr) *tries = 0;
  if (n == 0 || rounds <= 0) return false;
  std::mt19937 rng(seed);
  auto effective = [&](const std::vector<std::uint16_t>& c) {
    double e = 0;
    for (int i = 0; i < n; ++i) e += cands[i]->points[c[i]].energy_j - p_block_w * cands[i]->points[c[i]].time_s;
    return e;
  };
  std::vector<double> dur(n), scratch, latest;
  double best = effective(choice);
  bool changed = false;
  std::vector<std::uint16_t> trial;
  std::vector<int> ruin;
  std::vector<char> in_ruin(n, 0);
  int r = 0;
  for (int failed = 0; r < rounds && failed < patience; ++r, ++failed) {
    const int size = 2 + static_cast<int>(rng() % static_cast<unsigned>(std::max(1, max_ruin - 1)));
    ruin.assign(1, static_cast<int>(rng() % static_cast<unsigned>(n)));
    in_ruin[ruin[0]] = 1;
    for (std::size_t k = 0; k < ruin.size() && static_cast<int>(ruin.size()) < size; ++k) {
      const int v = ruin[k];
      for (auto nb : {dag.successors(v), dag.predecessors(v)})
        for (int w : nb)
          if (!in_ruin[w] && static_cast<int>(ruin.size()) < size) {
            in_ruin[w] = 1;
            ruin.push_back(w);
          }
    }
    trial = choice;
    for (int v : ruin) {
      trial[v] = hull.of_op[v]->front();
      in_ruin[v] = 0;
    }
    fill_by_rate(dag, cands, hull, p_block_w, horizon_s, trial);
    fill_slack(dag, cands, trial, scratch, latest, horizon_s);
    const double e = effective(trial);
    if (e < best - 1e-12 * std::abs(best)) {
      for (int i = 0; i < n; ++i) dur[i] = cands[i]->points[trial[i]].time_s;
      if (compute_timeline(dag, dur).time_s > horizon_s * (1 + 1e-12)) continue;
      best = e;
      choice.swap(trial);
      changed = true;
      failed = -1;
    }
  }
  if (tries != nullptr) *tries = r;
  return changed;
}

void fill_slack(const Dag& dag, const std::vector<const Candidates*>& cands, std::vector<std::uint16_t>& choice,
                std::vector<double>& scratch_time, std::vector<double>& latest_start, double horizon_s) {
  const int n = dag.num_ops();
  scratch_time.resize(n);
  latest_start.resize(n);
  for (int i = 0; i < n; ++i) scratch_time[i] = cands[i]->points[choice[i]].time_s;
  const Timeline tl = compute_timeline(dag, scratch_time);
  const auto& topo = dag.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const int v = *it;
    double lf = std::max(tl.time_s, horizon_s);
    for (int w : dag.successors(v)) lf = std::min(lf, latest_start[w]);
    const double window = lf - tl.start_s[v];
    const auto& pts = cands[v]->points;
    std::size_t c = choice[v];
    while (c + 1 < pts.size() && pts[c + 1].time_s <= window * (1 + 1e-12)) ++c;
    choice[v] = static_cast<std::uint16_t>(c);
    latest_start[v] = lf - pts[c].time_s;
  }
}

namespace {

/// One pass that meets target_s from any plan: in topological order each op keeps the slowest
/// candidate, no slower than its current one, that still ends by its latest finish with every
/// later op at its fastest. The fastest candidates meet target_s (it is at least the all-fastest
/// plan's time), so each op's fastest always fits and the result ends by target_s.
void tighten_in_one_pass(const Dag& dag, const std::vector<const Candidates*>& cands, std::vector<std::uint16_t>& choice,
                         double target_s) {
  const int n = dag.num_ops();
  const auto& topo = dag.topological_order();
  std::vector<double> latest_finish(n), end(n);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    double lf = target_s;
    for (int w : dag.successors(*it)) lf = std::min(lf, latest_finish[w] - cands[w]->points.front().time_s);
    latest_finish[*it] = lf;
  }
  for (int v : topo) {
    double start = 0;
    for (int u : dag.predecessors(v)) start = std::max(start, end[u]);
    const auto& pts = cands[v]->points;
    std::size_t c = choice[v];
    while (c > 0 && start + pts[c].time_s > latest_finish[v] * (1 + 1e-12)) --c;
    choice[v] = static_cast<std::uint16_t>(c);
    end[v] = start + pts[c].time_s;
  }
}

}  // namespace

void tighten(const Dag& dag, const std::vector<const Candidates*>& cands, std::vector<std::uint16_t>& choice,
             double target_s) {
  const int n = dag.num_ops();
  std::vector<double> time(n), lf(n);
  for (int round = 0; round < kTightenRounds; ++round) {
    for (int i = 0; i < n; ++i) time[i] = cands[i]->points[choice[i]].time_s;
    const Timeline tl = compute_timeline(dag, time);
    if (tl.time_s <= target_s) return;
    const auto& topo = dag.topological_order();
    bool moved = false;
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      const int v = *it;
      double f = tl.time_s;
      for (int w : dag.successors(v)) f = std::min(f, lf[w] - time[w]);
      lf[v] = f;
      const bool critical = tl.end_s[v] >= f - 1e-12 * tl.time_s;
      if (critical && choice[v] > 0) {
        --choice[v];
        moved = true;
      }
    }
    if (!moved) return;  // every critical op is at its fastest
  }
  tighten_in_one_pass(dag, cands, choice, target_s);
}

}  // namespace perseus::detail

namespace perseus::detail {

/// improve_by_pairs() moves an op by at most this many clocks (a profile of 200 clocks per
/// computation made a 16-computation solve take 15 s in pair moves alone).
constexpr std::size_t kPairMoveClocks = 8;

bool improve_by_pairs(const Dag& dag, const std::vector<const Candidates*>& cands, double p_block_w,
                      double deadline_s, std::vector<std::uint16_t>& choice, int max_rounds, bool pairs) {
  const int n = dag.num_ops();
  std::vector<double> time(n);
  for (int i = 0; i < n; ++i) time[i] = cands[i]->points[choice[i]].time_s;
  auto eff = [&](int v, std::size_t c) { return cands[v]->points[c].energy_j - p_block_w * cands[v]->points[c].time_s; };
  bool any = false;
  for (int round = 0; round < max_rounds; ++round) {
    bool improved = false;
    for (int a = 0; a < n && pairs; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        const auto& pa = cands[a]->points;
        const auto& pb = cands[b]->points;
        // Within kPairMoveClocks clocks of the current ones (the work per round stays
        // O(ops² × kPairMoveClocks²) timelines on profiles of hundreds of clocks).
        const std::size_t ca_from = choice[a] > kPairMoveClocks ? choice[a] - kPairMoveClocks : 0;
        const std::size_t cb_to = std::min(pb.size(), choice[b] + 1 + kPairMoveClocks);
        for (std::size_t ca = ca_from; ca < choice[a]; ++ca) {      // a faster
          for (std::size_t cb = choice[b] + 1; cb < cb_to; ++cb) {  // b slower
            // Energy at the deadline is Σ eff + P_block R τ: the move must lower Σ eff.
            const double gain = eff(a, choice[a]) - eff(a, ca) + eff(b, choice[b]) - eff(b, cb);
            if (gain <= 1e-12 * std::abs(eff(b, cb))) continue;
            time[a] = pa[ca].time_s;
            time[b] = pb[cb].time_s;
            if (compute_timeline(dag, time).time_s <= deadline_s * (1 + 1e-12)) {
              choice[a] = static_cast<std::uint16_t>(ca);
              choice[b] = static_cast<std::uint16_t>(cb);
              improved = any = true;
              break;
            }
            time[a] = pa[choice[a]].time_s;
            time[b] = pb[choice[b]].time_s;
          }
          if (improved) break;
        }
        if (improved) break;
      }
      if (improved) break;
    }
    if (!improved) {
      // Speed one op up, then let slack filling spend the time it frees on the others.
      std::vector<double> scratch, latest;
      double base = 0;
      for (int v = 0; v < n; ++v) base += eff(v, choice[v]);
      for (int a = 0; a < n && !improved; ++a) {
        const std::size_t ca_from = choice[a] > kPairMoveClocks ? choice[a] - kPairMoveClocks : 0;
        for (std::size_t ca = choice[a]; ca-- > ca_from && !improved;) {  // one clock faster first
          std::vector<std::uint16_t> trial = choice;
          trial[a] = static_cast<std::uint16_t>(ca);
          fill_slack(dag, cands, trial, scratch, latest, deadline_s);
          double e = 0;
          for (int v = 0; v < n; ++v) e += eff(v, trial[v]);
          for (int v = 0; v < n; ++v) time[v] = cands[v]->points[trial[v]].time_s;
          if (e < base - 1e-12 * std::abs(base) && compute_timeline(dag, time).time_s <= deadline_s * (1 + 1e-12)) {
            choice = std::move(trial);
            improved = any = true;
          }
        }
      }
      for (int v = 0; v < n; ++v) time[v] = cands[v]->points[choice[v]].time_s;
    }
    if (!improved) break;
  }
  return any;
}

}  // namespace perseus::detail
