#!/usr/bin/env bash
# Capacity and hostile-input probe of `perseus serve` on loopback (docs/http-api.md, "Load test"):
#  1. 10,000 keep-alive connections each poll a plan once per second (10 rounds);
#  2. 200 pollers while 1,000 slow connections hold half-sent requests; health p99 the same way;
#  3. server RSS before/after 1 GiB of junk before auth: chunked, Content-Length, gzip.
# Usage: bench/server_probe.sh [BUILD_DIR]. Exit 1 if a poller phase had errors.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
perseus=${PERSEUS_BIN:-$build/cli/perseus}
pollers=${POLLERS_BIN:-$build/bench/server/perseus_server_pollers}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/token"
"$perseus" serve --db "$tmp/probe.db" --port 0 --port-file "$tmp/port" --token-file "$tmp/token" \
  --threads "${SERVER_THREADS:-2}" --rate-limit-rps 0 --max-connections 30000 --max-connections-per-ip 0 \
  2> "$tmp/serve.log" &
pid=$!
for _ in $(seq 500); do [ -s "$tmp/port" ] && break; sleep 0.01; done
port=$(cat "$tmp/port"); tok=$(cat "$tmp/token"); url="http://127.0.0.1:$port"
auth=(-H "Authorization: Bearer $tok" -H "Content-Type: application/json")
python3 - "$root/examples/stage_profile_gpt3-175b_a100_sxm.csv" > "$tmp/job.json" <<'PY'
import json, sys
print(json.dumps({"name": "probe", "pp": 8, "dp": 1, "microbatches": 8, "unit_time_s": 0.01, "p2p_power_w": 83.64,
                  "profile_csv": open(sys.argv[1]).read()}))
PY
job=$(curl -sf "${auth[@]}" --data-binary @"$tmp/job.json" "$url/v1/jobs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
curl -sf "${auth[@]}" -d '{"rank":0,"dp_rank":0,"pp_rank":0,"tp_rank":0}' "$url/v1/jobs/$job/ranks" > /dev/null
for _ in $(seq 600); do
  curl -sf "${auth[@]}" "$url/v1/jobs/$job" | grep -q '"status":"ready"' && break; sleep 0.1
done
plan="/v1/jobs/$job/ranks/0/plan?since_version=1000000"
rc=0
"$pollers" --port "$port" --token-file "$tmp/token" --path "$plan" --connections "${POLLERS:-10000}" --rounds 10 || rc=1
"$pollers" --port "$port" --token-file "$tmp/token" --path "$plan" --connections 200 --rounds 5 --slow 1000 || rc=1
"$pollers" --port "$port" --token-file "$tmp/token" --path "/v1/health" --connections 200 --rounds 5 --slow 1000 || rc=1
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
echo "server RSS before junk: $(rss) KiB"
head -c 1073741824 /dev/zero | curl -s -o /dev/null -w "chunked 1 GiB before auth: HTTP %{http_code}, %{size_upload} bytes sent\n" \
  -X POST -H "Transfer-Encoding: chunked" -H "Content-Type: application/json" -T - "$url/v1/jobs" || true
echo "server RSS: $(rss) KiB"
head -c 1073741824 /dev/zero | curl -s -o /dev/null -w "chunked 1 GiB with token: HTTP %{http_code}, %{size_upload} bytes sent\n" \
  "${auth[@]}" -X POST -H "Transfer-Encoding: chunked" -T - "$url/v1/jobs" || true
echo "server RSS: $(rss) KiB"
head -c 1048576 /dev/zero | curl -s -o /dev/null -w "gzip body: HTTP %{http_code}\n" \
  "${auth[@]}" -H "Content-Encoding: gzip" --data-binary @- "$url/v1/jobs" || true
echo "server RSS after junk: $(rss) KiB"
exit $rc
