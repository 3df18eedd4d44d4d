// Internal: the parts of the `_perseus` extension module, one function per concept.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <pybind11/pybind11.h>

namespace perseus::python {

namespace py = pybind11;

/// True once the interpreter is shutting down: a thread must not take the GIL any more (CPython
/// ends it inside the call, by pthread_exit, unwinding through C++ frames that cannot stop it).
inline bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

/// The interpreter's main thread (the one that finalizes it), set when the module loads.
inline unsigned long& main_thread_ident() {
  static unsigned long ident = 0;
  return ident;
}

/// The exit gate. At exit CPython ends a daemon thread that waits for the GIL (in
/// PyEval_RestoreThread or PyGILState_Ensure) by pthread_exit once finalizing has begun, even
/// before it gets the GIL (3.11: its timed wait checks every switch interval). In a thread coming
/// back from perseus that unwinding crossed C++ frames which cannot stop it: from
/// GilRelease's destructor std::terminate ("terminate called without an active exception",
/// session 23's CI), through the client's C ABI "FATAL: exception not rethrown"; the process
/// aborted at exit. Checking Py_IsFinalizing() first leaves a race: the thread checks, then
/// waits for the GIL while the main thread holds it through the step that sets the flag.
///
/// So the GIL is taken back only through the gate: close_exit_gate(), an atexit callback (atexit
/// callbacks run before finalizing begins), closes it and waits, without the GIL, for the
/// threads already past it to get the GIL; any later thread is refused. The main thread always
/// passes: it is the one that finalizes, and CPython never ends it.

/// Runs `take` (which takes the GIL) unless the gate is closed; returns whether it ran. On the
/// main thread it always runs.
bool take_gil_before_exit(const std::function<void()>& take);

/// Closes the gate (registered with atexit when the module loads; the GIL held on entry and exit).
void close_exit_gate();

/// Blocks the calling thread until the process exits (a refused thread's end: CPython 3.14 does
/// the same, PyThread_hang_thread).
[[noreturn]] void hang_until_exit();

/// Releases the GIL for a scope, as py::gil_scoped_release does, but takes it back through the
/// exit gate: a daemon thread still inside perseus when the interpreter exits hangs until the
/// process ends instead of aborting it.
class GilRelease {
 public:
  GilRelease() : state_(PyEval_SaveThread()) {}
  ~GilRelease() {
    if (!take_gil_before_exit([this] { PyEval_RestoreThread(state_); })) hang_until_exit();
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};

/// The message for argument `name` holding a NUL at byte `at` of `size`: "NAME must not contain a
/// NUL character (found at byte AT of SIZE): ...". The value itself is never shown (it may be a
/// token).
std::string nul_message(const char* name, std::size_t at, std::size_t size);

/// Refuses `value` of argument `name` when it holds a NUL character and will cross into a C
/// string (the client's C ABI) or an OS path: C would silently end it there ("tok\0junk" would
/// be sent as "tok", "p.csv\0.bak" would open p.csv). Throws a Python ValueError naming `name`
/// (nul_message()); returns `value` otherwise.
const std::string& c_string_arg(const std::string& value, const char* name);

/// A text argument (CSV text in memory) as UTF-8: a str, else TypeError; a str holding a lone
/// surrogate (no UTF-8 form) is perseus.InputError (a ValueError) with field `name` and the
/// character's position, not pybind11's "incompatible function arguments".
std::string text_arg(const py::object& obj, const char* name);

/// A path argument (str, bytes or os.PathLike, through os.fspath) as the library takes it.
/// Throws TypeError for anything else, and perseus.InputError (a ValueError) with field `name`
/// when it holds a NUL character (nul_message()), before anything is opened or written.
std::string path_arg(const py::object& obj, const char* name);
/// path_arg() without the NUL check: the path's bytes (str, bytes or os.PathLike, TypeError
/// naming `name` otherwise), for callers that check NULs with c_string_arg() (the client).
std::string fs_path_bytes(const py::object& obj, const char* name);

/// An integer argument (a sizes, count or budget keyword): a Python int or anything with
/// __index__ (numpy integers), but never a bool (True is an int in Python, so stages=True would
/// silently be 1) or a float; a value outside T's range is refused too. Any of these is a
/// TypeError naming the expected signature, as for any other wrong type.
template <class T>
struct Strict {
  T value{};
};

/// The value of an optional Strict keyword (nullopt: not given).
template <class T>
std::optional<T> strict_value(const std::optional<Strict<T>>& s) {
  return s ? std::optional<T>(s->value) : std::nullopt;
}

/// True for a Python bool or a numpy bool (numpy.bool_ / numpy.bool): never a number here, so
/// `p2p_power_w=np.bool_(True)` is refused like `True` (without importing numpy).
inline bool is_bool_like(PyObject* o) {
  if (PyBool_Check(o)) return true;
  const std::string_view name = Py_TYPE(o)->tp_name;
  return name == "numpy.bool_" || name == "numpy.bool";
}

/// stacklevel of the bindings' UserWarnings (optimize(), emulate(), render_timeline_svg()): the
/// caller's line (2: past perseus/__init__.py's keyword-hint wrapper), where a notebook user looks.
inline constexpr Py_ssize_t kWarnStackLevel = 2;

/// A real-valued keyword (W, s, ...): a Python float or int, or a numpy number, but not a
/// bool (`p2p_power_w=True` would silently be 1 W): TypeError instead.
struct Real {
  double value = 0;
};

/// A cancel hook (PlannerOptions::cancelled) for a solve running without the GIL, so that Ctrl-C
/// (any Python signal handler) ends it: at most every 50 ms it takes the GIL and runs the pending
/// handlers; one that raises (KeyboardInterrupt) sets `interrupted` and the hook says true from
/// then on (latched: the polish stage polls again and ran to the end of its budget when a later
/// poll said false). The caller catches PlanningCancelled and, when `interrupted`, re-raises the
/// handler's exception with the GIL held (py::error_already_set). Once the exit gate is closed it
/// says true without taking the GIL (a daemon thread: GilRelease).
inline std::function<bool()> python_signal_poll(bool& interrupted) {
  return [&interrupted, last = std::chrono::steady_clock::now()]() mutable {
    if (interrupted) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::milliseconds(50)) return false;
    last = now;
    std::optional<py::gil_scoped_acquire> gil;
    if (!take_gil_before_exit([&] { gil.emplace(); })) return true;  // exiting: the solve ends
    interrupted = PyErr_CheckSignals() != 0;
    return interrupted;
  };
}

/// Set (on this thread) when a signal handler raised inside a blocking input read (a FIFO with
/// no writer) through the module's input interrupt hook. Under the client's C ABI, which reports
/// any C++ exception as PERSEUS_ERR_INTERNAL and drops the Python error, the binding then raises
/// KeyboardInterrupt instead of a ClientError "KeyboardInterrupt: <EMPTY MESSAGE>" (session 32's
/// trial). A flag, not the exception: a Python object kept in thread-local storage would be
/// released after the interpreter finalized. Reset it before such a call.
bool& input_read_interrupted();

/// InputError -> perseus.InputError (a ValueError subclass).
void bind_errors(py::module_& m);
/// Profile, load_profile/parse_profile, schedule, optimize.
void bind_planner(py::module_& m);
/// Client over the C ABI (perseus/client.h) and its exceptions; HAVE_CLIENT flag.
void bind_client(py::module_& m);
/// emulate/render when the library has them; HAVE_EMULATE / HAVE_RENDER flags.
void bind_extras(py::module_& m);

/// Makes a class's own tp_new the only way to create its instances. Python lets a base's
/// __new__ build an instance of a subclass (`pybind11_object.__new__(perseus.Profile)`, or
/// `Client.__new__(Client)`, which is the base's) unless the subclass has a C tp_new of its own;
/// pybind11's classes have none, so that call gave an object whose C++ value was never built,
/// and its methods read garbage or crashed. After this, such a call raises TypeError ("... is not
/// safe, use Profile.__new__()").
/// - constructible: `cls(...)` still creates instances (the base's tp_new, then __init__);
/// - otherwise (a class that only pybind11 builds, returned from functions, which never calls
///   tp_new) every tp_new call raises the TypeError of the class's own `__new__` attribute.
/// Call it after the class's last def (a def of __new__ resets the slot). Every perseus class
/// derives from pybind11_object directly.
inline void own_new_only(py::handle cls, bool constructible) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  static newfunc base_new = type->tp_base->tp_new;  // pybind11_object's
  if (constructible) {
    type->tp_new = [](PyTypeObject* t, PyObject* args, PyObject* kwargs) { return base_new(t, args, kwargs); };
  } else {
    type->tp_new = [](PyTypeObject* t, PyObject* args, PyObject* kwargs) -> PyObject* {
      // The class's own __new__ raises the TypeError that says how to get an instance.
      PyObject* refusal = PyObject_GetAttrString(reinterpret_cast<PyObject*>(t), "__new__");
      if (refusal == nullptr) return nullptr;
      PyObject* out = PyObject_Call(refusal, args, kwargs);
      Py_DECREF(refusal);
      if (out == nullptr) return nullptr;
      Py_DECREF(out);
      PyErr_Format(PyExc_TypeError, "%s cannot be created directly", t->tp_name);
      return nullptr;
    };
  }
  PyType_Modified(type);
}

}  // namespace perseus::python

