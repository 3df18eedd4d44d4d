// The `_perseus` extension module: pybind11 bindings of the Perseus C++ library.
// The public API is the `perseus` package (python/perseus/__init__.py), which re-exports it.
#include "bindings.hpp"

#include "perseus/error.hpp"

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

void bind_errors(py::module_& m) {
  static py::exception<perseus::InputError> error(m, "InputError", PyExc_ValueError);
  error.doc() =
      "Bad user input (malformed profile, impossible configuration, unknown schedule name).\n"
      "The message names the file, line and field where there is one and what was expected;\n"
      "the attributes `field` (the keyword argument, CSV column or JSON key; '' if none), `source`\n"
      "(file name; '' if none) and `line` (1-based; 0 if none) say the same as data.\n"
      "Subclass of ValueError.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const perseus::InputError& e) {
      const bool in_file = !e.source().empty();
      py::object exc = py::handle(error.ptr())(py::str(e.phrased(keyword_for_field)));
      exc.attr("field") = in_file ? e.field() : keyword_for_field(e.field());
      exc.attr("source") = e.source();
      exc.attr("line") = e.line();
      PyErr_SetObject(error.ptr(), exc.ptr());
    }
  });
}

}  // namespace perseus::python

PYBIND11_MODULE(_perseus, m) {
  m.doc() = "Perseus C++ core (planner, runtime client). Use the `perseus` package, not this module.";
  m.attr("__version__") = PERSEUS_VERSION;
  perseus::python::bind_errors(m);
  perseus::python::bind_planner(m);
  perseus::python::bind_client(m);
  perseus::python::bind_extras(m);
}
