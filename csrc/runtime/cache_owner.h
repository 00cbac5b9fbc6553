// CacheOwner: whose cache entries these are. Each compile() call owns one; entries, frame actions
// decided by a callback (SKIP, run-only at the cache limit) and cache limits are kept per owner,
// so what one compile() decided never changes another's behaviour.
//
// Identity: an owner is known to the caches by its id, a number never reused in the process, so a
// code's cache never holds a pointer to an owner and a stale id can only ever match nothing.
// Plain `runtime.set_eval_frame(cb)` callbacks share one owner, `CacheOwner::shared()` (id 0),
// which lives for the whole process: the JIT-author API keeps one cache per code, as before.
//
// Ownership: a compile() call's owner is held by its FrameCompiler (`cache_owner`, a pybind11
// shared_ptr holder); the CompiledFunction and the thread state hold the Python object strongly
// while a call runs. When the owner dies, its destructor evicts its entries and forgets its
// per-code state in every cache: the entries of a compile die with the compiled object.
//
// Threads: GIL held for everything.
#pragma once

#include <cstdint>

namespace tjc {

class CacheOwner {
 public:
  // `cache_limit`: entries per code (per guarded object, see ExtraState) for this owner; 0 uses
  // the code's own limit or the process-wide config.cache_limit.
  explicit CacheOwner(int cache_limit = 0);
  ~CacheOwner();
  CacheOwner(const CacheOwner&) = delete;
  CacheOwner& operator=(const CacheOwner&) = delete;

  uint64_t id() const { return id_; }
  int cache_limit() const { return cache_limit_; }

  // The owner of plain set_eval_frame callbacks; never destroyed.
  static CacheOwner& shared();

 private:
  struct SharedTag {};
  explicit CacheOwner(SharedTag);

  uint64_t id_;
  int cache_limit_;
};

}  // namespace tjc
