// TENSOR_MATCH and GLOBAL_STATE read straight from libtorch (the _C_torch backend).
//
// This is the only translation unit that includes libtorch headers (they are slow to compile).
//
// Why the dispatch key set is compared with the thread-local include/exclude sets applied (as
// TorchDynamo's LocalState does) rather than the tensor's raw key_set(): the TLS sets are how
// libtorch itself decides which kernels run (inference_mode excludes the autograd keys, functorch
// transforms include their layer keys, autocast on/off toggles the Autocast* excludes). A graph
// traced under one TLS configuration is not valid under another, and GLOBAL_STATE does not cover
// inference mode or functorch, so folding the TLS into the key comparison is what catches those.
// Cost: one thread-local read per check. The C-API fallback computes the same value
// (torch_py_api.cpp), so both backends accept and reject the same tensors.
#include "guards/torch_backend_libtorch.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/check.h"
#include "common/py_errors.h"
#include "guards/tensor_text.h"

namespace tjc {
namespace {

using torch_text::cat;

// str(torch.dtype) for a ScalarType: the same object Python prints, so the text equals the
// fallback's.
std::string dtype_text(c10::ScalarType st) {
  try {
    return torch_text::py_str(reinterpret_cast<PyObject*>(torch::getTHPDtype(st)));
  } catch (const std::exception&) {
    clear_guard_error();
    return cat("torch.", c10::toString(st));
  }
}

// Thread-local include/exclude applied to a tensor's key set; see the file comment for why.
inline uint64_t applied_keys(const c10::TensorImpl& impl) noexcept {
  const c10::impl::LocalDispatchKeySet tls = c10::impl::tls_local_dispatch_key_set();
  return ((impl.key_set() | tls.included_) - tls.excluded_).raw_repr();
}

std::string keys_text(uint64_t raw) { return c10::toString(c10::DispatchKeySet(c10::DispatchKeySet::RAW, raw)); }

// Everything describe()/explain() show. Throws c10::Error for tensors whose sizes cannot be read
// as plain ints (callers catch).
torch_text::TensorFacts read_facts(PyObject* value, const at::Tensor& t) {
  torch_text::TensorFacts f;
  f.type = torch_text::type_name(Py_TYPE(value));
  f.dtype = dtype_text(t.scalar_type());
  f.device = t.device().str();
  f.requires_grad = t.requires_grad();
  const c10::IntArrayRef sizes = t.sizes();
  f.sizes.assign(sizes.begin(), sizes.end());
  if (t.layout() == c10::kStrided) {
    const c10::IntArrayRef strides = t.strides();
    f.strides.emplace(strides.begin(), strides.end());
  }
  return f;
}

class LibtorchTensorMatch final : public TensorMatchImpl {
 public:
  LibtorchTensorMatch(torch_text::ExpectedType type, const at::Tensor& example, torch_text::TensorFacts facts)
      : type_(std::move(type)),
        dispatch_keys_(applied_keys(*example.unsafeGetTensorImpl())),
        dtype_(example.scalar_type()),
        device_(example.device()),
        requires_grad_(example.requires_grad()),
        strided_(example.layout() == c10::kStrided),
        sizes_(torch_text::with_any(facts.sizes, facts.dynamic_sizes)),
        strides_(torch_text::with_any(facts.strides.value_or(std::vector<int64_t>{}), facts.dynamic_strides)),
        facts_(std::move(facts)) {}

  bool check(PyObject* value) noexcept override {
    // The exact type test comes first: it also proves `value` is a THPVariable, so the unpack
    // below needs no isinstance (which could run a metaclass's __instancecheck__).
    if (!type_.matches(value)) return false;
    try {
      const c10::TensorImpl& impl = *THPVariable_Unpack(value).unsafeGetTensorImpl();
      if (applied_keys(impl) != dispatch_keys_) return false;
      if (impl.dtype().toScalarType() != dtype_) return false;
      if (impl.device() != device_) return false;
      if (impl.requires_grad() != requires_grad_) return false;
      // sizes()/strides() can call into a Python subclass (custom size policy) or throw for
      // symbolic shapes; both end in the catch below.
      const c10::IntArrayRef sizes = impl.sizes();
      if (sizes.size() != sizes_.size()) return false;
      // A dynamic dim holds kAnyDim; the second test runs only on a mismatch.
      for (size_t i = 0; i < sizes_.size(); ++i) {
        if (sizes[i] != sizes_[i] && sizes_[i] != torch_text::kAnyDim) return false;
      }
      if (strided_) {  // a layout change already changed the dispatch keys (Sparse*, ...)
        const c10::IntArrayRef strides = impl.strides();
        for (size_t i = 0; i < strides_.size(); ++i) {
          if (strides[i] != strides_[i] && strides_[i] != torch_text::kAnyDim) return false;
        }
      }
      return true;
    } catch (...) {
      // python_error and c10::Error alike: a failed check, never an exception into CPython.
      clear_guard_error();
      return false;
    }
  }

