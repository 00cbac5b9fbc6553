// Leaf guards on plain Python values (see leaf_guards.h). TENSOR_MATCH and GLOBAL_STATE, which go
// through the torch backend, are in torch_leaf_guards.cpp.
#include "guards/leaf_guards.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"
#include "common/py_errors.h"
#include "guards/guard_errors.h"
#include "guards/guard_text.h"
#include "guards/value_rules.h"
#include "guards/weak_identity.h"

namespace tjc {

std::optional<std::string> LeafGuard::explain(PyObject* value, const std::string& source) {
  if (check(value)) return std::nullopt;
  return failure_text(value, source);
}

std::string LeafGuard::failure_text(PyObject*, const std::string& source) const {
  return absl::StrCat(source, ": ", describe(), " failed");
}

namespace {

// `got 4` for values whose repr says it all; `got str` otherwise.
std::string got_text(PyObject* value) {
  if (is_immutable_builtin(value)) return safe_repr(value);
  return absl::StrCat(short_type_name(value), " ", safe_repr(value, 60));
}

class TypeMatch final : public LeafGuard {
 public:
  TypeMatch(WeakTarget type, std::string type_name)
      : LeafGuard(LeafKind::kTypeMatch), type_(std::move(type)), type_name_(std::move(type_name)) {}

  bool check(PyObject* value) noexcept override {
    return reinterpret_cast<PyObject*>(Py_TYPE(value)) == type_.ptr();
  }
  std::string describe() const override {
    return absl::StrCat("TYPE_MATCH: ", type_name_, type_.is_weak() ? " (weak)" : "");
  }

 protected:
  std::string failure_text(PyObject* value, const std::string& source) const override {
    return absl::StrCat("type(", source, ") is ", type_name_, " failed: got ",
                        qualified_type_name(Py_TYPE(value)));
  }

 private:
  WeakTarget type_;
  std::string type_name_;
};

class IdMatch final : public LeafGuard {
 public:
  IdMatch(WeakTarget target, std::string label)
      : LeafGuard(LeafKind::kIdMatch), target_(std::move(target)), label_(std::move(label)) {}

  bool check(PyObject* value) noexcept override { return value == target_.ptr(); }
  std::string describe() const override {
    return absl::StrCat("ID_MATCH: ", label_, target_.is_weak() ? " (weak)" : "");
  }

 protected:
  std::string failure_text(PyObject* value, const std::string& source) const override {
    // The target is alive here (a dead one invalidates the tree before any leaf runs), but only
    // its pointer is kept: print the label captured at creation and the address.
    return absl::StrFormat("%s is %s at %p failed: got %s", source, label_,
                           static_cast<const void*>(target_.ptr()), identity_label_with_address(value));
  }

 private:
  WeakTarget target_;
  std::string label_;
};

// Compares `value` with `expected` (an immutable builtin): pointer, exact type, then ==.
// Returns 1, 0, or -1 with a Python error set.
int equals_immutable(PyObject* value, PyObject* expected) noexcept {
  if (value == expected) return 1;
  if (Py_TYPE(value) != Py_TYPE(expected)) return 0;
  return PyObject_RichCompareBool(value, expected, Py_EQ);
}

class EqualsMatch final : public LeafGuard {
 public:
  explicit EqualsMatch(py::object expected)
      : LeafGuard(LeafKind::kEqualsMatch), expected_(std::move(expected)) {}

  bool check(PyObject* value) noexcept override {
    int equal = equals_immutable(value, expected_.ptr());
    if (TJC_UNLIKELY(equal < 0)) {
      clear_guard_error();  // a tuple element's __eq__ raised: the guard failed
      return false;
    }
    return equal == 1;
  }
  std::optional<std::string> explain(PyObject* value, const std::string& source) override {
    int equal = equals_immutable(value, expected_.ptr());
    if (equal == 1) return std::nullopt;
    if (equal < 0) {
      return absl::StrCat(source, " == ", safe_repr(expected_.ptr()), " raised ", take_error_text());
    }
    return failure_text(value, source);
  }
  std::string describe() const override {
    return absl::StrCat("EQUALS_MATCH: ", safe_repr(expected_.ptr()));
  }

