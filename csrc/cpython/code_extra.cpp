// The per-code extra slot: _PyCode_{Get,Set}Extra on 3.11, PyUnstable_Code_{Get,Set}Extra on 3.12+.
#include "cpython/code_extra.h"

#include "common/runtime_state.h"
#include "cpython/internal.h"

namespace tjc::cpython {

bool init_code_extra(ExtraFreeFunc free_func) {
  Py_ssize_t& index = runtime_state().code_extra_index;
  if (index >= 0) return true;
#if PY_VERSION_HEX >= 0x030C0000
  index = PyUnstable_Eval_RequestCodeExtraIndex(free_func);
#else
  index = _PyEval_RequestCodeExtraIndex(free_func);
#endif
  if (index < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "no co_extra slot is left for torch_jit_cache");
    return false;
  }
  return true;
}

void* get_code_extra(PyCodeObject* code) {
  const Py_ssize_t index = runtime_state().code_extra_index;
  if (index < 0) return nullptr;
  void* extra = nullptr;
#if PY_VERSION_HEX >= 0x030C0000
  if (PyUnstable_Code_GetExtra(reinterpret_cast<PyObject*>(code), index, &extra) < 0) {
#else
  if (_PyCode_GetExtra(reinterpret_cast<PyObject*>(code), index, &extra) < 0) {
#endif
    PyErr_Clear();
    return nullptr;
  }
  return extra;
}

bool set_code_extra(PyCodeObject* code, void* value) {
  const Py_ssize_t index = runtime_state().code_extra_index;
  if (index < 0) {
    PyErr_SetString(PyExc_RuntimeError, "torch_jit_cache: co_extra slot not initialized");
    return false;
  }
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_SetExtra(reinterpret_cast<PyObject*>(code), index, value) == 0;
#else
  return _PyCode_SetExtra(reinterpret_cast<PyObject*>(code), index, value) == 0;
#endif
}

}  // namespace tjc::cpython
