// Discrete-event simulation of one iteration: per-GPU queues, completion events in time order.
#include "perseus/simulator.hpp"

#include <cmath>
#include <queue>
#include <random>
#include <stdexcept>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus {

SimulationResult simulate(const Dag& dag, const FrequencyPlan& plan, double p_block_w, const SimulationOptions& opt) {
  const int n = dag.num_ops();
  const int ranks = dag.num_ranks();
  if (static_cast<int>(plan.time_s.size()) != n || static_cast<int>(plan.energy_j.size()) != n ||
      static_cast<int>(plan.freq_mhz.size()) != n) {
    throw std::invalid_argument(fmt::format("simulate: plan has {}/{}/{} entries for {} ops", plan.time_s.size(),
                                            plan.energy_j.size(), plan.freq_mhz.size(), n));
  }
  if (!(opt.jitter >= 0 && opt.jitter < 1)) throw InputError(fmt::format("simulation: jitter must be in [0, 1), got {}", opt.jitter));
  if (!(opt.switch_latency_s >= 0) || !std::isfinite(opt.switch_latency_s)) {
    throw InputError(fmt::format("simulation: frequency-switch latency must be >= 0 s, got {}", opt.switch_latency_s));
  }
  if (opt.slow_rank < -1 || opt.slow_rank >= ranks) {
    throw InputError(fmt::format("simulation: slowed GPU {} does not exist (ranks 0..{})", opt.slow_rank, ranks - 1));
  }
  if (!(opt.slow_factor > 0) || !std::isfinite(opt.slow_factor)) {
    throw InputError(fmt::format("simulation: slow factor must be > 0, got {}", opt.slow_factor));
  }

  SimulationResult res;
  res.duration_s = plan.time_s;
  std::vector<double> energy = plan.energy_j;
  if (opt.jitter > 0) {
    std::mt19937_64 gen(opt.seed);
    for (int i = 0; i < n; ++i) {
      // 53 random bits -> [0, 1) -> [-1, 1); independent of the standard library's distributions.
      const double u01 = static_cast<double>(gen() >> 11) * 0x1.0p-53;
      const double f = 1.0 + opt.jitter * (2.0 * u01 - 1.0);
      res.duration_s[i] *= f;
      energy[i] *= f;
    }
  }
  if (opt.slow_rank >= 0 && opt.slow_factor != 1.0) {
    for (int i : dag.rank_ops(opt.slow_rank)) {
      res.duration_s[i] *= opt.slow_factor;
      energy[i] *= opt.slow_factor;
    }
  }

  res.start_s.assign(n, 0.0);
  res.end_s.assign(n, 0.0);
  std::vector<int> pending(n);                // unfinished predecessors
  std::vector<double> ready_s(n, 0.0);        // latest predecessor end seen so far
  std::vector<std::size_t> next(ranks, 0);    // next position in each rank's order
  std::vector<char> running(ranks, 0);        // a computation is in progress on the GPU
  std::vector<int> rank_prev(ranks, -1);
  for (int i = 0; i < n; ++i) pending[i] = static_cast<int>(dag.predecessors(i).size());

  struct Event {
    double time_s;
    std::uint64_t seq;
    int op;
    bool operator>(const Event& o) const { return time_s != o.time_s ? time_s > o.time_s : seq > o.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::uint64_t seq = 0;
  // Starts the rank's next computation if the GPU is idle and all its predecessors are done.
  auto try_start = [&](int r) {
    if (next[r] >= dag.rank_ops(r).size()) return;
    const int op = dag.rank_ops(r)[next[r]];
    if (pending[op] != 0) return;
    if (running[r]) return;
    double ready = ready_s[op];
    if (rank_prev[r] >= 0) {
      double gpu_ready = res.end_s[rank_prev[r]];
      if (opt.switch_latency_s > 0 && plan.freq_mhz[rank_prev[r]] != plan.freq_mhz[op]) gpu_ready += opt.switch_latency_s;
      ready = std::max(ready, gpu_ready);
    }
    res.start_s[op] = ready;
    res.end_s[op] = ready + res.duration_s[op];
    running[r] = 1;
    ++next[r];
    events.push({res.end_s[op], seq++, op});
  };
  for (int r = 0; r < ranks; ++r) try_start(r);
  while (!events.empty()) {
    const Event ev = events.top();
    events.pop();
    ++res.events;
    const int op = ev.op;
    const int r = dag.rank_of(op);
    running[r] = 0;
    rank_prev[r] = op;
    res.time_s = std::max(res.time_s, ev.time_s);
    for (int w : dag.successors(op)) {
      ready_s[w] = std::max(ready_s[w], res.end_s[op]);
      --pending[w];
    }
    try_start(r);
    for (int w : dag.successors(op)) {
      if (pending[w] == 0 && dag.rank_of(w) != r) try_start(dag.rank_of(w));
    }
  }
  for (int r = 0; r < ranks; ++r) {
    if (next[r] != dag.rank_ops(r).size()) {
      throw std::logic_error(fmt::format("simulate: rank {} stopped after {} of {} computations (deadlock)", r, next[r],
                                         dag.rank_ops(r).size()));
    }
  }

  // Energy exactly as evaluate_durations() sums it (op-id order), so results agree bit for bit.
  double busy = 0;
  for (int i = 0; i < n; ++i) {
    res.compute_energy_j += energy[i];
    busy += res.duration_s[i];
  }
  res.blocking_energy_j = p_block_w * (ranks * res.time_s - busy);

  res.ranks.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    RankTimeline& tl = res.ranks[r];
    double t = 0;
    for (int op : dag.rank_ops(r)) {
      if (res.start_s[op] > t) tl.idle.push_back({t, res.start_s[op], -1});
      tl.busy.push_back({res.start_s[op], res.end_s[op], op});
      tl.busy_s += res.duration_s[op];
      t = res.end_s[op];
    }
    if (res.time_s > t) tl.idle.push_back({t, res.time_s, -1});
    tl.idle_s = res.time_s - tl.busy_s;
  }
  return res;
}

}  // namespace perseus