 protected:
  std::string failure_text(PyObject* value, const std::string& source) const override {
    return absl::StrCat(source, " == ", safe_repr(expected_.ptr()), " failed: got ", got_text(value));
  }

 private:
  py::object expected_;  // an immutable builtin (value_rules.h)
};

class NoneMatch final : public LeafGuard {
 public:
  NoneMatch() : LeafGuard(LeafKind::kNoneMatch) {}
  bool check(PyObject* value) noexcept override { return value == Py_None; }
  std::string describe() const override { return "NONE_MATCH"; }

 protected:
  std::string failure_text(PyObject* value, const std::string& source) const override {
    return absl::StrCat(source, " is None failed: got ", got_text(value));
  }
};

class NotNone final : public LeafGuard {
 public:
  NotNone() : LeafGuard(LeafKind::kNotNone) {}
  bool check(PyObject* value) noexcept override { return value != Py_None; }
  std::string describe() const override { return "NOT_NONE"; }

 protected:
  std::string failure_text(PyObject*, const std::string& source) const override {
    return absl::StrCat(source, " is not None failed: got None");
  }
};

class BoolMatch final : public LeafGuard {
 public:
  explicit BoolMatch(bool expected)
      : LeafGuard(LeafKind::kBoolMatch), expected_(expected ? Py_True : Py_False) {}
  bool check(PyObject* value) noexcept override { return value == expected_; }
  std::string describe() const override {
    return absl::StrCat("BOOL_MATCH: ", expected_ == Py_True ? "True" : "False");
  }

 protected:
  std::string failure_text(PyObject* value, const std::string& source) const override {
    return absl::StrCat(source, " is ", expected_ == Py_True ? "True" : "False", " failed: got ",
                        got_text(value));
  }

 private:
  PyObject* expected_;  // Py_True or Py_False: immortal for our purposes, not counted
};

// len(value): fast paths for the exact builtin containers; -1 with an error set when len raises.
Py_ssize_t length_of(PyObject* value) noexcept {
  if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) return Py_SIZE(value);
  if (PyDict_CheckExact(value)) return PyDict_GET_SIZE(value);
  return PyObject_Length(value);
}

class Length final : public LeafGuard {
 public:
  explicit Length(Py_ssize_t length) : LeafGuard(LeafKind::kLength), length_(length) {}
  bool check(PyObject* value) noexcept override {
    Py_ssize_t length = length_of(value);
    if (TJC_UNLIKELY(length < 0)) {
      clear_guard_error();
      return false;
    }
    return length == length_;
  }
  std::optional<std::string> explain(PyObject* value, const std::string& source) override {
    Py_ssize_t length = length_of(value);
    if (length == length_) return std::nullopt;
    if (length < 0) return absl::StrCat("len(", source, ") raised ", take_error_text());
    return absl::StrCat("len(", source, ") == ", length_, " failed: got ", length);
  }
  std::string describe() const override { return absl::StrCat("LENGTH: ", length_); }

 private:
  Py_ssize_t length_;
};

class DictKeys final : public LeafGuard {
 public:
  explicit DictKeys(py::tuple keys) : LeafGuard(LeafKind::kDictKeys), keys_(std::move(keys)) {
    for (py::handle key : keys_) {
      // A tuple key can hold objects whose __eq__ is user code, which may mutate the dict under
      // PyDict_Next; compare those on a snapshot of the keys instead.
      if (PyTuple_Check(key.ptr())) snapshot_needed_ = true;
    }
  }

  bool check(PyObject* value) noexcept override {
    int equal = compare(value);
    if (TJC_UNLIKELY(equal < 0)) {
      clear_guard_error();
      return false;
    }
    return equal == 1;
  }
  std::optional<std::string> explain(PyObject* value, const std::string& source) override {
    int equal = compare(value);
    if (equal == 1) return std::nullopt;
    if (equal < 0) return absl::StrCat(source, ".keys() raised ", take_error_text());
    if (!PyDict_Check(value)) {
      return absl::StrCat(source, " is a dict failed: got ", short_type_name(value));
    }
    py::object actual = py::reinterpret_steal<py::object>(PyDict_Keys(value));  // new ref
    if (!actual) return absl::StrCat(source, ".keys() raised ", take_error_text());
    return absl::StrCat(source, ".keys() == ", keys_text(), " failed: got ",
                        safe_repr(actual.ptr(), 200));
  }
  std::string describe() const override { return absl::StrCat("DICT_KEYS: ", keys_text()); }

