#!/bin/sh
# Renders the HTML report of the bundled example (GPT-3 175B on A100 SXM, 8 stages x 12
# microbatches) in headless Chromium and checks the screenshot is a real page.
# Usage: report_screenshot.sh PERSEUS_BINARY PROFILE_CSV WORK_DIR [REFERENCE_CSV [DOCS_DIR]]
#   WORK_DIR receives the optimize folder (out/), out/report.html and report.png.
#   REFERENCE_CSV (optional, may be ""): reference frontier drawn in the plot (the paper's
#     frontier_gpt3-175b_a100_sxm_mb12.csv); skipped when the file does not exist.
#   DOCS_DIR (optional): also copy report.png, timeline.svg and frontier.svg there (to refresh docs/).
# Exit status: 0 pass, 1 fail, 77 skipped (no Chromium; ctest SKIP_RETURN_CODE).
set -eu
perseus=$1 profile=$2 work=$3 reference=${4:-} docs=${5:-}

chromium=""
for c in "${CHROMIUM:-}" chromium chromium-browser google-chrome; do
  if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then chromium=$(command -v "$c"); break; fi
done
if [ -z "$chromium" ]; then
  echo "SKIPPED: Chromium not found (install the Debian package 'chromium' or set CHROMIUM=/path/to/chrome)"
  exit 77
fi

rm -rf "$work"
mkdir -p "$work"
"$perseus" optimize --quiet --report --profile "$profile" --stages 8 --microbatches 12 --p2p-power 83.64 \
  --out "$work/out" > "$work/optimize.log"
if [ -n "$reference" ] && [ -f "$reference" ]; then
  "$perseus" report --svg --reference "$reference" --reference-label "Perseus artifact frontier (SOSP'24)" \
    "$work/out" >> "$work/optimize.log"
else
  "$perseus" report --svg "$work/out" >> "$work/optimize.log"
fi
test -s "$work/out/report.html" || { echo "FAIL: no report.html"; exit 1; }

profile_dir=$(mktemp -d)
trap 'rm -rf "$profile_dir"' EXIT
# No network, no first-run UI, no background services: the page must render from the file alone.
timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
  --user-data-dir="$profile_dir" --screenshot="$work/report.png" --window-size=1400,2400 \
  "file://$(cd "$work/out" && pwd)/report.html" > "$work/chromium.log" 2>&1 || {
  echo "FAIL: chromium exited with an error"; tail -5 "$work/chromium.log"; exit 1; }

test -s "$work/report.png" || { echo "FAIL: no screenshot"; exit 1; }
# PNG signature and IHDR size (bytes 16..23, big endian).
sig=$(od -An -tx1 -N8 "$work/report.png" | tr -d ' \n')
[ "$sig" = "89504e470d0a1a0a" ] || { echo "FAIL: report.png is not a PNG"; exit 1; }
width=$(od -An -tu1 -j16 -N4 "$work/report.png" | awk '{print $1*16777216+$2*65536+$3*256+$4}')
height=$(od -An -tu1 -j20 -N4 "$work/report.png" | awk '{print $1*16777216+$2*65536+$3*256+$4}')
[ "$width" -eq 1400 ] && [ "$height" -eq 2400 ] || { echo "FAIL: screenshot is ${width}x${height}, expected 1400x2400"; exit 1; }
# A blank or error page compresses to a few KB; the report (tables, plot, timelines) is far larger.
size=$(wc -c < "$work/report.png")
[ "$size" -gt 60000 ] || { echo "FAIL: screenshot is only $size bytes: blank or error page?"; exit 1; }

if [ -n "$docs" ]; then
  mkdir -p "$docs"
  cp "$work/report.png" "$docs/report.png"
  cp "$work/out/timeline_fastest.svg" "$docs/timeline.svg"
  cp "$work/out/frontier.svg" "$docs/frontier.svg"
fi
echo "PASS: $work/report.png (${width}x${height}, $size bytes)"
