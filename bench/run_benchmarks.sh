#!/usr/bin/env bash
# Planner benchmarks (issues 2 and 5). Each case runs in its own process (peak RSS per case),
# pinned to one core. Prints markdown tables; writes the scaling data to $OUT_CSV and the
# scaling plot (solve CPU seconds vs computations) to $OUT_SVG.
# Usage: bench/run_benchmarks.sh [BUILD_DIR]   (default: build)
#   PERSEUS_BENCH_LARGE=1      also run 64 x 1024 (131,072 computations)
#   PERSEUS_BENCH_TIMEOUT=S    per-case wall-clock timeout (default 600 s)
#   PERSEUS_BENCH_PLANNER=P     graph-cut (default; the README speed tables) or certified (Planner 2.0)
#   PERSEUS_BENCH_BUDGET_S=S   synthetic cases stop after S s of solve CPU and report how far
#                              they got and their RSS (default 300)
#   OUT_CSV / OUT_SVG          default: bench/planner_scaling.csv, docs/planner_scaling.svg
# Regenerate the plot only: python3 bench/plot_scaling.py bench/planner_scaling.csv docs/planner_scaling.svg
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD=${1:-build}
BIN="$BUILD/bench/perseus_planner_bench"
DATA="$ROOT/tests/data"
OUT_CSV=${OUT_CSV:-$ROOT/bench/planner_scaling.csv}
OUT_SVG=${OUT_SVG:-$ROOT/docs/planner_scaling.svg}
TMO=${PERSEUS_BENCH_TIMEOUT:-600}
export PERSEUS_BENCH_BUDGET_S=${PERSEUS_BENCH_BUDGET_S:-300}
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""
rel=$(mktemp)
trap 'rm -f "$rel"' EXIT
echo "series,label,computations,cpu_s" > "$OUT_CSV"
echo "## Paper cases (GPT-3 175B, 8 stages, 1F1B)"
echo "| device | microbatches | unit s | computations | steps | max-flows | frontier plans | solve CPU s | solve wall s | saving % | paper % | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for dev in a100_sxm a40; do
  for mb in 12 24 48 96; do
    row=$($PIN "$BIN" case "$DATA" $dev $mb 0.001 2>>"$rel")
    echo "$row"
    echo "$row" | awk -F'|' -v d=$dev -v m=$mb '{gsub(/ /,""); print "paper,"d"_mb"m","$5","$9}' >> "$OUT_CSV"
  done
done
# The paper's finest frontier: a40 mb96 at 0.1 ms (issue 5 target: <= 5 s).
timeout "$TMO" $PIN "$BIN" case "$DATA" a40 96 0.0001 2>/dev/null || echo "| a40 | 96 | 0.0001 | timed out after $TMO s |"
echo
echo "## Golden cases (tests/golden/cases: whole perseus optimize run, one process each)"
$PIN python3 "$ROOT/scripts/golden_cases.py" "$BUILD/cli/perseus" bench
echo
echo "## Energy / all-max baseline (%) at T/T_min = 1.00 1.01 1.02 1.05 1.10 1.20 (ours / paper)"
cat "$rel"
echo
# synth_rows SERIES PLANNER CASE...: one synth run per "S M" case with PERSEUS_BENCH_PLANNER=PLANNER;
# prints each row and adds the finished ones to the plot data as SERIES.
synth_rows() {
  local series=$1 planner=$2
  shift 2
  for c in "$@"; do
    # shellcheck disable=SC2086
    if row=$(PERSEUS_BENCH_PLANNER=$planner timeout "$TMO" $PIN "$BIN" synth $c 0.001); then
      echo "$row"
      # Only finished solves go into the plot.
      case "$row" in *stopped*) ;; *)
        echo "$row" | awk -F'|' -v s="$series" '{gsub(/ /,"",$2); gsub(/ /,"",$3); gsub(/ /,"",$7); print s","$2","$3","$7}' >> "$OUT_CSV" ;;
      esac
    else
      echo "| ${c/ / x } | timed out after $TMO s |"
    fi
  done
}
echo "## Synthetic pipelines (1F1B, 40 frequencies per op, heterogeneous stages, seed 42, unit time 1 ms)"
echo "| stages x microbatches | computations | steps | max-flows | frontier plans | solve CPU s | solve wall s | peak RSS MiB | LP solves | result |"
echo "|---|---|---|---|---|---|---|---|---|---|"
synth_rows synthetic graph-cut "4 8" "4 64" "8 32" "8 128" "16 32" "16 64" "16 128" "16 256" "32 128" "64 32" "64 64" \
  "64 256" ${PERSEUS_BENCH_LARGE:+"64 1024"}
echo
echo "## Synthetic pipelines, certified planner (the default: graph cut + bound stage + plan improvement)"
echo "| stages x microbatches | computations | steps | max-flows | frontier plans | solve CPU s | solve wall s | peak RSS MiB | LP solves | result | bound | max gap % |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
synth_rows certified certified "16 32" "16 64" "16 128" "16 256"
python3 "$ROOT/bench/plot_scaling.py" "$OUT_CSV" "$OUT_SVG" && echo && echo "plot: $OUT_SVG"
