// Accessor: how a guard manager's value is reached (see accessors.h).
#include "guards/accessors.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/py_errors.h"
#include "guards/guard_errors.h"
#include "guards/guard_text.h"
#include "guards/value_rules.h"

namespace tjc {

PyObject* dict_get_new_ref(PyObject* dict, PyObject* key) noexcept {
  PyObject* value = PyDict_GetItemWithError(dict, key);  // borrowed
  Py_XINCREF(value);
  return value;  // new ref; NULL: missing (no error) or raised (error set)
}

absl::StatusOr<Accessor> Accessor::make(AccessorKind kind, py::handle operand,
                                        const std::string& parent_source) {
  switch (accessor_spec(kind).operand) {
    case Operand::kName:
      return named(kind, operand);
    case Operand::kKey:
      return item(kind, operand, parent_source);
    case Operand::kNone:
      break;
  }
  TJC_DCHECK(kind != AccessorKind::kRoot);
  return Accessor(kind, py::object());
}

absl::StatusOr<Accessor> Accessor::named(AccessorKind kind, py::handle name) {
  TJC_DCHECK(accessor_spec(kind).operand == Operand::kName);
  if (!name) return type_error_status(absl::StrCat(accessor_spec(kind).builder, "() needs a name"));
  if (!PyUnicode_Check(name.ptr())) {
    return type_error_status(absl::StrCat("a name must be a str, got ", short_type_name(name.ptr())));
  }
  // Interned, so dict lookups and getattr hit the pointer-equality fast path.
  PyObject* interned = name.inc_ref().ptr();
  PyUnicode_InternInPlace(&interned);
  return Accessor(kind, py::reinterpret_steal<py::object>(interned));
}

namespace {

// (args, kwargs): a tuple, and a tuple of (str, value) pairs.
bool is_call_arguments(PyObject* key) {
  if (!PyTuple_CheckExact(key) || PyTuple_GET_SIZE(key) != 2) return false;
  PyObject* args = PyTuple_GET_ITEM(key, 0);
  PyObject* kwargs = PyTuple_GET_ITEM(key, 1);
  if (!PyTuple_CheckExact(args) || !PyTuple_CheckExact(kwargs)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwargs); ++i) {
    PyObject* pair = PyTuple_GET_ITEM(kwargs, i);
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
      return false;
    }
  }
  return true;
}

// parent(*args, **dict(kwargs)) for a key is_call_arguments accepted; new reference or NULL.
PyObject* call_with_key(PyObject* parent, PyObject* key) noexcept {
  PyObject* args = PyTuple_GET_ITEM(key, 0);
  PyObject* pairs = PyTuple_GET_ITEM(key, 1);
  if (PyTuple_GET_SIZE(pairs) == 0) return PyObject_Call(parent, args, nullptr);
  PyObject* kwargs = PyDict_New();
  if (kwargs == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pairs); ++i) {
    PyObject* pair = PyTuple_GET_ITEM(pairs, i);
    if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0) {
      Py_DECREF(kwargs);
      return nullptr;
    }
  }
  PyObject* result = PyObject_Call(parent, args, kwargs);
  Py_DECREF(kwargs);
  return result;
}

}  // namespace

absl::StatusOr<Accessor> Accessor::item(AccessorKind kind, py::handle key, const std::string& parent_source) {
  const char* builder = accessor_spec(kind).builder;
  if (!key) return type_error_status(absl::StrCat(parent_source, ": ", builder, "() needs a key"));
  if (kind == AccessorKind::kApply && !PyType_Check(key.ptr())) {
    return type_error_status(absl::StrCat(parent_source, ": apply() needs a builtin type; got ",
                                          short_type_name(key.ptr())));
  }
  if (!is_key_constant(key.ptr())) {
    return type_error_status(absl::StrCat(
        parent_source, ": ", builder, "() keys are held by the guard tree, so they must be ", kKeyConstants,
        "; got ", short_type_name(key.ptr())));
  }
  if (kind == AccessorKind::kCall && !is_call_arguments(key.ptr())) {
    return type_error_status(absl::StrCat(parent_source, ": call() needs (args, kwargs): a tuple and a "
                                          "tuple of (str, value) pairs; got ", safe_repr(key.ptr())));
  }
  Accessor accessor(kind, py::reinterpret_borrow<py::object>(key));
  if (kind == AccessorKind::kItem && PyLong_CheckExact(key.ptr())) {
    Py_ssize_t index = PyLong_AsSsize_t(key.ptr());
    if (index == -1 && PyErr_Occurred()) {
      clear_guard_error();  // too big for an index: only the generic path can use it
    } else {
      accessor.int_key_ = index;
      accessor.has_int_key_ = true;
    }
  }
  return accessor;
}

std::string Accessor::name() const {
  if (!name_or_key_ || !PyUnicode_Check(name_or_key_.ptr())) return "";
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(name_or_key_.ptr(), &size);
  if (data == nullptr) {
    clear_guard_error();
    return "";
  }
  return std::string(data, static_cast<size_t>(size));
}

