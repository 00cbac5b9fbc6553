// The leaf guard kinds a node accepts, as data: one row per kind in kLeafSpecs (its Python name,
// what it takes, its options, its doc) and one factory by kind, make_leaf.
//
// Every way of adding a leaf goes through this table: GuardManager::add_leaf (C++), and in Python
// the one binding GuardNode.add_leaf(kind, value, ...) plus the named builder methods
// (node.type_match(cls), ...), which the bindings generate from the rows. Adding a kind: its
// LeafKind, class and make_* factory (leaf_guards.{h,cpp}), a row here, a case in make_leaf, and its
// row in torch_jit_cache/guard/tree.py (the Python table; a test checks the two agree).
//
// GLOBAL_STATE is a leaf of the root (RootGuardManager::add_global_state), not a row: the table
// holds the kinds that check a node's value. DICT_TAGS is not a leaf (it changes how a node's
// children are checked, never their outcome) and has its own builder.
//
// Threads: the table is constant; make_leaf needs the GIL.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "guards/leaf_guards.h"
#include "guards/torch_backend.h"
#include "guards/tree_state.h"

namespace tjc {

namespace py = pybind11;

// What a kind's builder takes besides the node.
enum class LeafOperand : uint8_t {
  kNone,    // nothing: none_match(), not_none()
  kObject,  // any object; the factory refuses what the tree must not hold
  kBool,    // a bool (Python's conversion rules: True, False, or what converts to one)
  kLength,  // an int that fits Py_ssize_t
};

// Keyword options a kind accepts (bits).
enum LeafOption : uint8_t {
  kNoOptions = 0,
  kHoldOption = 1 << 0,         // strong=True: ID_MATCH holds its object strongly
  kDynamicDimsOption = 1 << 1,  // dynamic_sizes / dynamic_strides: dims TENSOR_MATCH leaves unchecked
};

// One leaf's operand and options, as the builder was given them.
struct LeafArgs {
  LeafArgs() = default;
  // The kObject operand alone: `node.add_leaf(LeafKind::kEqualsMatch, py::int_(3))`.
  template <typename T, typename = std::enable_if_t<std::is_convertible_v<T, py::object>>>
  LeafArgs(T&& object) : value(std::forward<T>(object)) {}  // NOLINT(google-explicit-constructor)

  py::object value;       // kObject
  bool flag = false;      // kBool
  Py_ssize_t length = 0;  // kLength
  IdHold hold = IdHold::kWeak;
  DynamicDims dynamic;
};

struct LeafSpec {
  LeafKind kind;
  const char* name;  // the Python builder: GuardNode.<name>(...), GuardNode.add_leaf("<name>", ...)
  LeafOperand operand;
  const char* arg;   // the operand's Python argument name ("" for kNone)
  uint8_t options;   // LeafOption bits
  const char* doc;
};

// In LeafKind order (checked in leaf_kinds.cpp).
inline constexpr LeafSpec kLeafSpecs[] = {
    {LeafKind::kTypeMatch, "type_match", LeafOperand::kObject, "cls", kNoOptions,
     "TYPE_MATCH: type(value) is cls; a heap type is held weakly (its death invalidates the tree)."},
    {LeafKind::kIdMatch, "id_match", LeafOperand::kObject, "obj", kHoldOption,
     "value is obj; obj is held weakly and its death invalidates the tree, or strongly when "
     "strong=True (for objects that live as long as the process: torch.dtype, ...)."},
    {LeafKind::kEqualsMatch, "equals_match", LeafOperand::kObject, "value", kNoOptions,
     "EQUALS_MATCH: type(value) is type(expected) and value == expected (an immutable builtin)."},
    {LeafKind::kNoneMatch, "none_match", LeafOperand::kNone, "", kNoOptions, "NONE_MATCH: value is None."},
    {LeafKind::kNotNone, "not_none", LeafOperand::kNone, "", kNoOptions, "NOT_NONE: value is not None."},
    {LeafKind::kBoolMatch, "bool_match", LeafOperand::kBool, "b", kNoOptions,
     "BOOL_MATCH: value is True / value is False."},
    {LeafKind::kLength, "length", LeafOperand::kLength, "n", kNoOptions, "LENGTH: len(value) == n."},
    {LeafKind::kDictKeys, "dict_keys", LeafOperand::kObject, "keys", kNoOptions,
     "value is a dict with exactly these keys, in this order."},
    {LeafKind::kSetItems, "set_items", LeafOperand::kObject, "items", kNoOptions,
     "value is a set or frozenset whose own iteration yields exactly these items, in this order."},
    {LeafKind::kTensorMatch, "tensor_match", LeafOperand::kObject, "example", kDynamicDimsOption,
     "TENSOR_MATCH on a real example tensor; the sizes / strides of the dims named in "
     "dynamic_sizes / dynamic_strides are not checked (a SYMBOLIC_SHAPES guard checks them)."},
};

// The row of a node leaf kind (not kGlobalState).
const LeafSpec& leaf_spec(LeafKind kind);
// The row named `name`, or nullptr.
const LeafSpec* find_leaf_spec(std::string_view name);
// `type_match(cls)`, `none_match()`: how a builder call is written in messages.
std::string leaf_call_text(const LeafSpec& spec);

// The leaf of `kind` on the node for `source` (its tree's `state`), from the operand and options
// that `kind`'s row takes (the others are ignored); the factory's status when it refuses.
absl::StatusOr<LeafPtr> make_leaf(LeafKind kind, const LeafArgs& args, const std::shared_ptr<TreeState>& state,
                                  const std::string& source);

}  // namespace tjc
