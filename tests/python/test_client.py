"""perseus.Client (C ABI bindings) and perseus.server against a real `perseus serve`, without
torch: hooks, counters, clock log, and every error path mapped to a Python exception."""
import json
import os
import unittest

import perseus

from common import runtime_missing, temp_dir, write_first_stages


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.why = runtime_missing()
        if cls.why:
            return
        from perseus.server import LocalServer
        cls.server = LocalServer(os.environ.get("PERSEUS_BINARY")).start()
        import tempfile
        cls._tmp = tempfile.TemporaryDirectory(prefix="perseus-client-test-")
        cls.profile = write_first_stages(2, cls._tmp.name)
        with open(cls.profile) as f:
            cls.csv = f.read()
        created = cls.server.api.create_job(pp=2, microbatches=3, profile_csv=cls.csv, p2p_power_w=83.64,
                                            unit_time_s=0.002)
        cls.job_id, cls.job_token = created["job_id"], created["job_token"]
        cls.server.api.wait_ready(cls.job_id, timeout_s=600)

    @classmethod
    def tearDownClass(cls):
        if not cls.why:
            cls.server.stop()
            cls._tmp.cleanup()

    def setUp(self):
        if self.why:
            self.skipTest(self.why)

    def client(self, rank, **kw):
        args = dict(rank=rank, pp_rank=rank, token=self.server.token, backend="simulated",
                    profile_path=self.profile, sim_time_scale=0.01, coalesce_clock_requests=False,
                    plan_poll_interval_s=0.05)
        args.update(kw)
        c = perseus.Client(self.server.url, self.job_id, **args)
        self.addCleanup(c.close)
        return c

    def test_an_int_beyond_64_bits_is_a_client_config_error_saying_so(self):
        # Session 32's trial: first_iteration=2**63 was a planner InputError claiming a 32-bit range.
        with self.assertRaises(perseus.ClientConfigError) as cm:
            perseus.Client(self.server.url, self.job_id, rank=0, backend="dry-run", first_iteration=2**63)
        self.assertIn("first_iteration=9223372036854775808 is outside the range of integers it accepts (beyond 64 bits)",
                      str(cm.exception))

    def test_a_failed_local_server_start_leaves_no_folder_or_token(self):
        # Session 32's trial: a server that exited at once left its temporary folder, admin
        # token included (__exit__ does not run when __enter__ raised); NaN waited for ever.
        import glob
        import tempfile
        from perseus.server import LocalServer, ServerStartError

        pattern = os.path.join(tempfile.gettempdir(), "perseus-serve-*")
        before = set(glob.glob(pattern))
        server = LocalServer(os.environ.get("PERSEUS_BINARY"), args=["--bogus-flag"])
        with self.assertRaises(ServerStartError) as cm:
            with server:
                pass
        self.assertIn("bogus", str(cm.exception))
        self.assertIsNone(server._dir)
        self.assertEqual(set(glob.glob(pattern)) - before, set())
        for bad in (float("nan"), 0, -1, float("inf"), "5", True):
            with self.assertRaises(ValueError, msg=repr(bad)):
                LocalServer(os.environ.get("PERSEUS_BINARY"), startup_timeout_s=bad)

    def test_a_killed_script_leaves_no_local_server_or_token(self):
        # A training script killed with SIGKILL (no __exit__ runs): its LocalServer gets SIGTERM
        # from the kernel (PR_SET_PDEATHSIG) and the admin token file is already gone.
        import subprocess
        import sys
        import time

        script = ("import os, sys\n"
                  "from perseus.server import LocalServer\n"
                  "s = LocalServer(os.environ.get('PERSEUS_BINARY')).start()\n"
                  "print(s.proc.pid, s._dir, flush=True)\n"
                  "os.kill(os.getpid(), 9)\n")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, -9, out.stderr)
        pid, folder = out.stdout.split()
        self.addCleanup(lambda: __import__("shutil").rmtree(folder, ignore_errors=True))
        self.assertFalse(os.path.exists(os.path.join(folder, "token")))

        def alive():
            try:
                with open("/proc/%s/stat" % pid) as f:
                    return f.read().split(")")[-1].split()[0] != "Z"
            except FileNotFoundError:
                return False

        deadline = time.monotonic() + 60  # the kernel's signal arrives at once; the bound only stops a hang
        while alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertFalse(alive(), "perseus serve %s outlived the killed script" % pid)

    def test_the_watchdog_ships_beside_the_extension(self):
        # The client looks for perseus-watchdog next to _perseus first: a package copied to
        # another machine or installed (cmake --install) brings its watchdog along.
        import subprocess
        exe = os.path.join(os.path.dirname(perseus._perseus.__file__), "perseus-watchdog")
        self.assertTrue(os.access(exe, os.X_OK), exe)
        usage = subprocess.run([exe], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(usage.returncode, 0)
        self.assertIn("--fd and --parent are required", usage.stderr)

    def test_an_installed_package_finds_the_installed_perseus(self):
        # Fresh-user trial (session 21): an installed package (<prefix>/lib/python3.X/dist-packages/
        # perseus) looked only in a build tree's layout, so LocalServer failed unless
        # <prefix>/bin was on PATH. Loaded from a copy in that layout, with PATH and
        # $PERSEUS_BINARY telling nothing, it finds <prefix>/bin/perseus.
        import importlib.util
        import shutil
        import stat
        from unittest import mock
        import perseus.server
        d = temp_dir(self)
        pkg = os.path.join(d, "prefix", "lib", "python3.11", "dist-packages", "perseus")
        os.makedirs(pkg)
        shutil.copy(perseus.server.__file__, pkg)
        os.makedirs(os.path.join(d, "prefix", "bin"))
        exe = os.path.join(d, "prefix", "bin", "perseus")
        with open(exe, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(exe, stat.S_IRWXU)
        spec = importlib.util.spec_from_file_location("installed_server", os.path.join(pkg, "server.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with mock.patch.dict(os.environ, {"PATH": d, "PERSEUS_BINARY": ""}):
            self.assertEqual(os.path.realpath(mod.find_perseus_binary()), os.path.realpath(exe))
            os.remove(exe)
            with self.assertRaises(mod.ServerStartError):
                mod.find_perseus_binary()

    def test_conflicting_registration_raises(self):
        # Issue 16 row 3: rank 1 is registered as (dp 0, pp 1); a process claiming rank 1 at
        # pp_rank 0 must not silently run stage 0's plan.
        self.client(1)
        with self.assertRaises(perseus.ServerRefusedError) as cm:
            self.client(1, pp_rank=0)
        self.assertIn("409", str(cm.exception))

    def test_a_second_process_on_the_same_rank_is_noticed(self):
        # The server keeps the first report of each (rank, iteration); a client whose first post
        # of an iteration comes back "duplicate" counts it (and warns once): another process runs
        # as this rank, or training resumed from reported iterations.
        names = [i["instruction"] for i in perseus.schedule("1f1b", 2, 3)["ranks"][1]]

        def run(c):
            for _ in range(2):
                c.on_step_begin()
                for n in names:
                    c.on_instruction_begin(n)
                    c.simulate_compute()
                    c.on_instruction_end(n)
                c.on_step_end()
            c.flush(10)
            return c.stats()

        first = run(self.client(1, first_iteration=7000))
        self.assertEqual(first["reports_foreign_duplicates"], 0)
        second = run(self.client(1, first_iteration=7000))
        self.assertEqual(second["reports_sent"], 2)
        self.assertEqual(second["reports_foreign_duplicates"], 2)

    def test_hooks_reports_and_clock_log(self):
        log = os.path.join(temp_dir(self), "freq.json")
        c = self.client(0)
        plan = self.server.api.get_plan(self.job_id, 0)
        names = [i["instruction"] for i in plan["instructions"]]
        self.assertEqual(names, [i["instruction"] for i in perseus.schedule("1f1b", 2, 3)["ranks"][0]])
        # The client's own checked copy of the plan (perseus.torch reads it instead of a second
        # HTTP fetch on the training thread): the server's plan, field by field.
        mine = c.plan()
        self.assertEqual(mine["version"], plan["version"])
        self.assertEqual(mine["iteration_time_s"], plan["iteration_time_s"])
        self.assertEqual(mine["energy_j"], plan["energy_j"])
        self.assertEqual([(i["instruction"], i["stage"], i["microbatch"], i["freq_mhz"]) for i in mine["instructions"]],
                         [(i["instruction"], i["stage"], i["microbatch"], i["freq_mhz"]) for i in plan["instructions"]])
        self.assertEqual({i["planned_freq_mhz"] for i in mine["instructions"]}, {0})  # simulated: every clock exists
        for _ in range(3):
            c.on_step_begin()
            for n in names:
                c.on_instruction_begin(n)
                t = c.simulate_compute()
                self.assertGreater(t, 0)
                c.on_instruction_end(n)
            c.on_step_end()
        c.flush(10)
        s = c.stats()
        self.assertEqual(s["iterations"], 3)
        self.assertEqual(s["reports_sent"], 3)
        self.assertEqual(s["plan_version"], plan["version"])
        self.assertIn(s["applied_mhz"], {i["freq_mhz"] for i in plan["instructions"]})
        c.write_freq_log(log)
        # Any path type perseus takes elsewhere: pathlib.Path was a TypeError (session 32's trial).
        import pathlib
        c.write_freq_log(pathlib.Path(log + ".path.json"))
        self.assertTrue(os.path.exists(log + ".path.json"))
        with self.assertRaises(TypeError) as cm:
            c.write_freq_log(3)
        self.assertIn("path must be str, bytes or os.PathLike", str(cm.exception))
        with self.assertRaises(perseus.ClientConfigError):  # a NaN or negative wait is a mistake
            c.flush(float("nan"))
        with self.assertRaises(perseus.ClientError) as cm:  # a folder: refused with the reason
            c.write_freq_log(temp_dir(self))
        self.assertIn("folder", str(cm.exception))
        with open(log) as f:
            entries = [e for e in json.load(f) if e["iteration"] == 2]
        self.assertEqual([e["requested_mhz"] for e in sorted(entries, key=lambda e: e["index"])],
                         [i["freq_mhz"] for i in plan["instructions"]])
        job = self.server.api.get_job(self.job_id)
        self.assertGreaterEqual(job["measurements"]["count"], 3)
        page = self.server.api.get_job(self.job_id, pipelines_from=job["pipelines_total"], pipelines_count=1)
        self.assertEqual((page["pipelines"], page["pipelines_from"]), ([], job["pipelines_total"]))
        with self.assertRaises(ValueError):
            self.server.api.get_job(self.job_id, pipelines_from=-1)
        c.close()
        self.assertTrue(c.closed)
        with self.assertRaises(perseus.HookOrderError) as cm:
            c.on_step_begin()
        self.assertIn("closed", str(cm.exception))
        with self.assertRaises(perseus.HookOrderError):  # `with` on a closed client
            with c:
                pass
        c.close()  # idempotent

    def test_hook_order_and_plan_mismatch(self):
        c = self.client(1)
        with self.assertRaises(perseus.HookOrderError) as cm:
            c.on_step_end()
        self.assertEqual(cm.exception.status, "PERSEUS_ERR_STATE")
        self.assertIsInstance(cm.exception, perseus.ClientError)
        self.assertIsInstance(cm.exception, RuntimeError)
        c.on_step_begin()
        with self.assertRaises(perseus.PlanMismatchError) as cm:
            c.on_instruction_begin("backward")  # the plan starts with a forward
        self.assertIn("forward", str(cm.exception))
        self.assertEqual(cm.exception.status, "PERSEUS_ERR_PLAN_MISMATCH")
        c.on_instruction_end("backward")
        with self.assertRaises(perseus.HookOrderError):
            c.on_instruction_end("backward")

    def test_unknown_job_and_bad_token(self):
        with self.assertRaises(perseus.ServerRefusedError) as cm:
            perseus.Client(self.server.url, "no-such-job", rank=0, token=self.server.token, backend="simulated",
                           profile_path=self.profile)
        self.assertEqual(cm.exception.status, "PERSEUS_ERR_SERVER")
        with self.assertRaises(perseus.ServerRefusedError):
            perseus.Client(self.server.url, self.job_id, rank=0, token="wrong", backend="simulated",
                           profile_path=self.profile)

    def test_job_token_reaches_only_its_job(self):
        from perseus.server import API, APIError
        c = self.client(1, token=self.job_token)  # a rank with the job's own token
        c.on_step_begin()
        job_api = API(self.server.url, self.job_token)
        self.assertEqual(job_api.get_job(self.job_id)["job_id"], self.job_id)
        for call in (lambda: job_api.request("GET", "/v1/jobs"),
                     lambda: job_api.create_job(pp=2, microbatches=3, profile_csv=self.csv, p2p_power_w=83.64),
                     lambda: job_api.request("DELETE", "/v1/jobs/" + self.job_id)):
            with self.assertRaises(APIError) as cm:
                call()
            self.assertEqual(cm.exception.http_status, 403)
            self.assertEqual(cm.exception.code, "forbidden")
        self.assertEqual(self.server.api.get_job(self.job_id)["job_id"], self.job_id)  # not deleted

    def test_bad_config(self):
        with self.assertRaises(perseus.ClientConfigError) as cm:
            perseus.Client(self.server.url, self.job_id, rank=0, backend="quantum")
        self.assertIn("quantum", str(cm.exception))
        with self.assertRaises(perseus.ClientError):
            perseus.Client(self.server.url, self.job_id, rank=0, backend="simulated", profile_path="/nonexistent.csv")
        with self.assertRaises(TypeError):
            perseus.Client(self.server.url, self.job_id)  # rank is required
        # A folder that does not exist is the caller's mistake for both log paths (the dry-run
        # one was a GpuError, session 22's trial).
        for kw in ("dry_run_log_path", "freq_log_path"):
            with self.subTest(kw=kw), self.assertRaises(perseus.ClientConfigError) as cm:
                perseus.Client(self.server.url, self.job_id, rank=0, backend="dry-run", enable_watchdog=False,
                               **{kw: "/nonexistent-perseus-dir/x.log"})
            self.assertIn(kw, str(cm.exception))
        # The dry-run log is only appended to: /dev/null silences it (refused as "a device, not a
        # regular file" before session 31).
        self.client(0, backend="dry-run", enable_watchdog=False, dry_run_log_path="/dev/null").close()
        import pathlib  # any path type (session 32's trial: pathlib.Path was a TypeError)
        self.client(0, backend="dry-run", enable_watchdog=False, dry_run_log_path=pathlib.Path("/dev/null")).close()
        # A rank beyond 64 bits (or negative) names the keyword and the range, not pybind's signature list.
        for kw, value in (("rank", 99999999999999999999), ("pp_rank", -1)):
            args = dict(rank=0, backend="simulated")
            args[kw] = value
            with self.assertRaises(perseus.ClientConfigError) as cm:
                perseus.Client(self.server.url, self.job_id, **args)
            self.assertEqual(str(cm.exception), "%s must be an integer in [0, 2147483647], got %d" % (kw, value))
        with self.assertRaises(TypeError) as cm:
            perseus.Client(self.server.url, self.job_id, rank="0")
        self.assertIn("rank must be an int", str(cm.exception))
        self.assertIn("of type str", str(cm.exception))
        with self.assertRaises(TypeError):
            perseus.Client(self.server.url, self.job_id, rank=True)  # an int to Python, never a rank
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            # A numpy integer is a rank as `optimize` and `API.create_job` take one: it was "rank
            # must be an int in [0, 2147483647], got 0" (session 17's trial).
            self.client(numpy.int64(1), pp_rank=numpy.int64(1), dp_rank=numpy.int32(0), device_index=numpy.uint8(0))
            with self.assertRaises(perseus.ClientConfigError) as cm:
                perseus.Client(self.server.url, self.job_id, rank=numpy.int64(-1))
            self.assertEqual(str(cm.exception), "rank must be an integer in [0, 2147483647], got -1")
            with self.assertRaises(TypeError):
                perseus.Client(self.server.url, self.job_id, rank=numpy.bool_(True))
        # A flag takes True/False (or a numpy bool), not any value Python can test: NaN and 2**70
        # were True (session 15's fuzzing).
        for kw, value in (("sim_time_scale", True), ("first_iteration", True), ("request_timeout_s", "5"),
                          ("max_buffered_reports", 1.5), ("enable_watchdog", float("nan")),
                          ("handle_signals", 2**70), ("coalesce_clock_requests", "no"),
                          ("enable_watchdog", None)):
            with self.subTest(keyword=kw, value=value):
                with self.assertRaises(TypeError):
                    perseus.Client(self.server.url, self.job_id, rank=0, backend="dry-run", **{kw: value})
        # Negative or NaN durations and scales, and an iteration number the server cannot take,
        # are the caller's mistakes: refused by name, never turned into a default.
        # Session 14's trial: 0 silently meant the C default, 1e300 and inf passed (the sleep or
        # deadline overflowed), max_buffered_reports=-1 or 2**40 gave pybind's overload dump.
        for kw, value in (("request_timeout_s", -3.0), ("plan_poll_interval_s", -1.0),
                          ("sim_time_scale", float("nan")), ("sim_time_scale", -1.0), ("first_iteration", -5),
                          ("first_iteration", 2**53 + 1), ("sim_time_scale", 0.0), ("sim_time_scale", 1e300),
                          ("request_timeout_s", 0.0), ("request_timeout_s", float("inf")),
                          ("startup_timeout_s", float("inf")), ("plan_poll_interval_s", 1e7),
                          ("max_buffered_reports", -1), ("max_buffered_reports", 0), ("max_buffered_reports", 2**40)):
            with self.subTest(keyword=kw, value=value):
                with self.assertRaises(perseus.ClientConfigError) as cm:
                    perseus.Client(self.server.url, self.job_id, rank=0, backend="dry-run", **{kw: value})
                self.assertIn(kw, str(cm.exception))
                # Python's range, never the C config's "(0 = the default)" (session 18's trial).
                self.assertNotIn("the default", str(cm.exception))
                if kw in ("sim_time_scale", "request_timeout_s", "plan_poll_interval_s"):
                    self.assertIn(kw + " must be a number in (0, 1e+06], got", str(cm.exception))
        # A simulated GPU's blocking power past any GPU's: 1e308 W made its energy infinite.
        for value in (1e308, float("nan"), -1.0):
            with self.subTest(sim_blocking_power_w=value):
                with self.assertRaises(perseus.ClientError) as cm:
                    perseus.Client(self.server.url, self.job_id, rank=0, backend="simulated",
                                   profile_path=self.profile, sim_blocking_power_w=value)
                self.assertIn("blocking power", str(cm.exception))

    def test_a_client_is_made_only_by_its_constructor(self):
        """Client.__new__(Client) (the base's __new__) gave an object whose C++ client was never
        built; its methods read garbage. Now a TypeError; subclasses must call __init__."""
        base = perseus.Client.__mro__[1]
        for make in (lambda: perseus.Client.__new__(perseus.Client), lambda: base.__new__(perseus.Client)):
            with self.assertRaises(TypeError):
                make()

        class Sub(perseus.Client):
            def __init__(self):
                pass

        with self.assertRaises(TypeError):
            Sub()

    def test_nul_in_a_string_option_is_refused_before_anything_is_sent(self):
        """A str that becomes a C string (or a file path) must not hold a NUL: C would silently
        cut it there ("tok\\0junk" became the valid token "tok" before this was checked)."""
        import socket
        d = temp_dir(self)
        # A listener nobody answers: a client that got as far as connecting would leave a
        # connection in its backlog.
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        quiet_url = "http://127.0.0.1:%d" % listener.getsockname()[1]
        cut = os.path.join(d, "cut")  # what a path "cut\0.x" would have opened or written
        good = dict(rank=0, pp_rank=0, token=self.server.token, backend="dry-run", enable_watchdog=False,
                    startup_timeout_s=0.5, request_timeout_s=0.5)
        cases = [("token", dict(token=self.server.token + "\x00junk"))]
        for kw in ("profile_path", "nvml_library_path", "dry_run_log_path", "freq_log_path", "watchdog_path",
                   "gpud_socket_path", "rocm_smi_library_path"):
            cases.append((kw, {kw: cut + "\x00.x"}))
        cases += [("device_uuid", dict(device_uuid="GPU-1\x00")), ("device_pci_bus_id", dict(device_pci_bus_id="0\x00")),
                  ("backend", dict(backend="dry-run\x00nvml"))]
        for kw, override in cases:
            with self.subTest(kw=kw):
                args = dict(good)
                args.update(override)
                with self.assertRaises(ValueError) as cm:
                    perseus.Client(quiet_url, self.job_id, **args)
                self.assertNotIsInstance(cm.exception, perseus.ClientError)
                self.assertIn(kw + " must not contain a NUL character", str(cm.exception))
                self.assertNotIn("junk", str(cm.exception), "the value (a token) is never echoed")
        for args, kw in (((quiet_url + "\x00x", self.job_id), "server_url"), ((quiet_url, self.job_id + "\x00"), "job_id")):
            with self.assertRaises(ValueError) as cm:
                perseus.Client(*args, **good)
            self.assertIn(kw + " must not contain a NUL character", str(cm.exception))
        with self.assertRaises(BlockingIOError):
            listener.accept()  # nothing was sent
        self.assertFalse(os.path.exists(cut), "no file was opened or written at the cut path")
        # The real server with the truncated token would have accepted it: refused there too.
        with self.assertRaises(ValueError):
            perseus.Client(self.server.url, self.job_id, rank=0, token=self.server.token + "\x00junk",
                           backend="simulated", profile_path=self.profile)
        # Hooks and the clock log.
        c = self.client(1, backend="dry-run", profile_path=None, enable_watchdog=False,
                        dry_run_log_path=os.path.join(d, "dry.log"))
        c.on_step_begin()
        for hook in (c.on_instruction_begin, c.on_instruction_end):
            with self.assertRaises(ValueError) as cm:
                hook("forward\x00backward")
            self.assertIn("name must not contain a NUL character", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            c.write_freq_log(cut + "\x00.json")
        self.assertIn("path must not contain a NUL character", str(cm.exception))
        self.assertFalse(os.path.exists(cut))

    def test_gpud_backend(self):
        # No helper: a GpuError that says what is missing.
        with self.assertRaises(perseus.GpuError) as cm:
            perseus.Client(self.server.url, self.job_id, rank=0, token=self.server.token, backend="gpud",
                           gpud_socket_path="/nonexistent/gpud.sock")
        self.assertIn("cannot connect to perseus gpud at /nonexistent/gpud.sock", str(cm.exception))
        fake_nvml = os.environ.get("FAKE_NVML_PATH")
        if not fake_nvml:
            self.skipTest("fake NVML not built")
        # The real helper on the fake NVML; the client sets its clocks through it.
        import subprocess
        import time
        d = temp_dir(self)
        sock = os.path.join(d, "gpud.sock")
        with open(os.path.join(d, "gpud.conf"), "w") as f:
            f.write(f"socket {sock}\nstate_dir {d}/state\nlibrary {fake_nvml}\nallow * uid:{os.getuid()}\n")
        log_path = os.path.join(d, "gpud.log")
        with open(log_path, "w") as log:
            helper = subprocess.Popen([os.environ["PERSEUS_BINARY"], "gpud", "--config", os.path.join(d, "gpud.conf")],
                                      stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(helper.wait)
        self.addCleanup(helper.terminate)

        def log_text():
            with open(log_path) as f:
                return f.read()
        deadline = time.monotonic() + 60
        while "serving GPUs" not in log_text() and helper.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertIn("serving GPUs", log_text())
        from unittest import mock
        with mock.patch.dict(os.environ, {"PERSEUS_LOCK_DIR": os.path.join(d, "locks")}):
            c = perseus.Client(self.server.url, self.job_id, rank=0, pp_rank=0, token=self.server.token,
                               backend="gpud", gpud_socket_path=sock, device_index=0, coalesce_clock_requests=False,
                               plan_poll_interval_s=0.05)
        self.assertEqual(c.backend, "gpud")
        c.on_step_begin()
        for name in ["forward", "forward", "backward", "forward", "backward", "backward"]:
            c.on_instruction_begin(name)
            c.on_instruction_end(name)
        c.on_step_end()
        c.close()
        self.assertIn("GPU 0: locked at ", log_text())
        self.assertIn(f"GPU 0: unlocked by uid={os.getuid()}", log_text())

    def test_unsupported_on_dry_run(self):
        c = self.client(1, backend="dry-run", profile_path=None, enable_watchdog=False,
                        dry_run_log_path=os.path.join(temp_dir(self), "dry.log"))
        c.on_step_begin()
        c.on_instruction_begin("forward")
        with self.assertRaises(perseus.UnsupportedError):
            c.simulate_compute()

    def test_job_overheads_and_partial_frontier(self):
        from perseus.server import APIError
        # Issue 19: the job carries op_overhead_s / p2p_latency_s into its problem; issue 20: a
        # planning budget of 0 gives a partial frontier (deterministic), served as ready.
        o, l = 0.004, 0.01
        created = self.server.api.create_job(pp=2, microbatches=3, profile_csv=self.csv, p2p_power_w=83.64,
                                             unit_time_s=0.002, op_overhead_s=o, p2p_latency_s=l,
                                             planning_budget_s=0)
        self.addCleanup(self.server.api.delete_job, created["job_id"])
        self.assertEqual((created["spec"]["op_overhead_s"], created["spec"]["p2p_latency_s"]), (o, l))
        job = self.server.api.wait_ready(created["job_id"], timeout_s=600)
        fr = job["frontier"]
        self.assertTrue(fr["partial"])
        self.assertEqual(fr["partial_reason"], "time_budget")
        self.assertIn("time budget", fr["partial_detail"])
        lib = perseus.optimize(self.profile, 2, 3, p2p_power_w=83.64, unit_time_s=0.002, plans="none",
                               op_overhead_s=o, p2p_latency_s=l, time_budget_s=0)
        self.assertTrue(lib["summary"]["partial"])
        self.assertEqual(len(fr["points"]), len(lib["frontier"]))
        for (t, e), p in zip(fr["points"], lib["frontier"]):
            self.assertAlmostEqual(t, p["time_s"], places=12)
            self.assertAlmostEqual(e, p["energy_j"], places=9)
        for key in ("op_overhead_s", "p2p_latency_s"):
            for bad in (-0.001, 3601.0, "0.1"):
                with self.subTest(key=key, value=bad):
                    with self.assertRaises(APIError) as cm:
                        self.server.api.create_job(pp=2, microbatches=3, profile_csv=self.csv, p2p_power_w=83.64,
                                                   **{key: bad})
                    self.assertEqual(cm.exception.http_status, 422)
                    self.assertIn(key, cm.exception.message)

    def test_api_errors(self):
        from perseus.server import API, APIError
        # A token read from its file keeps the newline: urllib's error then quoted the whole
        # Authorization header, admin token included (session 16's trial).
        for bad in (self.server.token + "\n", "a b", ""):
            with self.assertRaises(ValueError) as cm:
                API(self.server.url, bad)
            self.assertNotIn(self.server.token, str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            API(self.server.url, "t\n")
        self.assertIn("strip its newline", str(cm.exception))
        # A LocalServer's url before start() is None: AttributeError on 'rstrip' (session 17's trial).
        from perseus.server import LocalServer
        with self.assertRaises(TypeError) as cm:
            API(LocalServer(os.environ.get("PERSEUS_BINARY")).url, "x" * 32)
        self.assertIn("call start()", str(cm.exception))
        with self.assertRaises(APIError) as cm:
            self.server.api.get_job("nope")
        self.assertEqual(cm.exception.http_status, 404)
        self.assertEqual(cm.exception.code, "unknown_job")
        with self.assertRaises(APIError) as cm:
            API(self.server.url, "wrong").get_job(self.job_id)
        self.assertEqual(cm.exception.http_status, 401)
        with self.assertRaises(APIError) as cm:
            self.server.api.create_job(pp=0, microbatches=3, profile_csv=self.csv, p2p_power_w=80.0)
        self.assertEqual(cm.exception.http_status, 422)
        self.assertIn("pp", cm.exception.message)
        with self.assertRaises(ValueError):  # P_block is required, as in the CLI
            self.server.api.create_job(pp=2, microbatches=3, profile_csv=self.csv)
        with self.assertRaises(APIError) as cm:  # and the server says which field is missing
            self.server.api.request("POST", "/v1/jobs", dict(pp=2, microbatches=3, profile_csv=self.csv))
        self.assertEqual(cm.exception.http_status, 422)
        self.assertIn("p2p_power_w", cm.exception.message)
        with self.assertRaises(APIError) as cm:
            API("http://127.0.0.1:1", timeout_s=1).health()
        self.assertEqual(cm.exception.code, "unreachable")
        # Not a URL, or no timeout: refused at once, by name (session 18's trial: a raw urllib
        # "unknown url type" at the first request; timeout_s=0 "Operation now in progress").
        for url in ("not a url", "http://", "127.0.0.1:8000"):
            with self.assertRaises(ValueError) as cm:
                API(url)
            self.assertIn("url must be http://HOST:PORT", str(cm.exception))
        for timeout in (0, -1.0, float("nan"), float("inf"), True, "5"):
            with self.assertRaises(ValueError, msg=repr(timeout)) as cm:
                API(self.server.url, timeout_s=timeout)
            self.assertIn("timeout_s must be a finite number of seconds > 0", str(cm.exception))

    def test_bad_values_are_refused_before_sending(self):
        """NaN/infinity (no JSON for them) and job ids that would change the route are named
        client-side, never sent as invalid JSON or to another route."""
        api = self.server.api
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            # numpy numbers, as the planner functions take them ("Object of type int64 is not JSON
            # serializable" before); a numpy NaN is named like a Python one.
            created = api.create_job(pp=numpy.int64(2), microbatches=numpy.int32(3), profile_csv=self.csv,
                                     p2p_power_w=numpy.float32(83.5))
            self.assertEqual(api.get_job(created["job_id"])["spec"]["pp"], 2)
            api.delete_job(created["job_id"])
            with self.assertRaises(ValueError) as cm:
                api.create_job(pp=2, microbatches=3, profile_csv=self.csv, p2p_power_w=numpy.float32("nan"))
            self.assertIn("p2p_power_w must be a finite number", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            api.create_job(pp=2, microbatches=3, profile_csv=self.csv, p2p_power_w=float("nan"))
        self.assertIn("p2p_power_w must be a finite number", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            api.report_straggler(self.job_id, 0, slowdown=float("inf"))
        self.assertIn("slowdown must be a finite number", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            api.create_job(pp=1, microbatches=1, p2p_power_w=80.0,
                           plans=[{"time_s": float("-inf"), "energy_j": 1.0, "ranks": [[]]}])
        self.assertIn("plans[0].time_s", str(cm.exception))
        for bad in ("", self.job_id + "/ranks", "a b", "x?y=1", "..%2F"):
            with self.assertRaises(ValueError, msg=bad) as cm:
                api.get_job(bad)
            self.assertIn("one path segment", str(cm.exception))
        with self.assertRaises(TypeError):
            api.get_plan(7, 0)
        # Session 14's trial: "%d" % 1.5 sent rank 1 (and clear_straggler pipeline 1); "0" raised
        # a formatting TypeError. Ranks and pipelines are ints, named when they are not.
        for call, name in ((api.get_plan, "rank"), (api.clear_straggler, "pipeline")):
            for bad in (1.5, "0", True):
                with self.assertRaises(TypeError, msg=repr(bad)) as cm:
                    call(self.job_id, bad)
                self.assertIn("%s must be an int, got %r" % (name, bad), str(cm.exception))
            with self.assertRaises(ValueError):
                call(self.job_id, -1)
        self.assertEqual(api.get_job(self.job_id)["job_id"], self.job_id)  # a real id still works


if __name__ == "__main__":
    unittest.main()


class RetryAfterTest(unittest.TestCase):
    """Session 21's operator trial: API.wait_ready raised on the 503 `starting` a restarted
    server answers while it loads its jobs, instead of waiting as Retry-After says."""

    def test_wait_ready_waits_out_a_503_with_retry_after(self):
        import http.server
        import threading
        from perseus.server import API, APIError

        answers = [(503, {"error": {"code": "starting", "message": "loading jobs"}}, "0.05"),
                   (503, {"error": {"code": "starting", "message": "loading jobs"}}, "0.05"),
                   (200, {"status": "ready", "job_id": "job-x"}, None)]
        served = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server name
                status, body, retry = answers[min(len(served), len(answers) - 1)]
                served.append(self.path)
                data = json.dumps(body).encode()
                self.send_response(status)
                if retry:
                    self.send_header("Retry-After", retry)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.addCleanup(httpd.shutdown)
        api = API("http://127.0.0.1:%d" % httpd.server_address[1], token="t")
        self.assertEqual(api.wait_ready("job-x", timeout_s=60)["status"], "ready")
        self.assertEqual(len(served), 3)
        # The attribute itself, for callers such as report_straggler's.
        answers[:] = [(503, {"error": {"code": "frontier_not_ready", "message": "re-deriving"}}, "1")]
        served.clear()
        with self.assertRaises(APIError) as cm:
            api.get_job("job-x")
        self.assertEqual((cm.exception.http_status, cm.exception.code, cm.exception.retry_after_s),
                         (503, "frontier_not_ready", 1.0))
