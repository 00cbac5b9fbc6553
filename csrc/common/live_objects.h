// Live C++ objects of the runtime and the guard trees, counted in their constructors and
// destructors, so tests can require that nothing is left once every cache is dropped: a leaked C++
// object may hold no Python reference, and then nothing else can see it.
//
// Threads: updated and read under the GIL only.
#pragma once

#include <cstdint>

namespace tjc {

struct LiveObjects {
  int64_t extra_states = 0;    // one per code object that has a cache (dies with the code)
  int64_t cache_entries = 0;
  int64_t guard_managers = 0;  // guard tree nodes, roots included
};

inline LiveObjects& live_objects() {
  static LiveObjects live;
  return live;
}

}  // namespace tjc
