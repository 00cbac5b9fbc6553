// _C's torch parts: the _C_torch registration slot, the states of TENSOR_MATCH / GLOBAL_STATE
// (what the on-disk cache stores), and test-only handles on their impls of a named backend.
//
// The runtime reaches these guards through GuardManager.tensor_match()/global_state(); the
// `_..._for_test` functions exist so tests can pin both backends (libtorch and python-api) to the
// same behaviour and text. They are underscored and not re-exported by the package.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "guards/tensor_text.h"
#include "guards/torch_backend_registry.h"

namespace tjc::bindings {
namespace {

TorchBackendKind parse_kind(const std::string& name) {
  if (name == "auto") return TorchBackendKind::kAuto;
  if (name == "libtorch") return TorchBackendKind::kLibtorch;
  if (name == "python-api") return TorchBackendKind::kPythonApi;
  throw py::value_error("backend must be 'auto', 'libtorch' or 'python-api', not '" + name + "'");
}

TorchBackend* backend_or_throw(const std::string& name) {
  absl::StatusOr<TorchBackend*> backend = torch_backend(parse_kind(name));
  throw_if_error(backend.status());
  return *backend;
}

// Test handle on one TensorMatchImpl. Holds the impl only (never the example tensor).
struct TensorMatchForTest {
  std::shared_ptr<TensorMatchImpl> impl;
  std::string backend;
};

struct GlobalStateForTest {
  std::shared_ptr<GlobalStateImpl> impl;
  std::string backend;
};

// Mean nanoseconds per call of `fn` over `n` calls, for the micro timing printed by the tests.
template <typename F>
double ns_per_call(int n, F&& fn) {
  int passed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) passed += fn() ? 1 : 0;
  const auto stop = std::chrono::steady_clock::now();
  if (passed != n && passed != 0) throw std::runtime_error("check() changed its answer while timing");
  return std::chrono::duration<double, std::nano>(stop - start).count() / n;
}

// A size / stride list as a tuple, None where the dim is dynamic (kAnyDim).
py::tuple dims_tuple(const std::vector<int64_t>& dims) {
  py::tuple out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    out[i] = dims[i] == torch_text::kAnyDim ? py::object(py::none()) : py::object(py::int_(dims[i]));
  }
  return out;
}

py::dict state_dict(const TensorMatchState& s) {
  py::dict out;
  out["type"] = s.type != nullptr ? py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(s.type)) : py::none();
  out["dispatch_keys"] = py::int_(s.dispatch_keys);
  out["dtype"] = s.dtype;
  out["device"] = s.device;
  out["requires_grad"] = s.requires_grad;
  out["strided"] = s.strided;
  out["sizes"] = dims_tuple(s.sizes);
  out["strides"] = s.strided ? py::object(dims_tuple(s.strides)) : py::none();
  return out;
}

py::dict state_dict(const GlobalStateFacts& s) {
  py::dict out;
  out["grad_mode"] = s.grad_mode;
  out["default_dtype"] = s.default_dtype;
  out["deterministic"] = s.deterministic;
  out["autocast_cpu"] = s.autocast_cpu;
  out["autocast_cpu_dtype"] = s.autocast_cpu_dtype;
  out["autocast_cuda"] = s.autocast_cuda;
  out["autocast_cuda_dtype"] = s.autocast_cuda_dtype;
  return out;
}

std::unique_ptr<TensorMatchImpl> make_tensor_match_or_throw(TorchBackend* backend, py::handle example,
                                                            std::vector<int> dynamic_sizes,
                                                            std::vector<int> dynamic_strides) {
  absl::StatusOr<std::unique_ptr<TensorMatchImpl>> impl =
      backend->make_tensor_match(example.ptr(), DynamicDims{std::move(dynamic_sizes), std::move(dynamic_strides)});
  throw_if_error(impl.status());
  return std::move(*impl);
}

std::unique_ptr<GlobalStateImpl> make_global_state_or_throw(TorchBackend* backend) {
  absl::StatusOr<std::unique_ptr<GlobalStateImpl>> impl = backend->make_global_state();
  throw_if_error(impl.status());
  return std::move(*impl);
}

}  // namespace

