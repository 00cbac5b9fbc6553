// The C-API fallback TorchBackend ("python-api"; see torch_backend_python_api.h).
#include "guards/torch_backend_python_api.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/check.h"
#include "common/runtime_state.h"
#include "common/py_errors.h"
#include "guards/global_state.h"
#include "guards/tensor_text.h"
#include "guards/torch_py_api.h"

namespace tjc {
namespace {

// ---------------------------------------------------------------------------------------------
// Reading tensor facts through Python.

// Compares the int tuple `tuple` (new ref, consumed: the result of x.size() / x.stride()) with
// `want` (kAnyDim entries match anything). False, possibly with an error set, on mismatch or
// failure. No allocation beyond the tuple itself: small ints are read in place.
bool steal_and_compare_ints(PyObject* tuple, const std::vector<int64_t>& want) noexcept {
  if (tuple == nullptr) return false;
  bool ok = PyTuple_Check(tuple) && PyTuple_GET_SIZE(tuple) == static_cast<Py_ssize_t>(want.size());
  for (size_t i = 0; ok && i < want.size(); ++i) {
    const long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, static_cast<Py_ssize_t>(i)));
    if (v == -1 && PyErr_Occurred()) break;  // not an int (a SymInt, ...): fails below
    ok = v == want[i] || want[i] == torch_text::kAnyDim;
  }
  Py_DECREF(tuple);
  return ok && !PyErr_Occurred();
}

// The int at `dim` of the tuple `tuple` (new ref, consumed; NULL allowed): false on failure, possibly
// with an error set.
bool steal_int_at(PyObject* tuple, int dim, int64_t* out) noexcept {
  if (tuple == nullptr) return false;
  bool ok = PyTuple_Check(tuple) && dim >= 0 && dim < PyTuple_GET_SIZE(tuple);
  if (ok) {
    const long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, dim));
    ok = !(v == -1 && PyErr_Occurred());
    *out = v;
  }
  Py_DECREF(tuple);
  return ok;
}

// The ints of x.size() / x.stride(); nullopt with an error set on failure (e.g. symbolic sizes).
std::optional<std::vector<int64_t>> read_ints(PyObject* t, PyObject* method) {
  PyObject* tuple = PyObject_CallMethodNoArgs(t, method);
  if (tuple == nullptr) return std::nullopt;
  if (!PyTuple_Check(tuple)) {
    PyErr_Format(PyExc_TypeError, "expected a tuple of ints, got %s", Py_TYPE(tuple)->tp_name);
    Py_DECREF(tuple);
    return std::nullopt;
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(PyTuple_GET_SIZE(tuple)));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    const long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(tuple);
      return std::nullopt;
    }
    out.push_back(v);
  }
  Py_DECREF(tuple);
  return out;
}

// getattr(t, name) as text; nullopt with an error set on failure.
std::optional<std::string> attr_text(PyObject* t, PyObject* name) {
  PyObject* v = PyObject_GetAttr(t, name);
  if (v == nullptr) return std::nullopt;
  std::string s = torch_text::py_str(v);
  Py_DECREF(v);
  return s;
}

