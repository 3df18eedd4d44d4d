"""Perseus hooks for ``torch.distributed`` pipeline-parallel training loops.

Works with any framework that runs forward/backward computations per microbatch (Megatron,
DeepSpeed, torch pipelining, a hand-written schedule)::

    import perseus.torch as pt
    job_id = pt.create_job(url, token=tok, pp=4, dp=2, microbatches=8, profile_csv=csv, p2p_power_w=83.64)  # rank 0 creates
    rt = pt.PipelineRuntime(url, job_id, token=tok, dp_rank=d, pp_rank=p, device=dev)
    for it in range(iters):
        with rt.step():
            for kind, mb in my_schedule:              # must follow the plan's order
                if kind == "forward":
                    x = recv(...)
                    with rt.forward():
                        y = stage(x)
                    send(y)
                else:
                    with rt.backward():
                        y.backward(grad)
    rt.close()

CUDA synchronisation: a new SM clock must not apply to kernels still queued from the previous
computation, so before a computation whose planned clock differs from the one in force the
runtime calls ``torch.cuda.synchronize(device)`` (``sync="auto"``). Nothing else is
synchronised; on CPU devices synchronisation is a no-op. ``sync="always"`` synchronises at
every begin and end (exact per-computation times), ``sync="never"`` never.
"""

import contextlib
import operator
import os
import warnings

import torch
import torch.distributed as dist

from . import Client, ClientError, PlanMismatchError
from .server import API, APIError

__all__ = ["create_job", "PipelineRuntime"]


def create_job(server_url, *, token=None, group=None, src=0, wait_ready=True, timeout_s=120.0, **spec):
    """Creates the Perseus job on rank `src` of `group` and broadcasts its id to every rank.

    Collective: every rank of `group` (default: the world) must call it. spec: the job fields
    of :meth:`perseus.server.API.create_job` (pp, dp, tp, microbatches, profile_csv or plans,
    schedule, p2p_power_w W, unit_time_s s...). wait_ready: rank `src` waits until the
    frontier is solved (status 'ready', at most timeout_s seconds) so that training starts
    on a final plan. Returns the job id (str) on every rank. When the creation failed, rank
    `src` raises its own error (an APIError keeps the server's ``http_status`` and ``code``,
    e.g. 401 ``unauthorized``; a TimeoutError of wait_ready stays one) and every other rank an
    APIError with the same ``http_status`` and ``code`` (0 and ``job_creation_failed`` for an
    error that is not the server's) whose message names rank `src` and its error. A job created
    but not ready within timeout_s is deleted (best effort), so a failed call leaves no job
    planning on the server.
    """
    me = dist.get_rank(group) if group is not None else dist.get_rank()
    payload = [None]
    failure = None
    if me == src:
        api = API(server_url, token)
        job_id = None
        try:
            job_id = api.create_job(**spec)["job_id"]
            if wait_ready:
                api.wait_ready(job_id, timeout_s=timeout_s)
            payload = [("ok", job_id)]
        except (APIError, TimeoutError, OSError, ValueError, TypeError) as e:
            failure = e
            if job_id is not None:  # created, not ready: nobody will run it
                try:
                    api.delete_job(job_id)
                except (APIError, OSError):
                    pass
            status, code = (e.http_status, e.code) if isinstance(e, APIError) else (0, "job_creation_failed")
            payload = [("error", (status, code, "%s: %s" % (type(e).__name__, e)))]
    src_global = dist.get_global_rank(group, src) if group is not None and hasattr(dist, "get_global_rank") else src
    dist.broadcast_object_list(payload, src=src_global, group=group)
    outcome, value = payload[0]
    if outcome == "ok":
        return value
    if failure is not None:
        raise failure
    status, code, message = value
    raise APIError(status, code, "rank %d could not create the Perseus job: %s" % (src, message))


def _device_identity(device):
    """The CUDA device's UUID as torch reports it (None when unknown): the client maps it to
    the NVML device exactly, whatever CUDA_VISIBLE_DEVICES says."""
    if device is None or device.type != "cuda" or not torch.cuda.is_available():
        return None
    try:
        index = device.index if device.index is not None else torch.cuda.current_device()
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        return str(uuid) if uuid is not None else None
    except (RuntimeError, AssertionError):
        return None


_GPU_BACKENDS = ("nvml", "rocm-smi", "gpud")


def _env_index(name):
    """$name as a non-negative int; ValueError naming the variable otherwise (was a bare
    "invalid literal for int()", session 32's trial)."""
    text = os.environ[name]
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError("$%s must be a non-negative integer (torchrun sets it), got %r" % (name, text)) from None
    return value


