// torch_jit_cache._C: the pybind11 module; the only place C++ errors become Python exceptions.
#include <pybind11/pybind11.h>

#include "bindings/bindings.h"
#include "common/status.h"

#ifndef TJC_VERSION
#error "TJC_VERSION must be defined by the build (pyproject.toml's version)"
#endif

namespace tjc::bindings {

void throw_if_error(const absl::Status& status) {
  if (status.ok()) return;
  set_python_error(status);
  throw py::error_already_set();
}

}  // namespace tjc::bindings

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_jit_cache C++ core: frame hook, code cache, guard trees";
  m.attr("__version__") = TJC_VERSION;
  m.attr("python_version") = pybind11::make_tuple(PY_MAJOR_VERSION, PY_MINOR_VERSION);
  tjc::bindings::init_guards(m);
  tjc::bindings::init_torch(m);
  tjc::bindings::init_runtime(m);
  tjc::bindings::init_compiled_function(m);
}
