#!/usr/bin/env python3
"""Data-driven golden cases: tests/golden/cases/<name>/ holds the inputs (case.json: profile
and `perseus optimize` options) and the expected outputs (summary.json, frontier.csv).

usage: scripts/golden_cases.py PERSEUS_BINARY check  [CASE...]   compare outputs with expectations
       scripts/golden_cases.py PERSEUS_BINARY update [CASE...]   rewrite expectations (only when asked)
       scripts/golden_cases.py PERSEUS_BINARY bench  [CASE...]   wall time and peak RSS per case

case.json: {"description": str, "profile": path relative to the repository root,
            "args": [extra `perseus optimize` arguments, e.g. "--stages", "8", ...]}
Numbers are compared with a relative tolerance of 1e-9 (the planner is deterministic; the
tolerance only absorbs the last printed digit); summary.json keys that measure the run itself
(solve time) are not compared. Exit status: 0 all match, 1 a mismatch or a failed run, 2 usage.
PERSEUS_GOLDEN_CASES=DIR reads the cases from DIR instead. Standard library only.
"""
import csv
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.environ.get("PERSEUS_GOLDEN_CASES", os.path.join(ROOT, "tests", "golden", "cases"))
VOLATILE = {"solve_time_s", "bound_time_s", "polish_time_s"}  # depend on the machine, not on the plan
REL_TOL = 1e-9


def load_case(name):
    path = os.path.join(CASES, name, "case.json")
    with open(path) as f:
        case = json.load(f)
    for key, kind in (("profile", str), ("args", list)):
        if not isinstance(case.get(key), kind):
            raise SystemExit(f"{path}: field '{key}': expected a {kind.__name__}")
    return case


def run_optimize(binary, case, out_dir):
    cmd = [binary, "optimize", "--profile", case["profile"], *case["args"], "--out", out_dir, "--quiet"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\nexit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return wall


def close(a, b):
    return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= REL_TOL * max(abs(a), abs(b)))


def diff_json(want, got, where, out):
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if k in VOLATILE:
                continue
            if k not in got:
                out.append(f"{where}.{k}: missing")
            elif k not in want:
                out.append(f"{where}.{k}: not expected (run update if intended)")
            else:
                diff_json(want[k], got[k], f"{where}.{k}", out)
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            out.append(f"{where}: {len(got)} items, expected {len(want)}")
        for i, (w, g) in enumerate(zip(want, got)):
            diff_json(w, g, f"{where}[{i}]", out)
    elif isinstance(want, (int, float)) and isinstance(got, (int, float)) and not isinstance(want, bool):
        if not close(float(want), float(got)):
            out.append(f"{where}: {got!r}, expected {want!r}")
    elif want != got:
        out.append(f"{where}: {got!r}, expected {want!r}")


def diff_csv(want_path, got_path, out):
    with open(want_path, newline="") as f:
        want = list(csv.reader(f))
    with open(got_path, newline="") as f:
        got = list(csv.reader(f))
    if want[:1] != got[:1]:
        out.append(f"frontier.csv header {got[:1]}, expected {want[:1]}")
        return
    if len(want) != len(got):
        out.append(f"frontier.csv: {len(got) - 1} rows, expected {len(want) - 1}")
    for line, (w, g) in enumerate(zip(want[1:], got[1:]), start=2):
        for col, (a, b) in enumerate(zip(w, g)):
            try:
                same = close(float(a), float(b))
            except ValueError:
                same = a == b
            if not same:
                out.append(f"frontier.csv:{line}: {want[0][col]} = {b}, expected {a}")
                break
        if len(out) > 20:
            out.append("... (more differences)")
            return


def main(argv):
    if len(argv) < 3 or argv[2] not in ("check", "update", "bench"):
        print(__doc__, file=sys.stderr)
        return 2
    binary, mode, names = os.path.abspath(argv[1]), argv[2], argv[3:]
    names = names or sorted(d for d in os.listdir(CASES) if os.path.isdir(os.path.join(CASES, d)))
    if not names:
        print(f"no cases under {CASES}", file=sys.stderr)
        return 1
    failed = 0
    if mode == "bench":
        print("| case | wall s | peak RSS MiB (largest child so far) |\n|---|---|---|")
    for name in names:
        if not os.path.isfile(os.path.join(CASES, name, "case.json")):
            print(f"{name}: no such case ({CASES}/{name}/case.json)", file=sys.stderr)
            return 2
        case = load_case(name)
        tmp = tempfile.mkdtemp(prefix="perseus-golden-")
        out_dir = os.path.join(tmp, "out")
        try:
            wall = run_optimize(binary, case, out_dir)
            if mode == "bench":
                rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
                print(f"| {name} | {wall:.3f} | {rss:.0f} |")
                continue
            case_dir = os.path.join(CASES, name)
            if mode == "update":
                for f in ("summary.json", "frontier.csv"):
                    shutil.copyfile(os.path.join(out_dir, f), os.path.join(case_dir, f))
                print(f"{name}: expectations rewritten")
                continue
            problems = []
            for f in ("summary.json", "frontier.csv"):
                if not os.path.isfile(os.path.join(case_dir, f)):
                    problems.append(f"{f}: no expectation (run: scripts/golden_cases.py PERSEUS update {name})")
            if not problems:
                with open(os.path.join(case_dir, "summary.json")) as f:
                    want = json.load(f)
                with open(os.path.join(out_dir, "summary.json")) as f:
                    got = json.load(f)
                diff_json(want, got, "summary", problems)
                diff_csv(os.path.join(case_dir, "frontier.csv"), os.path.join(out_dir, "frontier.csv"), problems)
            if problems:
                failed += 1
                print(f"{name}: FAILED")
                for p in problems:
                    print(f"  {p}")
                print(f"  if the change is intended: scripts/golden_cases.py {argv[1]} update {name} "
                      "(or make golden-update), then review git diff tests/golden/cases")
            else:
                print(f"{name}: ok")
        except RuntimeError as e:
            failed += 1
            print(f"{name}: FAILED to run\n{e}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
