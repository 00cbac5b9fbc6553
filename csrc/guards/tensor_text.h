// Header-only pieces shared by both TENSOR_MATCH / GLOBAL_STATE implementations: how the expected
// Python type is held, and the stable text of describe() and explain().
//
// Both _C (the C-API fallback) and _C_torch (libtorch) include this file and link nothing else of
// each other, so everything here is inline and uses only the CPython C API, abseil and the standard
// library. Keeping the text in one place is what makes the two backends print the same words for
// the same facts: each backend only turns what it reads into the plain structs below.
//
// Ownership: ExpectedType owns one reference (to the type, or to a weakref to it). Text helpers own
// nothing and return std::string.
// GIL: every function here needs the GIL, ExpectedType's destructor included.
#pragma once

#include <Python.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <type_traits>

#include "guards/torch_backend.h"

namespace tjc::torch_text {

// String building. Debian's abseil is built with its own absl::string_view (not std's), so
// absl::StrCat does not take the std::string_view this interface uses; this small variadic
// concatenation takes strings, string_views, C strings and integers.
namespace detail {
inline void append(std::string& out, std::string_view s) { out.append(s); }
template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>)
inline void append(std::string& out, T v) {
  out += std::to_string(v);
}
}  // namespace detail

template <typename... Args>
std::string cat(const Args&... args) {
  std::string out;
  (detail::append(out, args), ...);
  return out;
}
template <typename... Args>
void append_to(std::string* out, const Args&... args) {
  (detail::append(*out, args), ...);
}

// ---------------------------------------------------------------------------------------------
// ExpectedType: the exact Python type a TENSOR_MATCH accepts.
//
// torch's own classes (torch.Tensor, torch.nn.Parameter) live as long as torch, so they are held
// strongly. A user's Tensor subclass is held through a weakref: a cache entry must never keep a
// user class (and its module, closures, ...) alive. Once that class is gone no live value can have
// it as its type; a value whose type merely sits at the same (reused) address must not pass, hence
// the liveness test after the pointer comparison.
class ExpectedType {
 public:
  ExpectedType() = default;
  ExpectedType(const ExpectedType&) = delete;
  ExpectedType& operator=(const ExpectedType&) = delete;
  ExpectedType(ExpectedType&& other) noexcept
      : type_(std::exchange(other.type_, nullptr)), ref_(std::exchange(other.ref_, nullptr)),
        strong_(other.strong_) {}
  ExpectedType& operator=(ExpectedType&& other) noexcept {
    if (this != &other) {
      Py_XDECREF(ref_);
      type_ = std::exchange(other.type_, nullptr);
      ref_ = std::exchange(other.ref_, nullptr);
      strong_ = other.strong_;
    }
    return *this;
  }
  ~ExpectedType() { Py_XDECREF(ref_); }

  // Holds `type` (borrowed) strongly when `strong`, else weakly. False (with a Python error set)
  // when the weakref cannot be made.
  bool reset(PyTypeObject* type, bool strong) noexcept {
    PyObject* ref = nullptr;
    if (strong) {
      ref = Py_NewRef(reinterpret_cast<PyObject*>(type));
    } else {
      ref = PyWeakref_NewRef(reinterpret_cast<PyObject*>(type), nullptr);  // new ref
      if (ref == nullptr) return false;
    }
    Py_XDECREF(ref_);
    type_ = type;
    ref_ = ref;
    strong_ = strong;
    return true;
  }

  // Hot path: exact type match, allocation-free, never sets an error.
  bool matches(PyObject* value) const noexcept {
    if (Py_TYPE(value) != type_) return false;
    return strong_ || alive();
  }

  // False only for a weakly held type that has been freed.
  bool alive() const noexcept {
    if (strong_) return true;
#if PY_VERSION_HEX >= 0x030D0000
    // 3.13 deprecates PyWeakref_GET_OBJECT; PyWeakref_GetRef returns a new reference and only
    // fails (-1) when ref_ is not a weakref, which cannot happen here.
    PyObject* obj = nullptr;
    if (PyWeakref_GetRef(ref_, &obj) != 1) return false;
    Py_DECREF(obj);
    return true;
#else
    return PyWeakref_GET_OBJECT(ref_) != Py_None;
#endif
  }

