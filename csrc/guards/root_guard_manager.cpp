// RootGuardManager: the root of one cache entry's guard tree (see root_guard_manager.h).
#include "guards/root_guard_manager.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/py_errors.h"
#include "guards/guard_errors.h"
#include "guards/guard_text.h"

namespace tjc {

RootGuardManager::RootGuardManager()
    : GuardManager(Accessor::root(), "", std::make_shared<TreeState>()) {}

RootGuardManager::~RootGuardManager() {
  // The callback belongs to whoever owns this root (the runtime's entry). Children may outlive the
  // root through their Python wrappers and still see a death; they must not call a freed owner.
  state_->on_invalidate = nullptr;
}

// ---- Builder.

absl::Status RootGuardManager::add_global_state() {
  if (state_->frozen) return frozen_status();
  return push_leaf(make_global_state());
}

bool RootGuardManager::has_identity_guards() const { return state_->weak_watches > 0; }

namespace {
// The nodes from a child of `from` down to `target`, or false when `target` is not below `from`.
bool path_to(const GuardManager& from, const GuardManager* target,
             std::vector<std::shared_ptr<GuardManager>>& path) {
  for (const std::shared_ptr<GuardManager>& child : from.children()) {
    path.push_back(child);
    if (child.get() == target || path_to(*child, target, path)) return true;
    path.pop_back();
  }
  return false;
}
}  // namespace

absl::Status RootGuardManager::add_identity_relation(
    const std::vector<std::shared_ptr<GuardManager>>& nodes, const std::vector<int>& classes) {
  if (state_->frozen) return frozen_status();
  if (nodes.size() != classes.size()) {
    return absl::InvalidArgumentError("identity_relation: one class per source");
  }
  std::vector<IdentityRelation::Member> members;
  for (size_t i = 0; i < nodes.size(); ++i) {
    IdentityRelation::Member member;
    if (nodes[i] == nullptr || !path_to(*this, nodes[i].get(), member.chain)) {
      return absl::InvalidArgumentError(
          "identity_relation: every source must be a node of this tree (made from this root)");
    }
    member.cls = classes[i];
    members.push_back(std::move(member));
  }
  absl::StatusOr<std::unique_ptr<IdentityRelation>> relation = IdentityRelation::make(std::move(members));
  if (!relation.ok()) return relation.status();
  relations_.push_back(std::move(*relation));
  return absl::OkStatus();
}

absl::Status RootGuardManager::add_shape_guards(const std::vector<ShapeBinding>& bindings, size_t num_symbols,
                                               std::vector<ShapeGuards::Range> ranges,
                                               std::vector<ShapeProgram> exprs) {
  if (state_->frozen) return frozen_status();
  std::vector<ShapeGuards::Binding> chains;
  for (const ShapeBinding& b : bindings) {
    ShapeGuards::Binding binding{{}, b.read, b.dim, b.symbol};
    if (b.node == nullptr || !path_to(*this, b.node.get(), binding.chain)) {
      return absl::InvalidArgumentError(
          "symbolic_shapes: every binding's node must be a node of this tree (made from this root)");
    }
    chains.push_back(std::move(binding));
  }
  absl::StatusOr<std::unique_ptr<ShapeGuards>> guards =
      ShapeGuards::make(std::move(chains), num_symbols, std::move(ranges), std::move(exprs));
  if (!guards.ok()) return guards.status();
  shape_guards_.push_back(std::move(*guards));
  return absl::OkStatus();
}

int64_t RootGuardManager::num_guards() const {
  int64_t total = GuardManager::num_guards();
  for (const auto& guards : shape_guards_) total += guards->num_guards();
  return total;
}

bool RootGuardManager::local_identities_match(const FrameView& view) const {
  for (const auto& child : children()) {
    if (child->accessor().kind() != AccessorKind::kLocal) continue;
    for (const auto& leaf : child->leaves()) {
      if (leaf->kind() != LeafKind::kIdMatch) continue;
      PyObject* value = child->accessor().fetch(nullptr, view);  // new ref or null
      bool same = value != nullptr && leaf->check(value);
      Py_XDECREF(value);
      if (PyErr_Occurred()) clear_guard_error();
      if (!same) return false;
    }
  }
  return true;
}

// ---- bind.

namespace {

// Index of `name` in the tuple `names`, or -1. Names are str; an error is cleared.
int index_in(PyObject* names, PyObject* name) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* candidate = PyTuple_GET_ITEM(names, i);  // borrowed
    if (candidate == name) return static_cast<int>(i);
    int equal = PyObject_RichCompareBool(candidate, name, Py_EQ);
    if (equal < 0) clear_guard_error();
    if (equal == 1) return static_cast<int>(i);
  }
  return -1;
}

// co_argcount (positional-only included) + keyword-only + *args + **kwargs: the slots bound at
// frame entry.
int argument_slots(PyCodeObject* code) {
  int count = code->co_argcount + code->co_kwonlyargcount;
  if (code->co_flags & CO_VARARGS) ++count;
  if (code->co_flags & CO_VARKEYWORDS) ++count;
  return count;
}

}  // namespace

