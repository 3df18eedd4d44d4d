"""The HTTP API of ``perseus serve`` (docs/http-api.md) from Python, standard library only.

:class:`API` wraps the /v1 routes used by training jobs and operators (create a job, read its
status and plans, report stragglers). :class:`LocalServer` starts ``perseus serve`` on
loopback for tests, demos and single-machine runs.

Errors: :class:`APIError` (HTTP status, server error code, message) for refused requests;
:class:`ServerStartError` when ``perseus serve`` cannot be started.
"""

import json
import math
import numbers
import operator
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

__all__ = ["API", "APIError", "LocalServer", "ServerStartError", "find_perseus_binary"]


class APIError(RuntimeError):
    """The server answered an error. Attributes: ``http_status`` (int), ``code`` (server error
    code such as ``"unknown_job"``; ``"unreachable"`` when no answer came), ``message``,
    ``retry_after_s`` (the answer's Retry-After, s, e.g. 503 ``starting`` or
    ``frontier_not_ready`` right after a restart: try again then; None without one)."""

    def __init__(self, http_status, code, message, retry_after_s=None):
        super().__init__("HTTP %s %s: %s" % (http_status, code, message))
        self.http_status = http_status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s


def _non_finite_field(value, path="body"):
    """The path (``body.plans[0].time_s``) of the first NaN or infinite float in a request body,
    or None: JSON has no such numbers, so they are refused before anything is sent."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and not math.isfinite(value):
        return path  # float, numpy.float32, ...
    if isinstance(value, dict):
        for k, v in value.items():
            found = _non_finite_field(v, "%s.%s" % (path, k) if path != "body" else str(k))
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _non_finite_field(v, "%s[%d]" % (path, i))
            if found:
                return found
    return None


def _json_number(value):
    """json.dumps' fallback: numpy integers, floats and bools as JSON numbers and booleans, as the
    planner functions take them (``create_job(pp=numpy.int64(4))`` raised "Object of type int64 is
    not JSON serializable"). Anything else: TypeError as json.dumps raises it."""
    if type(value).__name__ in ("bool_", "bool") and type(value).__module__ == "numpy":
        return bool(value)
    if isinstance(value, numbers.Integral):
        return operator.index(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)


def _job_path(job_id):
    """``/v1/jobs/{job_id}``; a job id is one path segment (``job-…`` as create_job answers it):
    raises TypeError for a non-string and ValueError for one that would change the route."""
    if not isinstance(job_id, str):
        raise TypeError("job_id must be a str (the 'job_id' create_job answers), got %s" % type(job_id).__name__)
    if not job_id or re.search(r"[/?#%\s\x00-\x1f\x7f]", job_id):
        raise ValueError("job_id must be one path segment such as 'job-1a2b...' (no '/', '?', '#', '%%' or white "
                         "space), got %r" % job_id)
    return "/v1/jobs/" + job_id


def _index(value, name):
    """`value` as a path segment: a non-negative int (numpy integers too). TypeError for a float,
    a str or a bool (``"%d" % 1.5`` silently gave rank 1, ``"%d" % True`` rank 1), ValueError for
    a negative one."""
    import operator

    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("%s must be an int, got %r" % (name, value))
    value = operator.index(value)
    if value < 0:
        raise ValueError("%s must be >= 0, got %d" % (name, value))
    return value


class ServerStartError(RuntimeError):
    """``perseus serve`` could not be started (binary missing, built without the server...)."""


class API:
    """Client of the /v1 HTTP API.

    url: ``"http://host:port"``; token: bearer token (None: no Authorization header);
    timeout_s: per request, s. Every method raises :class:`APIError` on an error answer or
    when the server is unreachable; ValueError (TypeError) before sending anything for a body
    with a NaN/infinite number or a job_id that is not one path segment (not a str). A token
    that is not printable ASCII without spaces (e.g. read from a file with its newline) is a
    ValueError at construction that never shows the token.
    """

    def __init__(self, url, token=None, timeout_s=10.0):
        if not isinstance(url, str):
            hint = (": a LocalServer has its url once started (call start(), or use `with LocalServer() as s`)"
                    if url is None else "")
            raise TypeError("url must be a str such as 'http://127.0.0.1:8000', got %r%s" % (url, hint))
        if not url.startswith(("http://", "https://")) or len(url.rstrip("/")) <= len(url.split("//", 1)[0]) + 2:
            # urllib said "unknown url type: 'not a url/v1/health'" at the first request.
            raise ValueError("url must be http://HOST:PORT such as 'http://127.0.0.1:8000', got %r" % url[:80])
        import math

        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not (
                math.isfinite(timeout_s) and timeout_s > 0):
            # 0 made every request fail with "Operation now in progress" (a non-blocking socket).
            raise ValueError("timeout_s must be a finite number of seconds > 0, got %r" % (timeout_s,))
        self.url = url.rstrip("/")
        if token is not None:
            if not isinstance(token, str):
                raise TypeError("token must be a str or None, got %s" % type(token).__name__)
            if not token or any(not ("!" <= ch <= "~") for ch in token):
                # urllib's own error quoted the whole header, the admin token with it.
                hint = " (read from a file? strip its newline)" if token.strip() != token else ""
                raise ValueError("token must be printable ASCII without spaces or control characters%s; "
                                 "it is not shown here" % hint)
        self.token = token
        self.timeout_s = timeout_s

    def request(self, method, path, body=None):
        """Sends one request; returns the decoded JSON answer (None for an empty body).
        Raises ValueError naming the field when the body holds a NaN or infinite number (JSON
        has none; the server would answer 400 malformed_json)."""
        bad = _non_finite_field(body)
        if bad:
            raise ValueError("%s must be a finite number (JSON has no NaN or infinity)" % bad)
        data = None if body is None else json.dumps(body, allow_nan=False, default=_json_number).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                text = resp.read()
        except urllib.error.HTTPError as e:
            code, message = "http_error", e.reason
            try:
                err = json.loads(e.read())["error"]
                code, message = err.get("code", code), err.get("message", message)
            except Exception:  # noqa: BLE001 - keep the HTTP reason
                pass
            retry_after = None
            try:
                retry_after = float(e.headers.get("Retry-After")) if e.headers.get("Retry-After") else None
            except ValueError:  # an HTTP date: not sent by perseus serve
                pass
            raise APIError(e.code, code, message, retry_after) from None
        except (urllib.error.URLError, OSError) as e:
            raise APIError(0, "unreachable", "%s %s: %s" % (method, self.url + path, e)) from None
        return json.loads(text) if text else None

    def health(self):
        """GET /v1/health (liveness): {'status', 'version', 'uptime_s'}; status 'ok', 'starting'
        (a restarted server loads its jobs) or 'degraded' (its database refuses writes, e.g. a
        full disk; then also 'error': {'code': 'storage_unwritable', 'message'})."""
        return self.request("GET", "/v1/health")

    def ready(self):
        """GET /v1/ready (readiness): the health body when the status is 'ok'; raises APIError 503
        ('starting' or 'storage_unwritable') otherwise."""
        return self.request("GET", "/v1/ready")

    def create_job(self, *, pp, microbatches, profile_csv=None, plans=None, dp=1, tp=1, schedule="1f1b",
                   chunks=1, p2p_power_w=None, unit_time_s=1e-3, name="", op_overhead_s=0.0, p2p_latency_s=0.0,
                   **extra):
        """POST /v1/jobs. pp: GPUs per pipeline; dp: pipelines; tp: tensor-parallel degree;
        microbatches per iteration; profile_csv: profile CSV *text* (the server solves the
        frontier in the background; ranks run the quick T_min plan meanwhile); or plans: a
        precomputed frontier. p2p_power_w in W (required, as the CLI's --p2p-power: raises
        ValueError when missing), unit_time_s in s. op_overhead_s / p2p_latency_s: per-computation
        overhead and blocking P2P send time, s (0..3600, default 0 = computation only; as
        `perseus optimize --op-overhead/--p2p-latency`, docs/validation.md). Extra keys are sent as
        given (e.g. planning_budget_s: when reached, the job serves a partial frontier; the server
        refuses a field it does not know with 422 invalid_field naming it, docs/http-api.md).
        Returns the answer: {'job_id', 'job_token', 'status', 'world_size', 'num_ops', 'num_plans', ...};
        'job_token' is the job's own bearer token (shown only here): give it to the job's ranks,
        it reaches only this job (creating, listing and deleting jobs need the admin token)."""
        if p2p_power_w is None:
            raise ValueError("p2p_power_w is required: the power of a GPU blocked on P2P communication, W "
                             "(P_block, as `perseus optimize --p2p-power`)")
        body = dict(name=name, pp=pp, dp=dp, tp=tp, microbatches=microbatches, schedule=schedule, chunks=chunks,
                    p2p_power_w=p2p_power_w, unit_time_s=unit_time_s, op_overhead_s=op_overhead_s,
                    p2p_latency_s=p2p_latency_s, **extra)
        if profile_csv is not None:
            body["profile_csv"] = profile_csv
        if plans is not None:
            body["plans"] = plans
        return self.request("POST", "/v1/jobs", body)

    def get_job(self, job_id, *, pipelines_from=0, pipelines_count=1024):
        """GET /v1/jobs/{id}: status, frontier points, per-pipeline plan, stragglers, measurements.

        The per-pipeline lists (``pipelines``, ``straggler_loop["pipelines"]``) hold the page of
        pipelines ``pipelines_from`` .. ``pipelines_from + pipelines_count - 1`` (at most 1,024;
        the answer's ``pipelines_total`` is the job's dp): page through a larger job."""
        query = "?pipelines_from=%d&pipelines_count=%d" % (
            _index(pipelines_from, "pipelines_from"), _index(pipelines_count, "pipelines_count"))
        return self.request("GET", _job_path(job_id) + query)

    def delete_job(self, job_id):
        """DELETE /v1/jobs/{id}."""
        return self.request("DELETE", _job_path(job_id))

    def wait_ready(self, job_id, timeout_s=60.0, poll_s=0.05):
        """Polls the job until its status is 'ready' (frontier solved); returns the job. A 503
        with Retry-After (a server still loading its jobs after a restart) is waited out within
        timeout_s. Raises APIError (code 'job_failed') when planning failed, TimeoutError after
        timeout_s (s, finite and >= 0; poll_s > 0: else ValueError naming it)."""
        for name, value, least in (("timeout_s", timeout_s, 0.0), ("poll_s", poll_s, 1e-3)):
            if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
                    or value < least):
                raise ValueError("%s must be a finite number of seconds >= %g, got %r" % (name, least, value))
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                job = self.get_job(job_id)
            except APIError as e:
                if e.http_status != 503 or e.retry_after_s is None or time.monotonic() > deadline:
                    raise
                time.sleep(max(poll_s, min(e.retry_after_s, deadline - time.monotonic())))
                continue
            if job["status"] == "ready":
                return job
            if job["status"] == "failed":
                raise APIError(200, "job_failed", job.get("error", "planning failed"))
            if time.monotonic() > deadline:
                raise TimeoutError("job %s still %s after %.1f s" % (job_id, job["status"], timeout_s))
            time.sleep(poll_s)

    def get_plan(self, job_id, rank):
        """GET /v1/jobs/{id}/ranks/{rank}/plan: {'version', 'plan_index', 'pipeline', 'pp_rank',
        'iteration_time_s', 'energy_j', 'instructions': [...]} of the rank's current plan."""
        return self.request("GET", "%s/ranks/%d/plan" % (_job_path(job_id), _index(rank, "rank")))

    def report_straggler(self, job_id, pipeline, *, slowdown=None, iteration_time_s=None):
        """POST /v1/jobs/{id}/stragglers: pipeline (data-parallel rank) is slow by `slowdown`
        (>= 1, times T_min) or runs iterations of `iteration_time_s` s. The other pipelines
        switch to the plan that draws the least energy until the straggler's iteration time
        (its own energy plus waiting at P_block; Perseus §3.2). Returns {'decision': {...}}.
        Right after a server restart the answer may be 503 'frontier_not_ready': the APIError's
        retry_after_s says when to send it again."""
        body = {"pipeline": pipeline}
        if slowdown is not None:
            body["slowdown"] = slowdown
        if iteration_time_s is not None:
            body["iteration_time_s"] = iteration_time_s
        return self.request("POST", _job_path(job_id) + "/stragglers", body)

    def clear_straggler(self, job_id, pipeline):
        """DELETE /v1/jobs/{id}/stragglers/{pipeline}: the pipeline is back to normal speed."""
        return self.request("DELETE", "%s/stragglers/%d" % (_job_path(job_id), _index(pipeline, "pipeline")))


