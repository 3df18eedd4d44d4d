#!/usr/bin/env python3
"""Database bytes per measurement report (docs/http-api.md, "Durability").

Starts `perseus serve` on a fresh database in a temporary folder, creates a ready 4-stage job
with 96 microbatches from tests/data/cases/llama_a100_4st.csv, registers rank 0 and posts
REPORTS iteration reports of 192 per-computation entries each (in batches of 50), then prints
the mean stored body per report (SQLite `length(body_json)`). A ready job stores a report
without its entries (88 bytes); before, the whole report was stored (17,436 bytes).

Usage (from the repository root): bench/server_report_storage.py build/cli/perseus [REPORTS=200]
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request


def main():
    binary = sys.argv[1]
    reports = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    d = tempfile.mkdtemp(prefix="perseus-storage-")
    serve = subprocess.Popen([binary, "serve", "--db", d + "/db.sqlite", "--port", "0", "--port-file", d + "/port"],
                             stderr=open(d + "/serve.log", "w"))
    try:
        for _ in range(1000):
            if os.path.exists(d + "/port") and open(d + "/port").read().strip():
                break
            time.sleep(0.01)
        port = int(open(d + "/port").read())
        token = open(d + "/db.sqlite.token").read().strip()

        def request(method, path, body=None):
            data = None if body is None else json.dumps(body).encode()
            r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                       headers={"Authorization": "Bearer " + token,
                                                "Content-Type": "application/json"})
            with urllib.request.urlopen(r, timeout=120) as resp:
                return json.loads(resp.read() or b"null")

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
    finally:
        serve.terminate()
        serve.wait()
    try:
        con = sqlite3.connect(d + "/db.sqlite")
        n, mean = con.execute("SELECT COUNT(*), AVG(length(body_json)) FROM measurements").fetchone()
        con.close()
        print(f"{n} reports of {len(entries)} entries: {mean:.0f} bytes stored per report")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
