// The eval-frame hook: hot path (lookup + shadow frame) and the out-of-line miss path.
#include "runtime/eval_frame.h"

#include <pybind11/pybind11.h>

#include <pythread.h>

#include <exception>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "common/check.h"
#include "common/runtime_state.h"
#include "common/status.h"
#include "cpython/frame.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_owner.h"
#include "runtime/extra_state.h"
#include "runtime/frame_handle.h"
#include "runtime/guard_complete_hook.h"
#include "runtime/guarded_code.h"
#include "runtime/thread_state.h"

namespace tjc {
namespace {

// Hands `frame` to `previous`, another hook, marking it as forwarded while that hook holds it.
[[gnu::noinline]] PyObject* forward_to_hook(cpython::EvalFrameFunc previous, PyThreadState* tstate,
                                             cpython::Frame* frame, int throw_flag) {
  ThreadState& ts = thread_state();
  cpython::Frame* outer = ts.forwarded;
  ts.forwarded = frame;
  PyObject* result = previous(tstate, frame, throw_flag);
  ts.forwarded = outer;
  return result;
}

// Every frame (and shadow frame) the hook does not evaluate itself goes on through here.
PyObject* eval_original(PyThreadState* tstate, cpython::Frame* frame, int throw_flag) {
  const cpython::EvalFrameFunc previous = previous_eval_frame();
  if (TJC_LIKELY(previous == cpython::default_eval_frame_func())) return previous(tstate, frame, throw_flag);
  return forward_to_hook(previous, tstate, frame, throw_flag);
}

// The evaluator a shadow frame is handed to: CPython's directly when nothing else is chained.
cpython::EvalFrameFunc shadow_evaluator() {
  const cpython::EvalFrameFunc previous = previous_eval_frame();
  return previous == cpython::default_eval_frame_func() ? previous : &eval_original;
}

// Every path that does not hand `frame` to the evaluator ends here or in run_entry.
PyObject* fail(PyThreadState* tstate, cpython::Frame* frame) {
  TJC_DCHECK(PyErr_Occurred());
  cpython::release_unevaluated_frame(tstate, frame);
  return nullptr;
}

PyObject* run_entry(PyThreadState* tstate, cpython::Frame* frame, std::shared_ptr<CacheEntry> entry) {
  PyObject* result;
  {
    // The shadow frame holds its own reference to the code, and the run keeps the entry alive,
    // so an eviction during the run (reset(), a guarded object dying) is safe.
    EntryRun run(entry);
    result = cpython::eval_shadow_frame(tstate, frame, entry->code(), shadow_evaluator());
  }
  cpython::release_unevaluated_frame(tstate, frame);
  return result;
}

uint64_t compiled_work() {
  const RuntimeStats& stats = runtime_state().stats;
  return stats.compiles + stats.hits;
}

// kSkipWatch: run the original code and tell its ExtraState whether the run was quiet (nothing
// compiled, no entry hit, on any thread: a conservative test). The code is pinned: the frame and
// its last reference may be gone when the run returns, and the ExtraState lives in the code.
[[gnu::noinline]] PyObject* eval_watched(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra,
                                          uint64_t owner) {
  PyCodeObject* code = cpython::frame_code(frame);
  Py_INCREF(code);
  const uint64_t before = compiled_work();
  PyObject* result = eval_original(tstate, frame, 0);
  extra->note_watched_run(owner, compiled_work() == before);
  Py_DECREF(code);
  return result;
}

// kSkipTree: run the frame with this thread's interception cleared, so nothing below it is
// intercepted and, when no other thread is inside a compiled call, the hook is removed (3.11
// inlines Python calls again). Callback and owner are restored when the frame returns, even on error.
[[gnu::noinline]] PyObject* eval_tree_uncompiled(PyThreadState* tstate, cpython::Frame* frame) {
  Interception outer = exchange_interception(Interception{});  // new refs, ours until restored
  PyObject* result = eval_original(tstate, frame, 0);
  Interception inner = exchange_interception(outer);           // empty unless the frame left one set
  release(inner);
  release(outer);
  return result;
}

// A frame whose code `owner` decided not to intercept (kSkip, kSkipWatch, kSkipTree).
PyObject* eval_skipped(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra, uint64_t owner,
                       FrameAction action) {
  ++runtime_state().stats.skips;
  switch (action) {
    case FrameAction::kSkipWatch:
      return eval_watched(tstate, frame, extra, owner);
    case FrameAction::kSkipTree:
      return eval_tree_uncompiled(tstate, frame);
    case FrameAction::kSkip:
    case FrameAction::kDefault:
    case FrameAction::kRunOnly:
      break;
  }
  return eval_original(tstate, frame, 0);
}

std::string describe_code(PyCodeObject* code) {
  return absl::StrFormat("'%s' (%s:%d)", PyUnicode_AsUTF8(code->co_qualname), PyUnicode_AsUTF8(code->co_filename),
                         code->co_firstlineno);
}

// The first failing guard of the owner's most recently hit entry, for the cache-limit warning.
std::string last_failure(ExtraState* extra, uint64_t owner, const FrameView& view) {
  auto entries = extra->entries(owner);
  if (entries.empty()) return "no entry";
  std::optional<std::string> reason = entries.front()->explain(view);
  if (PyErr_Occurred()) PyErr_Clear();
  return reason ? *reason : "the guards passed when asked again";
}

// Entries a code may hold for one owner across all its guarded objects; past it the code turns
// run-only for that owner (TorchDynamo's accumulated limit is 256 as well).
constexpr size_t kAccumulatedCacheLimit = 256;

// The cache limit counts, per owner, the entries guarding the same objects by identity as this
// frame (`L['self']`): N identical modules each get the full limit. When every entry counts (no
// identity to tell them apart) or the accumulated limit is reached, the code turns run-only for
// the owner; otherwise only this guarded object's calls that miss run uncompiled.
[[gnu::noinline]] PyObject* handle_cache_limit(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra,
                                                ThreadState& ts, size_t counted) {
  const uint64_t owner = ts.owner->id();
  if (counted >= extra->live_entries(owner)) extra->set_action(owner, FrameAction::kRunOnly);
  if (!extra->warn_once_at_limit(owner)) {
    ++runtime_state().stats.fallbacks;
    return eval_original(tstate, frame, 0);
  }
  ++runtime_state().stats.cache_limit_hits;
  ++ts.suspended;
  const std::string reason = last_failure(extra, owner, cpython::frame_view(frame));
  --ts.suspended;
  const std::string message = absl::StrFormat(
      "torch_jit_cache: %s reached the cache limit (%d entries). Its cached entries keep running; calls that "
      "miss them now run uncompiled. Last guard failure: %s",
      describe_code(cpython::frame_code(frame)), extra->cache_limit(*ts.owner), reason);
  if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) < 0) return fail(tstate, frame);
  ++runtime_state().stats.fallbacks;
  return eval_original(tstate, frame, 0);
}

