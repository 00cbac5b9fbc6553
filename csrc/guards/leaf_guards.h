// LeafGuard: one check on one value (TYPE_MATCH, ID_MATCH, EQUALS_MATCH, ...).
//
// Each leaf has a lean hot path, check(), and a separate verbose path, explain(), that says in words
// why a value fails. The concrete classes live in leaf_guards.cpp, made by the make_* factories,
// which refuse (with a Status) what the tree must not hold: a non-weakrefable object for identity,
// a mutable or user-defined value for equality (guard_errors.h: TypeError statuses).
//
// Ownership: a leaf is owned by its GuardManager (std::unique_ptr). Values compared by equality
// are immutable builtins held strongly (value_rules.h); objects compared by identity, and heap
// types, are held weakly (weak_identity.h), so a leaf never keeps a user object alive.
//
// Threads: under the GIL. check() is noexcept, allocates nothing (beyond what a value's own
// __eq__/__len__ does) and leaves no Python error set: a guard that raises has failed.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "guards/torch_backend.h"
#include "guards/tree_state.h"

namespace tjc {

namespace py = pybind11;

enum class LeafKind : uint8_t {
  kTypeMatch,
  kIdMatch,
  kEqualsMatch,
  kNoneMatch,
  kNotNone,
  kBoolMatch,
  kLength,
  kDictKeys,
  kSetItems,
  kTensorMatch,
  kGlobalState,
};

class LeafGuard {
 public:
  explicit LeafGuard(LeafKind kind) : kind_(kind) {}
  virtual ~LeafGuard() = default;
  LeafGuard(const LeafGuard&) = delete;
  LeafGuard& operator=(const LeafGuard&) = delete;

  LeafKind kind() const { return kind_; }

  // Hot path. `value` is borrowed; it is null only for leaves on the root (GLOBAL_STATE).
  virtual bool check(PyObject* value) noexcept = 0;
  // Slow path: why `value` fails, prefixed by `source` (`L['n'] == 3 failed: got 4`), or nullopt
  // when it passes. Leaves no Python error set.
  virtual std::optional<std::string> explain(PyObject* value, const std::string& source);
  // Stable one-line text for debug_string(): `TYPE_MATCH: int`, `ID_MATCH: <Linear object> (weak)`.
  virtual std::string describe() const = 0;

  // How many checks this leaf failed (the manager's fail-fast bookkeeping).
  int64_t fail_count() const { return fail_count_; }
  void count_failure() { ++fail_count_; }

 protected:
  // Used by the default explain(): the reason for a value that check() rejected. Leaves that
  // override explain() (they word errors or delegate to the torch backend) never reach it.
  virtual std::string failure_text(PyObject* value, const std::string& source) const;

 private:
  LeafKind kind_;
  int64_t fail_count_ = 0;
};

using LeafPtr = std::unique_ptr<LeafGuard>;

// TYPE_MATCH: type(value) is cls. A heap type is held weakly (its death invalidates the tree).
absl::StatusOr<LeafPtr> make_type_match(py::handle cls, const std::shared_ptr<TreeState>& state,
                                        const std::string& source);
// How ID_MATCH holds its object. kWeak: weakly, its death invalidates the tree (TypeError status
// when it cannot be weakly referenced; singletons and static types are held strongly anyway).
// kStrong: strongly, for objects the caller knows live as long as the process (torch.dtype, ...).
enum class IdHold { kWeak, kStrong };
// ID_MATCH: value is obj.
absl::StatusOr<LeafPtr> make_id_match(py::handle obj, const std::shared_ptr<TreeState>& state,
                                      const std::string& source, IdHold hold = IdHold::kWeak);
// EQUALS_MATCH: type(value) is type(expected) and value == expected; expected must be an immutable
// builtin (TypeError status otherwise).
absl::StatusOr<LeafPtr> make_equals_match(py::handle expected, const std::string& source);
LeafPtr make_none_match();
LeafPtr make_not_none();
// BOOL_MATCH: value is True / value is False.
LeafPtr make_bool_match(bool expected);
// LENGTH: len(value) == length.
absl::StatusOr<LeafPtr> make_length(Py_ssize_t length);
// DICT_KEYS: value is a dict whose keys are exactly `keys`, in insertion order; each key must be
// an immutable builtin.
absl::StatusOr<LeafPtr> make_dict_keys(py::handle keys, const std::string& source);
// SET_ITEMS: value is a set or frozenset (or a subclass: TYPE_MATCH pins which) whose own
// iteration (set's, never a subclass's __iter__) yields exactly `items`, in this order; each item
// must be a key constant (value_rules.h). Iteration order of a set depends on its history (what
// was added and removed before), so equal sets may iterate differently: this pins the order too.
absl::StatusOr<LeafPtr> make_set_items(py::handle items, const std::string& source);
// TENSOR_MATCH and GLOBAL_STATE, through torch_backend() (torch_backend.h).
// `dynamic`: the dims whose size / stride TENSOR_MATCH leaves to SYMBOLIC_SHAPES (torch_backend.h).
absl::StatusOr<LeafPtr> make_tensor_match(py::handle example, const std::string& source,
                                          const DynamicDims& dynamic = {});
absl::StatusOr<LeafPtr> make_global_state();

}  // namespace tjc
