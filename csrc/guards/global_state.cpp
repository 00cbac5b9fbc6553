// GLOBAL_STATE through the C API (the fallback when _C_torch is not built).
#include "guards/global_state.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/check.h"
#include "common/py_errors.h"
#include "guards/tensor_text.h"

namespace tjc {
namespace {

// The five values, each a new reference: bools are Py_True/Py_False, dtypes torch.dtype singletons.
struct Snapshot {
  PyObject* grad_mode = nullptr;
  PyObject* default_dtype = nullptr;
  PyObject* deterministic = nullptr;
  PyObject* autocast_cpu = nullptr;
  PyObject* autocast_cpu_dtype = nullptr;
  PyObject* autocast_cuda = nullptr;
  PyObject* autocast_cuda_dtype = nullptr;

  Snapshot() = default;
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  Snapshot(Snapshot&& o) noexcept { *this = std::move(o); }
  Snapshot& operator=(Snapshot&& o) noexcept {
    if (this != &o) {
      clear();
      grad_mode = std::exchange(o.grad_mode, nullptr);
      default_dtype = std::exchange(o.default_dtype, nullptr);
      deterministic = std::exchange(o.deterministic, nullptr);
      autocast_cpu = std::exchange(o.autocast_cpu, nullptr);
      autocast_cpu_dtype = std::exchange(o.autocast_cpu_dtype, nullptr);
      autocast_cuda = std::exchange(o.autocast_cuda, nullptr);
      autocast_cuda_dtype = std::exchange(o.autocast_cuda_dtype, nullptr);
    }
    return *this;
  }
  ~Snapshot() { clear(); }

  void clear() noexcept {
    for (PyObject** p : {&grad_mode, &default_dtype, &deterministic, &autocast_cpu, &autocast_cpu_dtype,
                         &autocast_cuda, &autocast_cuda_dtype}) {
      Py_CLEAR(*p);
    }
  }

  // Reads the current state; false with a Python error set on failure.
  bool read(const TorchPyApi& api) noexcept {
    clear();
    grad_mode = PyObject_CallNoArgs(api.is_grad_enabled);
    if (grad_mode == nullptr) return false;
    default_dtype = PyObject_CallNoArgs(api.get_default_dtype);
    if (default_dtype == nullptr) return false;
    deterministic = PyObject_CallNoArgs(api.deterministic);
    if (deterministic == nullptr) return false;
    autocast_cpu = PyObject_CallOneArg(api.is_autocast_enabled, api.s_cpu);
    if (autocast_cpu == nullptr) return false;
    autocast_cpu_dtype = PyObject_CallOneArg(api.get_autocast_dtype, api.s_cpu);
    if (autocast_cpu_dtype == nullptr) return false;
    autocast_cuda = PyObject_CallOneArg(api.is_autocast_enabled, api.s_cuda);
    if (autocast_cuda == nullptr) return false;
    autocast_cuda_dtype = PyObject_CallOneArg(api.get_autocast_dtype, api.s_cuda);
    return autocast_cuda_dtype != nullptr;
  }

  torch_text::GlobalStateFacts facts() const {
    torch_text::GlobalStateFacts f;
    f.grad_mode = grad_mode == Py_True;
    f.default_dtype = torch_text::py_str(default_dtype);
    f.deterministic = deterministic == Py_True;
    f.autocast_cpu = autocast_cpu == Py_True;
    f.autocast_cpu_dtype = torch_text::py_str(autocast_cpu_dtype);
    f.autocast_cuda = autocast_cuda == Py_True;
    f.autocast_cuda_dtype = torch_text::py_str(autocast_cuda_dtype);
    return f;
  }
};

// Calls `fn(arg)` (or fn() when arg is null) and compares the result with `want` by identity.
// Identity is exact here: the answers are bool and torch.dtype singletons.
inline bool same(PyObject* fn, PyObject* arg, PyObject* want) noexcept {
  PyObject* got = arg == nullptr ? PyObject_CallNoArgs(fn) : PyObject_CallOneArg(fn, arg);
  if (got == nullptr) return false;
  const bool eq = got == want;
  Py_DECREF(got);
  return eq;
}

class PythonApiGlobalState final : public GlobalStateImpl {
 public:
  PythonApiGlobalState(const TorchPyApi& api, Snapshot want)
      : api_(api), want_(std::move(want)), facts_(want_.facts()) {}

  bool check() noexcept override {
    const bool ok = same(api_.is_grad_enabled, nullptr, want_.grad_mode) &&
                    same(api_.get_default_dtype, nullptr, want_.default_dtype) &&
                    same(api_.deterministic, nullptr, want_.deterministic) &&
                    same(api_.is_autocast_enabled, api_.s_cpu, want_.autocast_cpu) &&
                    same(api_.get_autocast_dtype, api_.s_cpu, want_.autocast_cpu_dtype) &&
                    same(api_.is_autocast_enabled, api_.s_cuda, want_.autocast_cuda) &&
                    same(api_.get_autocast_dtype, api_.s_cuda, want_.autocast_cuda_dtype);
    if (TJC_UNLIKELY(PyErr_Occurred() != nullptr)) {
      clear_guard_error();
      return false;
    }
    return ok;
  }

  std::optional<std::string> explain() override {
    if (check()) return std::nullopt;
    Snapshot now;
    if (!now.read(api_)) {
      return "GLOBAL_STATE: torch did not answer (" + torch_text::take_error_text() + ")";
    }
    if (auto reason = torch_text::explain_global_state(facts_, now.facts())) return reason;
    return std::string("GLOBAL_STATE: changed");  // unreachable unless torch changed between calls
  }

  std::string describe() const override { return torch_text::describe_global_state(facts_); }
  GlobalStateFacts state() const override { return facts_; }  // want_, as text

 private:
  const TorchPyApi& api_;              // lives for the process
  Snapshot want_;                      // the state captured when the guard was made
  torch_text::GlobalStateFacts facts_;  // want_ as text, for describe()/explain()
};

}  // namespace

absl::StatusOr<std::unique_ptr<GlobalStateImpl>> make_python_api_global_state(const TorchPyApi& api) {
  Snapshot want;
  if (!want.read(api)) {
    return absl::InternalError("GLOBAL_STATE: could not read torch's global state: " +
                               torch_text::take_error_text());
  }
  return std::make_unique<PythonApiGlobalState>(api, std::move(want));
}

}  // namespace tjc
