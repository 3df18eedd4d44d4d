// Internal: the parts of the `_perseus` extension module, one function per concept.
#pragma once

#include <string>
#include <string_view>

#include <pybind11/pybind11.h>

namespace perseus::python {

namespace py = pybind11;

/// The message for argument `name` holding a NUL at byte `at` of `size`: "NAME must not contain a
/// NUL character (found at byte AT of SIZE): ...". The value itself is never shown (it may be a
/// token).
std::string nul_message(const char* name, std::size_t at, std::size_t size);

/// Refuses `value` of argument `name` when it holds a NUL character and will cross into a C
/// string (the client's C ABI) or an OS path: C would silently end it there ("tok\0junk" would
/// be sent as "tok", "p.csv\0.bak" would open p.csv). Throws a Python ValueError naming `name`
/// (nul_message()); returns `value` otherwise.
const std::string& c_string_arg(const std::string& value, const char* name);

/// A path argument (str, bytes or os.PathLike, through os.fspath) as the library takes it.
/// Throws TypeError for anything else, and perseus.InputError (a ValueError) with field `name`
/// when it holds a NUL character (nul_message()), before anything is opened or written.
std::string path_arg(const py::object& obj, const char* name);

/// InputError -> perseus.InputError (a ValueError subclass).
void bind_errors(py::module_& m);
/// Profile, load_profile/parse_profile, schedule, optimize.
void bind_planner(py::module_& m);
/// Client over the C ABI (perseus/client.h) and its exceptions; HAVE_CLIENT flag.
void bind_client(py::module_& m);
/// emulate/render when the library has them; HAVE_EMULATE / HAVE_RENDER flags.
void bind_extras(py::module_& m);

}  // namespace perseus::python
