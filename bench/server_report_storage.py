#!/usr/bin/env python3
"""Database bytes per measurement report (docs/http-api.md, "Durability").

Starts `perseus serve` on a fresh database in a temporary folder, creates a ready 4-stage job
with 96 microbatches from tests/data/cases/llama_a100_4st.csv, registers rank 0 and posts
REPORTS iteration reports of 192 per-computation entries each (in batches of 50), then prints
the mean stored body per report (SQLite `length(body_json)`). A ready job stores a report
without its entries (88 bytes); before (a build of commit 1b1d92d), the whole report was stored (17,436 bytes).

Usage (from the repository root): bench/server_report_storage.py build/cli/perseus [REPORTS=200]
"""
import json
import sqlite3
import sys
import time

from bench_server import BenchServer


def main():
    binary = sys.argv[1]
    reports = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    server = BenchServer(binary, "perseus-storage-")
    try:
        def request(method, path, body=None):
            status, text = server.request(method, path, body)
            assert status < 300, (status, text)
            return json.loads(text or b"null")

        profile = open("tests/data/cases/llama_a100_4st.csv").read()
        job = request("POST", "/v1/jobs", {"pp": 4, "dp": 1, "microbatches": 96, "p2p_power_w": 75,
                                           "unit_time_s": 0.01, "profile_csv": profile})["job_id"]
        while request("GET", f"/v1/jobs/{job}")["status"] != "ready":
            time.sleep(0.1)
        request("POST", f"/v1/jobs/{job}/ranks", {"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0})
        entries = [{"instruction": kind, "microbatch": mb, "freq_mhz": 1410, "time_s": 0.0123, "energy_j": 3.21}
                   for mb in range(96) for kind in ("forward", "backward")]
        for first in range(0, reports, 50):
            batch = [{"iteration": i, "time_s": 1.0, "energy_j": 600.0, "instructions": entries}
                     for i in range(first, min(reports, first + 50))]
            request("POST", f"/v1/jobs/{job}/ranks/0/measurements", {"measurements": batch})
        server.stop()
        con = sqlite3.connect(server.db)
        n, mean = con.execute("SELECT COUNT(*), AVG(length(body_json)) FROM measurements").fetchone()
        con.close()
        print(f"{n} reports of {len(entries)} entries: {mean:.0f} bytes stored per report")
    finally:
        server.stop()
        server.remove()


if __name__ == "__main__":
    main()
