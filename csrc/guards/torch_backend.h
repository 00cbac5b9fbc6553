// TorchBackend: how the torch-free core (_C) reaches tensor and torch global state.
//
// _C never links libtorch. Two implementations exist behind this interface:
//   * the libtorch one, in the separate extension torch_jit_cache._C_torch (csrc/torch/ and
//     csrc/guards/*_libtorch.cpp), which reads at::Tensor and the thread-local autograd/autocast
//     state directly (tens of nanoseconds per tensor);
//   * a C-API fallback inside _C that reads the same facts through Python attributes (slower),
//     used when _C_torch was not built.
// _C_torch registers itself at import through the capsule `torch_jit_cache._C._torch_backend_slot`
// (a `void (*)(TorchBackend*)`); torch_backend() imports it lazily the first time it is asked for.
//
// Both extensions are built by the same compiler in the same build, so this C++ interface is safe
// to share across the module boundary. The registered backend lives until the process exits.
//
// Threads: all calls under the GIL.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tjc {

// What one TENSOR_MATCH compares, read from the leaf itself: check() accepts exactly the tensors
// whose type is `type` and whose facts equal these (a kAnyDim entry matching any size / stride).
// The on-disk cache stores it, and loads a guard only for a tensor whose leaf has the same state,
// so that a stored guard checks what the live one checks (torch_jit_cache/pipeline/disk_cache/guard_codec.py).
// Both backends give equal states for equal tensors under equal thread-local state.
struct TensorMatchState {
  PyTypeObject* type = nullptr;  // borrowed: the exact type; nullptr once a weakly held one died
  uint64_t dispatch_keys = 0;    // c10 raw repr, the thread-local include/exclude sets applied
  std::string dtype;             // str(torch.dtype): torch.float32
  std::string device;            // str(torch.device): its type and index (cpu, cuda:0, meta)
  bool requires_grad = false;
  bool strided = false;          // strides are compared only for the strided layout
  std::vector<int64_t> sizes;    // kAnyDim (tensor_text.h) where dynamic
  std::vector<int64_t> strides;  // empty unless strided; kAnyDim where dynamic
};

// What one GLOBAL_STATE compares, as text (dtypes as str(torch.dtype)); equal states, equal checks.
struct GlobalStateFacts {
  bool grad_mode = true;
  std::string default_dtype;
  bool deterministic = false;
  bool autocast_cpu = false;
  std::string autocast_cpu_dtype;
  bool autocast_cuda = false;
  std::string autocast_cuda_dtype;
};

// One TENSOR_MATCH: the facts of an example tensor, checked against a value.
class TensorMatchImpl {
 public:
  virtual ~TensorMatchImpl() = default;
  // Hot path: true when `value` (borrowed) is a tensor with the same Python type, dispatch keys,
  // dtype, device, requires_grad, number of dims, and sizes and strides except in the dims made
  // dynamic (TensorDims). Never raises, never leaves an error set.
  virtual bool check(PyObject* value) noexcept = 0;
  // Slow path: why `value` fails, in words prefixed by `source`
  // (`L['x'].size()[0]: expected 8, got 16`), or nullopt when it passes.
  virtual std::optional<std::string> explain(PyObject* value, std::string_view source) = 0;
  // Stable text for the guard tree printout, e.g.
  // `TENSOR_MATCH: torch.Tensor, torch.float32, cpu, requires_grad=False, size=[8, 4], stride=[4, 1]`.
  virtual std::string describe() const = 0;
  // Every fact check() compares, as it compares them (see TensorMatchState).
  virtual TensorMatchState state() const = 0;
};

// Which dims a TENSOR_MATCH leaves unchecked: their size / stride is a symbol that the root's
// SYMBOLIC_SHAPES guard checks instead (shape_guards.h). Each index is in [0, dim()); order and
// duplicates do not matter. Empty (the default): every size and stride is pinned.
struct DynamicDims {
  std::vector<int> sizes;
  std::vector<int> strides;
  bool empty() const { return sizes.empty() && strides.empty(); }
};

// One integer a SYMBOLIC_SHAPES binding reads from a tensor.
enum class TensorField : uint8_t { kSize, kStride, kStorageOffset };
struct TensorRead {
  TensorField field;
  int dim;  // kSize / kStride: the dim, >= 0; ignored for kStorageOffset
};

// GLOBAL_STATE: grad mode, default dtype, deterministic algorithms, autocast (per device type
// enabled + dtype), captured when the guard is made and compared on every check.
class GlobalStateImpl {
 public:
  virtual ~GlobalStateImpl() = default;
  virtual bool check() noexcept = 0;
  virtual std::optional<std::string> explain() = 0;
  virtual std::string describe() const = 0;
  // The state check() compares the current one with, captured when the guard was made.
  virtual GlobalStateFacts state() const = 0;
};

class TorchBackend {
 public:
  virtual ~TorchBackend() = default;
  virtual const char* name() const = 0;  // "libtorch" or "python-api"
  // InvalidArgument when `example` is not a real torch.Tensor (a fake or symbolic-size tensor is
  // refused too) or a dynamic dim is out of range.
  virtual absl::StatusOr<std::unique_ptr<TensorMatchImpl>> make_tensor_match(PyObject* example,
                                                                             const DynamicDims& dynamic) = 0;
  // Hot path of SYMBOLIC_SHAPES: out[i] = field reads[i] of `value` (borrowed), for i < n. False,
  // with no Python error left set, when `value` is not a torch.Tensor, a dim is out of range, a
  // stride of a non-strided tensor is asked for, or the tensor cannot be read as plain ints
  // (symbolic sizes, a subclass whose sizes raise). The libtorch backend allocates nothing; the
  // fallback calls x.size() / x.stride() / x.storage_offset() once per read.
  virtual bool read_tensor_ints(PyObject* value, const TensorRead* reads, size_t n, int64_t* out) noexcept = 0;
  virtual absl::StatusOr<std::unique_ptr<GlobalStateImpl>> make_global_state() = 0;
};

// The backend to use: _C_torch's when it is importable, else the C-API fallback when torch is
// importable, else FailedPrecondition ("torch is not installed"). Never returns nullptr on OK.
absl::StatusOr<TorchBackend*> torch_backend();

// The name of the capsule `torch_jit_cache._C._torch_backend_slot`; its pointer is a
// `void (*)(TorchBackend*)` that calls register_torch_backend().
inline constexpr const char kTorchBackendSlotName[] = "torch_jit_cache._C._torch_backend_slot";

// Called by _C_torch's module init (through the capsule) to register itself.
void register_torch_backend(TorchBackend* backend);

}  // namespace tjc
