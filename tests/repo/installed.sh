#!/bin/sh
# `cmake --install` into a fresh prefix, then use only that prefix, as a user elsewhere would:
#   - a C++ program finds the core library with find_package(Perseus) and plans a profile;
#   - a C program builds with `pkg-config perseus-client` and loads the installed C ABI;
#   - the installed systemd unit names the installed perseus, the docs it cites are there;
#   - the installed perseus plans the bundled profile.
# Usage: installed.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/perseus-installed-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/moved/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
fail() { echo "installed.sh: $*" >&2; exit 1; }

# The systemd unit and the docs it names.
unit=$prefix/lib/systemd/system/perseus-gpud.service
grep -q "^ExecStart=$prefix/bin/perseus gpud " "$unit" || fail "the unit does not start $prefix/bin/perseus: $(grep ExecStart "$unit")"
if grep -v "^#" "$unit" | grep -q /usr/local; then fail "the unit still names /usr/local: $(grep /usr/local "$unit")"; fi
doc=$(sed -n 's/^Documentation=file://p' "$unit")
[ -f "$doc" ] || fail "the unit's Documentation=file:$doc is not installed"

# The C ABI through pkg-config.
libdir=$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$(dirname "$(find "$prefix" -name perseus-client.pc)") \
         pkg-config --variable=libdir perseus-client)
[ -f "$libdir/libperseus_client.so.1" ] || fail "no libperseus_client.so.1 in $libdir"
cat >"$tmp/app.c" <<'C'
#include <stdio.h>
#include "perseus/client.h"
int main(void) {
  printf("abi %d %s\n", perseus_client_abi_version(), perseus_status_string(PERSEUS_ERR_GPU));
  return perseus_client_abi_version() == PERSEUS_CLIENT_ABI_VERSION ? 0 : 1;
}
C
flags=$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$libdir/pkgconfig pkg-config --cflags --libs perseus-client)
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -pedantic -Werror "$tmp/app.c" $flags -o "$tmp/app"
out=$("$tmp/app")
[ "$out" = "abi 1 PERSEUS_ERR_GPU" ] || fail "the C program printed '$out'"
exported=$(nm -D --defined-only "$libdir/libperseus_client.so.1" | awk '{print $3}' | grep -v '^perseus_' || true)
[ -z "$exported" ] || fail "libperseus_client.so exports more than perseus_*: $exported"

# The C++ library through find_package(Perseus).
cmake -S "$src/tests/repo/installed" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
      >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/consumer" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
profile=$src/examples/stage_profile_gpt3-175b_a100_sxm.csv
out=$("$tmp/consumer/plan_gpt3" "$profile" 8 12 83.64)
echo "$out" | grep -q "^plans [0-9][0-9]* t_min_s 2.836" || fail "the C++ program printed '$out'"
# Its errors are the library's InputError.
if "$tmp/consumer/plan_gpt3" "$tmp/no-such.csv" 8 12 83.64 2>"$tmp/err.txt"; then fail "a missing profile was planned"; fi
grep -q "input error: .*no-such.csv" "$tmp/err.txt" || fail "unexpected error: $(cat "$tmp/err.txt")"

# The installed command, from the moved prefix, gives the same T_min.
"$prefix/bin/perseus" optimize --profile "$profile" --stages 8 --microbatches 12 --p2p-power 83.64 --quiet \
  --out "$tmp/out" >/dev/null
grep -q '"t_min_s": 2.836' "$tmp/out/summary.json" || fail "the installed perseus planned another T_min"
echo "installed.sh: the installed prefix works on its own ($out)"
