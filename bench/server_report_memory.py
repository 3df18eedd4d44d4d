#!/usr/bin/env python3
"""Server memory under large measurement reports (docs/http-api.md, "Memory").

Starts `perseus serve` on a fresh database in a temporary folder, creates a 4-stage job from
tests/data/cases/llama_a100_4st.csv, registers rank 0 and posts REPORTS reports of 140,000
instruction entries each (13.6 MB, within the documented size limits; refused since each names the
same computation, after the body is parsed and checked), printing the server's resident
memory (VmRSS) every 5 reports. Before the malloc_trim() after large bodies (http_server.cpp) it
grew by ~40 MiB per report; since, it stays flat.

Usage (from the repository root): bench/server_report_memory.py build/cli/perseus [REPORTS=20] [MAX_GROWTH_MIB]

With MAX_GROWTH_MIB it is a regression test (ctest server_report_memory): it exits 1 when the
RSS after the last report exceeds the RSS after the first by more than that (before the fix:
~40 MiB per report; since: a few MiB in all).
"""
import json
import sys

from bench_server import BenchServer


def main():
    binary = sys.argv[1]
    reports = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    max_growth_mib = int(sys.argv[3]) if len(sys.argv) > 3 else None
    after_first = None
    server = BenchServer(binary, "perseus-mem-")
    request, rss_mib = server.request, server.rss_mib
    try:
        profile = open("tests/data/cases/llama_a100_4st.csv").read()
        status, body = request("POST", "/v1/jobs", {"pp": 4, "dp": 1, "microbatches": 8, "p2p_power_w": 75,
                                                    "profile_csv": profile})
        assert status == 201, body
        job = json.loads(body)["job_id"]
        status, body = request("POST", f"/v1/jobs/{job}/ranks", {"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0})
        assert status == 201, body
        entry = {"instruction": "forward", "microbatch": 0, "freq_mhz": 1410, "time_s": 0.001, "energy_j": 0.1}
        print(f"reports,server_rss_mib (each report {140000} instruction entries)")
        print(f"0,{rss_mib()}")
        for i in range(reports):
            report = json.dumps({"iteration": i, "time_s": 1.0, "instructions": [entry] * 140000}).encode()
            status, body = request("POST", f"/v1/jobs/{job}/ranks/0/measurements", report)
            # Since session 14 a report naming a computation twice is refused (422) after the whole
            # body is parsed and checked: the memory question (parse buffers of a 13.6 MB body)
            # is the same either way.
            assert status in (202, 422), body
            if i == 0:
                after_first = rss_mib()
            if (i + 1) % 5 == 0 or i + 1 == reports:
                print(f"{i + 1},{rss_mib()}", flush=True)
        growth = rss_mib() - after_first
        if max_growth_mib is not None and growth > max_growth_mib:
            print(f"FAIL: the server's RSS grew by {growth} MiB over reports 2..{reports} (limit {max_growth_mib} MiB)")
            return 1
    finally:
        server.stop()
        server.remove()


if __name__ == "__main__":
    sys.exit(main())
