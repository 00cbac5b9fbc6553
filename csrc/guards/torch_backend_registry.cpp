// The torch backend registry: which TorchBackend serves guards (see torch_backend_registry.h).
#include "guards/torch_backend_registry.h"

#include <string>

#include "common/check.h"
#include "common/runtime_state.h"
#include "guards/tensor_text.h"
#include "guards/torch_backend_python_api.h"

namespace tjc {
namespace {

void register_from_capsule(TorchBackend* backend) { register_torch_backend(backend); }

// Imports _C_torch once; its module init calls register_torch_backend().
void try_import_libtorch_backend() {
  RuntimeState& state = runtime_state();
  if (state.libtorch_import_tried || state.registered_backend != nullptr) return;
  state.libtorch_import_tried = true;
  PyObject* mod = PyImport_ImportModule("torch_jit_cache._C_torch");
  if (mod == nullptr) {
    state.libtorch_fallback_reason =
        torch_text::cat("import torch_jit_cache._C_torch: ", torch_text::take_error_text());
    return;
  }
  Py_DECREF(mod);
  if (state.registered_backend == nullptr) {
    state.libtorch_fallback_reason = "torch_jit_cache._C_torch did not register a backend";
  }
}

}  // namespace

void register_torch_backend(TorchBackend* backend) {
  TJC_CHECK(backend != nullptr);
  runtime_state().registered_backend = backend;
  runtime_state().libtorch_fallback_reason.clear();
}

absl::StatusOr<TorchBackend*> torch_backend(TorchBackendKind kind) {
  const RuntimeState& state = runtime_state();
  switch (kind) {
    case TorchBackendKind::kPythonApi:
      return python_api_backend();
    case TorchBackendKind::kLibtorch:
      try_import_libtorch_backend();
      if (state.registered_backend != nullptr) return state.registered_backend;
      return absl::FailedPreconditionError(
          torch_text::cat("the libtorch backend is not available: ", state.libtorch_fallback_reason));
    case TorchBackendKind::kAuto:
      break;
  }
  try_import_libtorch_backend();
  if (state.registered_backend != nullptr) return state.registered_backend;
  return python_api_backend();
}

absl::StatusOr<TorchBackend*> torch_backend() { return torch_backend(TorchBackendKind::kAuto); }

PyObject* make_torch_backend_slot() {
  // The capsule carries a function pointer; casting it to void* is conditionally supported and
  // fine on every platform CPython runs on (dlsym relies on the same).
  void (*fn)(TorchBackend*) = &register_from_capsule;
  return PyCapsule_New(reinterpret_cast<void*>(fn), kTorchBackendSlotName, nullptr);
}

const std::string& torch_backend_fallback_reason() { return runtime_state().libtorch_fallback_reason; }

}  // namespace tjc
