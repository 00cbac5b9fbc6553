// ExtraState: per-code cache list, eviction with parking, reset.
#include "runtime/extra_state.h"

#include <pythread.h>

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "common/check.h"
#include "common/live_objects.h"
#include "common/runtime_state.h"
#include "cpython/code_extra.h"
#include "runtime/cache_owner.h"

namespace tjc {
namespace {

// Every live ExtraState, so reset() can reach them. Raw pointers are safe: an ExtraState removes
// itself in its destructor, and nothing looks one up by address.
absl::flat_hash_set<ExtraState*>& registry() {
  static auto* set = new absl::flat_hash_set<ExtraState*>();
  return *set;
}

// Keeps a code object (and so its ExtraState) alive for the duration of a scope.
class PinCode {
 public:
  explicit PinCode(PyCodeObject* code) : code_(code) { Py_INCREF(code_); }
  ~PinCode() { Py_DECREF(code_); }
  PinCode(const PinCode&) = delete;
  PinCode& operator=(const PinCode&) = delete;

 private:
  PyCodeObject* code_;
};

}  // namespace

const char* frame_action_name(FrameAction action) {
  switch (action) {
    case FrameAction::kDefault:
      return "default";
    case FrameAction::kSkip:
      return "skip";
    case FrameAction::kRunOnly:
      return "run-only";
    case FrameAction::kSkipWatch:
      return "skip-watch";
    case FrameAction::kSkipTree:
      return "skip-tree";
  }
  return "?";
}

ExtraState::ExtraState(PyCodeObject* code) : code_(code) {
  registry().insert(this);
  ++live_objects().extra_states;
}

ExtraState::~ExtraState() {
  registry().erase(this);
  --live_objects().extra_states;
  // A compiling frame holds its code, so no compile can be in progress; wake waiters regardless.
  for (OwnerState& state : owners_) {
    if (state.compiling) state.compiling->finish();
  }
  // Detach every entry first, so an invalidation that fires while payloads are released (below,
  // through arbitrary destructors) finds no owner to call back into.
  std::list<std::shared_ptr<CacheEntry>> entries = std::move(entries_);
  entries_.clear();
  for (auto& entry : entries) {
    if (!entry->evicted_) ++runtime_state().stats.evictions;
    entry->mark_evicted("its code object was freed");
    entry->owner_ = nullptr;
  }
  for (auto& entry : entries) {
    if (entry->running_ == 0) {
      py::object code;
      std::shared_ptr<RootGuardManager> guards;
      entry->take_payload(&code, &guards);
    }
  }
}

ExtraState* ExtraState::get(PyCodeObject* code) { return static_cast<ExtraState*>(cpython::get_code_extra(code)); }

ExtraState* ExtraState::get_or_create(PyCodeObject* code) {
  if (ExtraState* existing = get(code)) return existing;
  if (!cpython::init_code_extra(&ExtraState::free_extra)) return nullptr;
  auto* extra = new ExtraState(code);
  if (!cpython::set_code_extra(code, extra)) {
    delete extra;
    return nullptr;
  }
  return extra;
}

void ExtraState::free_extra(void* extra) noexcept { delete static_cast<ExtraState*>(extra); }

std::vector<py::object> ExtraState::all_codes() {
  std::vector<py::object> codes;
  codes.reserve(registry().size());
  for (ExtraState* extra : registry()) {
    codes.push_back(py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(extra->code_)));
  }
  return codes;
}

std::shared_ptr<CacheEntry> ExtraState::lookup(const FrameView& view, uint64_t owner) noexcept {
  ++busy_;
  std::shared_ptr<CacheEntry> found;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if ((*it)->cache_owner_ == owner && (*it)->check(view)) {
      found = *it;
      break;
    }
  }
  if (--busy_ > 0) return found;  // another lookup is iterating: leave the list as it is
  if (found && found->owner_ == this && !found->evicted_ && found->position_ != entries_.begin()) {
    entries_.splice(entries_.begin(), entries_, found->position_);
  }
  if (parked_) {
    // `found` (held above) stays alive even if it was evicted meanwhile.
    PinCode pin(code_);
    std::vector<py::object> codes;
    std::vector<std::shared_ptr<RootGuardManager>> guards;
    unlink_evicted(&codes, &guards);
    codes.clear();
    guards.clear();
  }
  return found && !found->evicted_ ? found : nullptr;
}

