# Shared by the bench scripts that start and stop `perseus serve` (sourced, not run).
# Needs $root (the repository) and $perseus (the binary). Makes a scratch folder $tmp (removed,
# and a running server killed, at exit) holding a bearer token ($tok, in $tmp/token); start()
# sets $pid and $url.
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/token"
tok=$(cat "$tmp/token")
# A job's JSON: the 8-stage GPT-3 A100 profile repeated over PP stages, unit 1e-3 s, P_block
# 83.64 W. Arguments: PP MICROBATCHES PLANNING_BUDGET_S DP NAME.
gpt3_job_json() {
  python3 - "$root/examples/stage_profile_gpt3-175b_a100_sxm.csv" "$@" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
pp, mb, budget, dp, name = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rows = [lines[0]] + [f"{s}," + l.split(",", 1)[1] for s in range(pp) for l in lines[1:] if int(l.split(",")[0]) == s % 8]
print(json.dumps({"name": name, "pp": pp, "dp": dp, "microbatches": mb, "unit_time_s": 1e-3,
                  "p2p_power_w": 83.64, "planning_budget_s": budget, "profile_csv": "\n".join(rows) + "\n"}))
PY
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
rss_mib() { awk '$1 == "VmRSS:" {printf "%.0f MiB", $2 / 1024}' "/proc/$pid/status"; }
api() { curl -sf -H "Authorization: Bearer $tok" "$@"; }
# Starts the server on $tmp/db and waits for its port file (written once every route is served).
start() {
  rm -f "$tmp/port"
  "$perseus" serve --db "$tmp/db" --port 0 --port-file "$tmp/port" --token-file "$tmp/token" 2>> "$tmp/serve.log" &
  pid=$!
  until [ -s "$tmp/port" ]; do kill -0 $pid; sleep 0.01; done
  url="http://127.0.0.1:$(cat "$tmp/port")"
}
# SIGTERM, then exit 1 unless the server exits 0.
stop() {
  kill -TERM $pid
  set +e; wait $pid; local code=$?; set -e
  pid=
  [ "$code" = 0 ] || { echo "server exit code $code" >&2; exit 1; }
}
