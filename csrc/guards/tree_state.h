// TreeState: the state every node of one guard tree shares (frozen flag, invalidation).
//
// Ownership: held by std::shared_ptr from every GuardManager node of the tree (the root and each
// child), so a child that outlives its root (a Python wrapper kept after the root's was dropped)
// still sees a valid state. The state points at no node, so there is no cycle. Weakref callbacks
// hold only a std::weak_ptr to it (weak_identity.h): a dead tree is never kept alive by the
// objects it guards.
//
// Threads: every member is read and written under the GIL only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tjc {

struct TreeState {
  // Set by RootGuardManager::bind(); after it no guard or child may be added (a check can run
  // arbitrary Python through __eq__, and the tree must not change under it).
  bool frozen = false;
  // Set once, when an object held weakly by a guard of this tree dies. Never cleared: the address
  // of the dead object may be reused, so the tree can never pass again.
  bool invalidated = false;
  // The source of the first guarded object that died (`L['self'].fc`), for explain().
  std::string dead_source;
  // The root's invalidation callback; moved out and run at most once. Cleared by the root's
  // destructor, so a child that outlives the root never calls into the runtime's freed entry.
  std::function<void()> on_invalidate;
  // Number of live weak identity watches (ID_MATCH, TYPE_MATCH on heap types) in the tree.
  int64_t weak_watches = 0;

  // Marks the tree invalidated (first call only) and runs the callback. Called from weakref
  // callbacks; never throws and leaves no Python error set.
  void invalidate(std::string_view source) noexcept;
  // Moves the callback out and runs it; reports a Python error it left with PyErr_WriteUnraisable.
  void run_callback() noexcept;
};

}  // namespace tjc