std::shared_ptr<CacheEntry> ExtraState::add(py::object code, std::shared_ptr<RootGuardManager> guards,
                                            uint64_t owner) {
  auto entry = std::make_shared<CacheEntry>(std::move(code), guards);
  if (entry->code_ptr_ == code_) entry->code_ = py::object();  // borrowed: see CacheEntry::code_ptr_
  entry->cache_owner_ = owner;
  entries_.push_front(entry);
  entry->owner_ = this;
  entry->position_ = entries_.begin();
  std::weak_ptr<CacheEntry> weak = entry;
  // Called once when a weakly held object of the tree dies. Holds only a weak_ptr: no cycle.
  guards->set_invalidation_callback([weak]() {
    std::shared_ptr<CacheEntry> e = weak.lock();
    if (e && e->owner_ != nullptr) e->owner_->evict(e.get(), "a guarded object was deallocated");
  });
  return entry;
}

void ExtraState::evict(CacheEntry* entry, const std::string& reason) {
  if (entry->owner_ != this || entry->evicted_) return;
  entry->mark_evicted(reason);
  ++runtime_state().stats.evictions;
  if (busy_ > 0) {
    parked_ = true;
    return;
  }
  PinCode pin(code_);
  std::shared_ptr<CacheEntry> keep = *entry->position_;
  py::object code;
  std::shared_ptr<RootGuardManager> guards;
  unlink(entry);
  if (entry->running_ == 0) entry->take_payload(&code, &guards);
  // `code`, `guards` and `keep` are released here, after the bookkeeping, then the pin.
}

void ExtraState::clear(const std::string& reason) {
  // A compile in progress keeps its ticket (its waiters are woken when it ends); only decisions go.
  for (OwnerState& state : owners_) {
    state.action = FrameAction::kDefault;
    state.warned_at_limit = false;
    state.quiet_runs = 0;
  }
  for (auto& entry : entries_) {
    if (!entry->evicted_) entry->mark_evicted(reason);
  }
  unlink_evicted_unless_busy();
}

void ExtraState::unlink_evicted_unless_busy() {
  if (busy_ > 0) {
    parked_ = true;  // the last lookup in progress unlinks them
    return;
  }
  PinCode pin(code_);
  std::vector<py::object> codes;
  std::vector<std::shared_ptr<RootGuardManager>> guards;
  unlink_evicted(&codes, &guards);
  // The payloads are released here, after the bookkeeping, then the pin.
}

void ExtraState::drop_owner(uint64_t owner) noexcept {
  // all_codes() holds a reference to every code, so releasing one cache's payloads (arbitrary
  // destructors) cannot free another's ExtraState under this loop.
  try {
    for (const py::object& code : all_codes()) {
      if (ExtraState* extra = get(reinterpret_cast<PyCodeObject*>(code.ptr()))) extra->forget_owner(owner);
    }
  } catch (...) {
    // all_codes() allocates; out of memory here leaves the entries to die with their codes.
  }
}

void ExtraState::forget_owner(uint64_t owner) {
  for (auto it = owners_.begin(); it != owners_.end(); ++it) {
    if (it->owner == owner) {
      if (it->compiling) it->compiling->finish();
      owners_.erase(it);
      break;
    }
  }
  bool any = false;
  for (auto& entry : entries_) {
    if (entry->cache_owner_ != owner || entry->evicted_) continue;
    entry->mark_evicted("its compile() wrapper was freed");
    ++runtime_state().stats.evictions;
    any = true;
  }
  if (!any) return;
  unlink_evicted_unless_busy();
}

