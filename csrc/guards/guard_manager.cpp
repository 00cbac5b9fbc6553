// GuardManager: one node of a guard tree (see guard_manager.h).
#include "guards/guard_manager.h"

#include "cpython/dict_version.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/live_objects.h"
#include "common/py_errors.h"
#include "guards/guard_errors.h"
#include "guards/guard_text.h"

namespace tjc {

GuardManager::GuardManager(Accessor accessor, std::string source, std::shared_ptr<TreeState> state)
    : state_(std::move(state)), accessor_(std::move(accessor)), source_(std::move(source)) {
  TJC_CHECK(state_ != nullptr);
  ++live_objects().guard_managers;
}

GuardManager::~GuardManager() { --live_objects().guard_managers; }

absl::StatusOr<std::shared_ptr<GuardManager>> GuardManager::child_for(absl::StatusOr<Accessor> accessor) {
  if (!accessor.ok()) return accessor.status();
  for (const std::shared_ptr<GuardManager>& existing : children_) {
    if (existing->accessor_.same_source(*accessor)) return existing;
  }
  if (state_->frozen) return frozen_status();
  std::string source = accessor->source_text(source_);
  auto node = std::make_shared<GuardManager>(std::move(*accessor), std::move(source), state_);
  children_.push_back(node);
  return node;
}

absl::StatusOr<std::shared_ptr<GuardManager>> GuardManager::child(AccessorKind kind, py::handle operand) {
  const AccessorSpec& spec = accessor_spec(kind);
  switch (spec.reads) {
    case Reads::kNothing:
      return absl::InvalidArgumentError("the root is not a child: make a RootGuardManager");
    case Reads::kFrame:
      if (!is_root()) {
        return absl::InvalidArgumentError(absl::StrCat(
            spec.builder, "() reads the frame: call it on the root, e.g. ", spec.example));
      }
      break;
    case Reads::kParent:
      if (is_root()) {
        return absl::InvalidArgumentError(absl::StrCat(
            spec.builder, "() reads a value: call it on a source, e.g. ", spec.example));
      }
      break;
  }
  return child_for(Accessor::make(kind, operand, source_));
}

absl::Status GuardManager::push_leaf(absl::StatusOr<LeafPtr> leaf) {
  if (state_->frozen) return frozen_status();
  if (!leaf.ok()) return leaf.status();
  leaves_.push_back(std::move(*leaf));
  return absl::OkStatus();
}

namespace {
absl::Status root_has_no_value(const std::string& guard) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the root has no value to guard: call ", guard, " on a source, e.g. g.local('x').", guard));
}
}  // namespace

absl::Status GuardManager::add_leaf(LeafKind kind, const LeafArgs& args) {
  if (kind == LeafKind::kGlobalState) return make_leaf(kind, args, state_, source_).status();  // the root's own
  if (is_root()) return root_has_no_value(leaf_call_text(leaf_spec(kind)));
  if (state_->frozen) return frozen_status();
  return push_leaf(make_leaf(kind, args, state_, source_));
}

absl::Status GuardManager::add_dict_tags() {
  if constexpr (!cpython::kDictTagsFollowEveryChange) {
    return absl::FailedPreconditionError(
        "dict_tags(): this Python's dict version tags miss stores through an object's inline "
        "values (3.13), so tags cannot vouch for a subtree; runtime.DICT_TAGS_SUPPORTED is False");
  }
  if (is_root()) return root_has_no_value("dict_tags()");
  if (state_->frozen) return frozen_status();
  if (tags_ == nullptr) tags_ = std::make_unique<DictTags>();
  return absl::OkStatus();
}

int64_t GuardManager::num_guards() const {
  int64_t total = static_cast<int64_t>(leaves_.size());
  for (const auto& child : children_) total += child->num_guards();
  return total;
}

// ---- Hot path.

