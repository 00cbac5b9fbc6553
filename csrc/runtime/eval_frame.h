// The eval-frame hook (PEP 523): cache lookup in C++, cached code run in a shadow frame, the
// Python callback asked only on a miss.
//
// Contract with the callback: `callback(frame, entries)` is called with this thread's hook
// suspended (frames it runs are not intercepted) and returns a GuardedCode (cached, then run),
// SKIP (the code is never intercepted again) or RUN_ORIGINAL (this call runs uncompiled). An
// exception from the callback propagates to the caller of the intercepted function. Generators,
// coroutines, resumed frames and frames evaluated with a pending throw are never handed to it.
// When a guard-complete hook is set (guard_complete_hook.h), it is asked after the lookup of a code
// that has entries and may turn a hit into a miss.
//
// Chaining: frames the hook does not take go to the evaluator installed before it. When that is
// another hook whose own previous evaluator became ours (TorchDynamo's can), a frame it hands back
// is run by CPython's evaluator (ThreadState::forwarded; docs/frame_hook.md, "Two hooks in one
// process").
//
// Ownership: on 3.12+ the hook owns the frame it is handed and clears it on every path that does
// not pass it to the previous evaluator (cpython::release_unevaluated_frame).
//
// Threads: runs with the GIL held, on any thread; the per-thread state is in thread_state.h.
#pragma once

#include <Python.h>

#include "cpython/frame.h"

namespace tjc {

// CPython calls this; throws no C++ exception of its own, leaves a Python error set when it
// returns nullptr.
//
// Not noexcept, unlike the other functions CPython calls into: a daemon thread that wakes while
// the interpreter finalizes is ended by CPython (3.11-3.13) with pthread_exit, which unwinds the
// thread's C stack as a forced unwind (abi::__forced_unwind). Every Python frame the thread
// entered while the hook was installed has this function on that stack, and a forced unwind that
// reaches a noexcept frame calls std::terminate: the process would abort at exit ("terminate called
// without an active exception") whenever a daemon thread is started inside a compiled call
// (tests/python/test_compile_threads.py). Nothing between here and the evaluator catches it with
// `catch (...)`; the guard checks are still noexcept, so a daemon thread ended while one of its
// guards runs Python code would still abort, a far narrower window.
PyObject* eval_frame_hook(PyThreadState* tstate, cpython::Frame* frame, int throw_flag);

}  // namespace tjc
