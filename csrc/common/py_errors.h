// Clearing the error of a guard that raised, without swallowing a Ctrl-C.
//
// A guard that raises counts as failed and leaves no exception set (the hot path must not leak
// errors). A KeyboardInterrupt raised inside a guard (a SIGINT that arrived while a guard's
// __eq__ or a property ran) must still reach the user: it is re-armed with PyErr_SetInterrupt, so
// the interpreter raises it (or runs the installed SIGINT handler) at its next check, right after
// the lookup. GIL held.
#pragma once

#include <Python.h>

namespace tjc {

inline void clear_guard_error() {
  const bool interrupted = PyErr_ExceptionMatches(PyExc_KeyboardInterrupt);
  PyErr_Clear();
  if (interrupted) PyErr_SetInterrupt();
}

}  // namespace tjc
