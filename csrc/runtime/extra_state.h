// ExtraState: the cache of one code object, stored in the code's co_extra slot.
//
// Ownership: CPython owns the pointer through co_extra and deletes it with the slot's free
// function when the code object dies (or when the slot is overwritten); an ExtraState never
// outlives its code and holds it only as a borrowed pointer. Entries are held by shared_ptr in a
// list, most recently hit first.
//
// Owners (cache_owner.h): every entry belongs to one owner (a compile() call, or the shared owner
// of plain set_eval_frame callbacks) and a lookup sees only the current owner's entries. What a
// callback decided (SKIP, run-only at the limit) and the compile in progress are kept per owner in
// `owners_`; only an explicit disable() (runtime.set_skip, tjc.disable) applies to every owner.
//
// Re-entrancy: a guard's __eq__ or a destructor can run arbitrary Python in the middle of a
// lookup, including code that kills a guarded object (-> an eviction), calls reset(), or runs the
// same function on another thread. While any lookup on this ExtraState is in progress (`busy_`),
// evictions only mark entries evicted ("parked"); the last lookup to finish unlinks them.
// Operations that release Python objects first finish their own bookkeeping, pin the code object
// (so this ExtraState cannot be freed under them), release, then unpin as their last act.
//
// Threads: GIL held for everything, except CompileTicket::wait(), which is called with the GIL
// released. The GIL can be released inside a guard, so two threads may be inside lookup() at once;
// the list is only spliced when a single lookup is in progress.
#pragma once

#include <Python.h>

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "guards/frame_view.h"
#include "runtime/cache_entry.h"

namespace tjc {

class CacheOwner;

enum class FrameAction : uint8_t {
  kDefault,  // look up the cache; on a miss ask the callback
  kSkip,     // never intercept this code again (the callback said SKIP, or disable())
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

// One compile of one (code, owner) in progress: other threads that miss the same code for the
// same owner wait on it, with the GIL released, instead of compiling it a second time.
// Shared by the compiling thread (which finishes it on every path) and its waiters.
class CompileTicket {
 public:
  explicit CompileTicket(unsigned long thread) : thread_(thread) {}
  unsigned long thread() const { return thread_; }  // PyThread_get_thread_ident() of the compiler
  // Wakes every waiter. Needs no GIL; never blocks on a thread that holds the GIL.
  void finish();
  // Blocks until finish(). Call with the GIL released (the compiler needs it to finish).
  void wait();

 private:
  const unsigned long thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mutex_
};

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
  // An owner died: in every code, its entries are evicted and its state forgotten.
  static void drop_owner(uint64_t owner) noexcept;

  ~ExtraState();
  ExtraState(const ExtraState&) = delete;
  ExtraState& operator=(const ExtraState&) = delete;

  // The first of `owner`'s entries whose guards pass (moved to the front), or nullptr. Never
  // raises.
  std::shared_ptr<CacheEntry> lookup(const FrameView& view, uint64_t owner) noexcept;

  // Caches a new entry of `owner` at the front and wires its guards' invalidation to evict it.
  std::shared_ptr<CacheEntry> add(py::object code, std::shared_ptr<RootGuardManager> guards, uint64_t owner);

  // Evicts `entry` (unlinked now, or when the lookups in progress finish); counts an eviction.
  void evict(CacheEntry* entry, const std::string& reason);
  // Drops every entry and every owner's action (reset()), unless the code was disabled explicitly
  // (disable()): that outlives reset(). Compiles in progress finish normally.
  void clear(const std::string& reason);

