#!/usr/bin/env python3
"""What the computation-only DAG misses on the real-GPU runs (docs/validation.md, issue 19).

For each workload folder (tests/data/real_gpu/<workload>): per-stage busy time of the all-max
plan, its simulated (computation-only) and measured iteration time, and four candidate models of
the gap, each with ONE parameter calibrated on the all-max plans only (their mean simulated time
= their mean measured time) and then scored on the other plans:
  constant  - T_dag + c                       (one per-iteration term: optimizer step, ...)
  per-op    - every computation + o on its GPU (host dispatch / clock setting / timing sync)
  send      - computations that send to the next/previous stage + l on the SENDING GPU
              (blocking P2P, the sender's stream waits)
  edge      - cross-stage edges get latency l, the GPUs do not wait (asynchronous P2P)
Prints a Markdown table. The C++ `perseus validate` implements 'constant' and 'per-op'/'send';
this script is the independent check (its per-op numbers must match validate's) and adds 'edge'.
usage: scripts/real_gpu_gap_analysis.py DIR...    Standard library only (no numpy/pandas)."""
import csv
import json
import statistics as st
import sys
from collections import defaultdict


def load(d):
    info = json.load(open(f"{d}/info.json"))
    prof = {(int(r["stage"]), r["instruction"][0], int(r["frequency"])): float(r["time"])
            for r in csv.DictReader(open(f"{d}/time_profile.csv"))}
    meas = {int(r["plan"]): (float(r["time_s"]), r["all_max_frequency"] == "1")
            for r in csv.DictReader(open(f"{d}/perseus_frontier.csv"))}
    plans, order = defaultdict(dict), defaultdict(list)
    for r in csv.DictReader(open(f"{d}/perseus_plans.csv")):
        p, s, k, m = int(r["plan"]), int(r["stage"]), r["instruction"][0], int(r["microbatch"])
        plans[p][(s, k, m)] = prof[(s, k, int(r["frequency_mhz"]))]
        if p == min(meas):
            order[s].append((int(r["order"]), (s, k, m)))
    order = [[c for _, c in sorted(order[s])] for s in range(info["pp"])]
    return info["pp"], order, plans, meas


def iteration_time(S, order, dur, per_op=0.0, send=0.0, edge=0.0):
    """Each GPU runs its computations in order; a computation starts when its GPU is free and
    its cross-stage input has arrived (end of the producer + edge latency)."""
    end, free, idx, left = {}, [0.0] * S, [0] * S, sum(map(len, order))
    while left:
        moved = False
        for s in range(S):
            while idx[s] < len(order[s]):
                _, k, m = order[s][idx[s]]
                pred = ((s - 1, "f", m) if s > 0 else None) if k == "f" else \
                    ((s + 1, "b", m) if s < S - 1 else (s, "f", m))
                if pred is not None and pred not in end:
                    break
                start = free[s]
                if pred is not None:
                    start = max(start, end[pred] + (edge if pred[0] != s else 0.0))
                sends = (k == "f" and s < S - 1) or (k == "b" and s > 0)
                free[s] = end[(s, k, m)] = start + dur[(s, k, m)] + per_op + (send if sends else 0.0)
                idx[s] += 1
                left -= 1
                moved = True
        if not moved:
            raise SystemExit("deadlock: the plan order is not a valid schedule")
    return max(free)


def calibrate(f, target):
    lo, hi = 0.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return lo


def main(dirs):
    print("| workload | per-stage busy, all-max (s) | T_dag (s) | measured (s) | gap (s) | gap per computation (ms) "
          "| constant: med / max \\|err\\| (%) | per-op: o (ms), med err, max \\|err\\| (%) "
          "| send: l (ms), med err, max \\|err\\| (%) | edge: l (ms), med err, max \\|err\\| (%) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in dirs:
        S, order, plans, meas = load(d)
        am = [p for p in plans if meas[p][1]]
        scored = [p for p in plans if not meas[p][1]]
        target = st.mean(meas[p][0] for p in am)
        busy = [sum(plans[am[0]][c] for c in order[s]) for s in range(S)]
        t0 = st.mean(iteration_time(S, order, plans[p]) for p in am)
        cols = []
        models = {"constant": lambda p, x: iteration_time(S, order, plans[p]) + x,
                  "per-op": lambda p, x: iteration_time(S, order, plans[p], per_op=x),
                  "send": lambda p, x: iteration_time(S, order, plans[p], send=x),
                  "edge": lambda p, x: iteration_time(S, order, plans[p], edge=x)}
        for name, model in models.items():
            x = target - t0 if name == "constant" else calibrate(lambda v: st.mean(model(p, v) for p in am), target)
            err = [100 * (model(p, x) - meas[p][0]) / meas[p][0] for p in scored]
            worst = max(map(abs, err))
            if name == "constant":
                cols.append(f"{st.median(map(abs, err)):.2f} / {worst:.2f}")
            else:
                cols.append(f"{1e3 * x:.2f}, {st.median(err):+.2f}, {worst:.2f}")
        name = d.rstrip("/").split("/")[-1]
        print(f"| {name} | {' '.join(f'{b:.2f}' for b in busy)} | {t0:.3f} | {target:.3f} | {target - t0:.3f} "
              f"| {1e3 * (target - t0) / len(order[0]):.2f} | " + " | ".join(cols) + " |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