  PyTypeObject* get() const noexcept { return type_; }  // borrowed; compare only unless alive()
  bool strong() const noexcept { return strong_; }

 private:
  PyTypeObject* type_ = nullptr;  // the expected type's address
  PyObject* ref_ = nullptr;       // new ref: the type itself (strong_) or a weakref to it
  bool strong_ = false;
};

// ---------------------------------------------------------------------------------------------
// Text.

// str(obj), or `fallback` (with the error cleared) when str() fails.
inline std::string py_str(PyObject* obj, std::string_view fallback = "<?>") {
  PyObject* s = PyObject_Str(obj);  // new ref
  if (s == nullptr) {
    PyErr_Clear();
    return std::string(fallback);
  }
  Py_ssize_t n = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(s, &n);
  std::string out = utf8 != nullptr ? std::string(utf8, static_cast<size_t>(n)) : std::string(fallback);
  if (utf8 == nullptr) PyErr_Clear();
  Py_DECREF(s);
  return out;
}

// The text of the pending Python exception (`TypeError: ...`), which is cleared; for the slow paths
// that turn a failure into a reason or a Status.
inline std::string take_error_text() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string text = "unknown error";
  if (type != nullptr) {
    text = reinterpret_cast<PyTypeObject*>(type)->tp_name;
    if (value != nullptr) append_to(&text, ": ", py_str(value));
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_Clear();  // py_str() of a hostile exception could have raised again
  return text;
}

// The name users write for a type: `int`, `torch.Tensor`, `torch.nn.Parameter`, `mymod.MyTensor`.
// torch.nn.parameter's classes are spelled by their public alias torch.nn.X.
inline std::string type_name(PyTypeObject* type) {
  PyObject* t = reinterpret_cast<PyObject*>(type);
  PyObject* module = PyObject_GetAttrString(t, "__module__");     // new ref
  PyObject* qualname = PyObject_GetAttrString(t, "__qualname__");  // new ref
  std::string out;
  if (module != nullptr && qualname != nullptr && PyUnicode_Check(module) && PyUnicode_Check(qualname)) {
    const char* m = PyUnicode_AsUTF8(module);
    const char* q = PyUnicode_AsUTF8(qualname);
    if (m != nullptr && q != nullptr) {
      const std::string_view mv(m);
      if (mv == "builtins") {
        out = q;
      } else if (mv == "torch.nn.parameter") {
        out = cat("torch.nn.", q);
      } else {
        out = cat(mv, ".", q);
      }
    }
  }
  Py_XDECREF(module);
  Py_XDECREF(qualname);
  if (out.empty()) {
    PyErr_Clear();
    out = type->tp_name;
  }
  return out;
}

// True when `type` is torch's FakeTensor or a subclass of it (by qualified name along the MRO, so
// torch._subclasses need not be imported). TENSOR_MATCH refuses such examples: a guard is built
// from the real example the trace was made for, never from the tracer's fake one. Slow path.
inline bool is_fake_tensor_type(PyTypeObject* type) {
  PyObject* mro = type->tp_mro;  // borrowed tuple
  if (mro == nullptr || !PyTuple_Check(mro)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyTypeObject* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (type_name(base) == "torch._subclasses.fake_tensor.FakeTensor") return true;
  }
  return false;
}

inline const char* bool_text(bool b) { return b ? "True" : "False"; }

// `[8, 4]`; an entry whose `dynamic` flag is set prints as `?` (not checked by TENSOR_MATCH).
inline std::string int_list_text(const std::vector<int64_t>& v, const std::vector<bool>& dynamic = {}) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    out += i == 0 ? "" : ", ";
    if (i < dynamic.size() && dynamic[i]) {
      out += "?";
    } else {
      append_to(&out, v[i]);
    }
  }
  out += "]";
  return out;
}

// `<source><field>: expected <expected>, got <got>`
inline std::string mismatch(std::string_view source, std::string_view field, std::string_view expected,
                            std::string_view got) {
  return cat(source, field, ": expected ", expected, ", got ", got);
}

