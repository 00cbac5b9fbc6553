// The torch backend registry: torch_backend() (declared in torch_backend.h) and the choice of
// backend it makes.
//
// Which backend serves guards: the first call to torch_backend() tries
// `import torch_jit_cache._C_torch`; that module's init registers its libtorch backend through the
// capsule _C._torch_backend_slot. When the import fails (not built, or built against another
// torch), the C-API fallback (torch_backend_python_api.h) serves them — slower, same answers, same text.
// The choice is made once per process; the reason the libtorch backend is not used is kept for
// diagnostics (torch_backend_fallback_reason()).
//
// State: RuntimeState's torch members (common/runtime_state.h). Backends live until the process
// exits (never freed: their destructors would run during interpreter finalization, after torch
// may be gone).
// GIL: every function here needs the GIL.
#pragma once

#include <Python.h>

#include <string>

#include "absl/status/statusor.h"
#include "guards/torch_backend.h"

namespace tjc {

// Which backend a caller wants. Only tests name one; the runtime uses kAuto.
enum class TorchBackendKind {
  kAuto,       // libtorch when _C_torch imports, else python-api
  kLibtorch,   // FailedPrecondition when _C_torch is not available
  kPythonApi,  // the C-API fallback, even when _C_torch is registered
};

absl::StatusOr<TorchBackend*> torch_backend(TorchBackendKind kind);

// The capsule exposed as _C._torch_backend_slot (new ref, or nullptr with an error set).
PyObject* make_torch_backend_slot();

// Why kAuto does not give the libtorch backend ("" when it does or was not asked yet).
const std::string& torch_backend_fallback_reason();

}  // namespace tjc
