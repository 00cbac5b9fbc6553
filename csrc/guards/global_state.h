// GLOBAL_STATE through the C API: the fallback GlobalStateImpl used when _C_torch is not built.
//
// Reads torch.is_grad_enabled(), torch.get_default_dtype(),
// torch.are_deterministic_algorithms_enabled(), torch.is_autocast_enabled(d) and
// torch.get_autocast_dtype(d) for d in ('cpu', 'cuda'). dtypes are torch singletons, so the check
// compares them by identity; the bools are Py_True/Py_False. About seven Python calls per check.
//
// Ownership: the impl holds strong references to the dtype singletons it captured (torch objects,
// never user objects) and borrows the TorchPyApi, which lives for the process.
// GIL: every member needs the GIL; so does destroying the impl.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "guards/torch_backend.h"
#include "guards/torch_py_api.h"

namespace tjc {

// Captures the current global state. Internal (no Python error left set) when torch fails to
// answer, which only a broken torch does.
absl::StatusOr<std::unique_ptr<GlobalStateImpl>> make_python_api_global_state(const TorchPyApi& api);

}  // namespace tjc
