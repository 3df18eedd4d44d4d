# Sourced by the bad-argument tests: expect EXPECTED_STATUS MESSAGE_PART ARGS... runs "$bin" ARGS
# and sets status=1 (printing why) unless it exits EXPECTED_STATUS with MESSAGE_PART in its output.
expect() {
  local want=$1 part=$2
  shift 2
  local out rc
  out=$("$bin" "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want" ] || [[ "$out" != *"$part"* ]]; then
    echo "FAIL: $* -> status $rc (want $want), output: $out (want: $part)" >&2
    status=1
  fi
}
