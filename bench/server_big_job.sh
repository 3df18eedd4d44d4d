#!/usr/bin/env bash
# What a job at the server's size limit costs (docs/http-api.md, "Limits"): one job of PP stages
# x MB microbatches (default 1024 x 512: 1.57 M computations, near kMaxJobComputations = 4 M
# counted as pp*chunks*microbatches*3), the 8-stage GPT-3 A100 profile repeated, unit 1e-3 s.
# Prints, each on its own line:
#   post      seconds of POST /v1/jobs (the quick plan is computed inside it)
#   ready     seconds from POST to status `ready` with planning_budget_s 0 (solve stops at once)
#   rss       the server's resident memory (VmRSS) before the job, at `ready`, after DELETE
#   then, for each DELAY in DELAYS (default "0 1 2 4"), with a second such job solving
#   (planning_budget_s 600; after a restart the server solves it again):
#   sigterm   seconds from SIGTERM, sent DELAY s after the solve started, to the exit
#   restart   seconds from start until every route is served (the port file; it listens and answers
#             503 "starting" before), both jobs kept in the database
# Usage: bench/server_big_job.sh [BUILD_DIR]   (PP=.. MB=.. change the job's size)
# Exit 1 if a step fails (a non-2xx answer, the server not exiting 0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
perseus=${PERSEUS_BIN:-$build/cli/perseus}
pp=${PP:-1024}
mb=${MB:-512}
source "$root/bench/serve_helpers.sh"
gpt3_job_json "$pp" "$mb" 0 1 big > "$tmp/job0.json"
gpt3_job_json "$pp" "$mb" 600 1 big > "$tmp/job600.json"
echo "job: $pp stages x $mb microbatches ($((pp * mb * 3)) computations counted against 4,000,000)"
start
rss0=$(rss_mib)
t0=$(now)
job=$(api -H "Content-Type: application/json" --data-binary @"$tmp/job0.json" "$url/v1/jobs" | jq -r .job_id)
echo "post      $(since "$t0") s"
until [ "$(api "$url/v1/jobs/$job" | jq -r .status)" = ready ]; do sleep 0.05; done
echo "ready     $(since "$t0") s"
rss1=$(rss_mib)
job2=$(api -H "Content-Type: application/json" --data-binary @"$tmp/job0.json" "$url/v1/jobs" | jq -r .job_id)
until [ "$(api "$url/v1/jobs/$job2" | jq -r .status)" = ready ]; do sleep 0.05; done
api -X DELETE "$url/v1/jobs/$job2" > /dev/null
sleep 0.5
echo "rss       before the job $rss0; at ready $rss1; a second job made ready and deleted: $(rss_mib)"
job3=$(api -H "Content-Type: application/json" --data-binary @"$tmp/job600.json" "$url/v1/jobs" | jq -r .job_id)
for delay in ${DELAYS:-0 1 2 4}; do
  until api "$url/metrics" | grep -q '^perseus_planner_running 1'; do sleep 0.05; done
  sleep "$delay"
  [ "$(api "$url/v1/jobs/$job3" | jq -r .status)" = planning ] || { echo "job $job3 is no longer planning" >&2; exit 1; }
  t0=$(now)
  stop
  echo "sigterm   $(since "$t0") s, sent ${delay} s into the solve"
  t0=$(now)
  start
  echo "restart   $(since "$t0") s to a listening port, RSS $(rss_mib)"
done
stop
