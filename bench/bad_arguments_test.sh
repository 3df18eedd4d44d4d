#!/usr/bin/env bash
# perseus_planner_bench rejects bad arguments with a message and exit status 2 (no abort).
# Usage: bad_arguments_test.sh PERSEUS_PLANNER_BENCH
set -uo pipefail
bin=$1
status=0
# shellcheck source=expect_status.sh
. "$(dirname "$0")/expect_status.sh"
expect 2 "STAGES: expected an integer >= 1, got '0'" synth 0 5
expect 2 "STAGES: expected a number, got 'a'" synth a b
expect 2 "UNIT_S: expected a number, got 'abc'" synth 4 8 abc
expect 2 "unit_time_s must be in [1e-7, 10] s" synth 4 8 0
expect 2 "no paper case a40 mb96 in DATA_DIR /nonexistent" case /nonexistent a40 96 0.001
PERSEUS_BENCH_BUDGET_S=x expect 2 "PERSEUS_BENCH_BUDGET_S: expected a number" synth 4 8
PERSEUS_BENCH_MIN_CUT_ENGINE=bogus expect 2 "PERSEUS_BENCH_MIN_CUT_ENGINE: expected warm, dinic, lemon, boost-bk or dynamic" synth 4 8
PERSEUS_BENCH_PLANNER=bogus expect 2 "PERSEUS_BENCH_PLANNER: expected graph-cut or certified" synth 4 8
PERSEUS_BENCH_BOUND=bogus expect 2 "PERSEUS_BENCH_BOUND: expected auto, lp or hull-walk" synth 4 8
PERSEUS_BENCH_DUMP=/nonexistent/dir/d.txt expect 1 "cannot open for writing" synth 4 8
expect 2 "DEADLINE_X: expected a factor in [1, 100]" milp /dev/null 4 8 70 0.5 10
expect 2 "DEADLINE_X: expected a factor in [1, 100]" milp /dev/null 4 8 70 1e300 10
PATH=/nonexistent expect 1 "cbc not found on PATH (Debian package coinor-cbc" \
  milp "$(dirname "$0")/../tests/data/cases/llama_a100_4st.csv" 4 8 75 1 10
expect 2 "SECONDS: expected 0 < SECONDS" milp /dev/null 4 8 70 1 0
expect 2 "SECONDS: expected a number" milp /dev/null 4 8 70 1 x
expect 0 "| 4 x 8 | 64 |" synth 4 8
exit $status
