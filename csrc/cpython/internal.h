// The only include of CPython's internal headers (internal/pycore_*.h) in the project, and the
// per-version aliases over them. Included by csrc/cpython/*.cpp only, never by a header.
//
// Checked against CPython 3.11.7, 3.12.1 and 3.13.0 (Include/internal/pycore_frame.h,
// Include/cpython/pystate.h, Include/cpython/code.h of each). Any other minor version stops the
// build: the frame layout changes between minor versions and must be read again first.
#pragma once

#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#if PY_VERSION_HEX >= 0x030D0000
#include <internal/pycore_ceval.h>  // _PyEval_FrameClearAndPop (exported on 3.13)
#endif

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "csrc/cpython/ knows the frame layout of CPython 3.11, 3.12 and 3.13 only; read the new pycore_frame.h first"
#endif

#if PY_VERSION_HEX >= 0x030D0000
#include <opcode_ids.h>
#else
#include <opcode.h>
#endif

namespace tjc::cpython {

using IFrame = _PyInterpreterFrame;

inline PyCodeObject* iframe_code(IFrame* f) {
#if PY_VERSION_HEX >= 0x030D0000
  return reinterpret_cast<PyCodeObject*>(f->f_executable);
#else
  return f->f_code;
#endif
}

// The function object running in the frame (a strong reference held by the frame), or nullptr.
inline PyFunctionObject* iframe_function(IFrame* f) {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* func = f->f_funcobj;
  return (func != nullptr && PyFunction_Check(func)) ? reinterpret_cast<PyFunctionObject*>(func) : nullptr;
#else
  return f->f_func;
#endif
}

inline bool iframe_owned_by_generator(IFrame* f) { return f->owner == FRAME_OWNED_BY_GENERATOR; }

inline PyThreadState* current_tstate() { return PyThreadState_Get(); }

}  // namespace tjc::cpython
