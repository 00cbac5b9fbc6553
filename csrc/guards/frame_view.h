// FrameView: what a root guard manager reads values from — a frame at entry, or a mapping in tests.
//
// Ownership: every pointer is borrowed and valid only for the duration of one check. The runtime
// fills a FrameView from an interpreter frame (csrc/cpython/frame.h) without changing the frame:
// no f_locals dict is built, COPY_FREE_VARS is never run. Free variables are read from the
// function's closure tuple; cell variables that are arguments still hold the raw argument at frame
// entry (MAKE_CELL has not run yet), so `localsplus[i]` is the value itself.
//
// Threads: used under the GIL only.
#pragma once

#include <Python.h>

namespace tjc {

struct FrameView {
  // Frame mode (localsplus != nullptr): indices are the code's localsplus indices.
  PyObject* const* localsplus = nullptr;  // borrowed; entries may be NULL (unbound)
  PyCodeObject* code = nullptr;           // borrowed; the code the indices refer to
  PyObject* closure = nullptr;            // borrowed tuple of cells (func_closure) or NULL
  PyObject* globals = nullptr;            // borrowed dict
  PyObject* builtins = nullptr;           // borrowed dict (or module dict)
  // Mapping mode (localsplus == nullptr): locals and closure variables are looked up by name
  // in `mapping`; globals in `globals` (may be NULL: then a global guard fails).
  PyObject* mapping = nullptr;            // borrowed dict or NULL

  bool is_frame() const { return localsplus != nullptr; }
};

}  // namespace tjc