  std::optional<std::string> explain(PyObject* value, std::string_view source) override {
    if (check(value)) return std::nullopt;
    const int is_tensor = PyObject_IsInstance(value, THPVariableClass);
    if (is_tensor != 1) {
      clear_guard_error();
      return torch_text::not_a_tensor(value, source);
    }
    if (!type_.matches(value)) return torch_text::type_mismatch(type_, facts_.type, value, source);
    try {
      const at::Tensor& t = THPVariable_Unpack(value);
      const torch_text::TensorFacts got = read_facts(value, t);
      if (auto reason = torch_text::explain_tensor(facts_, got, source)) return reason;
      const uint64_t keys = applied_keys(*t.unsafeGetTensorImpl());
      if (keys != dispatch_keys_) {
        return torch_text::dispatch_keys_mismatch(source, keys_text(dispatch_keys_), keys_text(keys));
      }
    } catch (const std::exception& e) {
      clear_guard_error();
      return cat(source, ": could not read the tensor (", e.what(), ")");
    }
    return cat(source, ": TENSOR_MATCH failed");  // a transient error inside check()
  }

  std::string describe() const override { return torch_text::describe_tensor(facts_); }

  TensorMatchState state() const override {
    return TensorMatchState{type_.alive() ? type_.get() : nullptr,
                            dispatch_keys_,
                            facts_.dtype,  // dtype_text(dtype_)
                            facts_.device,  // device_.str()
                            requires_grad_,
                            strided_,
                            sizes_,
                            strided_ ? strides_ : std::vector<int64_t>{}};
  }

 private:
  torch_text::ExpectedType type_;  // exact type; weak for user subclasses
  uint64_t dispatch_keys_;         // raw repr, TLS applied
  c10::ScalarType dtype_;
  c10::Device device_;
  bool requires_grad_;
  bool strided_;
  std::vector<int64_t> sizes_;    // kAnyDim where dynamic
  std::vector<int64_t> strides_;  // empty unless strided_; kAnyDim where dynamic
  torch_text::TensorFacts facts_;  // the same facts as text, for describe()/explain()
};

// ---------------------------------------------------------------------------------------------
// GLOBAL_STATE.

struct GlobalState {
  bool grad_mode;
  c10::ScalarType default_dtype;
  bool deterministic;
  bool autocast_cpu;
  c10::ScalarType autocast_cpu_dtype;
  bool autocast_cuda;
  c10::ScalarType autocast_cuda_dtype;

  // Plain reads of thread-local and global flags; none of them throws in practice, and
  // LibtorchGlobalState::check() guards the rest.
  static GlobalState read() {
    return GlobalState{
        c10::GradMode::is_enabled(),
        c10::get_default_dtype_as_scalartype(),
        at::globalContext().deterministicAlgorithms(),
        at::autocast::is_autocast_enabled(at::kCPU),
        at::autocast::get_autocast_dtype(at::kCPU),
        at::autocast::is_autocast_enabled(at::kCUDA),
        at::autocast::get_autocast_dtype(at::kCUDA),
    };
  }
  bool operator==(const GlobalState&) const = default;

  torch_text::GlobalStateFacts facts() const {
    torch_text::GlobalStateFacts f;
    f.grad_mode = grad_mode;
    f.default_dtype = dtype_text(default_dtype);
    f.deterministic = deterministic;
    f.autocast_cpu = autocast_cpu;
    f.autocast_cpu_dtype = dtype_text(autocast_cpu_dtype);
    f.autocast_cuda = autocast_cuda;
    f.autocast_cuda_dtype = dtype_text(autocast_cuda_dtype);
    return f;
  }
};

class LibtorchGlobalState final : public GlobalStateImpl {
 public:
  explicit LibtorchGlobalState(const GlobalState& want) : want_(want), facts_(want.facts()) {}

  bool check() noexcept override {
    try {
      return GlobalState::read() == want_;
    } catch (...) {
      clear_guard_error();
      return false;
    }
  }

