// The C-API fallback TorchBackend ("python-api"), inside _C: reads tensors through Python
// attributes (type(x), x.dtype, x.device, x.requires_grad, x.size(), x.stride(), the dispatch key
// set) when the libtorch backend (_C_torch) is not available. Slower than libtorch; same answers,
// same text.
//
// Ownership: the backend lives until the process exits (RuntimeState::python_api_backend, never
// freed: its destructor would run during interpreter finalization, after torch may be gone). A
// TENSOR_MATCH it makes holds the example's dtype and device objects (torch singletons / small
// value objects), its type (strongly for torch.Tensor and torch.nn.Parameter, weakly for anything
// else) and never the example tensor.
// GIL: every function here needs the GIL; so does destroying a TENSOR_MATCH it made.
#pragma once

#include "absl/status/statusor.h"
#include "guards/torch_backend.h"

namespace tjc {

// The fallback backend, made on first call; FailedPrecondition when torch does not import.
absl::StatusOr<TorchBackend*> python_api_backend();

}  // namespace tjc
