// Accessor: how a guard manager's value is reached from its parent's value or from the frame.
//
// Kinds: local(name), global_(name), builtin(name), closure(name) read the FrameView (children of
// the root only); attr(name), item(key), type() read the parent's value. An accessor is a small
// value type switched on by kind: no virtual call per fetch.
//
// Ownership: `name_or_key` is owned (a str, or an immutable builtin item key, so holding it keeps
// no user object alive). fetch() returns a NEW reference or NULL; NULL with no Python error set
// means "missing" (unbound local, empty cell, absent key), NULL with an error set means the access
// raised; the caller clears it.
//
// Threads: under the GIL.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <string>

#include "absl/status/statusor.h"
#include "guards/frame_view.h"

namespace tjc {

namespace py = pybind11;

enum class AccessorKind : uint8_t { kRoot, kLocal, kGlobal, kBuiltin, kClosure, kAttr, kItem, kType };

class Accessor {
 public:
  static Accessor root() { return Accessor(AccessorKind::kRoot, py::object()); }
  // `name` must be a str (local, global, builtin, closure, attr).
  static absl::StatusOr<Accessor> named(AccessorKind kind, py::handle name);
  // `key` must be an immutable builtin (held strongly); ints index lists and tuples directly.
  static absl::StatusOr<Accessor> item(py::handle key, const std::string& parent_source);
  static Accessor type() { return Accessor(AccessorKind::kType, py::object()); }

  AccessorKind kind() const { return kind_; }
  bool reads_frame() const {
    return kind_ == AccessorKind::kLocal || kind_ == AccessorKind::kGlobal ||
           kind_ == AccessorKind::kBuiltin || kind_ == AccessorKind::kClosure;
  }
  // The name (str) or key; null for root/type.
  py::handle name_or_key() const { return name_or_key_; }
  std::string name() const;  // the name as UTF-8 ("" for item/type/root)

  // Same source as `other` (same kind, same name or key with the same type).
  bool same_source(const Accessor& other) const;
  // The child's source text given its parent's: L['x'], G['torch'], B['len'], C['n'],
  // L['self'].fc, L['d']['k'], L['xs'][2], type(L['x']).
  std::string source_text(const std::string& parent_source) const;

  // Frame-mode slot: localsplus index (local) or index into the closure tuple (closure); -1 until
  // RootGuardManager::bind() resolves it.
  int index() const { return index_; }
  void set_index(int index) { index_ = index; }

  // Hot path. `parent`: borrowed, null for children of the root. Returns a new reference or NULL
  // (see above). Allocates nothing beyond what the accessed object's own code does.
  PyObject* fetch(PyObject* parent, const FrameView& view) const noexcept;

 private:
  Accessor(AccessorKind kind, py::object name_or_key) : kind_(kind), name_or_key_(std::move(name_or_key)) {}

  PyObject* fetch_local_or_closure(const FrameView& view) const noexcept;
  PyObject* fetch_item(PyObject* parent) const noexcept;

  AccessorKind kind_;
  int index_ = -1;
  Py_ssize_t int_key_ = 0;     // item(): the key as an index, when has_int_key_
  bool has_int_key_ = false;
  py::object name_or_key_;
};

// Dict lookup that reports "missing" as NULL with no error; new reference.
PyObject* dict_get_new_ref(PyObject* dict, PyObject* key) noexcept;

}  // namespace tjc
