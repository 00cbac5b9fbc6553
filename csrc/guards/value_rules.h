// Which values a guard tree may hold strongly: immutable builtins only.
//
// A guard tree lives as long as its cache entry; anything it holds strongly lives that long too.
// Immutable builtins (int, float, complex, bool, str, bytes, None, and tuples of these) own no user object,
// so EQUALS_MATCH values, DICT_KEYS keys and item() keys may be held. Anything else must be guarded
// by identity (held weakly, weak_identity.h) or by type.
//
// Threads: under the GIL. Arguments borrowed.
#pragma once

#include <Python.h>

#include "guards/process_lived.h"

namespace tjc {

inline constexpr const char* kImmutableBuiltins =
    "int, float, complex, bool, str, bytes, None and tuples of them";

// The exact builtin scalar types whose values a guard may hold: == on two of them runs no user
// code and they own no other object. The one table of them (exported to Python as
// _C.IMMUTABLE_SCALAR_TYPES, which the tracer's key and set-item rules read).
inline PyTypeObject* const kImmutableScalarTypes[] = {&PyLong_Type,    &PyBool_Type,    &PyFloat_Type,
                                                      &PyComplex_Type, &PyUnicode_Type, &PyBytes_Type};

inline bool is_immutable_scalar(PyObject* obj) {
  for (PyTypeObject* type : kImmutableScalarTypes) {
    if (Py_TYPE(obj) == type) return true;
  }
  return false;
}

// Objects that never die: identity guards may hold them strongly, and print them by repr.
inline bool is_immortal_singleton(PyObject* obj) {
  return obj == Py_None || obj == Py_True || obj == Py_False || obj == Py_Ellipsis ||
         obj == Py_NotImplemented;
}

inline bool is_immutable_builtin(PyObject* obj, int depth = 0) {
  if (obj == Py_None || is_immutable_scalar(obj)) return true;
  if (!PyTuple_CheckExact(obj) || depth > 16) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); ++i) {
    if (!is_immutable_builtin(PyTuple_GET_ITEM(obj, i), depth + 1)) return false;
  }
  return true;
}

inline constexpr const char* kKeyConstants =
    "int, float, complex, bool, str, bytes, None, static types (int, list, dict, ...), objects vouched for as "
    "living as long as the process (typing.Union, collections.abc.Sequence, ...) and tuples of them";

// A static (non-heap) type: it lives for the process and its metaclass is `type`, so == on it is
// identity and runs no user code; a guard may hold it.
inline bool is_static_type(PyObject* obj) {
  return PyType_CheckExact(obj) &&
         !(reinterpret_cast<PyTypeObject*>(obj)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

// What a guard may hold as a dict key (item() accessors, DICT_KEYS): an immutable builtin, a
// static type (unittest's table of assert methods by type: {dict: ..., list: ...}), an object
// Python vouched for as living as long as the process (process_lived.h: huggingface_hub's table
// of validators keyed by typing.Union, collections.abc.Sequence, ...), and tuples of those. Hashing
// or comparing one runs no user code; == on a vouched object is identity.
inline bool is_key_constant(PyObject* obj, int depth = 0) {
  if (is_immutable_builtin(obj) || is_static_type(obj) || is_process_lived(obj)) return true;
  if (!PyTuple_CheckExact(obj) || depth > 16) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); ++i) {
    if (!is_key_constant(PyTuple_GET_ITEM(obj, i), depth + 1)) return false;
  }
  return true;
}

}  // namespace tjc
