// Accessor: how a guard manager's value is reached from its parent's value or from the frame.
//
// Kinds: local(name), global_(name), builtin(name), closure(name), closure_cell(name) read the
// FrameView (children of
// the root only); attr(name), item(key), dict_item(key), instance_dict(), type(), call(arguments),
// apply(fn), call_method(name) read the parent's value. Each kind is one row of
// kAccessorSpecs below (its builder name, what it reads and takes, its source text, its docs) plus
// one case of fetch(). An accessor is a small value type switched on by kind: no virtual call per
// fetch.
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

#include <cstddef>
#include <iterator>
#include <string>

#include "absl/status/statusor.h"
#include "guards/frame_view.h"

namespace tjc {

namespace py = pybind11;

// Keep kCallMethod last (kLastAccessorKind); a new kind needs its row in kAccessorSpecs and its
// fetch() case (the switch warns, and -Werror stops the build, when one is missing).
enum class AccessorKind : uint8_t {
  kRoot, kLocal, kGlobal, kBuiltin, kClosure, kClosureCell, kAttr, kItem, kInstanceDict, kType, kDictItem, kCall, kApply, kCallMethod
};
inline constexpr AccessorKind kLastAccessorKind = AccessorKind::kCallMethod;

// What an accessor reads its value from.
enum class Reads : uint8_t {
  kNothing,  // the root: "the frame", no value of its own
  kFrame,    // the FrameView (children of the root only)
  kParent,   // the parent's value
};
// What the builder call takes and the accessor holds.
enum class Operand : uint8_t { kNone, kName, kKey };
// What RootGuardManager::bind() resolves for a frame-reading accessor.
enum class FrameSlot : uint8_t {
  kNone,      // read by name, or not from the frame
  kArgument,  // a localsplus index: the name must be an argument of the code
  kFreeVar,   // an index into the closure tuple: the name must be a free variable of the code
};

// One row per kind: everything that defines a kind except how fetch() reads it (a switch on the
// hot path, in accessors.cpp). The builders (GuardManager::child), the Python bindings (a method
// named `builder` on _C.GuardManager for kFrame kinds, on _C.GuardNode for kParent ones), bind()
// and the source text all read this table; adding a kind is one row here plus its fetch case.
struct AccessorSpec {
  AccessorKind kind;
  const char* builder;  // the builder method's name: root.local(name), node.attr(name)
  Reads reads;
  Operand operand;
  FrameSlot slot;
  // Source text: `prefix`, the parent's text (kParent only), `infix`, the operand (a name as is, a
  // key as its repr), `suffix`. Matches guard/sources.py's Source.name(): L['x'], x.fc, x[2], type(x).
  const char* prefix;
  const char* infix;
  const char* suffix;
  const char* example;  // how to call it, for messages
  const char* doc;      // the Python method's docstring
};

inline constexpr AccessorSpec kAccessorSpecs[] = {
    {AccessorKind::kRoot, "", Reads::kNothing, Operand::kNone, FrameSlot::kNone, "", "", "", "", ""},
    {AccessorKind::kLocal, "local", Reads::kFrame, Operand::kName, FrameSlot::kArgument, "L['", "", "']",
     "g.local('x')", "Child reading the argument `name` (L['name'])."},
    {AccessorKind::kGlobal, "global_", Reads::kFrame, Operand::kName, FrameSlot::kNone, "G['", "", "']",
     "g.global_('torch')", "Child reading f_globals[name] (G['name'])."},
    {AccessorKind::kBuiltin, "builtin", Reads::kFrame, Operand::kName, FrameSlot::kNone, "B['", "", "']",
     "g.builtin('len')", "Child reading f_builtins[name] (B['name'])."},
    {AccessorKind::kClosure, "closure", Reads::kFrame, Operand::kName, FrameSlot::kFreeVar, "C['", "",
     "']", "g.closure('n')", "Child reading the free variable `name`'s cell contents (C['name'])."},
    {AccessorKind::kClosureCell, "closure_cell", Reads::kFrame, Operand::kName, FrameSlot::kFreeVar,
     "cell(C['", "", "'])", "g.closure_cell('n')",
     "Child reading the free variable `name`'s cell object itself (cell(C['name'])): what an identity "
     "relation compares with a cell reached through a function's __closure__; missing in mapping "
     "mode, which has no cells."},
    {AccessorKind::kAttr, "attr", Reads::kParent, Operand::kName, FrameSlot::kNone, "", ".", "",
     "g.local('self').attr('fc')", "Child reading getattr(value, name)."},
    {AccessorKind::kItem, "item", Reads::kParent, Operand::kKey, FrameSlot::kNone, "", "[", "]",
     "g.local('d').item('k')", "Child reading value[key]; key must be an immutable builtin."},
    {AccessorKind::kInstanceDict, "instance_dict", Reads::kParent, Operand::kNone, FrameSlot::kNone, "vars(",
     "", ")", "g.local('obj').instance_dict()",
     "Child reading the value's instance __dict__ as object's lookup finds it, without running the "
     "class's own __getattribute__ (vars(value) for a class whose hook a guard must not run)."},
    {AccessorKind::kType, "type", Reads::kParent, Operand::kNone, FrameSlot::kNone, "type(", "", ")",
     "g.local('x').type()", "Child reading type(value)."},
    {AccessorKind::kDictItem, "dict_item", Reads::kParent, Operand::kKey, FrameSlot::kNone, "dict.__getitem__(",
     ", ", ")", "g.global_('registry').dict_item('k')",
     "Child reading dict's own item `key` of a dict or dict subclass object, without running the "
     "class's own __getitem__ (a guard must not run a hook the tracer followed); missing for a "
     "value that is not a dict."},
    {AccessorKind::kCall, "call", Reads::kParent, Operand::kKey, FrameSlot::kNone, "call(", ", ", ")",
     "g.global_('f').call((('2.5',), (('strict', True),)))",
     "Child reading value(*args, **dict(kwargs)) for the key (args, kwargs): a tuple of constant "
     "arguments and a tuple of (name, constant) pairs. Only for callables whose result for the same "
     "arguments is the same until their state changes (a functools.lru_cache wrapper: its cache), "
     "under an ID_MATCH of the value, which runs before any child."},
    {AccessorKind::kApply, "apply", Reads::kParent, Operand::kKey, FrameSlot::kNone, "apply(", ", ", ")",
     "g.local('od').apply(tuple)",
     "Child reading fn(value) for a builtin type `fn` (tuple: an OrderedDict's keys in its own "
     "order, which no dict read gives). Only under a TYPE_MATCH of the value, which runs before any "
     "child, for a type whose such use runs no code of the user's."},
    {AccessorKind::kCallMethod, "call_method", Reads::kParent, Operand::kName, FrameSlot::kNone, "", ".", "()",
     "g.local('w').call_method('__call__')",
     "Child reading value.name(): a method called without arguments. Only for builtin types whose "
     "such method reads the object's state and runs no other code (a weakref's __call__, a builtin "
     "iterator's __reduce__), under a TYPE_MATCH of the value, which runs before any child."},
};

constexpr const AccessorSpec& accessor_spec(AccessorKind kind) {
  return kAccessorSpecs[static_cast<size_t>(kind)];
}

// Every kind has its row, at its own index.
constexpr bool accessor_specs_in_order() {
  for (size_t i = 0; i < std::size(kAccessorSpecs); ++i) {
    if (static_cast<size_t>(kAccessorSpecs[i].kind) != i) return false;
  }
  return static_cast<size_t>(kLastAccessorKind) + 1 == std::size(kAccessorSpecs);
}
static_assert(accessor_specs_in_order(), "kAccessorSpecs: one row per AccessorKind, in enum order");

class Accessor {
 public:
  static Accessor root() { return Accessor(AccessorKind::kRoot, py::object()); }
  // The accessor of `kind` (not kRoot) with its operand (accessor_spec(kind).operand): a name must
  // be a str; a key an immutable builtin (held strongly; ints index lists and tuples directly);
  // kNone kinds ignore it. `parent_source` is for messages.
  static absl::StatusOr<Accessor> make(AccessorKind kind, py::handle operand,
                                       const std::string& parent_source);

  AccessorKind kind() const { return kind_; }
  const AccessorSpec& spec() const { return accessor_spec(kind_); }
  bool reads_frame() const { return spec().reads == Reads::kFrame; }
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

  static absl::StatusOr<Accessor> named(AccessorKind kind, py::handle name);
  static absl::StatusOr<Accessor> item(AccessorKind kind, py::handle key, const std::string& parent_source);

  PyObject* fetch_local_or_closure(const FrameView& view) const noexcept;
  PyObject* fetch_item(PyObject* parent) const noexcept;

  AccessorKind kind_;
  int index_ = -1;
  Py_ssize_t int_key_ = 0;     // item() of kItem: the key as an index, when has_int_key_
  bool has_int_key_ = false;
  py::object name_or_key_;
};

// Dict lookup that reports "missing" as NULL with no error; new reference.
PyObject* dict_get_new_ref(PyObject* dict, PyObject* key) noexcept;

}  // namespace tjc
