// RuntimeState: every piece of mutable process-wide state of _C, in one struct.
//
// Each member says which file owns it (the only file that writes it) and what protects it. There
// is one instance, made by constant initialization (no constructor runs at load, so a static
// initializer elsewhere can never see it half-built) and never destroyed: backends and CPython's
// eval-frame function outlive every Python object that could reach them.
//
// What is not here, and why: a thread's callback and owner (runtime/thread_state.h) are
// thread-local by nature; the shared CacheOwner (runtime/cache_owner.cpp) is an object with its own
// lifetime, made on first use. Stateless tables (accessor and leaf kinds) are constants.
//
// reset() (`_C.reset` and `_C.reset_stats`, bindings/runtime_bindings.cpp; the Python half of the
// list is torch_jit_cache/runtime/process_state.py): each member says "reset:" what it does with it. Beyond
// this struct it clears every ExtraState's entries and per-owner decisions, keeping a code's
// disable() and set_cache_limit (the user's).
//
// Threads: every member is read and written under the GIL only; no atomics are needed on GIL
// builds. The counters are plain integers because the hot path bumps them on every call.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>

struct _PyInterpreterFrame;

namespace tjc {

class TorchBackend;
struct TorchPyApi;

// Entries per code (per guarded object) before it turns run-only, when neither the compile() call
// nor the code sets its own: the one default of config.cache_limit (config.py reads it from
// _C.DEFAULT_CACHE_LIMIT, TJC_CACHE_LIMIT overriding it).
inline constexpr int kDefaultCacheLimit = 8;

// Counters of the runtime (runtime.stats()); tjc.stats() adds the compile pipeline's
// (torch_jit_cache/runtime/counters.py).
struct RuntimeStats {
  uint64_t hits = 0;        // a cached entry's guards passed and its code ran
  uint64_t misses = 0;      // no entry passed (the callback was asked, or the code is run-only)
  uint64_t compiles = 0;    // the callback returned GuardedCode that was cached
  uint64_t evictions = 0;   // entries freed because a weakly held object died
  uint64_t fallbacks = 0;   // frames that ran their original code after a miss
  uint64_t skips = 0;       // frames of codes marked skip
  uint64_t cache_limit_hits = 0;  // (code, owner) pairs that reached the cache limit (warned once)
  uint64_t compile_waits = 0;     // misses that waited for another thread's compile of the same code
  uint64_t forced_misses = 0;     // hits the guard-complete hook turned into misses (another rank missed)
};

struct RuntimeState {
  // ---- Counters and settings (runtime/, bindings/runtime_bindings.cpp).
  RuntimeStats stats;  // reset: zeroed
  // The process-wide cache limit (config.cache_limit pushes it here); >= 1. reset: kept (a setting).
  int cache_limit = kDefaultCacheLimit;
  // tjc.set_stance("force_eager") (torch_jit_cache/frontend/stance.py): every CompiledFunction call runs its
  // function with interception off, as if it had never been compiled; caches are kept.
  // reset: kept (the user's stance).
  bool force_eager = false;
  // The guard-complete hook (runtime/guard_complete_hook.cpp): strong; nullptr when none is set.
  // reset: cleared.
  PyObject* guard_complete_hook = nullptr;

  // ---- The eval-frame hook (runtime/thread_state.cpp). reset: kept (they follow the calls
  // running now).
  int active_threads = 0;  // threads with a callback set; the hook is installed while > 0
  // The evaluator that was installed before the hook (cpython::EvalFrameFunc; null: none yet).
  PyObject* (*previous_eval_frame)(PyThreadState*, _PyInterpreterFrame*, int) = nullptr;
  bool hook_installed = false;
  // Test support (eval_frame.cpp): fill free-variable slots before each lookup, as FastToLocals.
  bool testing_copy_free_vars_on_entry = false;

  // ---- Caches (cpython/code_extra.cpp, runtime/cache_owner.cpp). reset: kept (a slot index; ids
  // are never reused, so a stale one matches nothing).
  Py_ssize_t code_extra_index = -1;  // co_extra slot of ExtraState; -1 until requested
  uint64_t next_owner_id = 1;        // CacheOwner ids are never reused; 0 is the shared owner

  // ---- Torch access (guards/torch_backend_registry.cpp, guards/torch_py_api.cpp). Every
  // pointer is set once and never freed (see torch_backend.h). reset: kept (what torch offers).
  TorchBackend* registered_backend = nullptr;  // _C_torch's libtorch backend, once registered
  TorchBackend* python_api_backend = nullptr;  // the fallback, made on first use
  bool libtorch_import_tried = false;
  std::string libtorch_fallback_reason;  // why kAuto does not give libtorch ("" when it does)
  TorchPyApi* torch_py_api = nullptr;    // torch's Python objects the fallback reads
};

extern constinit RuntimeState g_runtime_state;

inline RuntimeState& runtime_state() { return g_runtime_state; }

// The cache limit in force for an owner and a code: the first one set (> 0) of the compile()
// call's own (`owner_limit`), the code's own (`code_limit`, runtime.set_cache_limit) and the
// process-wide one. The only place the three are ranked.
inline int resolve_cache_limit(int owner_limit, int code_limit = 0) {
  if (owner_limit > 0) return owner_limit;
  return code_limit > 0 ? code_limit : runtime_state().cache_limit;
}

}  // namespace tjc