 private:
  std::string keys_text() const {
    py::object as_list = py::reinterpret_steal<py::object>(PySequence_List(keys_.ptr()));  // new ref
    if (!as_list) return safe_repr(keys_.ptr(), 200);  // out of memory: the error is cleared there
    return safe_repr(as_list.ptr(), 200);
  }

  // 1 equal, 0 not, -1 error set.
  int compare(PyObject* value) noexcept {
    if (!PyDict_Check(value)) return 0;
    const Py_ssize_t n = PyTuple_GET_SIZE(keys_.ptr());
    if (PyDict_GET_SIZE(value) != n) return 0;
    if (snapshot_needed_) return compare_snapshot(value);
    Py_ssize_t pos = 0;
    PyObject* key = nullptr;  // borrowed
    for (Py_ssize_t i = 0; PyDict_Next(value, &pos, &key, nullptr); ++i) {
      // Key constants, not tuples (value_rules.h): == runs no user code, the dict cannot change.
      int equal = equals_immutable(key, PyTuple_GET_ITEM(keys_.ptr(), i));
      if (equal != 1) return equal;
    }
    return 1;
  }
  int compare_snapshot(PyObject* value) noexcept {
    PyObject* actual = PyDict_Keys(value);  // new ref
    if (actual == nullptr) return -1;
    int result = 1;
    for (Py_ssize_t i = 0; result == 1 && i < PyTuple_GET_SIZE(keys_.ptr()); ++i) {
      if (i >= PyList_GET_SIZE(actual)) {
        result = 0;
        break;
      }
      PyObject* key = PyList_GET_ITEM(actual, i);  // borrowed; the list owns it
      result = equals_immutable(key, PyTuple_GET_ITEM(keys_.ptr(), i));
    }
    Py_DECREF(actual);
    return result;
  }

  py::tuple keys_;  // key constants (value_rules.h)
  bool snapshot_needed_ = false;
};

class SetItems final : public LeafGuard {
 public:
  explicit SetItems(py::tuple items) : LeafGuard(LeafKind::kSetItems), items_(std::move(items)) {}

  bool check(PyObject* value) noexcept override {
    int equal = compare(value);
    if (TJC_UNLIKELY(equal < 0)) {
      clear_guard_error();
      return false;
    }
    return equal == 1;
  }
  std::optional<std::string> explain(PyObject* value, const std::string& source) override {
    int equal = compare(value);
    if (equal == 1) return std::nullopt;
    if (equal < 0) return absl::StrCat("iter(", source, ") raised ", take_error_text());
    if (!PyAnySet_Check(value)) {
      return absl::StrCat(source, " is a set failed: got ", short_type_name(value));
    }
    return absl::StrCat("list(", source, ") == ", items_text(), " failed: got ", safe_repr(value, 200));
  }
  std::string describe() const override { return absl::StrCat("SET_ITEMS: ", items_text()); }

 private:
  std::string items_text() const {
    py::object as_list = py::reinterpret_steal<py::object>(PySequence_List(items_.ptr()));  // new ref
    if (!as_list) return safe_repr(items_.ptr(), 200);  // out of memory: the error is cleared there
    return safe_repr(as_list.ptr(), 200);
  }

  // 1 equal, 0 not, -1 error set. The set's own iterator (PySet_Type's tp_iter serves set and
  // frozenset alike) runs no user code, and == on key constants runs none either, so the set cannot
  // change while it is walked.
  int compare(PyObject* value) noexcept {
    if (!PyAnySet_Check(value)) return 0;
    const Py_ssize_t n = PyTuple_GET_SIZE(items_.ptr());
    if (PySet_GET_SIZE(value) != n) return 0;
    PyObject* it = PySet_Type.tp_iter(value);  // new ref
    if (it == nullptr) return -1;
    int result = 1;
    for (Py_ssize_t i = 0; result == 1 && i < n; ++i) {
      PyObject* item = Py_TYPE(it)->tp_iternext(it);  // new ref
      if (item == nullptr) {
        result = PyErr_Occurred() ? -1 : 0;
        break;
      }
      result = equals_immutable(item, PyTuple_GET_ITEM(items_.ptr(), i));
      Py_DECREF(item);
    }
    Py_DECREF(it);
    return result;
  }