def _device_index(device, backend, device_index):
    """The GPU index the client drives: `device_index` when given (it must agree with a CUDA
    `device`), else a CUDA device's index, else $LOCAL_RANK (torchrun), else 0 for device=None.
    A CPU device with a GPU backend and neither device_index nor $LOCAL_RANK is refused: it
    silently became GPU 0 on every rank (session 22's trial)."""
    cuda_index = None
    if device is not None and device.type == "cuda":
        if device.index is None and not torch.cuda.is_available():
            # torch.cuda.current_device() raised AssertionError "Torch not compiled with CUDA enabled".
            raise ValueError("device=%s: this torch has no CUDA device; pass device='cuda:N' or device_index=N, "
                             "or device='cpu'" % (device,))
        cuda_index = device.index if device.index is not None else torch.cuda.current_device()
    if device_index is not None:
        if isinstance(device_index, bool) or not hasattr(device_index, "__index__"):
            raise TypeError("device_index must be a GPU index (an int >= 0), got %r" % (device_index,))
        device_index = operator.index(device_index)  # numpy integers too, as Client takes them
        if device_index < 0:
            raise ValueError("device_index must be a GPU index (an int >= 0), got %d" % device_index)
        if cuda_index is not None and cuda_index != device_index:
            raise ValueError("device_index=%d disagrees with device=%s; give one of them" % (device_index, device))
        return device_index
    if cuda_index is not None:
        return cuda_index
    if "LOCAL_RANK" in os.environ:
        return _env_index("LOCAL_RANK")
    if device is not None and backend in _GPU_BACKENDS:
        raise ValueError("device=%s with backend=%r: which GPU should Perseus drive? Pass device='cuda:N' or "
                         "device_index=N (the GPU's index), or run under torchrun ($LOCAL_RANK)" % (device, backend))
    return 0


