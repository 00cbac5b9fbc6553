// Per-thread hook state and the interpreter-wide installation of the eval-frame hook.
//
// Each thread chooses its own callback (`set_eval_frame`); the hook is installed in the
// interpreter only while at least one thread has a callback, and removed when the last one clears
// it, restoring whatever evaluator was there before (3.11 inlines Python calls only while no hook
// is installed, so code outside compiled calls keeps full speed).
//
// Ownership: `ThreadState::callback` and `owner_object` are strong references owned by the
// thread's state. A thread that exits with a callback still set leaks those references and keeps
// the hook installed (set_eval_frame callers restore the previous callback in a `finally`).
//
// Threads: every function needs the GIL; the thread-local state is only touched by its thread.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include "cpython/frame.h"

namespace tjc {

namespace py = pybind11;

class CacheOwner;

struct ThreadState {
  PyObject* callback = nullptr;  // strong; nullptr means "not intercepting"
  // Whose entries the callback makes and looks up (cache_owner.h): borrowed from owner_object
  // (strong), or the shared owner when owner_object is null. Never null while callback is set.
  PyObject* owner_object = nullptr;
  CacheOwner* owner = nullptr;
  int suspended = 0;             // > 0 while guards or the callback run: frames pass through
  cpython::Frame* miss_frame = nullptr;  // the frame whose miss the callback is handling
  // The innermost frame this thread handed to a previous evaluator that is another hook (not
  // CPython's own), while that evaluator holds it; nullptr when none. Such a hook may hand the
  // frame back to ours (TorchDynamo's, whose own previous evaluator became ours after we chained to
  // it): eval_frame_hook then runs it with CPython's evaluator instead of forwarding it round the
  // loop forever (docs/frame_hook.md, "Two hooks in one process").
  cpython::Frame* forwarded = nullptr;
};

ThreadState& thread_state();

// Sets this thread's callback (None disables) with the owner of the entries it makes
// (`owner_object` holds `owner`; None and nullptr: the shared owner); returns the previous
// callback (None when none). Raises TypeError for a non-callable other than None.
py::object set_eval_frame(py::handle callback, py::handle owner_object = py::handle(), CacheOwner* owner = nullptr);

// A thread's callback and owner, as exchanged by the fast path of compiled calls.
struct Interception {
  PyObject* callback = nullptr;      // nullptr: not intercepting
  PyObject* owner_object = nullptr;  // nullptr: the shared owner
  CacheOwner* owner = nullptr;       // borrowed from owner_object; nullptr: the shared owner
};

// Sets this thread's callback and owner to `next` (borrowed references; a null callback disables)
// and returns the previous ones as new references, installing or removing the hook as needed.
// Never raises; the caller guarantees `next.callback` is callable. The fast path of compiled
// calls: a call exchanges twice (in, then back with what the first exchange returned) and
// releases both results with release().
Interception exchange_interception(const Interception& next) noexcept;
void release(const Interception& interception) noexcept;

// The evaluator that was installed before the hook (the default one when none was).
cpython::EvalFrameFunc previous_eval_frame();

// Whether the hook is installed in the interpreter now (for tests and benchmarks).
bool hook_installed();

}  // namespace tjc
