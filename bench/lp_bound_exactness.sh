#!/usr/bin/env bash
# Is the certified planner's remaining gap bound looseness or plan quality (issue 17)? For
# GPT-3 175B, 8 stages, 1F1B: `perseus optimize` (the default, certified planner) into a temp
# folder, then perseus_lp_bound_exactness on its frontier.csv (the exact LP bound at every point).
# Usage: bench/lp_bound_exactness.sh BUILD_DIR
#   BUILD_DIR: a build with both targets, e.g.
#     cmake --build BUILD_DIR --target perseus perseus_lp_bound_exactness
# Prints each case's summary; exit status 1 when a case fails.
set -euo pipefail
if [ $# -ne 1 ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
PERSEUS=$1/cli/perseus
TOOL=$1/bench/perseus_lp_bound_exactness
for bin in "$PERSEUS" "$TOOL"; do
  [ -x "$bin" ] || { echo "$bin: not built" >&2; exit 2; }
done
DATA=$(cd "$(dirname "$0")/../tests/data/emulation" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
status=0
run() {  # run NAME PROFILE P_BLOCK_W MICROBATCHES CHECKS
  local name=$1 profile=$DATA/$2 p=$3 mb=$4
  echo "=== $name: $2, 8 stages x $mb microbatches, P_block $p W; $(date -u +%FT%TZ)"
  if ! "$PERSEUS" optimize --profile "$profile" --stages 8 --microbatches "$mb" --p2p-power "$p" --quiet \
      --out "$TMP/$name" >"$TMP/$name.log" 2>&1; then
    echo "perseus optimize failed:" && cat "$TMP/$name.log"
    status=1
    return
  fi
  "$TOOL" "$profile" 8 "$mb" "$p" "$TMP/$name/frontier.csv" --check "$5" || status=1
}
run a40_mb12 stage_profile_gpt3-175b_a40.csv 70.38 12 40
run a40_mb24 stage_profile_gpt3-175b_a40.csv 70.38 24 40
run a40_mb96 stage_profile_gpt3-175b_a40.csv 70.38 96 20
run a100_mb12 stage_profile_gpt3-175b_a100_sxm.csv 83.64 12 40
run a100_mb96 stage_profile_gpt3-175b_a100_sxm.csv 83.64 96 20
exit $status
