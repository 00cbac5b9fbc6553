// The one mapping from absl::Status to Python exceptions, used by the bindings (which throw) and
// by the eval-frame hook (which must return NULL with an error set).
#pragma once

#include <Python.h>

#include "absl/status/status.h"

namespace tjc {

// The Python exception type for a status code: InvalidArgument -> ValueError, NotFound ->
// KeyError, OutOfRange -> IndexError, Unimplemented -> NotImplementedError, FailedPrecondition
// and others -> RuntimeError.
inline PyObject* python_exception_type(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return PyExc_ValueError;
    case absl::StatusCode::kNotFound:
      return PyExc_KeyError;
    case absl::StatusCode::kOutOfRange:
      return PyExc_IndexError;
    case absl::StatusCode::kUnimplemented:
      return PyExc_NotImplementedError;
    default:
      return PyExc_RuntimeError;
  }
}

// Sets the Python error for a non-OK status unless one is already set (a status can report a
// Python error that is still pending). GIL held.
inline void set_python_error(const absl::Status& status) {
  if (status.ok() || PyErr_Occurred()) return;
  const std::string message(status.message());
  PyErr_SetString(python_exception_type(status.code()), message.c_str());
}

}  // namespace tjc