bool GuardManager::check_value(PyObject* value, const FrameView& view) noexcept {
  for (size_t i = 0; i < leaves_.size(); ++i) {
    if (TJC_UNLIKELY(!leaves_[i]->check(value))) {
      on_leaf_failure(i);
      return false;
    }
  }
  if (tags_ != nullptr) return tags_->check(*this, value, view);
  return check_children(value, view);
}

bool GuardManager::check_children(PyObject* value, const FrameView& view) noexcept {
  for (size_t i = 0; i < children_.size(); ++i) {
    GuardManager* child = children_[i].get();  // kept alive by children_: nodes are never removed
    PyObject* child_value = child->accessor_.fetch(value, view);  // new ref
    bool ok = child_value != nullptr && child->check_value(child_value, view);
    Py_XDECREF(child_value);
    if (TJC_UNLIKELY(!ok)) {
      if (PyErr_Occurred()) clear_guard_error();  // the accessor raised: a failure, never an error
      on_child_failure(i);
      return false;
    }
  }
  return true;
}

// Failure paths: count, and move the failing guard to the front (order of the others kept).
// `index` may be stale if Python re-entered and reordered this node meanwhile; then some other
// guard moves first, which is harmless.
void GuardManager::on_leaf_failure(size_t index) {
  if (index >= leaves_.size()) return;
  leaves_[index]->count_failure();
  if (index > 0) std::rotate(leaves_.begin(), leaves_.begin() + index, leaves_.begin() + index + 1);
}

void GuardManager::on_child_failure(size_t index) {
  if (index >= children_.size()) return;
  ++children_[index]->fail_count_;
  if (index > 0) std::rotate(children_.begin(), children_.begin() + index, children_.begin() + index + 1);
}

// ---- Slow path.

std::optional<std::string> GuardManager::explain_value(PyObject* value, const FrameView& view) {
  for (size_t i = 0; i < leaves_.size(); ++i) {
    if (std::optional<std::string> reason = leaves_[i]->explain(value, source_)) return reason;
  }
  for (size_t i = 0; i < children_.size(); ++i) {
    std::shared_ptr<GuardManager> child = children_[i];
    py::object child_value = py::reinterpret_steal<py::object>(child->accessor_.fetch(value, view));
    if (!child_value) {
      if (PyErr_Occurred()) return absl::StrCat(child->source_, ": raised ", take_error_text());
      return absl::StrCat(child->source_, ": missing");
    }
    if (std::optional<std::string> reason = child->explain_value(child_value.ptr(), view)) {
      return reason;
    }
  }
  return std::nullopt;
}

// ---- Text.
//
//   RootGuardManager
//   | GLOBAL_STATE: ...
//   +- L['x']
//   |  | TYPE_MATCH: int
//   +- L['self']
//   |  +- L['self'].fc
//   |  |  | ID_MATCH: <Linear object> (weak)
//
// Each node prints its full source (what explain() says), its leaves as `| ` lines and its
// children as `+- ` lines, both in evaluation order.

void GuardManager::append_body(std::string& out, const std::string& indent) const {
  for (const LeafPtr& leaf : leaves_) absl::StrAppend(&out, "\n", indent, "| ", leaf->describe());
  if (tags_ != nullptr) {
    absl::StrAppend(&out, "\n", indent, "| DICT_TAGS: children skipped while the dicts they read are unchanged");
  }
  const std::string child_indent = indent + "|  ";
  for (const auto& child : children_) {
    absl::StrAppend(&out, "\n", indent, "+- ", child->source_);
    child->append_body(out, child_indent);
  }
}

PyObject* fetch_along(const std::vector<std::shared_ptr<GuardManager>>& chain, const FrameView& view) noexcept {
  PyObject* value = nullptr;  // the root has no value
  for (const std::shared_ptr<GuardManager>& node : chain) {
    PyObject* next = node->accessor().fetch(value, view);  // new ref or null
    Py_XDECREF(value);
    if (next == nullptr) return nullptr;
    value = next;
  }
  return value;
}

std::string GuardManager::debug_string() const {
  std::string out = source_;
  append_body(out, "");
  return out;
}

}  // namespace tjc
