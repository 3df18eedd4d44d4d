"""Perseus: remove energy bloat from pipeline-parallel training (Chung et al., SOSP'24).

Planner (C++ core, via the ``_perseus`` extension)::

    import perseus
    prof = perseus.load_profile("examples/stage_profile_gpt3-175b_a100_sxm.csv")
    res = perseus.optimize(prof, stages=8, microbatches=12, p2p_power_w=83.64)
    res["frontier"]   # [{'plan', 'time_s', 'energy_j', ...}], slowest first
    res["plans"][-1]  # fastest plan: per rank, per instruction 'frequency_mhz'

Runtime: :class:`perseus.Client` (one per GPU, over the C ABI of ``perseus/client.h``),
:mod:`perseus.server` (HTTP API of ``perseus serve``) and :mod:`perseus.torch`
(``torch.distributed`` helpers). Units everywhere: s, J, W, MHz.

Errors: :class:`perseus.InputError` (a ``ValueError``) for bad input to the planner;
:class:`perseus.ClientError` and subclasses for the runtime client;
:class:`perseus.server.APIError` for HTTP API errors. C++ errors never crash the interpreter.
"""

from ._perseus import (  # noqa: F401  (re-exports)
    HAVE_CLIENT,
    HAVE_EMULATE,
    HAVE_RENDER,
    InputError,
    Profile,
    __version__,
    load_profile,
    optimize,
    parse_profile,
    schedule,
    schedule_names,
)

if HAVE_CLIENT:
    from ._perseus import (  # noqa: F401
        CLIENT_ABI_VERSION,
        Client,
        ClientConfigError,
        ClientError,
        GpuError,
        HookOrderError,
        PlanMismatchError,
        ServerRefusedError,
        UnsupportedError,
    )
else:

    class ClientError(RuntimeError):
        """Raised for every runtime-client use when the package was built without perseus_client."""

    class PlanMismatchError(ClientError):
        """See the runtime build."""

    class Client:  # pragma: no cover - only in builds without the runtime
        """Placeholder: this build has no runtime client (configure with -DPERSEUS_BUILD_RUNTIME=ON)."""

        def __init__(self, *args, **kwargs):
            raise ClientError(
                "perseus was built without the runtime client (perseus_client); "
                "rebuild with -DPERSEUS_BUILD_RUNTIME=ON and libcpp-httplib-dev installed"
            )

if HAVE_EMULATE:  # bound when the C++ library has perseus/emulate.hpp
    from ._perseus import emulate  # noqa: F401
if HAVE_RENDER:  # bound when the C++ library has perseus/render.hpp
    from ._perseus import render_frontier_svg, render_timeline_svg, write_report  # noqa: F401


def profile_rows_to_csv(rows):
    """CSV text (stage,instruction,frequency,time,energy) from dicts as Profile.rows() returns.

    Handy for building a sub-profile, e.g. the first k stages::

        text = perseus.profile_rows_to_csv(r for r in prof.rows() if r["stage"] < 4)
        perseus.parse_profile(text)
    """
    lines = ["stage,instruction,frequency,time,energy"]
    for r in rows:
        lines.append(
            "%d,%s,%d,%r,%r" % (r["stage"], r["instruction"], r["freq_mhz"], float(r["time_s"]), float(r["energy_j"]))
        )
    return "\n".join(lines) + "\n"
