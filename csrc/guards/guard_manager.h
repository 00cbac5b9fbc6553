// GuardManager: one node of a guard tree — one source (`L['x']`, `L['self'].fc`), the accessor
// that reaches its value from the parent, the leaf guards on that value, and child managers.
//
// Tree shape: RootGuardManager (root_guard_manager.h) is the node for "the frame"; its children
// read the frame (local, global_, builtin, closure); every deeper child reads its parent's value
// (attr, item, type); which is which is the accessor table's (accessors.h). A node checks its
// leaves first, then its children, stopping at the first failure. On a failure path only, the
// failing leaf or child moves to the front of its list and its fail count grows, so the guard most
// likely to fail runs first next time ("fail fast").
//
// Ownership: parents own children by std::shared_ptr; a child has no pointer to its parent, so a
// Python wrapper of a child keeps that subtree alive after the root is gone, without a cycle. Every
// node shares the tree's TreeState (frozen flag, invalidation). Leaves are owned by their node.
//
// Mutation: the builder methods add children and leaves until the root is bound (frozen); after
// that they fail with FailedPrecondition, except for asking for a child that already exists.
// Loops over children and leaves index the vectors afresh on each step, because a guard's __eq__
// can run Python that touches the (unfrozen) tree.
//
// Threads: under the GIL only.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "guards/accessors.h"
#include "guards/dict_tags.h"
#include "guards/frame_view.h"
#include "guards/leaf_guards.h"
#include "guards/leaf_kinds.h"
#include "guards/tree_state.h"

namespace tjc {

namespace py = pybind11;

class GuardManager {
 public:
  GuardManager(Accessor accessor, std::string source, std::shared_ptr<TreeState> state);
  virtual ~GuardManager();
  GuardManager(const GuardManager&) = delete;
  GuardManager& operator=(const GuardManager&) = delete;

  // ---- Builder (slow path).
  // The child reaching its value by `kind` with `operand` (a name, a key or nothing: see
  // kAccessorSpecs in accessors.h), or the existing child for the same source. Kinds that read the
  // frame are children of the root only; kinds that read a value, of any other node.
  absl::StatusOr<std::shared_ptr<GuardManager>> child(AccessorKind kind, py::handle operand = py::handle());

  // A leaf of `kind` (leaf_kinds.h) on this node's value, from the operand and options its row
  // takes. Refused on the root (it has no value) and once the tree is frozen, before anything is
  // built, so a refused leaf never creates a weakref.
  absl::Status add_leaf(LeafKind kind, const LeafArgs& args = {});
  // DICT_TAGS (dict_tags.h): this node's children are skipped while the dicts they read are
  // unchanged. Not a leaf: it changes how the children are checked, never their outcome.
  absl::Status add_dict_tags();

  // ---- Introspection.
  bool is_root() const { return accessor_.kind() == AccessorKind::kRoot; }
  const std::string& source() const { return source_; }
  const Accessor& accessor() const { return accessor_; }
  // In evaluation order (fail-fast reordering changes it).
  const std::vector<std::shared_ptr<GuardManager>>& children() const { return children_; }
  const std::vector<LeafPtr>& leaves() const { return leaves_; }
  int64_t fail_count() const { return fail_count_; }
  // Leaf guards in this subtree (the root adds its SYMBOLIC_SHAPES lines).
  virtual int64_t num_guards() const;
  // The node's DICT_TAGS, or null.
  const DictTags* dict_tags() const { return tags_.get(); }
  // This subtree as stable text (see append_body); virtual so the root prints its own header.
  virtual std::string debug_string() const;

 protected:
  // The child for `accessor`, made on first request. Refused once the tree is frozen.
  absl::StatusOr<std::shared_ptr<GuardManager>> child_for(absl::StatusOr<Accessor> accessor);
  absl::Status push_leaf(absl::StatusOr<LeafPtr> leaf);

  // Hot path: leaves on `value` (borrowed; null on the root), then each child on the value its
  // accessor fetches. Leaves no Python error set.
  bool check_value(PyObject* value, const FrameView& view) noexcept;
  // The children part of check_value (each child on the value its accessor fetches).
  bool check_children(PyObject* value, const FrameView& view) noexcept;
  // Slow path twin of check_value: the first failing guard in words. Does not reorder or count.
  std::optional<std::string> explain_value(PyObject* value, const FrameView& view);
  // Appends this node's leaves and children, one per line, each line starting with `indent`.
  void append_body(std::string& out, const std::string& indent) const;

  // For RootGuardManager::bind(): where a frame-reading child finds its value in a frame view.
  static void set_frame_index(GuardManager& child, int index) { child.accessor_.set_index(index); }

  std::shared_ptr<TreeState> state_;

 private:
  void on_leaf_failure(size_t index);
  void on_child_failure(size_t index);

  Accessor accessor_;
  std::string source_;
  std::vector<LeafPtr> leaves_;
  std::vector<std::shared_ptr<GuardManager>> children_;
  int64_t fail_count_ = 0;
  std::unique_ptr<DictTags> tags_;  // DICT_TAGS, or null

  friend class DictTags;  // checks and records the children
};

// The value reached by fetching along `chain` from the root (its first node a child of the root):
// a new reference, or NULL (missing, or raised: the error, if any, is left for the caller). Used by
// the root-level guards that hold chains (identity_relation.h, shape_guards.h).
PyObject* fetch_along(const std::vector<std::shared_ptr<GuardManager>>& chain, const FrameView& view) noexcept;

}  // namespace tjc
