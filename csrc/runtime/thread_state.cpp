// Per-thread callback, and installing the eval-frame hook only while some thread has one.
#include "runtime/thread_state.h"

#include "common/check.h"
#include "common/runtime_state.h"
#include "runtime/cache_owner.h"
#include "runtime/eval_frame.h"

namespace tjc {
namespace {

// The interpreter-wide part (installed hook, threads that need it) is in RuntimeState.
void install_hook() {
  RuntimeState& state = runtime_state();
  state.previous_eval_frame = cpython::get_eval_frame_func();
  cpython::set_eval_frame_func(&eval_frame_hook);
  state.hook_installed = true;
}

void uninstall_hook() {
  // Restore only if nobody installed another hook over ours meanwhile; if someone did, leave the
  // chain alone (ours keeps passing frames through to the previous evaluator).
  if (cpython::get_eval_frame_func() == &eval_frame_hook) {
    RuntimeState& state = runtime_state();
    cpython::set_eval_frame_func(state.previous_eval_frame);
    state.hook_installed = false;
  }
}

}  // namespace

ThreadState& thread_state() {
  static thread_local ThreadState state;
  return state;
}

Interception exchange_interception(const Interception& next) noexcept {
  ThreadState& ts = thread_state();
  // The references move to the caller.
  Interception previous{ts.callback, ts.owner_object, ts.callback != nullptr ? ts.owner : nullptr};
  ts.callback = Py_XNewRef(next.callback);
  ts.owner_object = next.callback != nullptr ? Py_XNewRef(next.owner_object) : nullptr;
  ts.owner = next.owner != nullptr ? next.owner : &CacheOwner::shared();
  RuntimeState& state = runtime_state();
  if (previous.callback == nullptr && next.callback != nullptr) {
    // Asked of the interpreter, not of our flag: another hook's owner may have put its own previous
    // evaluator back over ours meanwhile (TorchDynamo does when its last user leaves, even while
    // ours sits above its own), and a flag still saying "installed" left every later compiled call
    // running uncompiled, silently, for the rest of the process.
    if (state.active_threads++ == 0 && !hook_installed()) install_hook();
  } else if (previous.callback != nullptr && next.callback == nullptr) {
    TJC_CHECK(state.active_threads > 0);
    if (--state.active_threads == 0) uninstall_hook();
  }
  return previous;
}

void release(const Interception& interception) noexcept {
  Py_XDECREF(interception.callback);
  Py_XDECREF(interception.owner_object);
}

py::object set_eval_frame(py::handle callback, py::handle owner_object, CacheOwner* owner) {
  if (!callback.is_none() && !PyCallable_Check(callback.ptr())) {
    throw py::type_error("set_eval_frame: callback must be callable or None, got " +
                         std::string(Py_TYPE(callback.ptr())->tp_name));
  }
  Interception next;
  if (!callback.is_none()) {
    next.callback = callback.ptr();
    if (owner != nullptr) {
      next.owner_object = owner_object.ptr();
      next.owner = owner;
    }
  }
  Interception previous = exchange_interception(next);
  Py_XDECREF(previous.owner_object);
  if (previous.callback == nullptr) return py::none();
  return py::reinterpret_steal<py::object>(previous.callback);
}

cpython::EvalFrameFunc previous_eval_frame() {
  cpython::EvalFrameFunc previous = runtime_state().previous_eval_frame;
  return previous != nullptr ? previous : cpython::default_eval_frame_func();
}

bool hook_installed() { return cpython::get_eval_frame_func() == &eval_frame_hook; }

}  // namespace tjc
