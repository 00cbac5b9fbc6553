// TreeState: invalidation of one guard tree (see tree_state.h).
#include "guards/tree_state.h"

#include <Python.h>

#include <utility>

namespace tjc {

void TreeState::invalidate(std::string_view source) noexcept {
  if (invalidated) return;
  invalidated = true;
  try {
    dead_source.assign(source);
  } catch (...) {
    // Out of memory: explain() then names no source; the invalidation itself stands.
  }
  run_callback();
}

void TreeState::run_callback() noexcept {
  // Moved out first: the callback may drop the last reference to the root, whose destructor
  // clears on_invalidate; the local keeps the running function alive until it returns.
  std::function<void()> callback = std::move(on_invalidate);
  on_invalidate = nullptr;
  if (!callback) return;
  try {
    callback();
  } catch (...) {
    // The contract says the callback does not throw; if it does, the exception stops here.
  }
  if (PyErr_Occurred()) PyErr_WriteUnraisable(nullptr);
}

}  // namespace tjc
