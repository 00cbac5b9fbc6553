// The eval-frame hook: hot path (lookup + shadow frame) and the out-of-line miss path.
#include "runtime/eval_frame.h"

#include <pybind11/pybind11.h>

#include <exception>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "common/check.h"
#include "common/status.h"
#include "cpython/frame.h"
#include "runtime/cache_entry.h"
#include "runtime/extra_state.h"
#include "runtime/frame_handle.h"
#include "runtime/guarded_code.h"
#include "runtime/stats.h"
#include "runtime/thread_state.h"

namespace tjc {
namespace {

PyObject* eval_original(PyThreadState* tstate, cpython::Frame* frame, int throw_flag) {
  return previous_eval_frame()(tstate, frame, throw_flag);
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
    result = cpython::eval_shadow_frame(tstate, frame, entry->code(), previous_eval_frame());
  }
  cpython::release_unevaluated_frame(tstate, frame);
  return result;
}

uint64_t compiled_work() {
  const RuntimeStats& stats = runtime_stats();
  return stats.compiles + stats.hits;
}

// kSkipWatch: run the original code and tell its ExtraState whether the run was quiet (nothing
// compiled, no entry hit, on any thread: a conservative test). The code is pinned: the frame and
// its last reference may be gone when the run returns, and the ExtraState lives in the code.
[[gnu::noinline]] PyObject* eval_watched(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra) {
  PyCodeObject* code = cpython::frame_code(frame);
  Py_INCREF(code);
  const uint64_t before = compiled_work();
  PyObject* result = eval_original(tstate, frame, 0);
  extra->note_watched_run(compiled_work() == before);
  Py_DECREF(code);
  return result;
}

// kSkipTree: run the frame with this thread's callback cleared, so nothing below it is intercepted
// and, when no other thread is inside a compiled call, the hook is removed (3.11 inlines Python
// calls again). The callback is restored when the frame returns, even on error.
[[gnu::noinline]] PyObject* eval_tree_uncompiled(PyThreadState* tstate, cpython::Frame* frame) {
  PyObject* callback = exchange_callback(nullptr);  // new ref, ours until restored
  PyObject* result = eval_original(tstate, frame, 0);
  PyObject* inner = exchange_callback(callback);    // nullptr unless the frame left one set
  Py_XDECREF(inner);
  Py_XDECREF(callback);
  return result;
}

std::string describe_code(PyCodeObject* code) {
  return absl::StrFormat("'%s' (%s:%d)", PyUnicode_AsUTF8(code->co_qualname), PyUnicode_AsUTF8(code->co_filename),
                         code->co_firstlineno);
}

// The first failing guard of the most recently hit entry, for the cache-limit warning.
std::string last_failure(ExtraState* extra, const FrameView& view) {
  auto entries = extra->entries();
  if (entries.empty()) return "no entry";
  std::optional<std::string> reason = entries.front()->explain(view);
  if (PyErr_Occurred()) PyErr_Clear();
  return reason ? *reason : "the guards passed when asked again";
}

[[gnu::noinline]] PyObject* handle_cache_limit(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra,
                                                ThreadState& ts) {
  extra->set_action(FrameAction::kRunOnly);
  ++runtime_stats().cache_limit_hits;
  ++ts.suspended;
  const std::string reason = last_failure(extra, cpython::frame_view(frame));
  --ts.suspended;
  const std::string message = absl::StrFormat(
      "torch_jit_cache: %s reached the cache limit (%d entries). Its cached entries keep running; calls that "
      "miss them now run uncompiled. Last guard failure: %s",
      describe_code(cpython::frame_code(frame)), extra->cache_limit(), reason);
  if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) < 0) return fail(tstate, frame);
  ++runtime_stats().fallbacks;
  return eval_original(tstate, frame, 0);
}

PyObject* apply_callback_result(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra,
                                const py::object& result) {
  if (py::isinstance<GuardedCode>(result)) {
    const auto& guarded = result.cast<const GuardedCode&>();
    absl::Status status = validate_guarded_code(guarded, cpython::frame_code(frame));
    if (!status.ok()) {
      set_python_error(status);
      return fail(tstate, frame);
    }
    std::shared_ptr<CacheEntry> entry = extra->add(guarded.code, guarded.guards);
    ++runtime_stats().compiles;
    return run_entry(tstate, frame, std::move(entry));
  }
  if (py::isinstance<CallbackAction>(result)) {
    switch (result.cast<CallbackAction>()) {
      case CallbackAction::kSkip:
        extra->set_action(FrameAction::kSkip);
        ++runtime_stats().skips;
        break;
      case CallbackAction::kSkipTreeIfQuiet:
        extra->set_action(FrameAction::kSkipWatch);
        ++runtime_stats().skips;
        return eval_watched(tstate, frame, extra);  // this first run counts
      case CallbackAction::kRunOriginal:
        ++runtime_stats().fallbacks;
        break;
    }
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
    for (auto& entry : extra->entries()) entries.append(py::cast(entry));
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
    return apply_callback_result(tstate, frame, extra, result);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return fail(tstate, frame);
}

[[gnu::noinline]] PyObject* eval_intercepted(PyThreadState* tstate, cpython::Frame* frame, ExtraState* extra,
                                              ThreadState& ts) {
  if (extra == nullptr) {
    extra = ExtraState::get_or_create(cpython::frame_code(frame));
    if (extra == nullptr) return fail(tstate, frame);
  }
  if (TJC_UNLIKELY(g_testing_copy_free_vars_on_entry)) cpython::copy_free_vars_like_fast_to_locals(frame);
  ++ts.suspended;  // guards can run Python (__eq__): those frames pass through
  std::shared_ptr<CacheEntry> entry = extra->lookup(cpython::frame_view(frame));
  --ts.suspended;
  if (entry) {
    ++runtime_stats().hits;
    ++entry->hits_ref();
    return run_entry(tstate, frame, std::move(entry));
  }
  ++runtime_stats().misses;
  if (extra->action() == FrameAction::kRunOnly) {
    ++runtime_stats().fallbacks;
    return eval_original(tstate, frame, 0);
  }
  if (extra->live_entries() >= static_cast<size_t>(extra->cache_limit())) {
    return handle_cache_limit(tstate, frame, extra, ts);
  }
  return handle_miss(tstate, frame, extra, ts);
}

}  // namespace

PyObject* eval_frame_hook(PyThreadState* tstate, cpython::Frame* frame, int throw_flag) noexcept {
  ThreadState& ts = thread_state();
  if (ts.callback == nullptr || ts.suspended > 0 || throw_flag != 0 || cpython::frame_is_passthrough(frame)) {
    return eval_original(tstate, frame, throw_flag);
  }
  ExtraState* extra = ExtraState::get(cpython::frame_code(frame));
  if (extra != nullptr) {
    switch (extra->action()) {
      case FrameAction::kSkip:
        ++runtime_stats().skips;
        return eval_original(tstate, frame, 0);
      case FrameAction::kSkipWatch:
        ++runtime_stats().skips;
        return eval_watched(tstate, frame, extra);
      case FrameAction::kSkipTree:
        ++runtime_stats().skips;
        return eval_tree_uncompiled(tstate, frame);
      case FrameAction::kDefault:
      case FrameAction::kRunOnly:
        break;
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
