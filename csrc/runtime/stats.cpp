// Process-wide runtime counters and settings.
#include "runtime/stats.h"

namespace tjc {

namespace {
RuntimeStats g_stats;
int g_cache_limit = 8;
}  // namespace

RuntimeStats& runtime_stats() { return g_stats; }
int cache_limit() { return g_cache_limit; }
void set_cache_limit(int limit) { g_cache_limit = limit; }

}  // namespace tjc