void init_torch(py::module_& m) {
  PyObject* slot = make_torch_backend_slot();
  if (slot == nullptr) throw py::error_already_set();
  m.attr("_torch_backend_slot") = py::reinterpret_steal<py::object>(slot);

  m.def(
      "_torch_backend_name",
      []() -> std::string { return backend_or_throw("auto")->name(); },
      "The TENSOR_MATCH backend in use: 'libtorch' or 'python-api'; RuntimeError with the reason when "
      "torch is not installed.");
  m.def(
      "_torch_backend_fallback_reason", []() { return torch_backend_fallback_reason(); },
      "Why the libtorch backend is not used ('' when it is).");

  py::class_<TensorMatchForTest>(m, "_TensorMatchForTest")
      .def_readonly("backend", &TensorMatchForTest::backend)
      .def("check", [](TensorMatchForTest& self, py::handle value) { return self.impl->check(value.ptr()); })
      .def(
          "explain",
          [](TensorMatchForTest& self, py::handle value, const std::string& source) {
            return self.impl->explain(value.ptr(), source);
          },
          py::arg("value"), py::arg("source") = "L['x']")
      .def("describe", [](const TensorMatchForTest& self) { return self.impl->describe(); })
      .def("state", [](const TensorMatchForTest& self) { return state_dict(self.impl->state()); })
      .def("_ns_per_check",
           [](TensorMatchForTest& self, py::handle value, int n) {
             return ns_per_call(n, [&] { return self.impl->check(value.ptr()); });
           })
      .def("__repr__", [](const TensorMatchForTest& self) { return self.impl->describe(); });

  py::class_<GlobalStateForTest>(m, "_GlobalStateForTest")
      .def_readonly("backend", &GlobalStateForTest::backend)
      .def("check", [](GlobalStateForTest& self) { return self.impl->check(); })
      .def("explain", [](GlobalStateForTest& self) { return self.impl->explain(); })
      .def("describe", [](const GlobalStateForTest& self) { return self.impl->describe(); })
      .def("state", [](const GlobalStateForTest& self) { return state_dict(self.impl->state()); })
      .def("_ns_per_check",
           [](GlobalStateForTest& self, int n) { return ns_per_call(n, [&] { return self.impl->check(); }); })
      .def("__repr__", [](const GlobalStateForTest& self) { return self.impl->describe(); });

  m.def(
      "tensor_match_state",
      [](py::handle example, std::vector<int> dynamic_sizes, std::vector<int> dynamic_strides) {
        return state_dict(make_tensor_match_or_throw(backend_or_throw("auto"), example, std::move(dynamic_sizes),
                                                     std::move(dynamic_strides))
                              ->state());
      },
      py::arg("example"), py::arg("dynamic_sizes") = std::vector<int>(),
      py::arg("dynamic_strides") = std::vector<int>(),
      "The state of the TENSOR_MATCH leaf that `example` would make here and now (this thread's "
      "dispatch-key state applied): a dict of type, dispatch_keys (c10's raw repr), dtype, device, "
      "requires_grad, strided, sizes and strides (None where dynamic; strides None unless strided). "
      "The leaf accepts exactly the tensors of that type whose state is equal. ValueError for what "
      "tensor_match refuses (not a real tensor, a dynamic dim out of range).");
  m.def(
      "global_state_state", []() { return state_dict(make_global_state_or_throw(backend_or_throw("auto"))->state()); },
      "The state a GLOBAL_STATE leaf made now compares with: a dict of grad_mode, default_dtype, "
      "deterministic, autocast_cpu(_dtype), autocast_cuda(_dtype) (dtypes as str(torch.dtype)).");
  m.def(
      "_make_tensor_match_for_test",
      [](py::handle example, const std::string& backend, std::vector<int> dynamic_sizes,
         std::vector<int> dynamic_strides) {
        TorchBackend* b = backend_or_throw(backend);
        return TensorMatchForTest{std::shared_ptr<TensorMatchImpl>(make_tensor_match_or_throw(
                                      b, example, std::move(dynamic_sizes), std::move(dynamic_strides))),
                                  b->name()};
      },
      py::arg("example"), py::arg("backend") = "auto", py::arg("dynamic_sizes") = std::vector<int>(),
      py::arg("dynamic_strides") = std::vector<int>());
  m.def(
      "_make_global_state_for_test",
      [](const std::string& backend) {
        TorchBackend* b = backend_or_throw(backend);
        return GlobalStateForTest{std::shared_ptr<GlobalStateImpl>(make_global_state_or_throw(b)), b->name()};
      },
      py::arg("backend") = "auto");
}

}  // namespace tjc::bindings
