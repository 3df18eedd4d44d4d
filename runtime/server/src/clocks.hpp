// The server's two clocks (definitions in job_util.cpp).
#pragma once

namespace perseus::server {

/// Unix time now, s: stored timestamps only (created_s, last_activity_s, decisions). It can
/// step back or forward (NTP, a resumed VM), so no duration or timeout is measured on it.
double now_s();

/// A monotonic clock, s: every duration and timeout (the request deadline, the rate limiter,
/// uptime, a job's idleness). It never steps.
double monotonic_s();

}  // namespace perseus::server
