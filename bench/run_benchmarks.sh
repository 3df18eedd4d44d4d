#!/usr/bin/env bash
# Planner benchmarks (issues 2 and 5). Each case runs in its own process (peak RSS per case).
# Usage: bench/run_benchmarks.sh [BUILD_DIR]   (default: build). Pin to one core with taskset.
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bench/perseus_planner_bench"
DATA="$(cd "$(dirname "$0")/../.." && pwd)/shared/data"
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""
echo "## Paper cases (GPT-3 175B, 8 stages, 1F1B, unit time 1 ms)"
echo "| device | microbatches | computations | steps | frontier plans | solve s | saving % | paper % | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|"
$PIN "$BIN" paper "$DATA" 0.001 2>/tmp/perseus-bench-relative.md
echo
echo "## Energy / all-max baseline (%) at T/T_min = 1.00 1.01 1.02 1.05 1.10 1.20 (ours / paper)"
cat /tmp/perseus-bench-relative.md
echo
echo "## Synthetic pipelines (1F1B, 40 frequencies per op, seed 42, unit time 1 ms)"
echo "| stages x microbatches | computations | steps | max-flows | frontier plans | solve s | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
for case in "4 8" "8 32" "16 64" "32 128" "64 256" ${PERSEUS_BENCH_LARGE:+"64 1024"}; do
  # shellcheck disable=SC2086
  timeout "${PERSEUS_BENCH_TIMEOUT:-600}" $PIN "$BIN" synth $case 0.001 || echo "| ${case/ / x } | timed out after ${PERSEUS_BENCH_TIMEOUT:-600} s |"
done
