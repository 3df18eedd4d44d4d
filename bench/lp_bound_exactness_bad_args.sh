#!/usr/bin/env bash
# perseus_lp_bound_exactness: bad arguments and input files give a one-line message naming the
# argument or file:line and exit status 2 (no abort); a tiny run gives 0, a reported bound
# above the exact one 1. Needs only the repository's tests/data (a 4-stage profile); < 1 s.
# Usage: lp_bound_exactness_bad_args.sh PERSEUS_LP_BOUND_EXACTNESS
set -uo pipefail
bin=$1
profile=$(dirname "$0")/../tests/data/cases/llama_a100_4st.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
# shellcheck source=expect_status.sh
. "$(dirname "$0")/expect_status.sh"
frontier() {  # frontier NAME LINES...: a frontier.csv in $tmp
  local f=$tmp/$1
  shift
  printf '%s\n' "$@" >"$f"
  echo "$f"
}
ok=$(frontier ok.csv plan,time_s,energy_j,lower_bound_j 0,100.0,1e9,1)
reordered=$(frontier reordered.csv lower_bound_j,energy_j,time_s 1,1e9,100.0)
expect 2 "expected 5 arguments" "$profile" 4 8
expect 2 "STAGES: expected a number, got 'a'" "$profile" a 8 75 "$ok"
expect 2 "STAGES: expected an integer in [1, 1e6], got '1.5'" "$profile" 1.5 8 75 "$ok"
expect 2 "MICROBATCHES: expected a number >= 1, got '0'" "$profile" 4 0 75 "$ok"
expect 2 "P_BLOCK_W: expected a number >= 0, got '-1'" "$profile" 4 8 -1 "$ok"
expect 2 "P_BLOCK_W: expected a number, got 'nan'" "$profile" 4 8 nan "$ok"
expect 2 "P_BLOCK_W" "$profile" 4 8 1e9 "$ok"
expect 2 "llama_a100_4st.csv: profile has 4 stages, but schedule '1f1b' has 3 stages" "$profile" 3 8 75 "$ok"
expect 2 "--check: expected a number >= 0, got '-2'" "$profile" 4 8 75 "$ok" --check -2
expect 2 "--check: expected a value" "$profile" 4 8 75 "$ok" --check
expect 2 "unknown option '--bogus'" "$profile" 4 8 75 "$ok" --bogus 1
expect 2 "--schedule" "$profile" 4 8 75 "$ok" --schedule bogus
expect 2 "--out $tmp/no/such/dir/x.csv: cannot open for writing" "$profile" 4 8 75 "$ok" --out "$tmp/no/such/dir/x.csv"
expect 2 "$tmp/missing.csv" "$tmp/missing.csv" 4 8 75 "$ok"
expect 2 "$tmp/missing_frontier.csv" "$profile" 4 8 75 "$tmp/missing_frontier.csv"
expect 2 "$tmp/nan.csv:3: field 'energy_j': expected a finite number" "$profile" 4 8 75 \
  "$(frontier nan.csv plan,time_s,energy_j,lower_bound_j 0,100.0,1e9,1 1,90.0,x,1)"
expect 2 "$tmp/short.csv:2: expected 4 fields like the header, got 3" "$profile" 4 8 75 \
  "$(frontier short.csv plan,time_s,energy_j,lower_bound_j 0,100.0,1e9)"
expect 2 "$tmp/nolb.csv:1: missing column 'lower_bound_j'" "$profile" 4 8 75 \
  "$(frontier nolb.csv plan,time_s,energy_j 0,100.0,1e9)"
expect 2 "$tmp/empty.csv: no frontier points" "$profile" 4 8 75 "$(frontier empty.csv plan,time_s,energy_j,lower_bound_j)"
expect 2 "$tmp/graphcut.csv:2: lower_bound_j is not > 0" "$profile" 4 8 75 \
  "$(frontier graphcut.csv plan,time_s,energy_j,lower_bound_j 0,100.0,1e9,0.000000)"
expect 2 "$tmp/fast.csv:3: time_s 0.001000000 s is below T_min" "$profile" 4 8 75 \
  "$(frontier fast.csv plan,time_s,energy_j,lower_bound_j 0,100.0,1e9,1 1,0.001,1e9,1)"
expect 0 "result: OK" "$profile" 4 8 75 "$ok" --out "$tmp/out.csv"
[ -s "$tmp/out.csv" ] || { echo "FAIL: --out wrote nothing" >&2; status=1; }
expect 0 "result: OK" --check 0 "$profile" 4 8 75 "$reordered"
expect 1 "the exact LB is below the reported certified LB at 1 point" "$profile" 4 8 75 \
  "$(frontier above.csv plan,time_s,energy_j,lower_bound_j 0,100.0,1e9,5e8)"
exit $status
