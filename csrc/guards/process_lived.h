// Objects that live as long as the process, as Python vouches for them: the guard tree may hold
// them as dict keys (DICT_KEYS, item() accessors) and compares them by identity.
//
// Which objects qualify is decided in Python, in one place (torch_jit_cache/guard/process_lived.py: a
// typing special form, an ABC, a named module-level object of the standard library or an
// installed package, whose hash and == are identity's); C++ cannot tell them from user objects.
// Python registers each one here before it builds a guard that holds it. The registry holds a
// strong reference to each for good: they would outlive every tree anyway, and releasing them at
// exit would run after the interpreter is gone. Nothing user-owned is ever registered, so nothing
// a user creates is kept alive.
//
// Threads: under the GIL. Arguments borrowed.
#pragma once

#include <Python.h>

namespace tjc {

// Registers `obj` (borrowed; a new reference is kept for the process).
void vouch_process_lived(PyObject* obj);
// Whether `obj` (borrowed) was registered. Never runs Python code.
bool is_process_lived(PyObject* obj) noexcept;

}  // namespace tjc