  std::optional<std::string> explain() override {
    if (check()) return std::nullopt;
    try {
      if (auto reason = torch_text::explain_global_state(facts_, GlobalState::read().facts())) return reason;
    } catch (const std::exception& e) {
      clear_guard_error();
      return cat("GLOBAL_STATE: could not read torch's global state (", e.what(), ")");
    }
    return std::string("GLOBAL_STATE: changed");
  }

  std::string describe() const override { return torch_text::describe_global_state(facts_); }
  GlobalStateFacts state() const override { return facts_; }  // want_, as text

 private:
  GlobalState want_;
  torch_text::GlobalStateFacts facts_;
};

// ---------------------------------------------------------------------------------------------

class LibtorchBackend final : public TorchBackend {
 public:
  const char* name() const override { return "libtorch"; }

  absl::StatusOr<std::unique_ptr<TensorMatchImpl>> make_tensor_match(PyObject* example,
                                                                     const DynamicDims& dynamic) override {
    if (THPVariableClass == nullptr) return absl::FailedPreconditionError("tensor_match: torch is not initialized");
    const int is_tensor = PyObject_IsInstance(example, THPVariableClass);
    if (is_tensor != 1) {
      if (is_tensor < 0) clear_guard_error();
      return absl::InvalidArgumentError(
          cat("tensor_match: expected a torch.Tensor, got ", torch_text::type_name(Py_TYPE(example))));
    }
    if (torch_text::is_fake_tensor_type(Py_TYPE(example))) {
      return absl::InvalidArgumentError("tensor_match: the example must be a real tensor, not a FakeTensor");
    }
    try {
      const at::Tensor& t = THPVariable_Unpack(example);
      if (t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
        return absl::InvalidArgumentError("tensor_match: the example must be a real tensor, not one with symbolic sizes");
      }
      torch_text::TensorFacts facts = read_facts(example, t);
      if (auto error = torch_text::apply_dynamic_dims(facts, dynamic)) return absl::InvalidArgumentError(*error);
      PyTypeObject* type = Py_TYPE(example);
      const bool torch_owned = type == reinterpret_cast<PyTypeObject*>(THPVariableClass) ||
                               type == reinterpret_cast<PyTypeObject*>(ParameterClass);
      torch_text::ExpectedType expected;
      if (!expected.reset(type, /*strong=*/torch_owned)) {
        return absl::InternalError(cat("tensor_match: ", torch_text::take_error_text()));
      }
      return std::unique_ptr<TensorMatchImpl>(new LibtorchTensorMatch(std::move(expected), t, std::move(facts)));
    } catch (const std::exception& e) {
      clear_guard_error();
      return absl::InvalidArgumentError(cat("tensor_match: cannot read the example tensor: ", e.what()));
    }
  }

  bool read_tensor_ints(PyObject* value, const TensorRead* reads, size_t n, int64_t* out) noexcept override {
    // A C-level subtype test (no __instancecheck__ runs): every torch.Tensor subclass instance is
    // a THPVariable.
    if (!PyObject_TypeCheck(value, reinterpret_cast<PyTypeObject*>(THPVariableClass))) return false;
    try {
      const c10::TensorImpl& impl = *THPVariable_Unpack(value).unsafeGetTensorImpl();
      // sizes()/strides()/storage_offset() throw for symbolic shapes and may call into a Python
      // subclass with a custom size policy; both end in the catch below.
      const c10::IntArrayRef sizes = impl.sizes();
      for (size_t i = 0; i < n; ++i) {
        const TensorRead& r = reads[i];
        if (r.field == TensorField::kStorageOffset) {
          out[i] = impl.storage_offset();
          continue;
        }
        if (r.dim < 0 || static_cast<size_t>(r.dim) >= sizes.size()) return false;
        if (r.field == TensorField::kSize) {
          out[i] = sizes[static_cast<size_t>(r.dim)];
        } else {
          if (impl.layout() != c10::kStrided) return false;
          out[i] = impl.strides()[static_cast<size_t>(r.dim)];
        }
      }
      return true;
    } catch (...) {
      clear_guard_error();
      return false;
    }
  }

  absl::StatusOr<std::unique_ptr<GlobalStateImpl>> make_global_state() override {
    try {
      return std::unique_ptr<GlobalStateImpl>(new LibtorchGlobalState(GlobalState::read()));
    } catch (const std::exception& e) {
      clear_guard_error();
      return absl::InternalError(cat("GLOBAL_STATE: could not read torch's global state: ", e.what()));
    }
  }
};

}  // namespace

TorchBackend* libtorch_backend() {
  static LibtorchBackend* backend = new LibtorchBackend();  // never freed: see torch_backend.h
  return backend;
}

}  // namespace tjc