namespace pybind11::detail {
template <class T>
struct type_caster<perseus::python::Strict<T>> {
  PYBIND11_TYPE_CASTER(perseus::python::Strict<T>, const_name("int"));
  bool load(handle src, bool /*convert*/) {
    if (!src || perseus::python::is_bool_like(src.ptr()) || PyFloat_Check(src.ptr())) return false;
    object index = reinterpret_steal<object>(PyNumber_Index(src.ptr()));  // int, numpy integer
    if (!index) {
      PyErr_Clear();
      return false;
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred()) || v < std::numeric_limits<T>::min() ||
        v > std::numeric_limits<T>::max()) {
      PyErr_Clear();
      return false;
    }
    value.value = static_cast<T>(v);
    return true;
  }
  static handle cast(const perseus::python::Strict<T>& s, return_value_policy, handle) {
    return PyLong_FromLongLong(static_cast<long long>(s.value));
  }
};
template <>
struct type_caster<perseus::python::Real> {
  PYBIND11_TYPE_CASTER(perseus::python::Real, const_name("float"));
  bool load(handle src, bool /*convert*/) {
    if (!src || perseus::python::is_bool_like(src.ptr())) return false;
    if (!PyFloat_Check(src.ptr()) && !PyLong_Check(src.ptr()) && !PyNumber_Check(src.ptr())) return false;
    // An array is not a number, even of one element (numpy's float() of a 1-element array
    // took np.array([83.0]) as 83 W); a numpy scalar has ndim 0.
    if (!PyFloat_Check(src.ptr()) && !PyLong_Check(src.ptr()) && PyObject_HasAttrString(src.ptr(), "ndim")) {
      object ndim = reinterpret_steal<object>(PyObject_GetAttrString(src.ptr(), "ndim"));
      if (!ndim || !PyLong_Check(ndim.ptr()) || PyLong_AsLong(ndim.ptr()) != 0) {
        PyErr_Clear();
        return false;
      }
    }
    object f = reinterpret_steal<object>(PyNumber_Float(src.ptr()));  // float, int, numpy number
    if (!f) {
      PyErr_Clear();
      return false;
    }
    value.value = PyFloat_AsDouble(f.ptr());
    return true;
  }
  static handle cast(const perseus::python::Real& r, return_value_policy, handle) { return PyFloat_FromDouble(r.value); }
};
}  // namespace pybind11::detail