  py::tuple items_;  // key constants (value_rules.h), in the set's iteration order
};

}  // namespace

absl::StatusOr<LeafPtr> make_type_match(py::handle cls, const std::shared_ptr<TreeState>& state,
                                        const std::string& source) {
  if (!PyType_Check(cls.ptr())) {
    return type_error_status(
        absl::StrCat(source, ": type_match needs a type, got ", short_type_name(cls.ptr())));
  }
  absl::StatusOr<WeakTarget> target = WeakTarget::watch(cls, state, source, "TYPE_MATCH");
  if (!target.ok()) return target.status();
  std::string name = qualified_type_name(reinterpret_cast<PyTypeObject*>(cls.ptr()));
  return LeafPtr(new TypeMatch(std::move(*target), std::move(name)));
}

absl::StatusOr<LeafPtr> make_id_match(py::handle obj, const std::shared_ptr<TreeState>& state,
                                      const std::string& source, IdHold hold) {
  absl::StatusOr<WeakTarget> target = hold == IdHold::kStrong ? WeakTarget::hold(obj, state)
                                                              : WeakTarget::watch(obj, state, source, "ID_MATCH");
  if (!target.ok()) return target.status();
  return LeafPtr(new IdMatch(std::move(*target), identity_label(obj.ptr())));
}

absl::StatusOr<LeafPtr> make_equals_match(py::handle expected, const std::string& source) {
  if (!is_immutable_builtin(expected.ptr())) {
    return type_error_status(absl::StrCat(
        source, ": EQUALS_MATCH holds its value, so it accepts only ", kImmutableBuiltins, ", got ",
        short_type_name(expected.ptr()), "; guard by identity (id_match) instead"));
  }
  return LeafPtr(new EqualsMatch(py::reinterpret_borrow<py::object>(expected)));
}

LeafPtr make_none_match() { return LeafPtr(new NoneMatch()); }
LeafPtr make_not_none() { return LeafPtr(new NotNone()); }
LeafPtr make_bool_match(bool expected) { return LeafPtr(new BoolMatch(expected)); }

absl::StatusOr<LeafPtr> make_length(Py_ssize_t length) {
  if (length < 0) return absl::InvalidArgumentError(absl::StrCat("length must be >= 0, got ", length));
  return LeafPtr(new Length(length));
}

absl::StatusOr<LeafPtr> make_dict_keys(py::handle keys, const std::string& source) {
  PyObject* tuple = PySequence_Tuple(keys.ptr());  // new ref
  if (tuple == nullptr) {
    clear_guard_error();
    return type_error_status(absl::StrCat(source, ": dict_keys needs an iterable of keys, got ",
                                          short_type_name(keys.ptr())));
  }
  py::tuple owned = py::reinterpret_steal<py::tuple>(tuple);
  for (py::handle key : owned) {
    if (!is_key_constant(key.ptr())) {
      return type_error_status(absl::StrCat(source, ": DICT_KEYS holds its keys, so they must be ",
                                            kKeyConstants, ", got ", short_type_name(key.ptr())));
    }
  }
  return LeafPtr(new DictKeys(std::move(owned)));
}

absl::StatusOr<LeafPtr> make_set_items(py::handle items, const std::string& source) {
  if (PyAnySet_Check(items.ptr())) {  // its iteration order is not the one the trace saw
    return type_error_status(absl::StrCat(source, ": set_items needs the items in order (a tuple), got ",
                                          short_type_name(items.ptr())));
  }
  PyObject* tuple = PySequence_Tuple(items.ptr());  // new ref
  if (tuple == nullptr) {
    clear_guard_error();
    return type_error_status(absl::StrCat(source, ": set_items needs an iterable of items, got ",
                                          short_type_name(items.ptr())));
  }
  py::tuple owned = py::reinterpret_steal<py::tuple>(tuple);
  for (py::handle item : owned) {
    if (!is_key_constant(item.ptr())) {
      return type_error_status(absl::StrCat(source, ": SET_ITEMS holds its items, so they must be ",
                                            kKeyConstants, ", got ", short_type_name(item.ptr())));
    }
  }
  return LeafPtr(new SetItems(std::move(owned)));
}

}  // namespace tjc
