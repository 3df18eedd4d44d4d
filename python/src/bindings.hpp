// Internal: the parts of the `_perseus` extension module, one function per concept.
#pragma once

#include <pybind11/pybind11.h>

namespace perseus::python {

namespace py = pybind11;

/// InputError -> perseus.InputError (a ValueError subclass).
void bind_errors(py::module_& m);
/// Profile, load_profile/parse_profile, schedule, optimize.
void bind_planner(py::module_& m);
/// Client over the C ABI (perseus/client.h) and its exceptions; HAVE_CLIENT flag.
void bind_client(py::module_& m);
/// emulate/render when the library has them; HAVE_EMULATE / HAVE_RENDER flags.
void bind_extras(py::module_& m);

}  // namespace perseus::python
