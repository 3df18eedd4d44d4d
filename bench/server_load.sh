#!/usr/bin/env bash
# Load test of `perseus serve` on loopback: 4,096 ranks register and fetch plans concurrently.
# Usage: bench/server_load.sh [BUILD_DIR] [extra perseus_server_load options...]
# Needs BUILD_DIR/cli/perseus and BUILD_DIR/bench/server/perseus_server_load (or $LOAD_BIN).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
perseus=${PERSEUS_BIN:-$build/cli/perseus}
load=${LOAD_BIN:-$build/bench/server/perseus_server_load}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/token"
"$perseus" serve --db "$tmp/load.db" --port 0 --port-file "$tmp/port" --token-file "$tmp/token" \
  --threads "${SERVER_THREADS:-2}" --rate-limit-rps 0 2> "$tmp/serve.log" &
pid=$!
for _ in $(seq 500); do [ -s "$tmp/port" ] && break; sleep 0.01; done
[ -s "$tmp/port" ] || { cat "$tmp/serve.log"; exit 1; }
"$load" --port "$(cat "$tmp/port")" --token-file "$tmp/token" \
  --profile "$root/examples/stage_profile_gpt3-175b_a100_sxm.csv" --ranks 4096 --pp 8 "$@"
