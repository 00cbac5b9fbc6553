// TorchPyApi: the torch objects the C-API fallback backend reads tensors and global state through.
//
// Used only when _C_torch is not available. Everything is looked up once, the first time a
// fallback guard is made, so a check does no attribute lookups on the torch module.
//
// Ownership: the struct holds a strong reference to each object and is never freed: it lives until
// the process exits (freeing it during interpreter finalization could run after torch is gone).
// These are torch's own module-level objects, never user objects, so nothing user-owned is kept.
// GIL: torch_py_api() and every use of the members need the GIL.
#pragma once

#include <Python.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace tjc {

struct TorchPyApi {
  // Types.
  PyObject* tensor_type = nullptr;      // torch.Tensor
  PyObject* parameter_type = nullptr;   // torch.nn.Parameter
  PyObject* strided = nullptr;          // torch.strided (layout singleton)
  PyObject* dispatch_key_set = nullptr; // torch._C.DispatchKeySet (from_raw_repr for text)

  // Callables.
  PyObject* dispatch_keys = nullptr;      // torch._C._dispatch_keys(t): the tensor's own key set
  PyObject* tls_include = nullptr;        // torch._C._dispatch_tls_local_include_set()
  PyObject* tls_exclude = nullptr;        // torch._C._dispatch_tls_local_exclude_set()
  PyObject* is_grad_enabled = nullptr;    // torch.is_grad_enabled()
  PyObject* get_default_dtype = nullptr;  // torch.get_default_dtype()
  PyObject* deterministic = nullptr;      // torch.are_deterministic_algorithms_enabled()
  PyObject* is_autocast_enabled = nullptr;  // torch.is_autocast_enabled(device_type)
  PyObject* get_autocast_dtype = nullptr;   // torch.get_autocast_dtype(device_type)

  // Interned strings: attribute names and the autocast device types.
  PyObject* s_dtype = nullptr;
  PyObject* s_device = nullptr;
  PyObject* s_requires_grad = nullptr;
  PyObject* s_size = nullptr;
  PyObject* s_stride = nullptr;
  PyObject* s_storage_offset = nullptr;
  PyObject* s_layout = nullptr;
  PyObject* s_raw_repr = nullptr;
  PyObject* s_cpu = nullptr;
  PyObject* s_cuda = nullptr;

  // DispatchKeySet's backend-component bits. c10's `a - b` keeps a's backend bits (it removes
  // functionality keys only), so applying the TLS exclude set to raw reprs is
  // `raw & (backend_mask | ~exclude)`; the mask is computed from torch itself, not hard-coded.
  uint64_t backend_mask = 0;
};

// The API, imported and looked up the first time. FailedPrecondition when torch cannot be
// imported ("torch is not installed: tensor_match needs torch"), Internal when torch lacks one of
// the names (a torch version we do not support); no Python error is left set either way.
absl::StatusOr<const TorchPyApi*> torch_py_api();

// The TLS-applied dispatch key set of tensor `t` (borrowed), as c10's raw repr. False with a
// Python error set on failure (the caller clears it).
bool python_dispatch_keys(const TorchPyApi& api, PyObject* t, uint64_t* out) noexcept;

// str(torch._C.DispatchKeySet.from_raw_repr(raw)), for explain().
std::string python_dispatch_keys_text(const TorchPyApi& api, uint64_t raw);

}  // namespace tjc
