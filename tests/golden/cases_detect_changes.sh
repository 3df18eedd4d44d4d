#!/usr/bin/env bash
# The golden-case checker can fail: a copy of one case with one expected energy changed by
# 1e-6 (relative), and one with a frontier row removed, must both be reported, naming the field.
# Usage: cases_detect_changes.sh PYTHON PERSEUS_BINARY REPO_ROOT
set -euo pipefail
py=$1 bin=$2 root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case=gpt3_a100_mb12_1f1b
for variant in energy row; do
  mkdir -p "$tmp/$variant"
  cp -r "$root/tests/golden/cases/$case" "$tmp/$variant/"
done
"$py" - "$tmp/energy/$case/summary.json" <<'PY'
import json, sys
p = sys.argv[1]; s = json.load(open(p)); s["energy_at_t_min_j"] *= 1 + 1e-6; json.dump(s, open(p, "w"))
PY
sed -i '3d' "$tmp/row/$case/frontier.csv"
status=0
out=$(PERSEUS_GOLDEN_CASES="$tmp/energy" "$py" "$root/scripts/golden_cases.py" "$bin" check "$case") && status=0 || status=$?
[ "$status" = 1 ] && grep -q "summary.energy_at_t_min_j" <<<"$out" || { echo "changed energy not caught (exit $status): $out"; exit 1; }
out=$(PERSEUS_GOLDEN_CASES="$tmp/row" "$py" "$root/scripts/golden_cases.py" "$bin" check "$case") && status=0 || status=$?
[ "$status" = 1 ] && grep -q "frontier.csv" <<<"$out" || { echo "removed frontier row not caught (exit $status): $out"; exit 1; }
out=$("$py" "$root/scripts/golden_cases.py" "$bin" check no_such_case 2>&1) && status=0 || status=$?
[ "$status" = 2 ] && grep -q "no such case" <<<"$out" || { echo "unknown case not a usage error (exit $status): $out"; exit 1; }
echo "golden checker catches a changed energy, a removed row and an unknown case: ok"
