// Text for the guard tree's slow paths: explain() reasons, debug_string() lines, error messages.
//
// Nothing here is called from RootGuardManager::check(). Every function returns a string and never
// throws a Python error out: a repr() that raises is replaced by a `<T object>` placeholder and the
// error is cleared. Arguments are borrowed.
//
// Threads: under the GIL.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <string>

namespace tjc {

namespace py = pybind11;

// `int`, `str`, `mymod.Foo`: the qualified name, without `builtins.`. Stable across runs.
std::string qualified_type_name(PyTypeObject* type);
// `int`, `Foo`: what a reason says it got (`got str`).
std::string short_type_name(PyObject* obj);
// repr(obj), cut to `max_len` characters (ending in `...`); `<T object>` when repr raises.
std::string safe_repr(PyObject* obj, size_t max_len = 80);
// A stable label for an object guarded by identity: `None`, `<module 'torch'>`,
// `<class 'mod.Foo'>`, `<function f>`, `<Linear object>` (no address: the text must be stable).
std::string identity_label(PyObject* obj);
// The label plus its address, for explain() where two objects of one type must be told apart.
std::string identity_label_with_address(PyObject* obj);
// Takes (and clears) the current Python error: `ValueError: boom`; "" when none is set.
std::string take_error_text();

}  // namespace tjc
