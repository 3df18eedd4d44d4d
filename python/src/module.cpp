// The `_perseus` extension module: pybind11 bindings of the Perseus C++ library.
// The public API is the `perseus` package (python/perseus/__init__.py), which re-exports it.
#include "bindings.hpp"

#include <fmt/core.h>

#include "perseus/error.hpp"
#include "perseus/input_file.hpp"

#ifndef PERSEUS_VERSION
#define PERSEUS_VERSION "0.0.0"
#endif

namespace perseus::python {

std::string keyword_for_field(const std::string& field) {
  if (field == "num_ranks") return "stages";
  if (field == "p_block_w") return "p2p_power_w";
  if (field == "profile_path") return "profile";
  return field;
}

namespace {
/// "must not contain a NUL character (found at byte AT of SIZE): ..." (the value is never shown).
std::string nul_detail(std::size_t at, std::size_t size) {
  return fmt::format("must not contain a NUL character (found at byte {} of {}): it becomes a C string or a file "
                     "path, which would silently end there",
                     at, size);
}
}  // namespace

std::string nul_message(const char* name, std::size_t at, std::size_t size) {
  return std::string(name) + " " + nul_detail(at, size);
}

const std::string& c_string_arg(const std::string& value, const char* name) {
  if (const auto at = value.find('\0'); at != std::string::npos) throw py::value_error(nul_message(name, at, value.size()));
  return value;
}

std::string text_arg(const py::object& obj, const char* name) {
  if (!py::isinstance<py::str>(obj))
    throw py::type_error(fmt::format("{} must be a str, got {}", name, Py_TYPE(obj.ptr())->tp_name));
  Py_ssize_t size = 0;
  if (const char* utf8 = PyUnicode_AsUTF8AndSize(obj.ptr(), &size)) return std::string(utf8, static_cast<std::size_t>(size));
  PyErr_Clear();  // a lone surrogate: the only str that has no UTF-8 form
  const Py_ssize_t n = PyUnicode_GetLength(obj.ptr());
  for (Py_ssize_t i = 0; i < n; ++i) {
    const Py_UCS4 c = PyUnicode_ReadChar(obj.ptr(), i);
    if (c >= 0xD800 && c <= 0xDFFF)
      throw perseus::InputError(name, fmt::format("holds a lone surrogate U+{:04X} at character {}, which has no UTF-8 "
                                                  "form (bytes decoded with errors='surrogateescape'? decode the "
                                                  "file as UTF-8)",
                                                  static_cast<unsigned>(c), i));
  }
  throw perseus::InputError(name, "has no UTF-8 form");
}

std::string path_arg(const py::object& obj, const char* name) {
  std::string s = fs_path_bytes(obj, name);
  // perseus.InputError "NAME must not contain ...", .field = NAME, as the planner's other errors.
  if (const auto at = s.find('\0'); at != std::string::npos) throw perseus::InputError(name, nul_detail(at, s.size()));
  return s;
}

std::string fs_path_bytes(const py::object& obj, const char* name) {
  const py::module_ os = py::module_::import("os");
  if (!py::isinstance<py::str>(obj) && !py::isinstance<py::bytes>(obj) && !py::isinstance(obj, os.attr("PathLike"))) {
    // os.fspath's own TypeError named no argument (session 22's trial: optimize(None, ...)).
    throw py::type_error(fmt::format("{} must be str, bytes or os.PathLike (a path), got {}", name,
                                     py::str(py::type::of(obj).attr("__name__")).cast<std::string>()));
  }
  py::object p = os.attr("fspath")(obj);
  // A str is encoded as the file system does (os.fsencode: a name that is not UTF-8, listed by
  // os.listdir as a str with lone surrogates, gets its own bytes back; a UTF-8 cast refused it).
  if (!py::isinstance<py::bytes>(p)) p = os.attr("fsencode")(p);
  return p.cast<std::string>();
}

void bind_errors(py::module_& m) {
  static py::exception<perseus::InputError> error(m, "InputError", PyExc_ValueError);
  error.doc() =
      "Bad user input (malformed profile, impossible configuration, unknown schedule name).\n"
      "The message names the file, line and field where there is one and what was expected;\n"
      "the attributes `field` (the keyword argument, CSV column or JSON key; '' if none), `source`\n"
      "(file name; '' if none) and `line` (1-based; 0 if none) say the same as data.\n"
      "Subclass of ValueError.";
  // Defaults on the class, so an InputError raised from Python (perseus.InputError("...")) has
  // them too.
  error.attr("field") = "";
  error.attr("source") = "";
  error.attr("line") = 0;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const perseus::InputError& e) {
      const bool in_file = !e.source().empty();
      // A path need not be UTF-8: the message shows its bad bytes as \xNN, `source` keeps them
      // as os.fsdecode() would (py::str's strict decoding raised UnicodeDecodeError instead).
      const auto decoded = [](const std::string& text, const char* errors) {
        PyObject* o = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), errors);
        if (o == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::str>(o);
      };
      // The message is safe to print (a path in it may hold control characters); `source` is data.
      py::object exc =
          py::handle(error.ptr())(decoded(terminal_safe(e.phrased(keyword_for_field)), "backslashreplace"));
      exc.attr("field") = in_file ? e.field() : keyword_for_field(e.field());
      exc.attr("source") = decoded(e.source(), "surrogateescape");
      exc.attr("line") = e.line();
      PyErr_SetObject(error.ptr(), exc.ptr());
    }
  });
}

}  // namespace perseus::python

namespace {
/// set_input_interrupt_hook(): a signal interrupted a blocking read of an input (a FIFO with no
/// writer blocks in open()): its Python handler runs now, and KeyboardInterrupt (or what the
/// handler raises) ends the read instead of a retry. The GIL is released around those reads.
void raise_pending_python_signal() {
  std::optional<pybind11::gil_scoped_acquire> gil;
  if (!perseus::python::take_gil_before_exit([&] { gil.emplace(); }))
    throw perseus::InputError("the Python interpreter is exiting");
  if (PyErr_CheckSignals() != 0) {
    perseus::python::input_read_interrupted() = true;
    throw pybind11::error_already_set();
  }
}
}  // namespace

bool& perseus::python::input_read_interrupted() {
  thread_local bool interrupted = false;
  return interrupted;
}

PYBIND11_MODULE(_perseus, m) {
  m.doc() = "Perseus C++ core (planner, runtime client). Use the `perseus` package, not this module.";
  m.attr("__version__") = PERSEUS_VERSION;
  perseus::python::main_thread_ident() =
      pybind11::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  // Before finalizing begins, no thread of ours may still wait for the GIL (bindings.hpp).
  pybind11::module_::import("atexit").attr("register")(pybind11::cpp_function(&perseus::python::close_exit_gate));
  perseus::set_input_interrupt_hook(&raise_pending_python_signal);
  perseus::python::bind_errors(m);
  perseus::python::bind_planner(m);
  perseus::python::bind_client(m);
  perseus::python::bind_extras(m);
}
