// The libtorch TorchBackend, built into torch_jit_cache._C_torch only.
//
// This header is torch-free on purpose: the module file that registers the backend includes it
// without paying for libtorch's headers; all libtorch code sits in torch_backend_libtorch.cpp.
//
// Ownership: the backend is a process-lifetime singleton (never destroyed; see torch_backend.h).
// GIL: call under the GIL.
#pragma once

#include "guards/torch_backend.h"

namespace tjc {

// The singleton; made on first call.
TorchBackend* libtorch_backend();

}  // namespace tjc
