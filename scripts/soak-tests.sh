#!/usr/bin/env bash
# The whole test suite N times in a row (default 5) while busy loops occupy every CPU, to show
# that no test depends on wall-clock margins (issue 13). Uses stress-ng when installed, else
# `yes` loops. Prints one line per round and a final verdict; exit 0 only if every round passed.
# Usage: scripts/soak-tests.sh [BUILD_DIR] [ROUNDS]    (after `make build`)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
ROUNDS=${2:-5}
CPUS=$(nproc)
[ -f "$BUILD/CTestTestfile.cmake" ] || { echo "soak: no test build in $BUILD (run make build)" >&2; exit 2; }
load_pids=()
cleanup() { [ ${#load_pids[@]} -eq 0 ] || kill "${load_pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
if command -v stress-ng >/dev/null; then
  stress-ng --cpu "$CPUS" --timeout 0 --quiet &
  load_pids+=($!)
  load="stress-ng --cpu $CPUS"
else
  for _ in $(seq "$CPUS"); do yes >/dev/null & load_pids+=($!); done
  load="$CPUS x yes"
fi
echo "soak: $ROUNDS rounds of the whole suite under load ($load) on $CPUS CPUs"
passed=0
for round in $(seq "$ROUNDS"); do
  log="$BUILD/soak-round-$round.log"
  start=$(date +%s)
  if (cd "$BUILD" && ctest --output-on-failure -j"$CPUS" >"$log" 2>&1); then
    passed=$((passed + 1))
    echo "round $round: passed ($(grep -E 'tests passed' "$log" | tail -1), $(( $(date +%s) - start )) s)"
  else
    echo "round $round: FAILED ($(( $(date +%s) - start )) s); failures:"
    sed -n '/The following tests FAILED/,$p' "$log"
  fi
done
echo "soak: $passed of $ROUNDS rounds passed under load"
[ "$passed" -eq "$ROUNDS" ]
