#!/usr/bin/env bash
# Installs the Debian packages Perseus needs, when missing.
# Usage: scripts/install-deps.sh [run|all]   (default all; uses sudo when not root)
#   run: what building the perseus command needs (make run)
#   all: also what the tests, benchmarks and Python package need (make test)
set -euo pipefail
WHAT=${1:-all}
PACKAGES=(
  build-essential cmake ccache pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev libfccp-dev liblemon-dev libboost-graph-dev
  libcpp-httplib-dev libmicrohttpd-dev libsqlite3-dev libssl-dev
  coinor-libclp-dev coinor-libcbc-dev libutfcpp-dev
  librocm-smi-dev
)
case "$WHAT" in
  run) PERSEUS_WITH_BROWSER=0 ;;
  all) PACKAGES+=(
         libgtest-dev libgmock-dev libbenchmark-dev
         python3-dev pybind11-dev python3-torch python3-numpy
         libxml2-utils stress-ng coinor-cbc
       ) ;;
  *) echo "usage: scripts/install-deps.sh [run|all]" >&2; exit 2 ;;
esac
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
# Optional: headless Chromium for the report screenshot test (the test is skipped when absent,
# so a failed install only warns).
if [ "${PERSEUS_WITH_BROWSER:-1}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends chromium >/tmp/perseus-apt-chromium.log 2>&1 ||
    echo "install-deps: chromium not installed (browser test will be skipped)" >&2
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/perseus-apt.log 2>&1; then
  $SUDO apt-get update -q >/dev/null 2>&1 || true
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" || { cat /tmp/perseus-apt.log >&2; exit 1; }
fi
