#!/usr/bin/env bash
# Every max-flow engine gives the same frontier (byte-identical frontier.csv): the warm
# default, cold Dinic, LEMON Preflow, Boost.Graph Boykov–Kolmogorov and the dynamic
# Boykov–Kolmogorov (docs/performance.md).
# Usage: engines_agree.sh PERSEUS_BINARY PROFILE_CSV
set -euo pipefail
bin=$1 profile=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for engine in warm dinic lemon boost-bk dynamic; do
  "$bin" optimize --min-cut-engine "$engine" --profile "$profile" --stages 8 --microbatches 12 \
    --p2p-power 83.64 --unit-time 0.002 --sample 1000 --quiet --out "$dir/$engine" >/dev/null
done
status=0
for engine in dinic lemon boost-bk dynamic; do
  if ! cmp "$dir/warm/frontier.csv" "$dir/$engine/frontier.csv"; then
    echo "engine $engine: frontier differs from the warm engine's" >&2
    status=1
  fi
done
[ "$(wc -l < "$dir/warm/frontier.csv")" -gt 100 ] || { echo "frontier too small to compare" >&2; exit 1; }
exit $status
