// Process-wide runtime counters and settings read on the hot path.
//
// Threads: written and read under the GIL only (no atomics needed on GIL builds).
#pragma once

#include <cstdint>

namespace tjc {

struct RuntimeStats {
  uint64_t hits = 0;        // a cached entry's guards passed and its code ran
  uint64_t misses = 0;      // no entry passed (the callback was asked, or the code is run-only)
  uint64_t compiles = 0;    // the callback returned GuardedCode that was cached
  uint64_t evictions = 0;   // entries freed because a weakly held object died
  uint64_t fallbacks = 0;   // frames that ran their original code after a miss
  uint64_t skips = 0;       // frames of codes marked skip
  uint64_t cache_limit_hits = 0;  // (code, owner) pairs that reached the cache limit (warned once)
  uint64_t compile_waits = 0;     // misses that waited for another thread's compile of the same code
};

RuntimeStats& runtime_stats();


// Entries per code object before it turns run-only (config.cache_limit).
int cache_limit();
void set_cache_limit(int limit);

}  // namespace tjc
