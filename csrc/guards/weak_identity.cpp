// WeakTarget: identity guards held weakly (see weak_identity.h).
#include "guards/weak_identity.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "guards/guard_errors.h"
#include "guards/guard_text.h"
#include "guards/value_rules.h"

namespace tjc {

namespace {

constexpr const char* kCapsuleName = "torch_jit_cache.guard_death_watch";

// What a weakref callback needs, and nothing more: not the tree, not the root.
struct DeathWatch {
  std::weak_ptr<TreeState> state;
  std::string source;
};

void destroy_death_watch(PyObject* capsule) noexcept {
  delete static_cast<DeathWatch*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (PyErr_Occurred()) PyErr_Clear();
}

// The weakref callback (METH_O: self is the capsule, arg the dead weakref). CPython calls it from
// the dying object's dealloc, with no error set; it must return a new reference and leave no error.
PyObject* on_target_death(PyObject* capsule, PyObject* /*weakref*/) noexcept {
  auto* watch = static_cast<DeathWatch*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (watch == nullptr) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  // lock() keeps the state alive while the runtime's callback runs, even if that callback drops
  // the last owner of the tree.
  if (std::shared_ptr<TreeState> state = watch->state.lock()) state->invalidate(watch->source);
  Py_RETURN_NONE;
}

PyMethodDef g_death_def = {"_guard_target_died", reinterpret_cast<PyCFunction>(on_target_death),
                           METH_O, "torch_jit_cache: a guarded object died; invalidate its tree"};

// Any static (non-heap) type, whatever its metaclass: it lives for the process.
bool is_any_static_type(PyObject* obj) {
  return PyType_Check(obj) &&
         !PyType_HasFeature(reinterpret_cast<PyTypeObject*>(obj), Py_TPFLAGS_HEAPTYPE);
}

}  // namespace

WeakTarget::WeakTarget(PyObject* ptr, py::object weakref, py::object strong,
                       std::shared_ptr<TreeState> state)
    : ptr_(ptr), weakref_(std::move(weakref)), strong_(std::move(strong)), state_(std::move(state)) {
  if (is_weak()) ++state_->weak_watches;
}

WeakTarget::~WeakTarget() {
  if (is_weak() && state_) --state_->weak_watches;
}

WeakTarget WeakTarget::hold(py::handle obj, const std::shared_ptr<TreeState>& state) {
  return WeakTarget(obj.ptr(), py::object(), py::reinterpret_borrow<py::object>(obj), state);
}

absl::StatusOr<WeakTarget> WeakTarget::watch(py::handle obj,
                                             const std::shared_ptr<TreeState>& state,
                                             const std::string& source, const char* guard_name) {
  PyObject* raw = obj.ptr();  // borrowed
  if (is_immortal_singleton(raw) || is_any_static_type(raw)) return hold(obj, state);
  if (!PyType_SUPPORTS_WEAKREFS(Py_TYPE(raw))) {
    return type_error_status(absl::StrCat(
        source, ": ", guard_name, " needs a weakrefable object, got ", short_type_name(raw),
        "; guard by value (equals_match) or type (type_match) instead"));
  }
  auto* watch = new DeathWatch{state, source};
  PyObject* capsule = PyCapsule_New(watch, kCapsuleName, destroy_death_watch);  // new ref
  if (capsule == nullptr) {
    delete watch;
    return absl::InternalError(absl::StrCat(source, ": ", take_error_text()));
  }
  PyObject* callback = PyCFunction_New(&g_death_def, capsule);  // new ref; owns a ref to capsule
  Py_DECREF(capsule);
  if (callback == nullptr) return absl::InternalError(absl::StrCat(source, ": ", take_error_text()));
  PyObject* weakref = PyWeakref_NewRef(raw, callback);  // new ref; owns a ref to callback
  Py_DECREF(callback);
  if (weakref == nullptr) return absl::InternalError(absl::StrCat(source, ": ", take_error_text()));
  return WeakTarget(raw, py::reinterpret_steal<py::object>(weakref), py::object(), state);
}

}  // namespace tjc