  // Hot path: what to do with a frame of this code for `owner`.
  FrameAction action(uint64_t owner) const noexcept {
    if (disabled_) return FrameAction::kSkip;
    for (const OwnerState& state : owners_) {
      if (state.owner == owner) return state.action;
    }
    return FrameAction::kDefault;
  }
  void set_action(uint64_t owner, FrameAction action) {
    OwnerState& state = state_of(owner);
    state.action = action;
    state.quiet_runs = 0;
  }
  // A kSkipWatch run for `owner` ended; `quiet` says whether the runtime's compile and hit counters
  // stayed put.
  void note_watched_run(uint64_t owner, bool quiet) {
    OwnerState* state = find_mutable_state(owner);
    if (state == nullptr || state->action != FrameAction::kSkipWatch) return;  // reset() or a nested run decided
    if (!quiet) {
      set_action(owner, FrameAction::kSkip);
    } else if (++state->quiet_runs >= kQuietRunsForSkipTree) {
      set_action(owner, FrameAction::kSkipTree);
    }
  }
  // An explicit "never intercept", for every owner (runtime.set_skip / tjc.disable); survives
  // clear().
  void disable() { disabled_ = true; }
  bool disabled() const { return disabled_; }

  // Live entries: all of them, or one owner's.
  size_t live_entries() const;
  size_t live_entries(uint64_t owner) const;
  // The entries of `owner` that count against the cache limit for `view`: those whose identity
  // guards on locals (`L['self']` is this module) pass for it. N identical modules whose frames are
  // compiled on their own each get the full limit, as with TorchDynamo's per-ID_MATCH buckets.
  size_t entries_counted_for_limit(const FrameView& view, uint64_t owner) const;
  // Entries `owner` may cache per guarded object: the owner's limit (compile(cache_limit=...)),
  // else this code's own (runtime.set_cache_limit), else the process-wide config.cache_limit.
  int cache_limit(const CacheOwner& owner) const;
  void set_cache_limit(int limit) { cache_limit_ = limit; }
  // Whether the cache-limit warning for `owner` was given already (then marks it given).
  bool warn_once_at_limit(uint64_t owner);

  // The compile in progress for `owner` on another thread, or nullptr.
  std::shared_ptr<CompileTicket> compiling(uint64_t owner) const;
  // Marks a compile for `owner` started by this thread; end_compile() finishes it (every path).
  std::shared_ptr<CompileTicket> begin_compile(uint64_t owner);
  void end_compile(uint64_t owner, const std::shared_ptr<CompileTicket>& ticket);

  std::vector<std::shared_ptr<CacheEntry>> entries() const;                // live ones, all owners
  std::vector<std::shared_ptr<CacheEntry>> entries(uint64_t owner) const;  // live ones of `owner`
  PyCodeObject* code() const { return code_; }

 private:
  // What one owner decided for this code. Owners without a decision have no state.
  struct OwnerState {
    uint64_t owner;
    FrameAction action = FrameAction::kDefault;
    bool warned_at_limit = false;
    int quiet_runs = 0;  // kSkipWatch: quiet runs so far
    std::shared_ptr<CompileTicket> compiling;  // a compile in progress, or null
  };

  explicit ExtraState(PyCodeObject* code);
  OwnerState& state_of(uint64_t owner);  // created on first use
  const OwnerState* find_state(uint64_t owner) const;
  OwnerState* find_mutable_state(uint64_t owner) { return const_cast<OwnerState*>(find_state(owner)); }
  // Evicts `owner`'s entries and forgets its state (drop_owner()).
  void forget_owner(uint64_t owner);
  // Unlinks the evicted entries now and releases their payloads, or, while lookups are in progress
  // (busy_), parks them for the last lookup to unlink (clear(), forget_owner()).
  void unlink_evicted_unless_busy();
  // Unlinks the parked (evicted) entries; returns their payloads for release by the caller.
  void unlink_evicted(std::vector<py::object>* codes, std::vector<std::shared_ptr<RootGuardManager>>* guards);
  void unlink(CacheEntry* entry);

  PyCodeObject* code_;  // borrowed: this object lives inside the code's co_extra
  std::list<std::shared_ptr<CacheEntry>> entries_;
  std::vector<OwnerState> owners_;  // small: one per owner that made a decision for this code
  int busy_ = 0;           // lookups in progress on this ExtraState (any thread)
  bool parked_ = false;    // some entry was evicted while busy_ > 0
  bool disabled_ = false;  // set by disable(); clear() keeps it
  int cache_limit_ = 0;    // 0: use the owner's or the process-wide limit
};

}  // namespace tjc