// What a TENSOR_MATCH compares, as text and numbers (the dispatch key set is backend-specific and
// compared by each backend last, since it follows from type, dtype and device in most cases).
struct TensorFacts {
  std::string type;    // type_name()
  std::string dtype;   // str(dtype): torch.float32
  std::string device;  // str(device): cpu, cuda:0
  bool requires_grad = false;
  std::vector<int64_t> sizes;
  std::optional<std::vector<int64_t>> strides;  // nullopt for non-strided layouts (sparse, ...)
  // Dims TENSOR_MATCH does not check (DynamicDims); empty, or one flag per dim. Only the expected
  // facts have them.
  std::vector<bool> dynamic_sizes;
  std::vector<bool> dynamic_strides;

  bool size_dynamic(size_t i) const { return i < dynamic_sizes.size() && dynamic_sizes[i]; }
  bool stride_dynamic(size_t i) const { return i < dynamic_strides.size() && dynamic_strides[i]; }
};

// Marks `dynamic`'s dims in `f` (the example's facts). An error message when a dim is out of
// range or a stride is made dynamic on a non-strided tensor; nullopt when applied.
inline std::optional<std::string> apply_dynamic_dims(TensorFacts& f, const DynamicDims& dynamic) {
  const size_t ndim = f.sizes.size();
  if (dynamic.empty()) return std::nullopt;
  f.dynamic_sizes.assign(ndim, false);
  f.dynamic_strides.assign(ndim, false);
  for (const int d : dynamic.sizes) {
    if (d < 0 || static_cast<size_t>(d) >= ndim) {
      return cat("tensor_match: dynamic size dim ", d, " is out of range for a tensor of ", ndim, " dims");
    }
    f.dynamic_sizes[static_cast<size_t>(d)] = true;
  }
  for (const int d : dynamic.strides) {
    if (d < 0 || static_cast<size_t>(d) >= ndim) {
      return cat("tensor_match: dynamic stride dim ", d, " is out of range for a tensor of ", ndim, " dims");
    }
    if (!f.strides) return std::string("tensor_match: dynamic strides need a strided tensor");
    f.dynamic_strides[static_cast<size_t>(d)] = true;
  }
  return std::nullopt;
}

// The ints a hot path compares: the example's, with kAnyDim where the dim is dynamic (no size or
// stride is INT64_MIN, so the sentinel never equals a real value).
inline constexpr int64_t kAnyDim = INT64_MIN;
inline std::vector<int64_t> with_any(const std::vector<int64_t>& values, const std::vector<bool>& dynamic) {
  std::vector<int64_t> out = values;
  for (size_t i = 0; i < out.size() && i < dynamic.size(); ++i) {
    if (dynamic[i]) out[i] = kAnyDim;
  }
  return out;
}

inline std::string describe_tensor(const TensorFacts& f) {
  std::string out = cat("TENSOR_MATCH: ", f.type, ", ", f.dtype, ", ", f.device,
                                 ", requires_grad=", bool_text(f.requires_grad),
                                 ", size=", int_list_text(f.sizes, f.dynamic_sizes));
  if (f.strides) append_to(&out, ", stride=", int_list_text(*f.strides, f.dynamic_strides));
  return out;
}

// The first fact that differs, in the order a user reads them; nullopt when all agree.
inline std::optional<std::string> explain_tensor(const TensorFacts& want, const TensorFacts& got,
                                                 std::string_view source) {
  if (want.type != got.type) return mismatch(cat("type(", source, ")"), "", want.type, got.type);
  if (want.dtype != got.dtype) return mismatch(source, ".dtype", want.dtype, got.dtype);
  if (want.device != got.device) return mismatch(source, ".device", want.device, got.device);
  if (want.requires_grad != got.requires_grad) {
    return mismatch(source, ".requires_grad", bool_text(want.requires_grad), bool_text(got.requires_grad));
  }
  if (want.sizes.size() != got.sizes.size()) {
    return mismatch(source, ".dim()", cat(want.sizes.size()), cat(got.sizes.size()));
  }
  for (size_t i = 0; i < want.sizes.size(); ++i) {
    if (!want.size_dynamic(i) && want.sizes[i] != got.sizes[i]) {
      return mismatch(source, cat(".size()[", i, "]"), cat(want.sizes[i]),
                      cat(got.sizes[i]));
    }
  }
  if (want.strides.has_value() != got.strides.has_value()) {
    return mismatch(source, ".layout", want.strides ? "strided" : "not strided",
                    got.strides ? "strided" : "not strided");
  }
  if (want.strides) {
    for (size_t i = 0; i < want.strides->size(); ++i) {
      if (!want.stride_dynamic(i) && (*want.strides)[i] != (*got.strides)[i]) {
        return mismatch(source, cat(".stride()[", i, "]"), cat((*want.strides)[i]),
                        cat((*got.strides)[i]));
      }
    }
  }
  return std::nullopt;
}

