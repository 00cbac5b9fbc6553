// GuardedCode: what a cache-miss callback returns to have transformed code cached and run.
//
// Ownership: holds the transformed code and shares ownership of its guard tree. The tree is bound
// (frozen, names resolved) to the original code when the entry is created.
//
// Threads: GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "absl/status/statusor.h"
#include "guards/root_guard_manager.h"

namespace tjc {

namespace py = pybind11;

struct GuardedCode {
  py::object code;  // a code object that keeps the original's argument names as a prefix
  std::shared_ptr<RootGuardManager> guards;
};

// What the callback asked for besides GuardedCode.
enum class CallbackAction : uint8_t {
  kSkip,         // never intercept this code again; run it uncompiled
  kRunOriginal,  // run this call uncompiled; ask again next time
  kSkipTreeIfQuiet,  // as kSkip; once its runs prove quiet, its callees are not intercepted either
  kSkipTree,         // as kSkip, and the frames it calls are never intercepted either
};

// Validates `code` and `guards` for a frame running `original`: the shadow-frame rules
// (csrc/cpython/frame.h: check_shadow_compatible) and the guard tree's binding.
absl::Status validate_guarded_code(const GuardedCode& guarded, PyCodeObject* original);

}  // namespace tjc
