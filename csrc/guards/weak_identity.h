// WeakTarget: an object guarded by identity, held weakly; its death invalidates the whole tree.
//
// Why weak: a cache entry must not keep alive the user objects it checks by identity (a module, a
// user class) for as long as the code lives. The guard compares raw pointers, which is only sound
// while the object lives; the weakref callback marks the tree invalidated *before* the object's memory is
// freed (CPython calls weakref callbacks from the object's dealloc), so a reused address can never
// make an invalidated tree pass: RootGuardManager::check() looks at the flag first.
//
// Ownership: a WeakTarget owns one weakref (py::object) whose callback is a C function bound to a
// capsule holding {std::weak_ptr<TreeState>, source}. Destroying the WeakTarget drops the weakref,
// which drops the callback and the capsule: the callback can no longer fire.
//
// Immortal-ish singletons (None, True, False, Ellipsis, NotImplemented) and static (non-heap)
// types are held strongly instead: they never die and holding them costs nothing. So are objects
// Python vouches for as living as long as the process (`hold`): torch.dtype, torch.layout and
// torch.memory_format are singletons in torch's own tables and cannot be weakly referenced; C++
// cannot tell them from other objects, Python decides (guard/tree.py).
//
// Threads: created, checked and destroyed under the GIL.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "guards/tree_state.h"

namespace tjc {

namespace py = pybind11;

class WeakTarget {
 public:
  // Watches `obj` (borrowed) for `source`. Fails with a TypeError status (guard_errors.h) when the
  // object cannot be weakly referenced; `guard_name` names the guard in that message.
  static absl::StatusOr<WeakTarget> watch(py::handle obj, const std::shared_ptr<TreeState>& state,
                                          const std::string& source, const char* guard_name);
  // Holds `obj` (borrowed) strongly: for objects that live as long as the process anyway.
  static WeakTarget hold(py::handle obj, const std::shared_ptr<TreeState>& state);

  WeakTarget(WeakTarget&&) noexcept = default;
  WeakTarget& operator=(WeakTarget&&) = delete;  // would lose the old target's watch count
  ~WeakTarget();

  // The identity to compare with. Never dereferenced: once the object is dead the tree is
  // invalidated and nobody compares against it any more.
  PyObject* ptr() const { return ptr_; }  // borrowed (or owned through strong_ when strong)
  bool is_weak() const { return weakref_.ptr() != nullptr; }

 private:
  WeakTarget(PyObject* ptr, py::object weakref, py::object strong,
             std::shared_ptr<TreeState> state);

  PyObject* ptr_;
  py::object weakref_;  // the weakref with our callback (weak targets only)
  py::object strong_;   // the object itself (singletons and static types only)
  std::shared_ptr<TreeState> state_;  // to keep TreeState::weak_watches exact
};

}  // namespace tjc
