// CacheEntry: one compiled version of a code object — transformed code plus the guards that say
// when it may run.
//
// Ownership: an entry is held by std::shared_ptr — by its ExtraState's list while it is cached,
// by the eval-frame hook while it runs, and by any Python CacheEntry wrapper (pybind11 holder), so
// a wrapper that outlives the entry's eviction still points at a live C++ object and answers
// `evicted`. The entry owns its transformed code and its guard tree (the "payload"); it owns no
// user object a guard checks by identity (the guard tree holds those weakly). Eviction releases
// the payload at once, or when the entry's last running execution finishes.
//
// `owner_` is a raw back-pointer to the ExtraState whose list holds the entry; the ExtraState
// clears it when it unlinks the entry or dies, so an entry never reaches a dead ExtraState.
//
// Threads: GIL held for everything.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include "guards/frame_view.h"
#include "guards/root_guard_manager.h"

namespace tjc {

namespace py = pybind11;

class ExtraState;

class CacheEntry {
 public:
  CacheEntry(py::object code, std::shared_ptr<RootGuardManager> guards);
  ~CacheEntry();
  CacheEntry(const CacheEntry&) = delete;
  CacheEntry& operator=(const CacheEntry&) = delete;

  // Hot path; false once evicted.
  bool check(const FrameView& view) noexcept { return !evicted_ && guards_->check(view); }

  PyCodeObject* code() const { return code_ptr_; }  // borrowed; null once released
  py::object code_object() const;                   // None once released
  const std::shared_ptr<RootGuardManager>& guards() const { return guards_; }
  uint64_t hits() const { return hits_; }
  uint64_t& hits_ref() { return hits_; }
  bool evicted() const { return evicted_; }
  // The CacheOwner (cache_owner.h) whose compile made this entry; lookups for others skip it.
  uint64_t cache_owner() const { return cache_owner_; }
  const std::string& eviction_reason() const { return eviction_reason_; }

  // The first failing guard for `view`, in words; nullopt when all pass or when evicted.
  std::optional<std::string> explain(const FrameView& view);

 private:
  friend class ExtraState;
  friend class EntryRun;

  // Marks the entry evicted; the payload is released by release_payload() once nothing runs it.
  void mark_evicted(std::string reason);
  // Moves the payload out (to be released by the caller after its own bookkeeping is done).
  void take_payload(py::object* code, std::shared_ptr<RootGuardManager>* guards);

  // The transformed code. Owned through code_, except when it IS the original code (a JIT that
  // only adds guards): then the entry borrows it, since the original owns this entry through
  // co_extra and a strong reference back would be a cycle no collector can see.
  PyCodeObject* code_ptr_ = nullptr;
  py::object code_;
  std::shared_ptr<RootGuardManager> guards_;
  uint64_t hits_ = 0;
  int running_ = 0;                          // executions in progress (recursion, threads)
  bool evicted_ = false;
  std::string eviction_reason_;
  ExtraState* owner_ = nullptr;              // see the header comment
  uint64_t cache_owner_ = 0;                 // a CacheOwner id (never a pointer: owners die)
  std::list<std::shared_ptr<CacheEntry>>::iterator position_;  // valid while owner_ != nullptr
};

// RAII for one execution of an entry's code: keeps the entry alive and counts it as running, so an
// eviction during the run releases the payload only when the run ends.
class EntryRun {
 public:
  explicit EntryRun(std::shared_ptr<CacheEntry> entry);
  ~EntryRun();
  EntryRun(const EntryRun&) = delete;
  EntryRun& operator=(const EntryRun&) = delete;

 private:
  std::shared_ptr<CacheEntry> entry_;
};

}  // namespace tjc
