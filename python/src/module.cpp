// The `_perseus` extension module: pybind11 bindings of the Perseus C++ library.
// The public API is the `perseus` package (python/perseus/__init__.py), which re-exports it.
#include "bindings.hpp"

#include "perseus/error.hpp"

#ifndef PERSEUS_VERSION
#define PERSEUS_VERSION "0.0.0"
#endif

namespace perseus::python {

void bind_errors(py::module_& m) {
  py::register_exception<perseus::InputError>(m, "InputError", PyExc_ValueError).doc() =
      "Bad user input (malformed profile, impossible configuration, unknown schedule name).\n"
      "The message names the file, line and field where there is one and what was expected.\n"
      "Subclass of ValueError.";
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
