// Text for the guard tree's slow paths (see guard_text.h).
#include "guards/guard_text.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "guards/value_rules.h"

namespace tjc {

namespace {

// str(getattr(obj, name)) or "" (error cleared).
std::string str_attr(PyObject* obj, const char* name) {
  PyObject* value = PyObject_GetAttrString(obj, name);  // new ref
  if (value == nullptr) {
    PyErr_Clear();
    return "";
  }
  std::string out;
  if (PyUnicode_Check(value)) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(value, &size);
    if (data != nullptr) out.assign(data, static_cast<size_t>(size));
  }
  Py_DECREF(value);
  if (PyErr_Occurred()) PyErr_Clear();
  return out;
}

}  // namespace

std::string qualified_type_name(PyTypeObject* type) {
  std::string qualname = str_attr(reinterpret_cast<PyObject*>(type), "__qualname__");
  if (qualname.empty()) return type->tp_name;
  std::string module = str_attr(reinterpret_cast<PyObject*>(type), "__module__");
  if (module.empty() || module == "builtins") return qualname;
  return absl::StrCat(module, ".", qualname);
}

std::string short_type_name(PyObject* obj) {
  const char* name = Py_TYPE(obj)->tp_name;
  // Static extension types spell `package.module.Name`; users think of `Name`.
  const char* dot = std::strrchr(name, '.');
  return dot == nullptr ? name : dot + 1;
}

std::string safe_repr(PyObject* obj, size_t max_len) {
  PyObject* text = PyObject_Repr(obj);  // new ref
  std::string out;
  if (text != nullptr) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(text, &size);
    if (data != nullptr) out.assign(data, static_cast<size_t>(size));
    Py_DECREF(text);
  }
  if (PyErr_Occurred() || text == nullptr) {
    PyErr_Clear();
    return absl::StrCat("<", short_type_name(obj), " object>");
  }
  if (out.size() > max_len) {
    out.resize(max_len > 3 ? max_len - 3 : 0);
    out += "...";
  }
  return out;
}

std::string identity_label(PyObject* obj) {
  if (is_immortal_singleton(obj)) return safe_repr(obj);
  if (PyModule_Check(obj)) {
    const char* name = PyModule_GetName(obj);
    if (name == nullptr) PyErr_Clear();
    return absl::StrCat("<module '", name ? name : "?", "'>");
  }
  if (PyType_Check(obj)) {
    return absl::StrCat("<class '", qualified_type_name(reinterpret_cast<PyTypeObject*>(obj)), "'>");
  }
  if (PyFunction_Check(obj)) return absl::StrCat("<function ", str_attr(obj, "__qualname__"), ">");
  if (PyCFunction_Check(obj)) {
    return absl::StrCat("<built-in function ", str_attr(obj, "__qualname__"), ">");
  }
  return absl::StrCat("<", short_type_name(obj), " object>");
}

std::string identity_label_with_address(PyObject* obj) {
  return absl::StrFormat("%s at %p", identity_label(obj), static_cast<const void*>(obj));
}

std::string take_error_text() {
  if (!PyErr_Occurred()) return "";
  // error_already_set fetches and clears the error portably across 3.11-3.13 (3.12 deprecated
  // PyErr_Fetch); this is the slow path, so its allocations do not matter.
  py::error_already_set error;
  std::string type_name = "Exception";
  std::string message;
  try {
    type_name = py::str(error.type().attr("__name__"));
    message = py::str(error.value());
  } catch (...) {
    PyErr_Clear();
  }
  return message.empty() ? type_name : absl::StrCat(type_name, ": ", message);
}

}  // namespace tjc
