"""Shared helpers of the Python tests: paths from the ctest environment, sub-profiles, and
the reasons a runtime test has to be skipped."""
import os
import tempfile

import perseus

SOURCE_DIR = os.environ.get("PERSEUS_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
EXAMPLES_DIR = os.environ.get("PERSEUS_EXAMPLES_DIR", os.path.join(SOURCE_DIR, "examples"))
GPT3_PROFILE = os.path.join(EXAMPLES_DIR, "stage_profile_gpt3-175b_a100_sxm.csv")
PERSEUS_BINARY = os.environ.get("PERSEUS_BINARY")
HERE = os.path.dirname(os.path.abspath(__file__))


def first_stages_csv(k, path=GPT3_PROFILE):
    """CSV text of the first k stages of a profile (stage ids kept)."""
    prof = perseus.load_profile(path)
    return perseus.profile_rows_to_csv(r for r in prof.rows() if r["stage"] < k)


def write_first_stages(k, folder):
    """Writes the first k stages of the GPT-3 profile to folder/profile_<k>.csv; returns the path."""
    path = os.path.join(folder, "profile_%d.csv" % k)
    with open(path, "w") as f:
        f.write(first_stages_csv(k))
    return path


def runtime_missing():
    """None when the runtime client and `perseus serve` are usable, else why not."""
    if not perseus.HAVE_CLIENT:
        return "the perseus package was built without the runtime client (target perseus_client, runtime/client)"
    from perseus.server import LocalServer
    ok, why = LocalServer.available(PERSEUS_BINARY)
    return None if ok else "`perseus serve` is not available: " + why


def temp_dir(test):
    d = tempfile.TemporaryDirectory(prefix="perseus-pytest-")
    test.addCleanup(d.cleanup)
    return d.name


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(test, server, out_dir, *, dp, pp, profile, iterations, microbatches, extra=(), timeout_s=1500):
    """Runs dp*pp pipeline_worker.py processes against `server` (a LocalServer); fails the
    test with their output if one fails. Returns the per-rank result dicts, rank order."""
    import json
    import subprocess
    import sys
    import time
    token_file = os.path.join(out_dir, "token")
    with open(token_file, "w") as f:
        f.write(server.token)
    os.chmod(token_file, 0o600)
    port = free_port()
    procs = []
    for rank in range(dp * pp):
        cmd = [sys.executable, os.path.join(HERE, "pipeline_worker.py"), "--rank", str(rank), "--dp", str(dp),
               "--pp", str(pp), "--master-port", str(port), "--server-url", server.url, "--token-file", token_file,
               "--profile", profile, "--iterations", str(iterations), "--microbatches", str(microbatches),
               "--out", out_dir] + list(extra)
        log = open(os.path.join(out_dir, "worker%d.log" % rank), "w")
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
    deadline = time.monotonic() + timeout_s
    failed = []
    # Poll all: when one rank fails the others would block in gloo, so stop them too.
    while any(p.poll() is None for p, _ in procs):
        if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p, _ in procs):
            time.sleep(1.0)  # let the others print their errors
            for p, _ in procs:
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(0.05)
    for rank, (p, log) in enumerate(procs):
        rc = p.wait()
        log.close()
        if rc != 0:
            failed.append(rank)
    if failed:
        logs = []
        for rank in range(dp * pp):
            with open(os.path.join(out_dir, "worker%d.log" % rank)) as f:
                logs.append("--- rank %d ---\n%s" % (rank, f.read()[-3000:]))
        test.fail("workers %s failed:\n%s\n--- server ---\n%s" % (failed, "\n".join(logs), server.log()[-2000:]))
    results = []
    for rank in range(dp * pp):
        with open(os.path.join(out_dir, "rank%d.json" % rank)) as f:
            r = json.load(f)
        with open(os.path.join(out_dir, "freq%d.json" % rank)) as f:
            r["freq_log"] = json.load(f)
        results.append(r)
    return results


def applied_by_iteration(freq_log):
    """{iteration: [(index, requested_mhz, applied_mhz, outcome)]} from a client clock log."""
    out = {}
    for e in freq_log:
        if e["iteration"] >= 0:
            out.setdefault(e["iteration"], []).append((e["index"], e["requested_mhz"], e["applied_mhz"], e["outcome"]))
    return {k: sorted(v) for k, v in out.items()}
