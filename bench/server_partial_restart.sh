#!/usr/bin/env bash
# What a restart costs with jobs whose partial frontiers store every plan (docs/http-api.md,
# "Limits"): JOBS jobs (default 3) of PP stages x MB microbatches (default 64 x 512), the 8-stage
# GPT-3 A100 profile repeated, unit 1e-3 s, dp 2, cut by planning_budget_s BUDGET (default 20 s),
# so each stores its whole partial frontier. Then the server is stopped and started again.
# Prints, each on its own line:
#   plans     stored plans per job (the partial frontiers' sizes)
#   rss       the server's resident memory (VmRSS) with the jobs ready
#   restart   seconds from start until every route is served (the port file), and the RSS then
#   switch    seconds of POST .../stragglers that moves pipeline 0 of the first job to its
#             slowest plan (never served before: read from the store on demand), and the RSS after
# Usage: bench/server_partial_restart.sh [BUILD_DIR]   (JOBS=.. PP=.. MB=.. BUDGET=.. change it)
# Exit 1 if a step fails (a non-2xx answer, the server not exiting 0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
perseus=${PERSEUS_BIN:-$build/cli/perseus}
jobs=${JOBS:-3}
pp=${PP:-64}
mb=${MB:-512}
budget=${BUDGET:-20}
source "$root/bench/serve_helpers.sh"
gpt3_job_json "$pp" "$mb" "$budget" 2 partial > "$tmp/job.json"
echo "jobs: $jobs of $pp stages x $mb microbatches, planning_budget_s $budget"
start
ids=()
for _ in $(seq "$jobs"); do
  ids+=("$(api -H "Content-Type: application/json" --data-binary @"$tmp/job.json" "$url/v1/jobs" | jq -r .job_id)")
done
sizes=
for id in "${ids[@]}"; do
  until [ "$(api "$url/v1/jobs/$id" | jq -r .status)" = ready ]; do sleep 0.2; done
  sizes="$sizes $(api "$url/v1/jobs/$id" | jq -r '.frontier.points | length')"
done
echo "plans    $sizes"
echo "rss       $(rss_mib)"
stop
t0=$(now)
start
echo "restart   $(since "$t0") s to every route served, RSS $(rss_mib)"
slowest=$(api "$url/v1/jobs/${ids[0]}" | jq '.frontier.points[0][0]')
t0=$(now)
api -H "Content-Type: application/json" -d "{\"pipeline\": 1, \"iteration_time_s\": $slowest}" \
  "$url/v1/jobs/${ids[0]}/stragglers" > /dev/null
echo "switch    $(since "$t0") s (pipeline 0 to plan $(api "$url/v1/jobs/${ids[0]}" | jq '.pipelines[0].plan_index')), RSS $(rss_mib)"
stop
