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
    profile_unit_warnings,
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


def _encodable(text):
    """Whether `text` can be passed to C++ (UTF-8: no lone surrogate)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _keyword_hints(f, display=None):
    """`f` (a bound C++ function or method) whose unknown keyword arguments are named, with the
    nearest accepted keyword: pybind11 only says "incompatible function arguments" and lists the
    whole signature (session 13's trial: ``optimize(..., microbatchs=12)``), and whose arguments
    of the wrong type are named too. Every other error, and the result, are f's own. `display`:
    the name in messages (e.g. "Client" for its __init__; default f's own)."""
    import difflib
    import functools
    import re

    name = f.__name__
    shown = display or name
    # pybind11's docstring starts with the signature(s): "name(a: int, *, b: float = 0.5) -> dict".
    params = set()
    signatures = []
    declared = {}  # keyword -> its plain declared type (str, bool, int, float), for the message
    listed = {}  # keyword -> the element type of a declared List[...] (str, bool, int, float)
    optional = {}  # keyword -> the type of a declared Optional[...] (None allowed)
    positional = []  # parameter names in order (of the first signature), for positional arguments
    for line in (f.__doc__ or "").splitlines():
        m = re.match(r"\s*(?:\d+\. )?%s\((.*)\) ->" % re.escape(name), line)
        if m:
            names = re.findall(r"(?:^|, |\*, )(\w+): ", m.group(1))
            params.update(n for n in names if n != "self")
            if not positional:
                positional = names
            signatures.append(line.strip())
            declared.update(re.findall(r"(?:^|, |\*, )(\w+): (str|bool|int|float)\b(?! *\])", m.group(1)))
            listed.update(re.findall(r"(?:^|, |\*, )(\w+): List\[(str|bool|int|float)\]", m.group(1)))
            optional.update(re.findall(r"(?:^|, |\*, )(\w+): Optional\[(str|bool|int|float)\]", m.group(1)))

    def given(v):
        return type(v).__name__ if v is not None else "None"

    @functools.wraps(f)
    def call(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except TypeError as e:
            if "incompatible function arguments" not in str(e) and "incompatible constructor arguments" not in str(e):
                raise
            unknown = [k for k in kwargs if k not in params]
            if not params or not unknown:
                # A value of the wrong type: pybind11's message repeats every argument (a frontier
                # with all its plans: megabytes, session 18's trial); name the types instead.
                kinds = {"str": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}
                named = list(zip(positional, args)) + list(kwargs.items())
                wrong = []
                out_of_range = []  # keywords whose int is beyond the C++ int it is read into
                for k, v in named:
                    if k == "self":
                        continue
                    if k in declared and (v is None or not isinstance(v, kinds[declared[k]]) or
                                          (isinstance(v, bool) and declared[k] in ("int", "float"))):
                        wrong.append("%s must be %s, got %s" % (k, declared[k], given(v)))
                    elif k in optional and v is not None and (
                            not isinstance(v, kinds[optional[k]]) or
                            (isinstance(v, bool) and optional[k] in ("int", "float"))):
                        wrong.append("%s must be %s or None, got %s" % (k, optional[k], given(v)))
                    elif ("int" in (declared.get(k), optional.get(k)) and isinstance(v, int) and
                          not isinstance(v, bool) and not -2**31 <= v < 2**31):
                        # The right type, beyond the C++ integer it is read into: a bad value,
                        # as the planner's own range checks say (InputError), not a bad type.
                        # Most keywords are 32-bit; a few (the client's first_iteration) are
                        # 64-bit, so a value past 64 bits is said as such (session 32's trial).
                        out_of_range.append(k)
                        wrong.append("%s=%d is outside the range of integers it accepts (%s)" % (
                            k, v, "beyond 64 bits" if not -2**63 <= v < 2**63
                            else "a 32-bit int, -2147483648 to 2147483647"))
                    elif isinstance(v, str) and not _encodable(v):
                        wrong.append("%s is not valid text (it holds a lone surrogate)" % k)
                    elif k in listed:
                        kind = listed[k]
                        if not isinstance(v, (list, tuple)):
                            wrong.append("%s must be a list of %s, got %s" % (k, kind, given(v)))
                        else:
                            bad = [i for i, x in enumerate(v) if x is None or not isinstance(x, kinds[kind])]
                            if bad:
                                wrong.append("%s[%d] must be %s, got %s" % (k, bad[0], kind, given(v[bad[0]])))
                if out_of_range and len(out_of_range) == len(wrong):
                    # The client's bad values are ClientConfigError, as its own range checks.
                    client = shown.startswith("Client") and "ClientConfigError" in globals()
                    err = (ClientConfigError if client else InputError)("%s(): %s" % (shown, "; ".join(wrong)))
                    err.field = out_of_range[0]
                    raise err from None
                got = [given(a) for k, a in zip(positional, args) if k != "self"]
                got += ["%s=%s" % (k, given(v)) for k, v in kwargs.items()]
                raise TypeError(
                    "%s(): %s; given (%s); it takes %s"
                    % (shown, "; ".join(wrong) or "an argument has the wrong type", ", ".join(got),
                       " or ".join(signatures) or "other arguments")
                ) from None
            hints = []
            for k in unknown:
                near = difflib.get_close_matches(k, sorted(params), n=1)
                hints.append("%r%s" % (k, " (did you mean %r?)" % near[0] if near else ""))
            raise TypeError(
                "%s() got an unexpected keyword argument%s %s; it takes %s"
                % (shown, "s" if len(hints) > 1 else "", ", ".join(hints), ", ".join(sorted(params)))
            ) from None

    return call


load_profile, parse_profile, optimize, schedule = map(_keyword_hints, (load_profile, parse_profile, optimize, schedule))
profile_unit_warnings = _keyword_hints(profile_unit_warnings)
for _method in ("has", "max_freq_mhz", "points", "write_csv"):
    setattr(Profile, _method, _keyword_hints(getattr(Profile, _method), "Profile." + _method))
if HAVE_CLIENT:
    Client.__init__ = _keyword_hints(Client.__init__, "Client")
    for _method in ("flush", "on_instruction_begin", "on_instruction_end", "on_step_begin", "on_step_end",
                    "write_freq_log"):
        setattr(Client, _method, _keyword_hints(getattr(Client, _method), "Client." + _method))
if HAVE_EMULATE:
    emulate = _keyword_hints(emulate)
if HAVE_RENDER:
    render_frontier_svg, render_timeline_svg, write_report = map(
        _keyword_hints, (render_frontier_svg, render_timeline_svg, write_report)
    )


def _row_number(row, i, key, integer):
    """Field `key` of row `i` as a finite int (integer) or float; InputError naming both otherwise."""
    import math

    v = row[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise InputError("row %d: field %r must be a number, got %r" % (i, key, v))
    if not math.isfinite(float(v)):
        raise InputError("row %d: field %r must be finite, got %r" % (i, key, v))
    if integer and float(v) != int(v):
        raise InputError("row %d: field %r must be an integer, got %r" % (i, key, v))
    return int(v) if integer else float(v)


def profile_rows_to_csv(rows):
    """CSV text (stage,instruction,frequency,time,energy) from dicts as Profile.rows() returns.

    Handy for building a sub-profile, e.g. the first k stages::

        text = perseus.profile_rows_to_csv(r for r in prof.rows() if r["stage"] < 4)
        perseus.parse_profile(text)

    Raises InputError naming the row and field when a row lacks a field or holds a value a
    profile cannot (stage < 0, an instruction outside forward/backward/backward_input/
    backward_weight, a clock outside [1, 100000] MHz, time <= 0 s, energy < 0 J, NaN or inf),
    and wherever parse_profile would refuse the text (its ranges, a duplicate row, no rows):
    the text returned always parses. TypeError when a row is not a mapping.
    """
    from collections.abc import Mapping

    kinds = ("forward", "backward", "backward_input", "backward_weight")
    lines = ["stage,instruction,frequency,time,energy"]
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise TypeError("profile_rows_to_csv: row %d is %s, expected a dict as Profile.rows() returns" % (i, type(r).__name__))
        for key in ("stage", "instruction", "freq_mhz", "time_s", "energy_j"):
            if key not in r:
                raise InputError("row %d: field %r is missing" % (i, key))
        stage, freq = _row_number(r, i, "stage", True), _row_number(r, i, "freq_mhz", True)
        time_s, energy_j = _row_number(r, i, "time_s", False), _row_number(r, i, "energy_j", False)
        if r["instruction"] not in kinds:
            raise InputError("row %d: field 'instruction' must be one of %s, got %r" % (i, ", ".join(kinds), r["instruction"]))
        if stage < 0 or not 1 <= freq <= 100000 or time_s <= 0 or energy_j < 0:
            raise InputError(
                "row %d: expected stage >= 0, freq_mhz in [1, 100000], time_s > 0 and energy_j >= 0; got %r"
                % (i, {k: r[k] for k in ("stage", "freq_mhz", "time_s", "energy_j")})
            )
        lines.append("%d,%s,%d,%r,%r" % (stage, r["instruction"], freq, time_s, energy_j))
    text = "\n".join(lines) + "\n"
    # The profile parser's own checks (ranges, duplicate rows, at least one row): never a CSV
    # that parse_profile would then refuse. CSV line L is row L - 2.
    try:
        parse_profile(text, "profile_rows_to_csv")
    except InputError as e:
        line = getattr(e, "line", 0) or 0
        import re

        what = str(e).split(": ", 1)[1] if ": " in str(e) else str(e)
        what = re.sub(r"first on line (\d+)", lambda m: "first as row %d" % (int(m.group(1)) - 2), what)
        # The CSV's column names, as the rows' keys (session 18's trial: "field 'time'").
        keys = {"frequency": "freq_mhz", "time": "time_s", "energy": "energy_j"}
        what = re.sub(r"field '(frequency|time|energy)'", lambda m: "field '%s'" % keys[m.group(1)], what)
        raise InputError("row %d: %s" % (line - 2, what) if line >= 2 else "profile_rows_to_csv: %s" % what) from None
    return text
