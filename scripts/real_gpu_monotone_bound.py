#!/usr/bin/env python3
"""Lower bound on the error of ANY monotone iteration model calibrated on the all-max plans
(docs/validation.md, issue 19, a40_pp8_t5-3b).

A model is monotone when its predicted iteration time never falls when a computation gets
longer: every longest-path DAG is, whatever non-negative terms it adds (per-computation or
per-stage overheads, blocking or asynchronous P2P latencies that may differ per stage or edge,
extra edges such as encoder -> decoder cross-attention dependencies, a per-iteration term), as
long as the DAG's structure is the same for every plan (here it is: every plan runs 32
microbatches in Merak's 1F1B order). Such a model is also 1-Lipschitz in the durations (a
longest path loses at most what its computations lose). So if it predicts the all-max plans at
A, it predicts plan p at >= A - shortfall(p), shortfall(p) = sum over computations of
max(0, all-max duration - duration in p) (time_profile.csv durations, as the model uses).
Prints, per workload, the smallest median and max |error| any such model can reach on the
scored plans, with A = the all-max plans' mean measured time (their calibration target) and
with A = the faster all-max plan (the most favourable to the model), for the measured times
as shipped (mean over iterations >= 2) and as medians over those iterations.
usage: scripts/real_gpu_monotone_bound.py DIR...   Standard library only."""
import csv
import os
import statistics as st
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_gpu_gap_analysis import load  # noqa: E402  (one reader of the folder format)


def median_times(d):
    """Per plan: median over iterations >= 2 of the max over ranks of the iteration time."""
    it = defaultdict(lambda: defaultdict(float))
    for r in csv.DictReader(open(f"{d}/perseus_iterations.csv")):
        p, i = int(r["plan"]), int(r["iteration"])
        if i >= 2:
            it[p][i] = max(it[p][i], float(r["iter_time_s"]))
    return {p: st.median(v.values()) for p, v in it.items()}


def bound(a, shortfall, measured, scored):
    err = [100 * max(0.0, a - shortfall[p] - measured[p]) / measured[p] for p in scored]
    return st.median(err), max(err)


def main(dirs):
    print("| workload | scored plans | all-max measured (s) | largest shortfall (ms) | measured as | "
          "min median / max \\|error\\| (%), A = mean all-max | A = faster all-max |")
    print("|---|---|---|---|---|---|---|")
    for d in dirs:
        _, _, plans, meas = load(d)
        am = sorted(p for p in plans if meas[p][1])
        scored = sorted(p for p in plans if not meas[p][1])
        ref = plans[am[0]]
        shortfall = {p: sum(max(0.0, ref[c] - plans[p][c]) for c in ref) for p in scored}
        name = d.rstrip("/").split("/")[-1]
        for label, measured in (("mean (shipped)", {p: meas[p][0] for p in plans}), ("median", median_times(d))):
            a_mean = st.mean(measured[p] for p in am)
            a_min = min(measured[p] for p in am)
            m1, x1 = bound(a_mean, shortfall, measured, scored)
            m2, x2 = bound(a_min, shortfall, measured, scored)
            print(f"| {name} | {len(scored)} | {' / '.join(f'{measured[p]:.2f}' for p in am)} | "
                  f"{1e3 * max(shortfall.values()):.1f} | {label} | {m1:.2f} / {x1:.2f} | {m2:.2f} / {x2:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
