// The guard-complete hook: setting, releasing and asking it.
#include "runtime/guard_complete_hook.h"

#include <string>

#include "runtime/thread_state.h"

namespace tjc {

py::object set_guard_complete_hook(py::handle hook) {
  if (!hook.is_none() && !PyCallable_Check(hook.ptr())) {
    throw py::type_error("set_guard_complete_hook: hook must be callable or None, got " +
                         std::string(Py_TYPE(hook.ptr())->tp_name));
  }
  PyObject*& held = runtime_state().guard_complete_hook;
  PyObject* previous = held;  // the reference moves to the caller
  held = hook.is_none() ? nullptr : Py_NewRef(hook.ptr());
  if (previous == nullptr) return py::none();
  return py::reinterpret_steal<py::object>(previous);
}

void clear_guard_complete_hook() noexcept { Py_CLEAR(runtime_state().guard_complete_hook); }

HookAnswer ask_guard_complete_hook(bool hit, ThreadState& ts) noexcept {
  PyObject* hook = Py_NewRef(runtime_state().guard_complete_hook);  // it may unset itself
  ++ts.suspended;  // the hook's frames (torch.distributed's) pass through
  PyObject* answer = PyObject_CallOneArg(hook, hit ? Py_True : Py_False);  // new ref
  --ts.suspended;
  Py_DECREF(hook);
  if (answer == nullptr) return HookAnswer::kError;
  if (!PyBool_Check(answer)) {
    PyErr_Format(PyExc_TypeError, "torch_jit_cache: the guard-complete hook must return True or False, got %.200s",
                 Py_TYPE(answer)->tp_name);
    Py_DECREF(answer);
    return HookAnswer::kError;
  }
  const bool run = answer == Py_True;
  Py_DECREF(answer);
  return run ? HookAnswer::kRun : HookAnswer::kMiss;
}

}  // namespace tjc
