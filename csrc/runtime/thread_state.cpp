// Per-thread callback, and installing the eval-frame hook only while some thread has one.
#include "runtime/thread_state.h"

#include "common/check.h"
#include "runtime/eval_frame.h"

namespace tjc {
namespace {

// Interpreter-wide; guarded by the GIL.
int g_active_threads = 0;
cpython::EvalFrameFunc g_previous = nullptr;
bool g_installed = false;

void install_hook() {
  g_previous = cpython::get_eval_frame_func();
  cpython::set_eval_frame_func(&eval_frame_hook);
  g_installed = true;
}

void uninstall_hook() {
  // Restore only if nobody installed another hook over ours meanwhile; if someone did, leave the
  // chain alone (ours keeps passing frames through to g_previous).
  if (cpython::get_eval_frame_func() == &eval_frame_hook) {
    cpython::set_eval_frame_func(g_previous);
    g_installed = false;
  }
}

}  // namespace

ThreadState& thread_state() {
  static thread_local ThreadState state;
  return state;
}

PyObject* exchange_callback(PyObject* callback) noexcept {
  ThreadState& ts = thread_state();
  PyObject* previous = ts.callback;  // the reference moves to the caller
  ts.callback = Py_XNewRef(callback);
  if (previous == nullptr && callback != nullptr) {
    if (g_active_threads++ == 0 && !g_installed) install_hook();
  } else if (previous != nullptr && callback == nullptr) {
    TJC_CHECK(g_active_threads > 0);
    if (--g_active_threads == 0) uninstall_hook();
  }
  return previous;
}

py::object set_eval_frame(py::handle callback) {
  if (!callback.is_none() && !PyCallable_Check(callback.ptr())) {
    throw py::type_error("set_eval_frame: callback must be callable or None, got " +
                         std::string(Py_TYPE(callback.ptr())->tp_name));
  }
  PyObject* previous = exchange_callback(callback.is_none() ? nullptr : callback.ptr());
  if (previous == nullptr) return py::none();
  return py::reinterpret_steal<py::object>(previous);
}

cpython::EvalFrameFunc previous_eval_frame() {
  return g_previous != nullptr ? g_previous : cpython::default_eval_frame_func();
}

bool g_testing_copy_free_vars_on_entry = false;

bool hook_installed() { return cpython::get_eval_frame_func() == &eval_frame_hook; }

}  // namespace tjc