bool Accessor::same_source(const Accessor& other) const {
  if (kind_ != other.kind_) return false;
  if (!name_or_key_ || !other.name_or_key_) return !name_or_key_ && !other.name_or_key_;
  PyObject* a = name_or_key_.ptr();
  PyObject* b = other.name_or_key_.ptr();
  if (a == b) return true;
  // 1, True and 1.0 are equal but reach different things through a non-dict __getitem__.
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  int equal = PyObject_RichCompareBool(a, b, Py_EQ);
  if (equal < 0) clear_guard_error();
  return equal == 1;
}

std::string Accessor::source_text(const std::string& parent_source) const {
  const AccessorSpec& row = spec();
  std::string operand;
  switch (row.operand) {
    case Operand::kName:
      operand = name();
      break;
    case Operand::kKey:
      operand = safe_repr(name_or_key_.ptr());
      break;
    case Operand::kNone:
      break;
  }
  return absl::StrCat(row.prefix, row.reads == Reads::kParent ? parent_source : "", row.infix, operand,
                      row.suffix);
}

PyObject* Accessor::fetch_local_or_closure(const FrameView& view) const noexcept {
  if (!view.is_frame()) {
    // Mapping mode: locals and closure variables by name (their contents: no cells).
    if (view.mapping == nullptr || kind_ == AccessorKind::kClosureCell) return nullptr;
    return dict_get_new_ref(view.mapping, name_or_key_.ptr());
  }
  if (index_ < 0) return nullptr;  // not bound: the root refuses frame views before this
  if (kind_ == AccessorKind::kLocal) {
    PyObject* value = view.localsplus[index_];  // borrowed; NULL when unbound
    Py_XINCREF(value);
    return value;
  }
  // Closure: the function's closure tuple, in co_freevars order; the cell's contents, or the cell
  // itself (kClosureCell).
  if (view.closure == nullptr || index_ >= PyTuple_GET_SIZE(view.closure)) return nullptr;
  PyObject* cell = PyTuple_GET_ITEM(view.closure, index_);  // borrowed
  if (!PyCell_Check(cell)) return nullptr;
  if (kind_ == AccessorKind::kClosureCell) return Py_NewRef(cell);
  PyObject* value = PyCell_GET(cell);  // borrowed; NULL for an empty cell
  Py_XINCREF(value);
  return value;
}

PyObject* Accessor::fetch_item(PyObject* parent) const noexcept {
  PyObject* key = name_or_key_.ptr();  // borrowed
  if (PyDict_CheckExact(parent)) return dict_get_new_ref(parent, key);
  if (has_int_key_ && (PyList_CheckExact(parent) || PyTuple_CheckExact(parent))) {
    Py_ssize_t size = Py_SIZE(parent);
    Py_ssize_t index = int_key_ < 0 ? int_key_ + size : int_key_;
    if (index < 0 || index >= size) return nullptr;  // missing
    PyObject* value = PyList_CheckExact(parent) ? PyList_GET_ITEM(parent, index)
                                                : PyTuple_GET_ITEM(parent, index);  // borrowed
    Py_INCREF(value);
    return value;
  }
  return PyObject_GetItem(parent, key);  // new ref
}

PyObject* Accessor::fetch(PyObject* parent, const FrameView& view) const noexcept {
  switch (kind_) {
    case AccessorKind::kLocal:
    case AccessorKind::kClosure:
    case AccessorKind::kClosureCell:
      return fetch_local_or_closure(view);
    case AccessorKind::kGlobal:
      return view.globals == nullptr ? nullptr : dict_get_new_ref(view.globals, name_or_key_.ptr());
    case AccessorKind::kBuiltin:
      if (view.builtins == nullptr) return nullptr;
      if (PyDict_Check(view.builtins)) return dict_get_new_ref(view.builtins, name_or_key_.ptr());
      return PyObject_GetAttr(view.builtins, name_or_key_.ptr());  // the builtins module itself
    case AccessorKind::kAttr:
      return PyObject_GetAttr(parent, name_or_key_.ptr());
    case AccessorKind::kItem:
      return fetch_item(parent);
    case AccessorKind::kDictItem:
      // dict's own lookup, for dict subclasses too: no __getitem__ or __missing__ of the class runs.
      if (!PyDict_Check(parent)) return nullptr;  // missing: the check fails
      return dict_get_new_ref(parent, name_or_key_.ptr());
    case AccessorKind::kInstanceDict:
      // The __dict__ slot itself (object's generic getter, made on first use as Python makes it);
      // AttributeError for an object without one. No class hook runs.
      return PyObject_GenericGetDict(parent, nullptr);  // new ref
    case AccessorKind::kType: {
      PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(parent));
      Py_INCREF(type);
      return type;
    }
    case AccessorKind::kCall:
      // Built only under the parent's ID_MATCH, for callables whose result is their state (accessors.h).
      return call_with_key(parent, name_or_key_.ptr());
    case AccessorKind::kApply:
      // Built only under the parent's TYPE_MATCH (accessors.h).
      return PyObject_CallOneArg(name_or_key_.ptr(), parent);  // new ref
    case AccessorKind::kCallMethod:
      // Built only under the parent's TYPE_MATCH, for methods that read state (accessors.h).
      return PyObject_CallMethodNoArgs(parent, name_or_key_.ptr());  // new ref
    case AccessorKind::kRoot:
      break;
  }
  return nullptr;
}

}  // namespace tjc