// Marks the (code, owner) as being compiled by this thread while the callback runs and its result
// is cached; every path out wakes the threads that wait for it.
class CompileScope {
 public:
  CompileScope(ExtraState* extra, uint64_t owner)
      : code_(reinterpret_cast<PyObject*>(extra->code())), owner_(owner), ticket_(extra->begin_compile(owner)) {
    Py_INCREF(code_);  // the ExtraState must outlive end_compile(); the frame holds the code too
  }
  ~CompileScope() { end(); }
  // Called once the result is cached (or refused), before the frame runs: waiters must not wait
  // for the run itself. Idempotent.
  void end() {
    if (code_ == nullptr) return;
    if (ExtraState* extra = ExtraState::get(reinterpret_cast<PyCodeObject*>(code_))) {
      extra->end_compile(owner_, ticket_);
    } else {
      ticket_->finish();
    }
    Py_CLEAR(code_);
  }
  CompileScope(const CompileScope&) = delete;
  CompileScope& operator=(const CompileScope&) = delete;

 private:
  PyObject* code_;
  uint64_t owner_;
  std::shared_ptr<CompileTicket> ticket_;
};

PyObject* apply_callback_result(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra, uint64_t owner,
                                const py::object& result, CompileScope& compiling) {
  if (py::isinstance<GuardedCode>(result)) {
    const auto& guarded = result.cast<const GuardedCode&>();
    absl::Status status = validate_guarded_code(guarded, cpython::frame_code(frame));
    if (!status.ok()) {
      set_python_error(status);
      return fail(tstate, frame);
    }
    std::shared_ptr<CacheEntry> entry = extra->add(guarded.code, guarded.guards, owner);
    ++runtime_state().stats.compiles;
    compiling.end();
    return run_entry(tstate, frame, std::move(entry));
  }
  if (py::isinstance<CallbackAction>(result)) {
    switch (result.cast<CallbackAction>()) {
      case CallbackAction::kSkip:
        extra->set_action(owner, FrameAction::kSkip);
        ++runtime_state().stats.skips;
        break;
      case CallbackAction::kSkipTreeIfQuiet:
        extra->set_action(owner, FrameAction::kSkipWatch);
        compiling.end();
        return eval_skipped(tstate, frame, extra, owner, FrameAction::kSkipWatch);  // this first run counts
      case CallbackAction::kSkipTree:
        extra->set_action(owner, FrameAction::kSkipTree);
        compiling.end();
        return eval_skipped(tstate, frame, extra, owner, FrameAction::kSkipTree);
      case CallbackAction::kRunOriginal:
        ++runtime_state().stats.fallbacks;
        break;
    }
    compiling.end();
    return eval_original(tstate, frame, 0);
  }
  PyErr_Format(PyExc_TypeError,
               "torch_jit_cache: the eval-frame callback returned %.200s for %s; expected GuardedCode, SKIP or "
               "RUN_ORIGINAL",
               Py_TYPE(result.ptr())->tp_name, describe_code(cpython::frame_code(frame)).c_str());
  return fail(tstate, frame);
}

