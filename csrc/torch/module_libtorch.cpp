// torch_jit_cache._C_torch: registers the libtorch TorchBackend with _C at import.
//
// _C never links libtorch; it finds this backend by importing this module (torch_backend() does
// that lazily), whose init hands the backend to _C through the capsule _C._torch_backend_slot.
// torch is imported first so THPVariableClass and friends are set before any guard is made.
#include <pybind11/pybind11.h>

#include "guards/torch_backend_libtorch.h"
#include "guards/torch_backend.h"

namespace py = pybind11;

PYBIND11_MODULE(_C_torch, m) {
  m.doc() = "torch_jit_cache libtorch backend for TENSOR_MATCH / GLOBAL_STATE (registers itself with _C)";
  py::module_::import("torch");
  py::object slot = py::module_::import("torch_jit_cache._C").attr("_torch_backend_slot");
  void* fn = PyCapsule_GetPointer(slot.ptr(), tjc::kTorchBackendSlotName);
  if (fn == nullptr) throw py::error_already_set();
  reinterpret_cast<void (*)(tjc::TorchBackend*)>(fn)(tjc::libtorch_backend());
  m.attr("backend_name") = tjc::libtorch_backend()->name();
}