// Everything describe()/explain() show, read from tensor `t` (borrowed); nullopt with an error set
// on failure.
std::optional<torch_text::TensorFacts> read_facts(const TorchPyApi& api, PyObject* t) {
  torch_text::TensorFacts f;
  f.type = torch_text::type_name(Py_TYPE(t));
  auto dtype = attr_text(t, api.s_dtype);
  if (!dtype) return std::nullopt;
  f.dtype = std::move(*dtype);
  auto device = attr_text(t, api.s_device);
  if (!device) return std::nullopt;
  f.device = std::move(*device);
  PyObject* rg = PyObject_GetAttr(t, api.s_requires_grad);
  if (rg == nullptr) return std::nullopt;
  const int truth = PyObject_IsTrue(rg);
  Py_DECREF(rg);
  if (truth < 0) return std::nullopt;
  f.requires_grad = truth == 1;
  auto sizes = read_ints(t, api.s_size);
  if (!sizes) return std::nullopt;
  f.sizes = std::move(*sizes);
  PyObject* layout = PyObject_GetAttr(t, api.s_layout);
  if (layout == nullptr) return std::nullopt;
  const bool strided = layout == api.strided;
  Py_DECREF(layout);
  if (strided) {
    auto strides = read_ints(t, api.s_stride);
    if (!strides) return std::nullopt;
    f.strides = std::move(*strides);
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// The fallback TENSOR_MATCH.

class PythonApiTensorMatch final : public TensorMatchImpl {
 public:
  PythonApiTensorMatch(const TorchPyApi& api, torch_text::ExpectedType type, PyObject* dtype, PyObject* device,
                       uint64_t dispatch_keys, torch_text::TensorFacts facts)
      : api_(api), type_(std::move(type)), dtype_(dtype), device_(device), dispatch_keys_(dispatch_keys),
        sizes_(torch_text::with_any(facts.sizes, facts.dynamic_sizes)),
        strides_(facts.strides ? std::optional<std::vector<int64_t>>(
                                     torch_text::with_any(*facts.strides, facts.dynamic_strides))
                               : std::nullopt),
        facts_(std::move(facts)) {}
  ~PythonApiTensorMatch() override {
    Py_DECREF(dtype_);
    Py_DECREF(device_);
  }
  PythonApiTensorMatch(const PythonApiTensorMatch&) = delete;
  PythonApiTensorMatch& operator=(const PythonApiTensorMatch&) = delete;

  bool check(PyObject* value) noexcept override {
    if (!type_.matches(value)) return false;
    const bool ok = check_facts(value);
    if (TJC_UNLIKELY(PyErr_Occurred() != nullptr)) {
      clear_guard_error();  // a subclass's __torch_function__ or a broken torch: counts as a failure
      return false;
    }
    return ok;
  }

  std::optional<std::string> explain(PyObject* value, std::string_view source) override {
    if (check(value)) return std::nullopt;
    const int is_tensor = PyObject_IsInstance(value, api_.tensor_type);
    if (is_tensor != 1) {
      clear_guard_error();
      return torch_text::not_a_tensor(value, source);
    }
    if (!type_.matches(value)) return torch_text::type_mismatch(type_, facts_.type, value, source);
    auto got = read_facts(api_, value);
    if (!got) return torch_text::cat(source, ": could not read the tensor (", torch_text::take_error_text(), ")");
    if (auto reason = torch_text::explain_tensor(facts_, *got, source)) return reason;
    uint64_t keys = 0;
    if (!python_dispatch_keys(api_, value, &keys)) {
      return torch_text::cat(source, ": could not read the dispatch keys (", torch_text::take_error_text(), ")");
    }
    if (keys != dispatch_keys_) {
      return torch_text::dispatch_keys_mismatch(source, python_dispatch_keys_text(api_, dispatch_keys_),
                                                python_dispatch_keys_text(api_, keys));
    }
    return torch_text::cat(source, ": TENSOR_MATCH failed");  // a transient error inside check()
  }

  std::string describe() const override { return torch_text::describe_tensor(facts_); }

  TensorMatchState state() const override {
    return TensorMatchState{type_.alive() ? type_.get() : nullptr,
                            dispatch_keys_,
                            facts_.dtype,   // str(dtype_)
                            facts_.device,  // str(device_)
                            facts_.requires_grad,
                            strides_.has_value(),
                            sizes_,
                            strides_.value_or(std::vector<int64_t>{})};
  }

 private:
  // Hot-path body after the type matched; may leave an error set (check() clears it). Order:
  // cheap identity tests first, the dispatch keys (four Python calls) last.
  bool check_facts(PyObject* value) noexcept {
    PyObject* o = PyObject_GetAttr(value, api_.s_dtype);
    if (o == nullptr) return false;
    bool ok = o == dtype_;  // dtypes are singletons
    Py_DECREF(o);
    if (!ok) return false;
    o = PyObject_GetAttr(value, api_.s_requires_grad);
    if (o == nullptr) return false;
    ok = o == (facts_.requires_grad ? Py_True : Py_False);
    Py_DECREF(o);
    if (!ok) return false;
    o = PyObject_GetAttr(value, api_.s_device);
    if (o == nullptr) return false;
    ok = PyObject_RichCompareBool(o, device_, Py_EQ) == 1;  // devices are fresh objects each time
    Py_DECREF(o);
    if (!ok) return false;
    if (!steal_and_compare_ints(PyObject_CallMethodNoArgs(value, api_.s_size), sizes_)) return false;
    // A layout change also changes the dispatch keys (Sparse*, ...), which are compared below;
    // reading the strides of a non-strided tensor would raise, so they are skipped for those.
    if (strides_ && !steal_and_compare_ints(PyObject_CallMethodNoArgs(value, api_.s_stride), *strides_)) {
      return false;
    }
    uint64_t keys = 0;
    return python_dispatch_keys(api_, value, &keys) && keys == dispatch_keys_;
  }

  const TorchPyApi& api_;            // lives for the process
  torch_text::ExpectedType type_;    // exact type; weak for user subclasses
  PyObject* dtype_;                  // new ref: the example's torch.dtype singleton
  PyObject* device_;                 // new ref: the example's torch.device
  uint64_t dispatch_keys_;           // raw repr, TLS include/exclude applied (see the libtorch unit)
  std::vector<int64_t> sizes_;       // compared; kAnyDim where dynamic
  std::optional<std::vector<int64_t>> strides_;  // compared (strided only); kAnyDim where dynamic
  torch_text::TensorFacts facts_;    // what describe() prints; requires_grad compared
};

class PythonApiBackend final : public TorchBackend {
 public:
  explicit PythonApiBackend(const TorchPyApi& api) : api_(api) {}
  const char* name() const override { return "python-api"; }

  absl::StatusOr<std::unique_ptr<TensorMatchImpl>> make_tensor_match(PyObject* example,
                                                                     const DynamicDims& dynamic) override {
    const int is_tensor = PyObject_IsInstance(example, api_.tensor_type);
    if (is_tensor != 1) {
      if (is_tensor < 0) clear_guard_error();
      return absl::InvalidArgumentError(torch_text::cat("tensor_match: expected a torch.Tensor, got ",
                                                     torch_text::type_name(Py_TYPE(example))));
    }
    if (torch_text::is_fake_tensor_type(Py_TYPE(example))) {
      return absl::InvalidArgumentError("tensor_match: the example must be a real tensor, not a FakeTensor");
    }
    auto facts = read_facts(api_, example);
    if (!facts) {
      return absl::InvalidArgumentError(
          torch_text::cat("tensor_match: cannot read the example tensor: ", torch_text::take_error_text()));
    }
    if (auto error = torch_text::apply_dynamic_dims(*facts, dynamic)) return absl::InvalidArgumentError(*error);
    uint64_t keys = 0;
    if (!python_dispatch_keys(api_, example, &keys)) {
      return absl::InternalError(torch_text::cat("tensor_match: dispatch keys: ", torch_text::take_error_text()));
    }
    PyTypeObject* type = Py_TYPE(example);
    const bool torch_owned = type == reinterpret_cast<PyTypeObject*>(api_.tensor_type) ||
                             type == reinterpret_cast<PyTypeObject*>(api_.parameter_type);
    torch_text::ExpectedType expected;
    if (!expected.reset(type, /*strong=*/torch_owned)) {
      return absl::InternalError(torch_text::cat("tensor_match: ", torch_text::take_error_text()));
    }
    PyObject* dtype = PyObject_GetAttr(example, api_.s_dtype);  // new ref
    PyObject* device = dtype != nullptr ? PyObject_GetAttr(example, api_.s_device) : nullptr;  // new ref
    if (device == nullptr) {
      Py_XDECREF(dtype);
      return absl::InternalError(torch_text::cat("tensor_match: ", torch_text::take_error_text()));
    }
    return std::unique_ptr<TensorMatchImpl>(
        new PythonApiTensorMatch(api_, std::move(expected), dtype, device, keys, std::move(*facts)));
  }

  bool read_tensor_ints(PyObject* value, const TensorRead* reads, size_t n, int64_t* out) noexcept override {
    if (!PyObject_TypeCheck(value, reinterpret_cast<PyTypeObject*>(api_.tensor_type))) return false;
    bool ok = true;
    for (size_t i = 0; ok && i < n; ++i) {
      const TensorRead& r = reads[i];
      switch (r.field) {
        case TensorField::kSize:
          ok = steal_int_at(PyObject_CallMethodNoArgs(value, api_.s_size), r.dim, &out[i]);
          break;
        case TensorField::kStride:
          ok = steal_int_at(PyObject_CallMethodNoArgs(value, api_.s_stride), r.dim, &out[i]);
          break;
        case TensorField::kStorageOffset: {
          PyObject* v = PyObject_CallMethodNoArgs(value, api_.s_storage_offset);  // new ref
          ok = v != nullptr && PyLong_CheckExact(v);
          if (ok) {
            out[i] = PyLong_AsLongLong(v);
            ok = !(out[i] == -1 && PyErr_Occurred());
          }
          Py_XDECREF(v);
          break;
        }
      }
    }
    if (PyErr_Occurred()) {
      clear_guard_error();
      return false;
    }
    return ok;
  }

  absl::StatusOr<std::unique_ptr<GlobalStateImpl>> make_global_state() override {
    return make_python_api_global_state(api_);
  }

 private:
  const TorchPyApi& api_;
};

}  // namespace

absl::StatusOr<TorchBackend*> python_api_backend() {
  RuntimeState& state = runtime_state();
  if (state.python_api_backend != nullptr) return state.python_api_backend;
  absl::StatusOr<const TorchPyApi*> api = torch_py_api();
  if (!api.ok()) return api.status();
  // Importing torch can release the GIL: another thread may have made it meanwhile.
  if (state.python_api_backend == nullptr) state.python_api_backend = new PythonApiBackend(**api);
  return state.python_api_backend;
}

}  // namespace tjc