[[gnu::noinline]] PyObject* handle_miss(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra,
                                         ThreadState& ts) {
  const uint64_t owner = ts.owner->id();
  CompileScope compiling(extra, owner);
  py::object callback = py::reinterpret_borrow<py::object>(ts.callback);
  ++ts.suspended;
  cpython::Frame* outer_miss = ts.miss_frame;
  ts.miss_frame = frame;
  py::object result;
  bool raised = false;
  std::shared_ptr<FrameHandle> handle;
  try {
    handle = std::make_shared<FrameHandle>(frame, py::reinterpret_steal<py::object>(cpython::caller_frame_object()));
    py::list entries;
    for (auto& entry : extra->entries(owner)) entries.append(py::cast(entry));
    result = callback(py::cast(handle), entries);
  } catch (py::error_already_set& e) {
    e.restore();
    raised = true;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    raised = true;
  }
  if (handle) handle->invalidate();
  ts.miss_frame = outer_miss;
  --ts.suspended;
  if (raised) return fail(tstate, frame);
  try {
    return apply_callback_result(tstate, frame, extra, owner, result, compiling);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return fail(tstate, frame);
}

// Another thread is compiling this code for the same owner: wait for it with the GIL released (it
// needs the GIL to finish), then look up again.
[[gnu::noinline]] void wait_for_compile(std::shared_ptr<CompileTicket> ticket) {
  ++runtime_state().stats.compile_waits;
  Py_BEGIN_ALLOW_THREADS
  ticket->wait();
  Py_END_ALLOW_THREADS
}

// Asks the guard-complete hook about a lookup of a code that has entries; a hit it refuses becomes
// a miss (`entry` reset). False: the hook raised (a Python error is set).
[[gnu::noinline]] bool agree_on_lookup(ThreadState& ts, std::shared_ptr<CacheEntry>& entry) {
  switch (ask_guard_complete_hook(entry != nullptr, ts)) {
    case HookAnswer::kError:
      return false;
    case HookAnswer::kMiss:
      if (entry) {
        entry.reset();
        ++runtime_state().stats.forced_misses;
      }
      return true;
    case HookAnswer::kRun:
      return true;
  }
  return true;
}

[[gnu::noinline]] PyObject* eval_intercepted(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra,
                                              ThreadState& ts) {
  if (extra == nullptr) {
    extra = ExtraState::get_or_create(cpython::frame_code(frame));
    if (extra == nullptr) return fail(tstate, frame);
  }
  if (TJC_UNLIKELY(runtime_state().testing_copy_free_vars_on_entry)) cpython::copy_free_vars_like_fast_to_locals(frame);
  const uint64_t owner = ts.owner->id();
  std::shared_ptr<CacheEntry> entry;
  for (;;) {
    ++ts.suspended;  // guards can run Python (__eq__): those frames pass through
    entry = extra->lookup(cpython::frame_view(frame), owner);
    --ts.suspended;
    if (entry) break;
    std::shared_ptr<CompileTicket> ticket = extra->compiling(owner);
    // The same thread missing a code it is compiling (recursion) compiles it again rather than
    // wait for itself.
    if (!ticket || ticket->thread() == PyThread_get_thread_ident()) break;
    wait_for_compile(std::move(ticket));
  }
  if (guard_complete_hook_set() && (entry || extra->live_entries(owner) > 0)) {
    if (!agree_on_lookup(ts, entry)) return fail(tstate, frame);
  }
  if (entry) {
    ++runtime_state().stats.hits;
    ++entry->hits_ref();
    return run_entry(tstate, frame, std::move(entry));
  }
  ++runtime_state().stats.misses;
  switch (extra->action(owner)) {
    case FrameAction::kDefault:
      break;
    case FrameAction::kSkip:  // another thread's compile said SKIP (or SKIP_TREE_IF_QUIET) meanwhile
    case FrameAction::kSkipWatch:
    case FrameAction::kSkipTree:
      return eval_skipped(tstate, frame, extra, owner, extra->action(owner));
    case FrameAction::kRunOnly:
      ++runtime_state().stats.fallbacks;
      return eval_original(tstate, frame, 0);
  }
  const size_t limit = static_cast<size_t>(extra->cache_limit(*ts.owner));
  if (extra->live_entries(owner) >= limit) {
    const size_t counted = extra->live_entries(owner) >= kAccumulatedCacheLimit
                               ? extra->live_entries(owner)
                               : extra->entries_counted_for_limit(cpython::frame_view(frame), owner);
    if (counted >= limit) return handle_cache_limit(tstate, frame, extra, ts, counted);
  }
  return handle_miss(tstate, frame, extra, ts);
}

}  // namespace

