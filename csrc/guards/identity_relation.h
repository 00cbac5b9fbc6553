// IdentityRelation: a root-level guard on how several sources alias each other ("L['a'].x is not
// L['b'].x", "L['p'] is L['q']"), the relation TorchDynamo's duplicate-input / no-aliasing guards
// check. The tracer adds one where a trace is exact only while two sources keep reaching distinct
// objects (or one object) as they did when it was compiled (tracer/side_effects.py).
//
// What it holds: for each source, the chain of tree nodes from the root's child down to that
// source's node (shared_ptr; nodes never point up, so no cycle), and the source's class: the index
// of the first source that reached the same object at compile time. It holds NO user object:
// identity is compared at check time only, between values fetched anew, so a cached entry keeps
// nothing alive through it and a reused address cannot pass (both values are alive while compared).
//
// Evaluation: RootGuardManager::check runs relations after every node passed (the sources' types
// and keys are known good then, so fetching them again runs nothing the node guards did not).
// Each source's value is fetched again through its accessors: the cost is one walk per source.
// Up to kInlineSources values are held on the stack; more (rare) use a vector.
//
// Threads: under the GIL.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "guards/frame_view.h"

namespace tjc {

class GuardManager;

class IdentityRelation {
 public:
  struct Member {
    std::vector<std::shared_ptr<GuardManager>> chain;  // root's child first, the source's node last
    int cls;  // index of the first member that was the same object at compile time (itself if none)
  };
  static constexpr size_t kInlineSources = 8;

  // `classes[i]` must be <= i and classes[classes[i]] == classes[i] (a canonical partition).
  static absl::StatusOr<std::unique_ptr<IdentityRelation>> make(std::vector<Member> members);

  // Hot path: fetch every member, compare identities pairwise with the compile-time classes.
  // Leaves no Python error set (an access that raises counts as a failure).
  bool check(const FrameView& view) const noexcept;
  // Slow path: the first broken pair in words, or nullopt.
  std::optional<std::string> explain(const FrameView& view) const;
  std::string describe() const;
  void count_failure() { ++fail_count_; }
  int64_t fail_count() const { return fail_count_; }
  size_t size() const { return members_.size(); }

 private:
  explicit IdentityRelation(std::vector<Member> members) : members_(std::move(members)) {}
  // New reference or NULL (missing or raised: the error, if any, is left for the caller).
  static PyObject* fetch(const Member& member, const FrameView& view) noexcept;
  bool compare(PyObject* const* values) const noexcept;

  std::vector<Member> members_;
  int64_t fail_count_ = 0;
};

}  // namespace tjc
