// RootGuardManager: the root of one cache entry's guard tree ("the frame being checked").
//
// This header is the contract between the guard tree (csrc/guards/, owned by the guard code) and
// the runtime (csrc/runtime/). The runtime uses ONLY the public members below.
//
// Ownership: a root is held by std::shared_ptr — by its Python wrapper (runtime.GuardManager) and,
// once a GuardedCode is created from it, by that GuardedCode and then by the CacheEntry. Objects
// checked by identity (ID_MATCH) are held weakly: when one dies, the root becomes invalidated and
// its invalidation callback runs once.
//
// Freezing: bind() freezes the tree; after it, adding guards raises (a tree that is being checked
// must not change under the check: a guard's __eq__ can run arbitrary Python).
//
// Threads: everything runs under the GIL. check() never releases it.
#pragma once

#include <Python.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "guards/frame_view.h"
#include "guards/guard_manager.h"
#include "guards/identity_relation.h"
#include "guards/shape_guards.h"
#include <vector>

namespace tjc {

class RootGuardManager : public GuardManager {
 public:
  RootGuardManager();
  ~RootGuardManager() override;

  // Resolves local and closure names to the indices of `code` (argument slots and free-variable
  // slots) and freezes the tree. Fails (InvalidArgument) when a guarded local is not an argument of
  // `code` (only arguments are bound at frame entry), or a closure name is not a free variable.
  // Binding twice to the same code is a no-op; to another code, an error.
  absl::Status bind(PyCodeObject* code);
  bool bound() const;

  // Hot path: true when every guard passes. Never leaves a Python exception set: a guard that
  // raises counts as failed (the error is cleared). Allocates nothing on success.
  bool check(const FrameView& view) noexcept;

  // Slow path: the first failing guard in words (`L['x'].size()[0]: expected 8, got 16`), or
  // nullopt when all pass. Never leaves a Python exception set.
  std::optional<std::string> explain(const FrameView& view);

  // The tree as readable, stable text (one guard per line, indented by source).
  std::string debug_string() const;

  // Called once, with the GIL held, when an object held weakly by a guard of this tree dies (or
  // immediately from set_invalidation_callback when one already has). The callback must not
  // throw. Replaces any earlier callback; an empty function clears it.
  void set_invalidation_callback(std::function<void()> callback);
  bool invalidated() const;

  // Slow path (cache-limit accounting): true when every ID_MATCH guard placed directly on a local
  // (`L['self']` is some module) passes for `view`; true when there are none. The runtime counts
  // the cache limit per guarded object with it, as TorchDynamo's per-ID_MATCH buckets do. Leaves
  // no Python error set; reorders and counts nothing.
  bool local_identities_match(const FrameView& view) const;

  // ---- Added by the guard code (not used by the runtime's contract above).

  // Builder: children that read the frame view are GuardManager::child(kind, name) with a kFrame
  // kind (kLocal, kGlobal, kBuiltin, kClosure); those with a FrameSlot (local, closure) are resolved
  // to frame slots by bind(); global_ reads f_globals only; builtin reads f_builtins.
  // GLOBAL_STATE leaf on the root (through torch_backend()).
  absl::Status add_global_state();
  // True when some guard holds an object weakly (its death would invalidate this tree).
  bool has_identity_guards() const;
  // OBJECT_ALIASING (identity_relation.h): `nodes` (nodes of this tree) must reach objects that are
  // the same exactly where `classes` (canonical: classes[i] is the first index of i's object) says
  // they were when compiled. Checked after every node passed; holds no object.
  absl::Status add_identity_relation(const std::vector<std::shared_ptr<GuardManager>>& nodes,
                                     const std::vector<int>& classes);
  const std::vector<std::unique_ptr<IdentityRelation>>& relations() const { return relations_; }
  // SYMBOLIC_SHAPES (shape_guards.h): each binding's node must be a node of this tree; its chain
  // from the root is found here. Checked after every node passed (before the relations); holds no
  // object. May be called more than once (each call adds one independent guard).
  struct ShapeBinding {
    std::shared_ptr<GuardManager> node;
    SymbolRead read;
    int dim;
    int symbol;
  };
  absl::Status add_shape_guards(const std::vector<ShapeBinding>& bindings, size_t num_symbols,
                                std::vector<ShapeGuards::Range> ranges, std::vector<ShapeProgram> exprs);
  const std::vector<std::unique_ptr<ShapeGuards>>& shape_guards() const { return shape_guards_; }
  // Leaf guards in the tree plus the SYMBOLIC_SHAPES lines.
  int64_t num_guards() const override;

 private:
  // Frame mode checks compare view.code with this pointer only; the weakref (no callback) lets
  // bind() tell a live code from a dead one whose address was reused. Never a strong reference:
  // the code's co_extra owns the cache entry that owns this root (a strong one would be a cycle no
  // collector can see).
  PyCodeObject* code_ = nullptr;  // borrowed identity
  py::object code_ref_;           // weakref to the bound code
  std::string code_name_;         // for messages
  // Checked after the tree (check_value) passed, in order; a failing one moves to the front.
  std::vector<std::unique_ptr<IdentityRelation>> relations_;
  // Checked after the tree passed and before the relations, in order.
  std::vector<std::unique_ptr<ShapeGuards>> shape_guards_;
};

}  // namespace tjc
