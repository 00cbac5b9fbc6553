// Frame access for the eval-frame hook: read a frame at entry without changing it, run a
// transformed code object in a shadow frame, and clear frames the hook takes ownership of.
//
// `Frame` is CPython's _PyInterpreterFrame, kept opaque here so no other folder depends on the
// frame layout (csrc/cpython/internal.h is the only include of internal/pycore_*.h).
//
// Ownership: the hook is handed a frame it does not own on 3.11 (the caller clears it) and does
// own on 3.12+ (the evaluator that receives a frame must clear and pop it). Every function here
// says which. All functions need the GIL.
#pragma once

#include <Python.h>

#include <string>

#include "absl/status/status.h"
#include "guards/frame_view.h"

struct _PyInterpreterFrame;

namespace tjc::cpython {

using Frame = _PyInterpreterFrame;
using EvalFrameFunc = PyObject* (*)(PyThreadState*, Frame*, int);

// --- Reading a frame (all results borrowed, valid while the frame lives) ---
PyCodeObject* frame_code(Frame* frame);
PyObject* frame_function(Frame* frame);  // the function object, or nullptr (not a function frame)
PyObject* frame_globals(Frame* frame);
PyObject* frame_builtins(Frame* frame);
PyObject* frame_closure(Frame* frame);   // tuple of cells, or nullptr
// True for frames the hook must pass straight to the evaluator: generator/coroutine bodies,
// frames owned by a generator, and frames that are not optimized function bodies (module code,
// class bodies, exec'd code).
bool frame_is_passthrough(Frame* frame);
// The values a root guard manager reads: localsplus by index, the closure tuple, the dicts.
FrameView frame_view(Frame* frame);
// A new dict of the frame's bound arguments and closure contents, built without changing the
// frame (no FastToLocals, no COPY_FREE_VARS). New reference, or nullptr with an error set.
PyObject* frame_locals_dict(Frame* frame);
// The PyFrameObject of the code that called this (not yet running) frame: new ref or None.
PyObject* caller_frame_object();

// --- Transformed code ---
// OK when `code` can run in a shadow frame of a frame running `original`: same argument names
// and kinds, same cell and free variables in the same order, an optimized function body that is
// not a generator or coroutine, and COPY_FREE_VARS first when it has free variables. Otherwise
// InvalidArgument naming the first difference.
absl::Status check_shadow_compatible(PyCodeObject* original, PyCodeObject* code);

// Runs `code` in a fresh interpreter frame for the function of `frame`, with the frame's
// arguments copied in (new references). The shadow frame is pushed on the thread's data stack,
// evaluated by `eval`, and cleared and popped on every path. Free variables are never copied
// from `frame`: the shadow's own COPY_FREE_VARS fills them from the closure, so they are counted
// once whatever state `frame` is in (see docs/frame_hook.md). Does NOT clear `frame`.
// Returns a new reference, or nullptr with an exception set.
PyObject* eval_shadow_frame(PyThreadState* tstate, Frame* frame, PyCodeObject* code, EvalFrameFunc eval);

// 3.12+: the evaluator that is handed a frame owns it. The hook calls this on every path that does
// not hand `frame` to the default evaluator (cache hit, callback error, bad return value).
// On 3.11 the caller clears the frame and this does nothing.
void release_unevaluated_frame(PyThreadState* tstate, Frame* frame);

// Test support: does to `frame` what CPython's FastToLocals does before a frame starts (copy the
// closure cells into the free-variable slots, mark COPY_FREE_VARS as run). Lets the tests prove a
// shadow frame counts closure cells once even after that happened.
void copy_free_vars_like_fast_to_locals(Frame* frame);

// --- The interpreter's frame-evaluation function ---
EvalFrameFunc get_eval_frame_func();
// Installs `func`; returns what was installed before (the default evaluator when none was).
void set_eval_frame_func(EvalFrameFunc func);
EvalFrameFunc default_eval_frame_func();  // _PyEval_EvalFrameDefault

}  // namespace tjc::cpython
