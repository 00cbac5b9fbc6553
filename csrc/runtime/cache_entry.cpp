// CacheEntry: transformed code + guards; released on eviction once nothing runs it.
#include "runtime/cache_entry.h"

#include <utility>

#include "common/check.h"
#include "common/live_objects.h"
#include "runtime/extra_state.h"

namespace tjc {

CacheEntry::CacheEntry(py::object code, std::shared_ptr<RootGuardManager> guards)
    : code_ptr_(reinterpret_cast<PyCodeObject*>(code.ptr())), code_(std::move(code)), guards_(std::move(guards)) {
  ++live_objects().cache_entries;
}

py::object CacheEntry::code_object() const {
  if (code_ptr_ == nullptr) return py::none();
  return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(code_ptr_));
}

CacheEntry::~CacheEntry() {
  --live_objects().cache_entries;
  // The ExtraState unlinks an entry (clearing owner_) before the last shared_ptr can go away.
  TJC_CHECK(owner_ == nullptr);
  if (guards_) guards_->set_invalidation_callback({});
}

std::optional<std::string> CacheEntry::explain(const FrameView& view) {
  if (evicted_ || !guards_) return std::nullopt;
  return guards_->explain(view);
}

void CacheEntry::mark_evicted(std::string reason) {
  if (evicted_) return;
  evicted_ = true;
  eviction_reason_ = std::move(reason);
}

void CacheEntry::take_payload(py::object* code, std::shared_ptr<RootGuardManager>* guards) {
  if (guards_) guards_->set_invalidation_callback({});
  *code = std::move(code_);
  *guards = std::move(guards_);
  code_ = py::object();
  code_ptr_ = nullptr;
  guards_.reset();
}

EntryRun::EntryRun(std::shared_ptr<CacheEntry> entry) : entry_(std::move(entry)) { ++entry_->running_; }

EntryRun::~EntryRun() {
  if (--entry_->running_ > 0 || !entry_->evicted_ || entry_->owner_ != nullptr) return;
  // Evicted while running and already unlinked: release the payload now that the run is over.
  // Move it out first: releasing can run arbitrary Python.
  py::object code;
  std::shared_ptr<RootGuardManager> guards;
  entry_->take_payload(&code, &guards);
}

}  // namespace tjc
