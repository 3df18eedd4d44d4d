#!/usr/bin/env bash
# SIGTERM latency of `perseus serve` during a long frontier solve (docs/http-api.md, "Signals"):
# starts the server, creates a job whose solve takes minutes, waits until the solve has started
# (perseus_planner_running 1 in /metrics), lets it run DELAY_S more, sends SIGTERM and prints the
# seconds until the process has exited. Repeated for every delay in DELAYS (default "0 1 3 10").
# Usage: bench/server_sigterm.sh [BUILD_DIR]
#   JOB=row8 (default): 64 stages x 1024 microbatches (issue 15's row 8; the 8-stage GPT-3
#                       profile repeated), unit 1e-4 s;
#   JOB=small: 8 stages x 256 microbatches, unit 1e-5 s.
# Exit 1 if the server did not exit 0, or the job was no longer `planning` (the solve finished).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
perseus=${PERSEUS_BIN:-$build/cli/perseus}
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/token"
tok=$(cat "$tmp/token")
python3 - "$root/examples/stage_profile_gpt3-175b_a100_sxm.csv" "${JOB:-row8}" > "$tmp/job.json" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
if sys.argv[2] == "row8":
    pp, mb, unit = 64, 1024, 1e-4
    rows = [lines[0]] + [f"{s}," + l.split(",", 1)[1] for s in range(pp) for l in lines[1:] if int(l.split(",")[0]) == s % 8]
else:
    pp, mb, unit = 8, 256, 1e-5
    rows = lines
print(json.dumps({"name": "sigterm", "pp": pp, "dp": 1, "microbatches": mb, "unit_time_s": unit,
                  "p2p_power_w": 83.64, "profile_csv": "\n".join(rows) + "\n"}))
PY
metric() { curl -sf -H "Authorization: Bearer $tok" "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
rc=0
for delay in ${DELAYS:-0 1 3 10}; do
  rm -f "$tmp/port" "$tmp/db"*
  "$perseus" serve --db "$tmp/db" --port 0 --port-file "$tmp/port" --token-file "$tmp/token" 2> "$tmp/serve.log" &
  pid=$!
  for _ in $(seq 500); do [ -s "$tmp/port" ] && break; sleep 0.01; done
  url="http://127.0.0.1:$(cat "$tmp/port")"
  t0=$(date +%s.%N)
  job=$(curl -sf -H "Authorization: Bearer $tok" -H "Content-Type: application/json" --data-binary @"$tmp/job.json" "$url/v1/jobs" | jq -r .job_id)
  t1=$(date +%s.%N)
  until [ "$(metric perseus_planner_running)" = 1 ]; do sleep 0.05; done
  sleep "$delay"
  status=$(curl -sf -H "Authorization: Bearer $tok" "$url/v1/jobs/$job" | jq -r .status)
  t2=$(date +%s.%N)
  kill -TERM $pid
  set +e; wait $pid; code=$?; set -e
  t3=$(date +%s.%N)
  pid=
  awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v delay="$delay" -v code="$code" -v st="$status" \
    'BEGIN {printf "solve running %4ss: POST /v1/jobs %.3f s; status at SIGTERM %s; SIGTERM -> exit %.3f s (exit code %d)\n", delay, b - a, st, d - c, code}'
  [ "$code" = 0 ] && [ "$status" = planning ] || rc=1
done
exit $rc
