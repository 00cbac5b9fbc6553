// ExtraState: the cache of one code object, stored in the code's co_extra slot.
//
// Ownership: CPython owns the pointer through co_extra and deletes it with the slot's free
// function when the code object dies (or when the slot is overwritten); an ExtraState never
// outlives its code and holds it only as a borrowed pointer. Entries are held by shared_ptr in a
// list, most recently hit first.
//
// Re-entrancy: a guard's __eq__ or a destructor can run arbitrary Python in the middle of a
// lookup, including code that kills a guarded object (-> an eviction), calls reset(), or runs the
// same function on another thread. While any lookup on this ExtraState is in progress (`busy_`),
// evictions only mark entries evicted ("parked"); the last lookup to finish unlinks them.
// Operations that release Python objects first finish their own bookkeeping, pin the code object
// (so this ExtraState cannot be freed under them), release, then unpin as their last act.
//
// Threads: GIL held for everything. The GIL can be released inside a guard, so two threads may be
// inside lookup() at once; the list is only spliced when a single lookup is in progress.
#pragma once

#include <Python.h>

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "guards/frame_view.h"
#include "runtime/cache_entry.h"

namespace tjc {

enum class FrameAction : uint8_t {
  kDefault,  // look up the cache; on a miss ask the callback
  kSkip,     // never intercept this code again (the callback said SKIP)
  kRunOnly,  // look up the cache; on a miss run the original code (the cache limit was reached)
  // Skip this code, and watch its runs: a run during which nothing was compiled and no entry hit
  // (anywhere: the runtime's counters did not move) is "quiet". After kQuietRunsForSkipTree quiet
  // runs the code turns kSkipTree; one run that is not quiet turns it kSkip for good.
  kSkipWatch,
  // Run this code and every frame it calls with interception off (the hook removed while no other
  // thread needs it): on 3.11 an installed hook alone turns off inlined Python calls, which made
  // pure-Python work inside a compiled call 25-50% slower than eager.
  kSkipTree,
};

// Quiet runs of a kSkipWatch code before it turns kSkipTree: the first run traces every callee
// once; the second shows the callees' decisions hold.
inline constexpr int kQuietRunsForSkipTree = 2;

const char* frame_action_name(FrameAction action);

class ExtraState {
 public:
  // The code's ExtraState, or nullptr when it has none. Never raises.
  static ExtraState* get(PyCodeObject* code);
  // The code's ExtraState, created on first use; nullptr with a Python error set on failure.
  static ExtraState* get_or_create(PyCodeObject* code);
  // The free function registered for the co_extra slot.
  static void free_extra(void* extra) noexcept;
  // Every live ExtraState's code, each with a new reference (for reset()).
  static std::vector<py::object> all_codes();

  ~ExtraState();
  ExtraState(const ExtraState&) = delete;
  ExtraState& operator=(const ExtraState&) = delete;

  // The first entry whose guards pass (moved to the front), or nullptr. Never raises.
  std::shared_ptr<CacheEntry> lookup(const FrameView& view) noexcept;

  // Caches a new entry at the front and wires its guards' invalidation to evict it.
  std::shared_ptr<CacheEntry> add(py::object code, std::shared_ptr<RootGuardManager> guards);

  // Evicts `entry` (unlinked now, or when the lookups in progress finish); counts an eviction.
  void evict(CacheEntry* entry, const std::string& reason);
  // Drops every entry and resets the action to kDefault (reset()), unless the code was disabled
  // explicitly (disable()): that outlives reset().
  void clear(const std::string& reason);

  FrameAction action() const { return action_; }
  void set_action(FrameAction action) {
    action_ = action;
    quiet_runs_ = 0;
  }
  // A kSkipWatch run ended; `quiet` says whether the runtime's compile and hit counters stayed put.
  void note_watched_run(bool quiet) {
    if (action_ != FrameAction::kSkipWatch) return;  // reset() or a nested run decided already
    if (!quiet) {
      set_action(FrameAction::kSkip);
    } else if (++quiet_runs_ >= kQuietRunsForSkipTree) {
      set_action(FrameAction::kSkipTree);
    }
  }
  // An explicit "never intercept" (runtime.set_skip / tjc.disable); survives clear().
  void disable() {
    action_ = FrameAction::kSkip;
    disabled_ = true;
  }
  size_t live_entries() const;
  // Entries this code may cache: its own limit when set (compile(cache_limit=...)), else the
  // process-wide config.cache_limit.
  int cache_limit() const;
  void set_cache_limit(int limit) { cache_limit_ = limit; }
  std::vector<std::shared_ptr<CacheEntry>> entries() const;  // live ones, lookup order
  PyCodeObject* code() const { return code_; }

 private:
  explicit ExtraState(PyCodeObject* code);
  // Unlinks the parked (evicted) entries; returns their payloads for release by the caller.
  void unlink_evicted(std::vector<py::object>* codes, std::vector<std::shared_ptr<RootGuardManager>>* guards);
  void unlink(CacheEntry* entry);

  PyCodeObject* code_;  // borrowed: this object lives inside the code's co_extra
  std::list<std::shared_ptr<CacheEntry>> entries_;
  FrameAction action_ = FrameAction::kDefault;
  int busy_ = 0;        // lookups in progress on this ExtraState (any thread)
  bool parked_ = false; // some entry was evicted while busy_ > 0
  bool disabled_ = false;  // set by disable(); clear() keeps kSkip
  int cache_limit_ = 0;     // 0: use the process-wide limit
  int quiet_runs_ = 0;      // kSkipWatch: quiet runs so far
};


}  // namespace tjc
