// Helpers for the guard tests: run Python source, build FrameViews by hand (frame mode over an
// array of PyObject*, as the runtime builds them from a real frame; mapping mode over dicts).
#pragma once

#include <Python.h>
#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <memory>
#include <string>
#include <vector>

#include "guards/frame_view.h"
#include "guards/root_guard_manager.h"

namespace tjc::testing {

namespace py = pybind11;

// Builders read as root.child(kLocal, s("x"))->child(kAttr, s("fc")).
using enum AccessorKind;

// Runs `source` in a fresh module-like namespace and returns that namespace.
inline py::dict run_python(const std::string& source) {
  py::dict scope;
  scope["__builtins__"] = py::module_::import("builtins");
  py::exec(source, scope);
  return scope;
}

inline py::dict builtins_dict() {
  return py::reinterpret_borrow<py::dict>(py::module_::import("builtins").attr("__dict__"));
}

// A frame-mode view of `fn` called with `args` (positional, in argument-slot order), as the runtime
// builds it at frame entry: argument slots hold the values, other slots NULL, free variables read
// from fn.__closure__.
struct FakeFrame {
  py::object fn;
  std::vector<py::object> args;
  std::vector<PyObject*> localsplus;
  py::object closure;
  py::object globals;
  py::dict builtins = builtins_dict();
  FrameView view;

  FakeFrame(py::object function, std::vector<py::object> arguments)
      : fn(std::move(function)), args(std::move(arguments)) {
    PyCodeObject* code = this->code();
    // Generous: enough slots for every local; the guards only read argument slots.
    localsplus.assign(static_cast<size_t>(code->co_nlocalsplus) + 1, nullptr);
    for (size_t i = 0; i < args.size(); ++i) localsplus[i] = args[i].ptr();
    closure = fn.attr("__closure__");
    globals = fn.attr("__globals__");
    view.localsplus = localsplus.data();
    view.code = code;
    view.closure = closure.is_none() ? nullptr : closure.ptr();
    view.globals = globals.ptr();
    view.builtins = builtins.ptr();
  }
  PyCodeObject* code() const {
    return reinterpret_cast<PyCodeObject*>(fn.attr("__code__").ptr());
  }
};

// A mapping-mode view over `locals` and `globals` (borrowed: keep the dicts alive).
inline FrameView mapping_view(const py::dict& locals, const py::dict& globals = py::dict(),
                              const py::dict& builtins = builtins_dict()) {
  FrameView view;
  view.mapping = locals.ptr();
  view.globals = globals.ptr();
  view.builtins = builtins.ptr();
  return view;
}

template <typename T>
T ok_or_die(absl::StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) throw std::runtime_error(std::string(result.status().message()));
  return std::move(*result);
}

inline void expect_ok(const absl::Status& status) { EXPECT_TRUE(status.ok()) << status; }

// Python-string handles for builder calls.
inline py::str s(const char* text) { return py::str(text); }

}  // namespace tjc::testing
