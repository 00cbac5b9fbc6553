// The project's one pair of invariant macros: TJC_CHECK (always on) and TJC_DCHECK (debug builds).
//
// Debian's abseil 20220623 predates absl/log, so we keep our own. A failed check is a bug in this
// project, never a user error: user errors travel as absl::Status and become Python exceptions in
// csrc/bindings/. A failed check prints the condition and location and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tjc::detail {
[[noreturn]] inline void check_failed(const char* cond, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "torch_jit_cache: internal check failed: %s at %s:%d%s%s\n", cond, file, line,
               msg[0] ? ": " : "", msg);
  std::fflush(stderr);
  std::abort();
}
}  // namespace tjc::detail

#define TJC_CHECK_MSG(cond, msg)                                                    \
  do {                                                                              \
    if (__builtin_expect(!(cond), 0)) ::tjc::detail::check_failed(#cond, __FILE__, __LINE__, msg); \
  } while (0)
#define TJC_CHECK(cond) TJC_CHECK_MSG(cond, "")

#ifdef NDEBUG
#define TJC_DCHECK(cond) \
  do {                   \
  } while (0)
#else
#define TJC_DCHECK(cond) TJC_CHECK(cond)
#endif

#define TJC_LIKELY(x) __builtin_expect(!!(x), 1)
#define TJC_UNLIKELY(x) __builtin_expect(!!(x), 0)