class PipelineRuntime:
    """The Perseus runtime of one rank: a :class:`perseus.Client` plus the plan it runs.

    server_url, job_id, token: the job (see :func:`create_job`). dp_rank: pipeline id;
    pp_rank: stage; tp_rank: tensor-parallel rank; rank: global rank (default
    ``dist.get_rank()``, else $RANK; ValueError when neither exists). device: the rank's torch
    device (its UUID, else its CUDA index through CUDA_VISIBLE_DEVICES -> NVML device; the
    client refuses when it cannot be sure; CPU -> no synchronisation). device_index: the GPU
    the client drives when the device does not say (a CPU device, e.g. CPU tensors on a GPU
    node); default: the CUDA device's index, else $LOCAL_RANK, else 0 for device=None (a CPU
    device with a GPU backend and none of these: ValueError). backend: "nvml", "rocm-smi", "gpud" (pass gpud_socket_path=... or set
    $PERSEUS_GPUD_SOCKET), "simulated" (pass profile_path=...) or "dry-run".
    strict: raise PlanMismatchError when the loop's instruction order differs from the
    plan (False: warn once; that step then runs without clock changes). sync: "auto",
    "always" or "never" (see the module doc). simulate_compute: with the simulated
    backend, also run each computation on the simulated GPU (profile time x
    sim_time_scale of sleep, profile energy). Other keyword arguments go to
    :class:`perseus.Client` (sim_time_scale, freq_log_path, startup_timeout_s, ...).

    Attributes after each step: ``history`` (one dict per step: iteration, plan_version,
    instructions run), ``clock_change_syncs`` (synchronisation points needed so far).
    Raises ClientError subclasses (e.g. ServerRefusedError for an unknown job).
    """

    def __init__(self, server_url, job_id, *, dp_rank, pp_rank, tp_rank=0, rank=None, token=None, device=None,
                 backend="nvml", strict=True, sync="auto", simulate_compute=False, **client_kwargs):
        if sync not in ("auto", "always", "never"):
            raise ValueError('sync must be "auto", "always" or "never", got %r' % (sync,))
        if rank is None:
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank()
            elif "RANK" in os.environ:  # torchrun, before init_process_group
                rank = _env_index("RANK")
            else:  # was 0 on every rank: the others then got 409 duplicate_rank (session 22's trial)
                raise ValueError("rank: torch.distributed is not initialized and $RANK is unset; pass rank=<global "
                                 "rank> or call torch.distributed.init_process_group() first")
        self.rank, self.dp_rank, self.pp_rank, self.tp_rank = rank, dp_rank, pp_rank, tp_rank
        self.job_id = job_id
        self.device = torch.device(device) if device is not None else None
        self.strict = strict
        self.sync = sync
        self.simulate_compute = simulate_compute and backend == "simulated"
        self._cuda = self.device is not None and self.device.type == "cuda" and torch.cuda.is_available()
        index = _device_index(self.device, backend, client_kwargs.pop("device_index", None))
        self.client = Client(server_url, job_id, rank=rank, dp_rank=dp_rank, pp_rank=pp_rank, tp_rank=tp_rank,
                             token=token, device_index=index, backend=backend,
                             **dict(dict(device_uuid=_device_identity(self.device)), **client_kwargs))
        self.plan = None            # plan in use: Client.plan() ({'version', 'instructions': [...], ...})
        self._plan_version = None
        self._index = 0
        self._clock_mhz = None      # clock requested last (None: unknown)
        self._step = None
        self._warned = False
        self.history = []
        self.clock_change_syncs = 0
        self.iteration = 0

    # -- plan tracking (for synchronisation decisions and diagnostics) --
    def _refresh_plan(self):
        # The client's own copy of the plan it switched in (checked, clocks snapped): no network
        # call on the training thread. A second fetch over HTTP here crashed the step on a bad
        # answer and blocked it on a slow server (session 23's trial).
        version = self.client.stats()["plan_version"]  # cheap; the plan is copied only when it changed
        if version < 0 or version == self._plan_version:
            return
        plan = self.client.plan()
        if plan is not None:
            self.plan = plan
            self._plan_version = plan["version"]

    def planned_frequencies_mhz(self):
        """Planned SM clock (MHz) of each computation of a step, in order ([] before a plan)."""
        return [i["freq_mhz"] for i in (self.plan or {}).get("instructions", [])]

    def _synchronize(self):
        if self._cuda:
            torch.cuda.synchronize(self.device)

    # -- hooks --
    def _mismatch(self, err):
        if self.strict:
            raise err
        if not self._warned:
            warnings.warn("perseus: %s (continuing without clock changes for this step)" % err)
            self._warned = True

    def begin_step(self):
        """Starts an iteration (prefer ``with rt.step():``)."""
        self.client.on_step_begin()
        self._refresh_plan()
        self._index = 0
        self._step = {"iteration": self.iteration, "plan_version": self._plan_version, "instructions": []}

    def end_step(self):
        """Ends the iteration; its measurements are reported in the background."""
        try:
            self.client.on_step_end()
        except PlanMismatchError as e:
            self._mismatch(e)
        finally:
            if self._step is not None:
                self.history.append(self._step)
            self._step = None
            self.iteration += 1

    def begin_instruction(self, name):
        """A computation ("forward", "backward", "backward_input", "backward_weight") starts."""
        freqs = self.planned_frequencies_mhz()
        planned = freqs[self._index] if self._index < len(freqs) else None
        needs_sync = self.sync == "always" or (
            self.sync == "auto" and planned is not None and planned != self._clock_mhz and self._clock_mhz is not None
        )
        if planned is not None and planned != self._clock_mhz:
            self.clock_change_syncs += 1 if self._clock_mhz is not None else 0
            self._clock_mhz = planned
        if needs_sync:
            self._synchronize()
        self._index += 1
        if self._step is not None:
            self._step["instructions"].append(name)
        try:
            self.client.on_instruction_begin(name)
        except PlanMismatchError as e:
            if self.strict:  # leave the client in a consistent state before raising
                with contextlib.suppress(ClientError):
                    self.client.on_instruction_end(name)
            self._mismatch(e)

    def end_instruction(self, name):
        """The computation `name` ended."""
        if self.sync == "always":
            self._synchronize()
        if self.simulate_compute:
            self.client.simulate_compute()
        self.client.on_instruction_end(name)

    @contextlib.contextmanager
    def step(self):
        """Context manager around one training iteration."""
        self.begin_step()
        try:
            yield self
        except BaseException:
            with contextlib.suppress(ClientError):  # do not hide the original error
                self.end_step()
            raise
        self.end_step()

    @contextlib.contextmanager
    def instruction(self, name):
        """Context manager around one computation of kind `name`."""
        self.begin_instruction(name)
        ok = False
        try:
            yield
            ok = True
        finally:
            if ok:
                self.end_instruction(name)
            else:
                with contextlib.suppress(ClientError):
                    self.client.on_instruction_end(name)

    def forward(self):
        """Context manager around one microbatch's forward computation."""
        return self.instruction("forward")

    def backward(self):
        """Context manager around one microbatch's backward computation."""
        return self.instruction("backward")

    def stats(self):
        """The client's counters (see perseus.Client.stats)."""
        return self.client.stats()

    def close(self):
        """Flushes reports, resets the clocks, stops the client. Idempotent."""
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