void ExtraState::unlink(CacheEntry* entry) {
  TJC_DCHECK(entry->owner_ == this);
  auto position = entry->position_;
  entry->owner_ = nullptr;
  entries_.erase(position);
}

void ExtraState::unlink_evicted(std::vector<py::object>* codes,
                                std::vector<std::shared_ptr<RootGuardManager>>* guards) {
  parked_ = false;
  std::vector<std::shared_ptr<CacheEntry>> dropped;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if ((*it)->evicted_) {
      dropped.push_back(*it);
      (*it)->owner_ = nullptr;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& entry : dropped) {
    if (entry->running_ > 0) continue;
    codes->emplace_back();
    guards->emplace_back();
    entry->take_payload(&codes->back(), &guards->back());
  }
}

ExtraState::OwnerState& ExtraState::state_of(uint64_t owner) {
  for (OwnerState& state : owners_) {
    if (state.owner == owner) return state;
  }
  owners_.push_back(OwnerState{owner});
  return owners_.back();
}

const ExtraState::OwnerState* ExtraState::find_state(uint64_t owner) const {
  for (const OwnerState& state : owners_) {
    if (state.owner == owner) return &state;
  }
  return nullptr;
}

int ExtraState::cache_limit(const CacheOwner& owner) const {
  return resolve_cache_limit(owner.cache_limit(), cache_limit_);
}

bool ExtraState::warn_once_at_limit(uint64_t owner) {
  OwnerState& state = state_of(owner);
  if (state.warned_at_limit) return false;
  state.warned_at_limit = true;
  return true;
}

size_t ExtraState::live_entries() const {
  size_t n = 0;
  for (const auto& entry : entries_) n += entry->evicted_ ? 0 : 1;
  return n;
}

size_t ExtraState::live_entries(uint64_t owner) const {
  size_t n = 0;
  for (const auto& entry : entries_) n += !entry->evicted_ && entry->cache_owner_ == owner ? 1 : 0;
  return n;
}

size_t ExtraState::entries_counted_for_limit(const FrameView& view, uint64_t owner) const {
  size_t n = 0;
  // Identity checks only compare pointers (no Python runs), so the list cannot change under us.
  for (const auto& entry : entries_) {
    if (entry->evicted_ || entry->cache_owner_ != owner || !entry->guards_) continue;
    if (entry->guards_->local_identities_match(view)) ++n;
  }
  return n;
}

std::shared_ptr<CompileTicket> ExtraState::compiling(uint64_t owner) const {
  const OwnerState* state = find_state(owner);
  return state != nullptr ? state->compiling : nullptr;
}

std::shared_ptr<CompileTicket> ExtraState::begin_compile(uint64_t owner) {
  auto ticket = std::make_shared<CompileTicket>(PyThread_get_thread_ident());
  OwnerState& state = state_of(owner);
  // A compile of this thread already in progress (recursion) keeps its ticket: waiters wait for
  // the outer one, which ends last.
  if (!state.compiling) state.compiling = ticket;
  return ticket;
}

void ExtraState::end_compile(uint64_t owner, const std::shared_ptr<CompileTicket>& ticket) {
  for (OwnerState& state : owners_) {
    if (state.owner == owner && state.compiling == ticket) state.compiling.reset();
  }
  ticket->finish();
}

void CompileTicket::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

void CompileTicket::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return done_; });
}

std::vector<std::shared_ptr<CacheEntry>> ExtraState::entries() const {
  std::vector<std::shared_ptr<CacheEntry>> out;
  for (const auto& entry : entries_) {
    if (!entry->evicted_) out.push_back(entry);
  }
  return out;
}

std::vector<std::shared_ptr<CacheEntry>> ExtraState::entries(uint64_t owner) const {
  std::vector<std::shared_ptr<CacheEntry>> out;
  for (const auto& entry : entries_) {
    if (!entry->evicted_ && entry->cache_owner_ == owner) out.push_back(entry);
  }
  return out;
}

}  // namespace tjc