def find_perseus_binary(binary=None):
    """The `perseus` executable: `binary`, else $PERSEUS_BINARY, else `perseus` on PATH, else the
    one installed with this package (<prefix>/lib/python3.X/dist-packages/perseus ->
    <prefix>/bin/perseus, wherever the prefix was installed), else the one built beside it in a
    build tree (<build>/python/perseus -> <build>/cli/perseus).
    Raises ServerStartError when none exists."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, os.pardir, os.pardir, os.pardir, os.pardir, "bin", "perseus")
    build_tree = os.path.join(here, os.pardir, os.pardir, "cli", "perseus")
    for cand in (binary, os.environ.get("PERSEUS_BINARY"), shutil.which("perseus"), installed, build_tree):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise ServerStartError("cannot find the `perseus` executable (pass binary=, set PERSEUS_BINARY, add it to PATH "
                           "or build it: make test)")


def _die_with_parent():
    """In the forked child, before exec: SIGTERM it when the thread that started it dies
    (Linux PR_SET_PDEATHSIG), so a killed training script leaves no ``perseus serve`` behind."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except Exception:  # not Linux: the server then outlives a killed parent, as before
        pass


class LocalServer:
    """Runs ``perseus serve`` on 127.0.0.1 with a free port, an in-memory database and a fresh
    random token (written to a 0600 file, never on the command line, removed once the server
    has read it). Use as a context manager; attributes ``url``, ``token``, ``api`` (an
    :class:`API`). The server gets SIGTERM when the thread that started it dies (Linux
    PR_SET_PDEATHSIG), so a training script killed with SIGTERM or SIGKILL leaves no server
    running; start it from the thread that lives as long as you need it.

    binary: see :func:`find_perseus_binary`; args: extra ``perseus serve`` options;
    startup_timeout_s: how long to wait for it to listen and answer /v1/health, s (finite, > 0:
    ValueError otherwise); log_path:
    file that receives the server's stdout and stderr (truncated at start, kept after
    :meth:`stop`); None: ``serve.log`` in the server's temporary folder, removed by
    :meth:`stop` (read it with :meth:`log`). Raises ServerStartError (here when the binary is
    not found).
    """

    def __init__(self, binary=None, args=(), startup_timeout_s=20.0, log_path=None):
        if isinstance(startup_timeout_s, bool) or not isinstance(startup_timeout_s, (int, float)) \
                or not 0 < startup_timeout_s < float("inf"):
            # NaN made every deadline comparison false: a server that never listened was awaited for ever.
            raise ValueError("startup_timeout_s must be a finite number of seconds > 0, got %r" % (startup_timeout_s,))
        self.binary = find_perseus_binary(binary)
        self.args = list(args)
        self.startup_timeout_s = startup_timeout_s
        self.log_path = log_path
        self.proc = None
        self._dir = None
        self.url = self.token = self.api = None

    @staticmethod
    def available(binary=None):
        """(True, "") when `perseus serve` exists in the binary, else (False, reason)."""
        try:
            exe = find_perseus_binary(binary)
        except ServerStartError as e:
            return False, str(e)
        r = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not re.search(r"^\s+serve\s", r.stdout, re.MULTILINE):
            return False, "%s has no `serve` subcommand (built without the server: needs SQLite3 and cpp-httplib)" % exe
        return True, ""

    def start(self):
        """Starts ``perseus serve`` (a temporary folder holds its token file, port file and,
        without log_path, its log), waits up to startup_timeout_s s until it listens and answers
        /v1/health, then removes the token file and sets ``url``, ``token`` and ``api``. Returns
        self. Raises ServerStartError when the server exits first (its log in the message) or
        does not answer in time; OSError when log_path cannot be opened. On any failure
        (Ctrl-C too) the server is stopped and its temporary folder removed.
        """
        self._dir = tempfile.mkdtemp(prefix="perseus-serve-")
        try:
            return self._start_in(self._dir)
        except BaseException:
            # Every failure (the server exited, no answer in time, Ctrl-C while waiting) stops it
            # and removes the folder with the admin token: __exit__ does not run when __enter__
            # raised (session 32's trial found the token file left behind).
            self.stop()
            raise

    def _start_in(self, folder):
        self.token = secrets.token_hex(16)
        token_file = os.path.join(folder, "token")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.token + "\n")
        port_file = os.path.join(folder, "port")
        log = open(self.log_path or os.path.join(folder, "serve.log"), "w")
        cmd = [self.binary, "serve", "--host", "127.0.0.1", "--port", "0", "--port-file", port_file,
               "--db", ":memory:", "--token-file", token_file] + self.args
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + self.startup_timeout_s
        while not os.path.exists(port_file):
            if self.proc.poll() is not None:
                raise ServerStartError("perseus serve exited with status %d: %s" % (self.proc.returncode, self.log()))
            if time.monotonic() > deadline:
                raise ServerStartError("perseus serve did not listen within %.0f s" % self.startup_timeout_s)
            time.sleep(0.02)
        with open(port_file) as f:
            port = int(f.read().strip())
        self.url = "http://127.0.0.1:%d" % port
        self.api = API(self.url, self.token)
        while True:
            try:
                self.api.health()
                break
            except APIError:
                if time.monotonic() > deadline:
                    raise ServerStartError("perseus serve does not answer /v1/health") from None
                time.sleep(0.02)
        # The server read the token at start: the file need not outlive that (a killed Python
        # process leaves no admin token on disk).
        os.unlink(token_file)
        return self

    def log(self):
        """The server's stderr so far (text)."""
        path = self.log_path or (self._dir and os.path.join(self._dir, "serve.log"))
        try:
            with open(path) as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def stop(self):
        """SIGTERM, then SIGKILL after 5 s. Idempotent."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
