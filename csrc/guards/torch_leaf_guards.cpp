// TENSOR_MATCH and GLOBAL_STATE leaves: thin adapters over the torch backend's impls
// (torch_backend.h), which own the facts and the words; the tree adds only its bookkeeping.
#include <utility>

#include "absl/strings/str_cat.h"
#include "guards/guard_errors.h"
#include "guards/leaf_guards.h"
#include "guards/torch_backend.h"

namespace tjc {

namespace {

class TensorMatch final : public LeafGuard {
 public:
  explicit TensorMatch(std::unique_ptr<TensorMatchImpl> impl)
      : LeafGuard(LeafKind::kTensorMatch), impl_(std::move(impl)) {}

  bool check(PyObject* value) noexcept override { return impl_->check(value); }
  std::optional<std::string> explain(PyObject* value, const std::string& source) override {
    return impl_->explain(value, source);
  }
  std::string describe() const override { return impl_->describe(); }

 private:
  std::unique_ptr<TensorMatchImpl> impl_;
};

class GlobalState final : public LeafGuard {
 public:
  explicit GlobalState(std::unique_ptr<GlobalStateImpl> impl)
      : LeafGuard(LeafKind::kGlobalState), impl_(std::move(impl)) {}

  bool check(PyObject*) noexcept override { return impl_->check(); }
  std::optional<std::string> explain(PyObject*, const std::string&) override {
    return impl_->explain();
  }
  std::string describe() const override { return impl_->describe(); }

 private:
  std::unique_ptr<GlobalStateImpl> impl_;
};

}  // namespace

absl::StatusOr<LeafPtr> make_tensor_match(py::handle example, const std::string& source,
                                          const DynamicDims& dynamic) {
  absl::StatusOr<TorchBackend*> backend = torch_backend();
  if (!backend.ok()) return backend.status();
  auto impl = (*backend)->make_tensor_match(example.ptr(), dynamic);
  if (!impl.ok()) {
    std::string message = absl::StrCat(source, ": ", impl.status().message());
    // The backend says InvalidArgument for "not a tensor": to Python that is a TypeError.
    if (impl.status().code() == absl::StatusCode::kInvalidArgument) return type_error_status(message);
    return absl::Status(impl.status().code(), message);
  }
  return LeafPtr(new TensorMatch(std::move(*impl)));
}

absl::StatusOr<LeafPtr> make_global_state() {
  absl::StatusOr<TorchBackend*> backend = torch_backend();
  if (!backend.ok()) return backend.status();
  auto impl = (*backend)->make_global_state();
  if (!impl.ok()) return impl.status();
  return LeafPtr(new GlobalState(std::move(*impl)));
}

}  // namespace tjc
