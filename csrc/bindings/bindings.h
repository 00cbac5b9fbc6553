// The parts of the torch_jit_cache._C module; each binding file adds its classes and functions.
// C++ errors become Python exceptions here and nowhere else (absl::Status -> status_to_python).
#pragma once

#include <pybind11/pybind11.h>

#include "absl/status/status.h"

namespace tjc {
class CacheOwner;
}  // namespace tjc

namespace tjc::bindings {

namespace py = pybind11;

void init_runtime(py::module_& m);  // runtime_bindings.cpp: hook, cache, GuardedCode, CacheEntry
void init_guards(py::module_& m);   // guard_bindings.cpp: GuardManager builder API
void init_torch(py::module_& m);    // torch_bindings.cpp: the _C_torch registration slot
void init_compiled_function(py::module_& m);  // compiled_function.cpp: compile()'s callable

// The CacheOwner a callback carries in its `cache_owner` attribute (FrameCompiler does), or null
// (then the shared owner is used); *owner_object receives the Python object that holds it.
CacheOwner* owner_of_callback(py::handle callback, py::object* owner_object);

// Throws the Python exception that matches `status` (InvalidArgument -> ValueError,
// FailedPrecondition -> RuntimeError, NotFound -> KeyError, OutOfRange -> IndexError, ...);
// when a Python error is already set, throws that one (error_already_set). No-op when OK.
void throw_if_error(const absl::Status& status);

}  // namespace tjc::bindings