inline std::string not_a_tensor(PyObject* value, std::string_view source) {
  return cat(source, ": expected a tensor, got ", type_name(Py_TYPE(value)));
}

// `type(L['x']): expected torch.Tensor, got torch.nn.Parameter`, for a tensor whose type is not the
// expected one (or is a freed user class whose address was reused).
inline std::string type_mismatch(const ExpectedType& want, std::string_view want_name, PyObject* value,
                                 std::string_view source) {
  std::string got = type_name(Py_TYPE(value));
  if (Py_TYPE(value) == want.get() && !want.alive()) {
    append_to(&got, " (the expected class was freed)");
  } else if (got == want_name) {
    append_to(&got, " (a different class with the same name)");
  }
  return mismatch(cat("type(", source, ")"), "", want_name, got);
}

inline std::string dispatch_keys_mismatch(std::string_view source, std::string_view want, std::string_view got) {
  return mismatch(source, " dispatch keys", want, got);
}

// ---------------------------------------------------------------------------------------------
// GLOBAL_STATE.

using GlobalStateFacts = tjc::GlobalStateFacts;  // torch_backend.h

// torch's own defaults for torch.get_autocast_dtype(device); describe() names a dtype only when
// autocast is on or the dtype was changed, so the common text stays short and stable.
inline constexpr std::string_view kDefaultAutocastCpuDtype = "torch.bfloat16";
inline constexpr std::string_view kDefaultAutocastCudaDtype = "torch.float16";

inline std::string autocast_text(bool enabled, std::string_view dtype, std::string_view default_dtype) {
  if (!enabled && dtype == default_dtype) return bool_text(enabled);
  return cat(bool_text(enabled), "(", dtype, ")");
}

inline std::string describe_global_state(const GlobalStateFacts& f) {
  return cat("GLOBAL_STATE: grad_mode=", bool_text(f.grad_mode), ", default_dtype=", f.default_dtype,
                      ", deterministic=", bool_text(f.deterministic),
                      ", autocast_cpu=", autocast_text(f.autocast_cpu, f.autocast_cpu_dtype, kDefaultAutocastCpuDtype),
                      ", autocast_cuda=",
                      autocast_text(f.autocast_cuda, f.autocast_cuda_dtype, kDefaultAutocastCudaDtype));
}

inline std::optional<std::string> explain_global_state(const GlobalStateFacts& want, const GlobalStateFacts& got) {
  constexpr std::string_view p = "GLOBAL_STATE: ";
  if (want.grad_mode != got.grad_mode) return mismatch(p, "grad_mode", bool_text(want.grad_mode), bool_text(got.grad_mode));
  if (want.default_dtype != got.default_dtype) return mismatch(p, "default_dtype", want.default_dtype, got.default_dtype);
  if (want.deterministic != got.deterministic) {
    return mismatch(p, "deterministic", bool_text(want.deterministic), bool_text(got.deterministic));
  }
  if (want.autocast_cpu != got.autocast_cpu) {
    return mismatch(p, "autocast_cpu", bool_text(want.autocast_cpu), bool_text(got.autocast_cpu));
  }
  if (want.autocast_cpu_dtype != got.autocast_cpu_dtype) {
    return mismatch(p, "autocast_cpu_dtype", want.autocast_cpu_dtype, got.autocast_cpu_dtype);
  }
  if (want.autocast_cuda != got.autocast_cuda) {
    return mismatch(p, "autocast_cuda", bool_text(want.autocast_cuda), bool_text(got.autocast_cuda));
  }
  if (want.autocast_cuda_dtype != got.autocast_cuda_dtype) {
    return mismatch(p, "autocast_cuda_dtype", want.autocast_cuda_dtype, got.autocast_cuda_dtype);
  }
  return std::nullopt;
}

}  // namespace tjc::torch_text