PyObject* eval_frame_hook(PyThreadState* tstate, cpython::Frame* frame, int throw_flag) {
  ThreadState& ts = thread_state();
  // A frame we forwarded to another hook, handed back by it: the chain of hooks loops through
  // ours, and only CPython's evaluator ends it. Every hook on the loop has seen the frame.
  if (TJC_UNLIKELY(frame == ts.forwarded)) return cpython::default_eval_frame_func()(tstate, frame, throw_flag);
  if (ts.callback == nullptr || ts.suspended > 0 || throw_flag != 0 || cpython::frame_is_passthrough(frame)) {
    return eval_original(tstate, frame, throw_flag);
  }
  ExtraState* extra = ExtraState::get(cpython::frame_code(frame));
  if (extra != nullptr) {
    const FrameAction action = extra->action(ts.owner->id());
    if (action != FrameAction::kDefault && action != FrameAction::kRunOnly) {
      return eval_skipped(tstate, frame, extra, ts.owner->id(), action);
    }
  }
  return eval_intercepted(tstate, frame, extra, ts);
}

absl::Status validate_guarded_code(const GuardedCode& guarded, PyCodeObject* original) {
  if (!PyCode_Check(guarded.code.ptr())) return absl::InvalidArgumentError("GuardedCode.code is not a code object");
  if (!guarded.guards) return absl::InvalidArgumentError("GuardedCode.guards is missing");
  absl::Status status = cpython::check_shadow_compatible(original, reinterpret_cast<PyCodeObject*>(guarded.code.ptr()));
  if (!status.ok()) return status;
  return guarded.guards->bind(original);
}

}  // namespace tjc
