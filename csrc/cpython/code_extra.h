// The per-code extra slot (co_extra) that holds each code object's cache state.
//
// The slot index is requested once per process with a free function; CPython calls that function
// when the code object dies or when the slot is overwritten, so the state dies with its code and
// never outlives it (no map keyed by raw code pointers, whose addresses are reused).
//
// Threads: GIL held for every call.
#pragma once

#include <Python.h>

namespace tjc::cpython {

using ExtraFreeFunc = void (*)(void*);

// Requests the slot once (idempotent); `free_func` is called with the stored pointer.
// Returns false with a Python error set when no slot is left.
bool init_code_extra(ExtraFreeFunc free_func);

// The stored pointer, or nullptr when none is set. Never raises.
void* get_code_extra(PyCodeObject* code);

// Stores `value` (nullptr clears); the previous value, if any, is freed by the free function.
// Returns false with a Python error set on failure.
bool set_code_extra(PyCodeObject* code, void* value);

}  // namespace tjc::cpython
