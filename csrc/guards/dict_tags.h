// DictTags: a node's children skipped while the dicts they read are unchanged (DICT_TAGS).
//
// An nn.Module's guards are mostly about what its instance dicts hold: the training flag and other
// attributes by value, the keys of `_parameters`/`_buffers`/`_modules`, empty hook dicts, each
// submodule's type and identity, and so on down the tree (hundreds of guards for a Transformer
// called opaquely). Each of those checks has the same outcome as last time if every dict on the
// way is unchanged: CPython gives a dict a new version tag on every change of its contents
// (cpython/dict_version.h). So a node with DICT_TAGS records, after its children passed, the tags
// of the dicts its subtree reads, and on later checks compares those tags instead of walking the
// subtree. What tags cannot vouch for runs every time, as a "residual" node fetched from its
// recorded parent: TENSOR_MATCH (a tensor's sizes, dtype or requires_grad change in place:
// `p.data = ...`, `requires_grad_()`), LENGTH of anything but a dict, tuple, str or bytes (a
// user __len__), and any child reached otherwise than by `item()` on a dict or tuple or by
// `.__dict__` (a class attribute, a bound method, a list element).
//
// The recorded state, and why each borrowed pointer stays valid:
// - root: the value recorded against, watched by a weakref whose callback clears the record when
//   it dies. A module's entry serves every equal instance (docs/cache.md), so a record must not
//   keep the last instance checked alive through its dicts (its parameters with them); a value
//   that cannot be weakly referenced is never recorded (its children are checked in full).
// - dicts: (dict, tag), the dict held strongly while its root lives; the tag read before the
//   children's full check and again after it, so a check that ran Python which changed a dict
//   never records a state it did not see.
// - owners: (object, dict) for each `.__dict__` child: the object's instance-dict slot still holds
//   that dict (`m.__dict__ = {...}` changes no tag). The object is borrowed: it is the node's own
//   value (null) or a value of a recorded dict or tuple, alive while those are unchanged, and the
//   dicts are compared first.
// - types: (object, type) for every object that is not a dict or an immutable builtin, the type
//   held strongly: TYPE_MATCH and ID_MATCH outcomes are fixed by identity except across
//   `obj.__class__ = ...`.
// - residuals: (node, parent), the parent held strongly (null: the node's own value): a residual's
//   check can run Python (a __len__) that frees what the others would read; the tags are compared
//   again after the residuals ran.
// Recording happens after a full check whenever the tags do not match (the first call, after any
// change, e.g. `model.eval()` called before every call writes `training` in every module's dict):
// then the check costs what it cost without tags, plus one walk that records. The node's own
// leaves (TYPE_MATCH, ID_MATCH of the module) run every time, before the tags.
//
// Threads: under the GIL only. check() is noexcept and leaves no Python error set.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "guards/frame_view.h"

namespace tjc {
namespace py = pybind11;

class GuardManager;

class DictTags {
 public:
  DictTags() = default;
  DictTags(const DictTags&) = delete;  // the root's weakref callback points at this object
  DictTags& operator=(const DictTags&) = delete;
  ~DictTags() { clear(); }
  // Hot path: the children of `node` on `value` (borrowed), as GuardManager::check_value would
  // run them, skipped where the recorded tags vouch for them.
  bool check(GuardManager& node, PyObject* value, const FrameView& view) noexcept;

  // Whether the last check left a recorded state to compare against (for tests and text).
  bool recorded() const { return recorded_; }
  size_t num_dicts() const { return dicts_.size(); }
  size_t num_residuals() const { return residuals_.size(); }

 private:
  struct Residual {
    GuardManager* node;  // owned by the tree, never removed
    py::object parent;   // null: the tagged node's own value
  };

  bool unchanged(PyObject* value) const noexcept;
  bool check_residuals(PyObject* value, const FrameView& view) noexcept;
  bool check_and_record(GuardManager& node, PyObject* value, const FrameView& view) noexcept;
  // Adds what `node`'s children on `value` read; false when a child's value is missing.
  bool record(GuardManager& node, PyObject* value, bool is_root, const FrameView& view);
  // Watches `value` (borrowed) so that its death clears the record; false if it cannot be.
  bool watch_root(PyObject* value) noexcept;
  static PyObject* on_root_death(PyObject* capsule, PyObject* weakref) noexcept;
  void clear() noexcept;

  bool recorded_ = false;
  PyObject* root_ = nullptr;  // borrowed: the value recorded against; compared by identity only
  py::object root_watch_;     // weakref to root_ whose callback clears the record (see above)
  struct RootWatch* watch_ = nullptr;  // what the callback reaches, owned by its capsule
  std::vector<std::pair<py::object, uint64_t>> dicts_;
  std::vector<std::pair<PyObject*, PyObject*>> owners_;   // (object or null, its dict), borrowed
  std::vector<std::pair<PyObject*, py::object>> types_;   // (object, its type)
  std::vector<Residual> residuals_;
};

}  // namespace tjc
