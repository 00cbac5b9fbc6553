// Reading frames at entry and driving the interpreter's eval-frame function (3.11 / 3.12 / 3.13).
#include "cpython/frame.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"
#include "cpython/internal.h"

namespace tjc::cpython {

PyCodeObject* frame_code(Frame* frame) { return iframe_code(frame); }

PyObject* frame_function(Frame* frame) { return reinterpret_cast<PyObject*>(iframe_function(frame)); }

PyObject* frame_globals(Frame* frame) { return frame->f_globals; }

PyObject* frame_builtins(Frame* frame) { return frame->f_builtins; }

PyObject* frame_closure(Frame* frame) {
  PyFunctionObject* func = iframe_function(frame);
  return func != nullptr ? func->func_closure : nullptr;
}

bool frame_is_passthrough(Frame* frame) {
  if (iframe_owned_by_generator(frame)) return true;
  PyCodeObject* code = iframe_code(frame);
  constexpr int kGeneratorLike = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE;
  if ((code->co_flags & kGeneratorLike) != 0) return true;
  if ((code->co_flags & CO_OPTIMIZED) == 0) return true;
  if (frame->f_locals != nullptr) return true;
  return iframe_function(frame) == nullptr;
}

FrameView frame_view(Frame* frame) {
  FrameView view;
  view.localsplus = frame->localsplus;
  view.code = iframe_code(frame);
  view.closure = frame_closure(frame);
  view.globals = frame->f_globals;
  view.builtins = frame->f_builtins;
  return view;
}

PyObject* frame_locals_dict(Frame* frame) {
  PyCodeObject* code = iframe_code(frame);
  PyObject* dict = PyDict_New();  // new ref
  if (dict == nullptr) return nullptr;
  PyObject* closure = frame_closure(frame);
  const int nfree = code->co_nfreevars;
  const int first_free = code->co_nlocalsplus - nfree;
  for (int i = 0; i < code->co_nlocalsplus; ++i) {
    PyObject* name = PyTuple_GET_ITEM(code->co_localsplusnames, i);  // borrowed
    PyObject* value = frame->localsplus[i];                          // borrowed
    if (i >= first_free) {
      // Read the closure, not the slot: the slot is filled only once COPY_FREE_VARS runs.
      PyObject* cell = closure != nullptr ? PyTuple_GET_ITEM(closure, i - first_free) : nullptr;
      value = cell != nullptr ? PyCell_GET(cell) : nullptr;
    }
    // At entry a cell variable that is an argument still holds the raw argument (MAKE_CELL has
    // not run), and other locals are unbound (NULL).
    if (value == nullptr) continue;
    if (PyDict_SetItem(dict, name, value) < 0) {
      Py_DECREF(dict);
      return nullptr;
    }
  }
  return dict;
}

PyObject* caller_frame_object() {
  // At hook time the frame being evaluated is not linked into the thread's frame chain yet, so
  // the current frame is the caller's.
  PyFrameObject* caller = PyEval_GetFrame();  // borrowed
  if (caller == nullptr) Py_RETURN_NONE;
  return Py_NewRef(reinterpret_cast<PyObject*>(caller));
}

absl::Status check_shadow_compatible(PyCodeObject* original, PyCodeObject* code) {
  auto name_of = [](PyCodeObject* c) { return std::string(PyUnicode_AsUTF8(c->co_qualname)); };
  const std::string what = absl::StrCat("transformed code '", name_of(code), "' for '", name_of(original), "'");
  constexpr int kGeneratorLike = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE;
  if ((code->co_flags & kGeneratorLike) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": generator and coroutine code cannot run in a shadow frame"));
  }
  if ((code->co_flags & CO_OPTIMIZED) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a function body (CO_OPTIMIZED is not set)"));
  }
  if (code->co_argcount != original->co_argcount || code->co_posonlyargcount != original->co_posonlyargcount ||
      code->co_kwonlyargcount != original->co_kwonlyargcount) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: argument counts differ (positional %d/%d, positional-only %d/%d, keyword-only %d/%d)", what,
        code->co_argcount, original->co_argcount, code->co_posonlyargcount, original->co_posonlyargcount,
        code->co_kwonlyargcount, original->co_kwonlyargcount));
  }
  constexpr int kStarFlags = CO_VARARGS | CO_VARKEYWORDS;
  if ((code->co_flags & kStarFlags) != (original->co_flags & kStarFlags)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": *args/**kwargs differ"));
  }
  const int nargs = original->co_argcount + original->co_kwonlyargcount +
                    ((original->co_flags & CO_VARARGS) ? 1 : 0) + ((original->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  if (code->co_nlocalsplus < nargs) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": fewer locals than arguments"));
  }
  for (int i = 0; i < nargs; ++i) {
    PyObject* a = PyTuple_GET_ITEM(original->co_localsplusnames, i);
    PyObject* b = PyTuple_GET_ITEM(code->co_localsplusnames, i);
    const int eq = PyUnicode_Compare(a, b);
    if (eq != 0) {
      if (PyErr_Occurred()) PyErr_Clear();
      return absl::InvalidArgumentError(absl::StrCat(what, ": argument ", i, " is named '", PyUnicode_AsUTF8(b),
                                                     "', the original's is '", PyUnicode_AsUTF8(a),
                                                     "' (the original's argument names must be a prefix)"));
    }
    if (original->co_localspluskinds != nullptr &&
        PyBytes_AS_STRING(original->co_localspluskinds)[i] != PyBytes_AS_STRING(code->co_localspluskinds)[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": argument '", PyUnicode_AsUTF8(a), "' is a cell in one code and not the other"));
    }
  }
  for (const char* attr : {"co_cellvars", "co_freevars"}) {
    PyObject* a = PyObject_GetAttrString(reinterpret_cast<PyObject*>(original), attr);  // new ref
    PyObject* b = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), attr);      // new ref
    const int same = (a != nullptr && b != nullptr) ? PyObject_RichCompareBool(a, b, Py_EQ) : -1;
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (same < 0) return absl::InternalError(absl::StrCat(what, ": cannot read ", attr));
    if (same == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", attr, " differ (cell and free variables must be the same, in the same order)"));
    }
  }
  if (code->co_nfreevars > 0) {
    PyObject* raw = PyCode_GetCode(code);  // new ref: the un-quickened bytes
    if (raw == nullptr) return absl::InternalError("cannot read co_code");
    const bool first_is_copy = PyBytes_GET_SIZE(raw) >= 2 &&
                               static_cast<unsigned char>(PyBytes_AS_STRING(raw)[0]) == COPY_FREE_VARS;
    Py_DECREF(raw);
    if (!first_is_copy) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": has free variables but does not start with COPY_FREE_VARS"));
    }
  }
  return absl::OkStatus();
}

EvalFrameFunc get_eval_frame_func() {
  return reinterpret_cast<EvalFrameFunc>(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()));
}

void set_eval_frame_func(EvalFrameFunc func) {
  // Installing the default evaluator must store NULL: 3.11 inlines Python-to-Python calls only
  // while interp->eval_frame is NULL, and its setter stores what it is given.
  _PyFrameEvalFunction f = reinterpret_cast<_PyFrameEvalFunction>(func);
  if (f == &_PyEval_EvalFrameDefault) f = nullptr;
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), f);
}

EvalFrameFunc default_eval_frame_func() { return reinterpret_cast<EvalFrameFunc>(&_PyEval_EvalFrameDefault); }

}  // namespace tjc::cpython