absl::Status RootGuardManager::bind(PyCodeObject* code) {
  if (code == nullptr || !PyCode_Check(reinterpret_cast<PyObject*>(code))) {
    return type_error_status("bind() needs a code object");
  }
  if (code_ != nullptr) {
    // Calling the weakref gives the live code or None (portable across 3.11-3.13, unlike
    // PyWeakref_GET_OBJECT): a dead code whose address was reused is not "the same code".
    py::object bound_code = py::reinterpret_steal<py::object>(PyObject_CallNoArgs(code_ref_.ptr()));
    if (!bound_code) return absl::InternalError(take_error_text());
    if (bound_code.ptr() == reinterpret_cast<PyObject*>(code)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "guard tree is already bound to the code of ", code_name_, "; a tree belongs to one code"));
  }
  const std::string code_name = py::str(py::handle(code->co_qualname));
  // In 3.11+ the arguments are the first localsplus slots, in co_varnames order, whether or not
  // they are also cells (MAKE_CELL converts them in place later): varnames index == slot index.
  py::tuple varnames = py::reinterpret_steal<py::tuple>(PyCode_GetVarnames(code));
  py::tuple freevars = py::reinterpret_steal<py::tuple>(PyCode_GetFreevars(code));
  if (!varnames || !freevars) return absl::InternalError(take_error_text());
  const int arguments = argument_slots(code);

  // Resolve everything first; commit only when every name resolved.
  std::vector<std::pair<GuardManager*, int>> slots;
  for (const std::shared_ptr<GuardManager>& node : children()) {
    const Accessor& accessor = node->accessor();
    const FrameSlot slot = accessor.spec().slot;
    if (slot == FrameSlot::kArgument) {
      int index = index_in(varnames.ptr(), accessor.name_or_key().ptr());
      if (index < 0 || index >= arguments) {
        return absl::InvalidArgumentError(absl::StrCat(
            node->source(), ": '", accessor.name(), "' is not an argument of ", code_name,
            " (only arguments are bound when the frame starts)"));
      }
      slots.emplace_back(node.get(), index);
    } else if (slot == FrameSlot::kFreeVar) {
      int index = index_in(freevars.ptr(), accessor.name_or_key().ptr());
      if (index < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            node->source(), ": '", accessor.name(), "' is not a free variable of ", code_name));
      }
      slots.emplace_back(node.get(), index);
    }
  }
  PyObject* weakref = PyWeakref_NewRef(reinterpret_cast<PyObject*>(code), nullptr);  // new ref
  if (weakref == nullptr) return absl::InternalError(take_error_text());
  for (auto& [node, index] : slots) set_frame_index(*node, index);
  code_ref_ = py::reinterpret_steal<py::object>(weakref);
  code_ = code;
  code_name_ = code_name;
  state_->frozen = true;
  return absl::OkStatus();
}

bool RootGuardManager::bound() const { return code_ != nullptr; }

// ---- check / explain.

bool RootGuardManager::check(const FrameView& view) noexcept {
  if (TJC_UNLIKELY(state_->invalidated)) return false;
  // Frame indices belong to the bound code; an unbound tree has none.
  if (view.is_frame() && TJC_UNLIKELY(view.code != code_ || code_ == nullptr)) return false;
  bool ok = check_value(nullptr, view);
  for (size_t i = 0; ok && i < shape_guards_.size(); ++i) ok = shape_guards_[i]->check(view);
  for (size_t i = 0; ok && i < relations_.size(); ++i) {
    if (TJC_UNLIKELY(!relations_[i]->check(view))) {
      relations_[i]->count_failure();
      if (i > 0) std::rotate(relations_.begin(), relations_.begin() + i, relations_.begin() + i + 1);
      ok = false;
    }
  }
  // A guard's __eq__ may have freed an object another guard holds weakly.
  return ok && !state_->invalidated;
}

std::optional<std::string> RootGuardManager::explain(const FrameView& view) {
  if (state_->invalidated) {
    return absl::StrCat(state_->dead_source.empty() ? "a guarded object" : state_->dead_source,
                        ": the guarded object is gone (it was deallocated)");
  }
  if (view.is_frame() && code_ == nullptr) {
    return std::string("the guard tree is not bound to a code object (bind(code) first)");
  }
  if (view.is_frame() && view.code != code_) {
    return absl::StrCat("the frame runs another code than ", code_name_, ", the one this tree is bound to");
  }
  std::optional<std::string> reason;
  try {
    reason = explain_value(nullptr, view);
    for (size_t i = 0; !reason && i < shape_guards_.size(); ++i) reason = shape_guards_[i]->explain(view);
    for (size_t i = 0; !reason && i < relations_.size(); ++i) reason = relations_[i]->explain(view);
  } catch (const std::exception& e) {
    // A failing repr()/list() while wording the reason; the reason is lost, not the process.
    reason = absl::StrCat("explain() failed: ", e.what());
  }
  if (PyErr_Occurred()) clear_guard_error();
  if (!reason && state_->invalidated) return explain(view);
  return reason;
}

// ---- Text and invalidation.

std::string RootGuardManager::debug_string() const {
  std::string out = "RootGuardManager";
  if (state_->invalidated) absl::StrAppend(&out, " (invalidated: ", state_->dead_source, " died)");
  for (const auto& guards : shape_guards_) {
    for (const std::string& line : guards->describe()) absl::StrAppend(&out, "\n| ", line);
  }
  for (const auto& relation : relations_) absl::StrAppend(&out, "\n| ", relation->describe());
  append_body(out, "");
  return out;
}

void RootGuardManager::set_invalidation_callback(std::function<void()> callback) {
  state_->on_invalidate = std::move(callback);
  if (state_->invalidated) state_->run_callback();
}

bool RootGuardManager::invalidated() const { return state_->invalidated; }

}  // namespace tjc
