"""`perseus serve` on a fresh database in a temporary folder, for the server benches
(server_report_memory.py, server_report_storage.py): start, authenticated JSON requests, stop."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request


class BenchServer:
    def __init__(self, binary, prefix="perseus-bench-"):
        self.folder = tempfile.mkdtemp(prefix=prefix)
        self.db = self.folder + "/db.sqlite"
        port_file = self.folder + "/port"
        self.process = subprocess.Popen([binary, "serve", "--db", self.db, "--port", "0", "--port-file", port_file],
                                        stderr=open(self.folder + "/serve.log", "w"))
        for _ in range(1000):  # the port file appears once the server listens
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.01)
        self.port = int(open(port_file).read())
        self.token = open(self.db + ".token").read().strip()

    def request(self, method, path, body=None):
        """(HTTP status, body bytes); `body` is JSON-encoded unless it is bytes."""
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        r = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                   headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(r, timeout=120) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def rss_mib(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) // 1024

    def stop(self):
        self.process.terminate()
        self.process.wait()

    def remove(self):
        shutil.rmtree(self.folder, ignore_errors=True)  # the database holds every report
