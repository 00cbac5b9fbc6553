// TorchPyApi: one-time lookup of the torch objects the C-API fallback uses.
#include "guards/torch_py_api.h"

#include <string>

#include "absl/status/status.h"
#include "common/runtime_state.h"
#include "guards/tensor_text.h"

namespace tjc {
namespace {

// getattr along a dotted path from `root` (borrowed); new ref, or nullptr with an error set.
PyObject* lookup(PyObject* root, const char* dotted) {
  PyObject* obj = Py_NewRef(root);
  std::string_view rest(dotted);
  while (!rest.empty()) {
    const size_t dot = rest.find('.');
    const std::string part(rest.substr(0, dot));
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
    PyObject* next = PyObject_GetAttrString(obj, part.c_str());
    Py_DECREF(obj);
    if (next == nullptr) return nullptr;
    obj = next;
  }
  return obj;
}

// raw_repr() of a DispatchKeySet; steals `keyset`. False with an error set on failure.
bool steal_raw_repr(const TorchPyApi& api, PyObject* keyset, uint64_t* out) noexcept {
  if (keyset == nullptr) return false;
  PyObject* raw = PyObject_CallMethodNoArgs(keyset, api.s_raw_repr);
  Py_DECREF(keyset);
  if (raw == nullptr) return false;
  const unsigned long long v = PyLong_AsUnsignedLongLong(raw);
  Py_DECREF(raw);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
  *out = v;
  return true;
}

// Drops every reference `api` holds, then `api` itself (only for a copy nobody else has seen).
void release(TorchPyApi* api) {
  for (PyObject* o : {api->tensor_type, api->parameter_type, api->strided, api->dispatch_key_set,
                      api->dispatch_keys, api->tls_include, api->tls_exclude, api->is_grad_enabled,
                      api->get_default_dtype, api->deterministic, api->is_autocast_enabled,
                      api->get_autocast_dtype, api->s_dtype, api->s_device, api->s_requires_grad, api->s_size,
                      api->s_stride, api->s_storage_offset, api->s_layout, api->s_raw_repr, api->s_cpu, api->s_cuda}) {
    Py_XDECREF(o);
  }
  delete api;
}

absl::StatusOr<TorchPyApi*> build() {
  PyObject* torch = PyImport_ImportModule("torch");  // new ref
  if (torch == nullptr) {
    const std::string why = torch_text::take_error_text();
    return absl::FailedPreconditionError(
        torch_text::cat("torch is not installed: tensor_match needs torch (import torch: ", why, ")"));
  }
  auto* api = new TorchPyApi();
  struct Name {
    PyObject** slot;
    const char* path;
  };
  const Name names[] = {
      {&api->tensor_type, "Tensor"},
      {&api->parameter_type, "nn.Parameter"},
      {&api->strided, "strided"},
      {&api->dispatch_key_set, "_C.DispatchKeySet"},
      {&api->dispatch_keys, "_C._dispatch_keys"},
      {&api->tls_include, "_C._dispatch_tls_local_include_set"},
      {&api->tls_exclude, "_C._dispatch_tls_local_exclude_set"},
      {&api->is_grad_enabled, "is_grad_enabled"},
      {&api->get_default_dtype, "get_default_dtype"},
      {&api->deterministic, "are_deterministic_algorithms_enabled"},
      {&api->is_autocast_enabled, "is_autocast_enabled"},
      {&api->get_autocast_dtype, "get_autocast_dtype"},
  };
  absl::Status status;
  for (const Name& n : names) {
    *n.slot = lookup(torch, n.path);
    if (*n.slot == nullptr) {
      status = absl::InternalError(torch_text::cat("torch.", n.path, " is missing (", torch_text::take_error_text(),
                                                "): this torch version is not supported"));
      break;
    }
  }
  Py_DECREF(torch);
  if (status.ok()) {
    const std::pair<PyObject**, const char*> strings[] = {
        {&api->s_dtype, "dtype"},   {&api->s_device, "device"},     {&api->s_requires_grad, "requires_grad"},
        {&api->s_size, "size"},     {&api->s_stride, "stride"},     {&api->s_layout, "layout"},
        {&api->s_storage_offset, "storage_offset"},
        {&api->s_raw_repr, "raw_repr"}, {&api->s_cpu, "cpu"},       {&api->s_cuda, "cuda"},
    };
    for (const auto& [slot, text] : strings) {
      *slot = PyUnicode_InternFromString(text);
      if (*slot == nullptr) {
        status = absl::InternalError(torch_text::take_error_text());
        break;
      }
    }
  }
  if (status.ok()) {
    // backend_mask = (all - all).raw_repr(): subtraction keeps exactly the backend bits.
    PyObject* all = PyObject_CallMethod(api->dispatch_key_set, "from_raw_repr", "K", ~0ULL);
    PyObject* diff = all != nullptr ? PyNumber_Subtract(all, all) : nullptr;
    Py_XDECREF(all);
    if (!steal_raw_repr(*api, diff, &api->backend_mask)) {
      status = absl::InternalError(torch_text::cat("torch._C.DispatchKeySet: ", torch_text::take_error_text()));
    }
  }
  if (!status.ok()) {
    release(api);  // nothing else has seen it
    return status;
  }
  return api;
}

}  // namespace

absl::StatusOr<const TorchPyApi*> torch_py_api() {
  // Set once, never freed (see the header).
  TorchPyApi*& api = runtime_state().torch_py_api;
  if (api != nullptr) return api;
  // Importing torch can release the GIL, so another thread may finish first: keep its copy.
  absl::StatusOr<TorchPyApi*> built = build();
  if (!built.ok()) return built.status();
  if (api == nullptr) {
    api = *built;
  } else {
    release(*built);
  }
  return api;
}

bool python_dispatch_keys(const TorchPyApi& api, PyObject* t, uint64_t* out) noexcept {
  uint64_t raw = 0, include = 0, exclude = 0;
  if (!steal_raw_repr(api, PyObject_CallOneArg(api.dispatch_keys, t), &raw)) return false;
  if (!steal_raw_repr(api, PyObject_CallNoArgs(api.tls_include), &include)) return false;
  if (!steal_raw_repr(api, PyObject_CallNoArgs(api.tls_exclude), &exclude)) return false;
  // c10: (key_set | tls.included_) - tls.excluded_, on raw reprs.
  *out = (raw | include) & (api.backend_mask | ~exclude);
  return true;
}

std::string python_dispatch_keys_text(const TorchPyApi& api, uint64_t raw) {
  PyObject* keys = PyObject_CallMethod(api.dispatch_key_set, "from_raw_repr", "K",
                                       static_cast<unsigned long long>(raw));
  if (keys == nullptr) {
    PyErr_Clear();
    return torch_text::cat("DispatchKeySet(raw=", raw, ")");
  }
  std::string text = torch_text::py_str(keys);
  Py_DECREF(keys);
  return text;
}

}  // namespace tjc
