// CacheOwner: ids that are never reused, and dropping an owner's state from every code's cache.
#include "runtime/cache_owner.h"

#include "common/runtime_state.h"
#include "runtime/extra_state.h"

namespace tjc {

CacheOwner::CacheOwner(int cache_limit) : id_(runtime_state().next_owner_id++), cache_limit_(cache_limit) {}

CacheOwner::CacheOwner(SharedTag) : id_(0), cache_limit_(0) {}

CacheOwner::~CacheOwner() { ExtraState::drop_owner(id_); }

CacheOwner& CacheOwner::shared() {
  static auto* owner = new CacheOwner(SharedTag{});  // leaked on purpose: lives for the process
  return *owner;
}

}  // namespace tjc
