#!/usr/bin/env bash
# Planner scale (issue 20): the same synthetic cases solved by two planner builds, one case at
# a time, alternating OLD and NEW, each pinned to one core (taskset -c 0), in one run.
# Usage: bench/planner_side_by_side.sh OLD_BENCH NEW_BENCH [STAGESxMICROBATCHES ...]
#   OLD_BENCH / NEW_BENCH: perseus_planner_bench binaries (e.g. one built from an older commit:
#     git worktree add /tmp/perseus-old COMMIT && cmake -S /tmp/perseus-old -B /tmp/perseus-old/build \
#       -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/perseus-old/build --target perseus_planner_bench)
#   cases: default "16x256 64x256 64x1024"
#   PERSEUS_BENCH_PLANNER=graph-cut|certified  planner of both (default graph-cut)
#   PERSEUS_BENCH_BUDGET_S=S  stop a solve after S s of CPU in the graph-cut walk and report how
#                             far it got (default 300; both binaries understand it)
# Prints one markdown row per (case, binary); the NEW rows have two more columns (LP solves,
# complete/partial).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,15p' "$0" >&2
  exit 2
fi
OLD=$1
NEW=$2
shift 2
CASES=${*:-16x256 64x256 64x1024}
export PERSEUS_BENCH_BUDGET_S=${PERSEUS_BENCH_BUDGET_S:-300}
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""
echo "planner: ${PERSEUS_BENCH_PLANNER:-graph-cut}; CPU budget per solve: $PERSEUS_BENCH_BUDGET_S s; $(date -u +%FT%TZ)"
echo "| build | stages x microbatches | computations | steps | max-flows | frontier plans | solve CPU s | solve wall s | peak RSS MiB | LP solves | result |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for c in $CASES; do
  for which in old new; do
    bin=$OLD
    [ "$which" = new ] && bin=$NEW
    # shellcheck disable=SC2086
    row=$($PIN "$bin" synth ${c/x/ } 0.001) || row="| ${c/x/ x } | failed (exit $?) |"
    echo "| $which $row"
  done
done
