// The guard-complete hook: a process-wide Python callable asked after the cache lookup of a code
// that has entries, so that the ranks of an SPMD program agree on hits (guard collectives,
// torch_jit_cache/runtime/guard_collectives.py). torch.compile's `set_guard_complete_hook` is the model.
//
// Contract: `hook(hit: bool) -> bool`, called once per intercepted frame entry, after the lookup,
// when the frame's code has at least one live entry of the frame's owner: never for a code seen the
// first time, never for skipped codes. On a hit it decides: True runs the entry, False takes the
// miss path (the callback compiles again, or the original code runs where the code is run-only at
// its cache limit). On a miss it is asked too (the other ranks wait for this one's vote) and its
// answer is ignored: there is no entry to run. It runs with this thread's interception suspended.
// An exception from it, or an answer other than True/False, propagates to the caller of the
// intercepted function.
//
// Ownership: the runtime holds the hook strongly (RuntimeState::guard_complete_hook) until
// set_guard_complete_hook(None), reset(), or interpreter exit (an atexit callback registered by
// the bindings) releases it. A call holds its own reference, so a hook that unsets itself is safe.
//
// Threads: GIL held; one hook for every thread (what it synchronizes is processes).
#pragma once

#include <pybind11/pybind11.h>

#include "common/check.h"
#include "common/runtime_state.h"

namespace tjc {

namespace py = pybind11;

struct ThreadState;

// Sets the hook (None clears it) and returns the previous one (None when none). Raises TypeError
// for a non-callable other than None.
py::object set_guard_complete_hook(py::handle hook);

// Releases the hook, if any (reset(), interpreter exit). Never raises; the hook's own __del__ may run.
void clear_guard_complete_hook() noexcept;

// The hot path's test: one load of a pointer.
inline bool guard_complete_hook_set() { return TJC_UNLIKELY(runtime_state().guard_complete_hook != nullptr); }

enum class HookAnswer { kRun, kMiss, kError };

// Asks the hook whether the lookup that found (`hit`) or did not find an entry counts as a hit.
// kError leaves a Python error set. Needs guard_complete_hook_set().
HookAnswer ask_guard_complete_hook(bool hit, ThreadState& ts) noexcept;

}  // namespace tjc
