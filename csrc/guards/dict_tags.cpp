// DictTags: a node's children skipped while the dicts they read are unchanged (see dict_tags.h).
#include "guards/dict_tags.h"

#include <new>

#include "common/check.h"
#include "common/py_errors.h"
#include "cpython/dict_version.h"
#include "guards/guard_manager.h"
#include "guards/value_rules.h"

namespace tjc {

namespace {

constexpr const char* kCapsuleName = "torch_jit_cache.dict_tags_root_watch";

}  // namespace

// What the root's weakref callback reaches: the DictTags, or null once that record was cleared
// (the weakref could outlive the record if Python code held it: weakref.getweakrefs).
struct RootWatch {
  DictTags* tags;
};

namespace {

void destroy_root_watch(PyObject* capsule) noexcept {
  delete static_cast<RootWatch*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (PyErr_Occurred()) PyErr_Clear();
}

// Dicts whose item() fetch and len() run no user code and whose every change gets a new tag.
bool is_tagged_dict(PyObject* obj) { return PyDict_CheckExact(obj) || Py_IS_TYPE(obj, &PyODict_Type); }

// Whether every leaf of `node` has the outcome it had when recorded, as long as `value` is the
// same object with the same type (and, for a tagged dict, the same tag).
bool leaves_fixed(const GuardManager& node, PyObject* value) {
  for (const LeafPtr& leaf : node.leaves()) {
    switch (leaf->kind()) {
      case LeafKind::kTensorMatch:
      case LeafKind::kGlobalState:
        return false;
      case LeafKind::kLength:
        if (!is_tagged_dict(value) && !PyTuple_CheckExact(value) && !PyUnicode_CheckExact(value) &&
            !PyBytes_CheckExact(value)) {
          return false;
        }
        break;
      case LeafKind::kDictKeys:
        if (PyDict_Check(value) && !is_tagged_dict(value)) return false;
        break;
      case LeafKind::kSetItems:  // a set has no version tag: its contents change untracked
        return false;
      case LeafKind::kTypeMatch:
      case LeafKind::kIdMatch:
      case LeafKind::kEqualsMatch:  // exact type first: no user __eq__ runs
      case LeafKind::kNoneMatch:
      case LeafKind::kNotNone:
      case LeafKind::kBoolMatch:  // by identity
        break;
    }
  }
  return true;
}

}  // namespace

bool DictTags::check(GuardManager& node, PyObject* value, const FrameView& view) noexcept {
  if (TJC_LIKELY(recorded_ && value == root_ && unchanged(value))) {
    if (TJC_LIKELY(check_residuals(value, view) && unchanged(value))) return true;
  }
  return check_and_record(node, value, view);
}

bool DictTags::unchanged(PyObject* value) const noexcept {
  // Dicts first: while they are unchanged, every borrowed object below is alive.
  for (const auto& [dict, tag] : dicts_) {
    if (cpython::dict_version(dict.ptr()) != tag) return false;
  }
  for (const auto& [owner, dict] : owners_) {
    if (cpython::instance_dict(owner != nullptr ? owner : value) != dict) return false;
  }
  for (const auto& [obj, type] : types_) {
    if (reinterpret_cast<PyObject*>(Py_TYPE(obj)) != type.ptr()) return false;
  }
  return true;
}

// A residual's check can run Python (a __len__) that changes what the tags vouch for: the caller
// compares the tags again afterwards, and the parents are held strongly meanwhile.
bool DictTags::check_residuals(PyObject* value, const FrameView& view) noexcept {
  for (size_t i = 0; i < residuals_.size(); ++i) {
    GuardManager* child = residuals_[i].node;
    PyObject* parent = residuals_[i].parent ? residuals_[i].parent.ptr() : value;
    PyObject* child_value = child->accessor_.fetch(parent, view);  // new ref
    bool ok = child_value != nullptr && child->check_value(child_value, view);
    Py_XDECREF(child_value);
    if (TJC_UNLIKELY(!ok)) {
      if (PyErr_Occurred()) clear_guard_error();
      ++child->fail_count_;
      return false;
    }
  }
  return true;
}

bool DictTags::check_and_record(GuardManager& node, PyObject* value, const FrameView& view) noexcept {
  clear();
  bool recorded = false;
  try {
    recorded = record(node, value, /*is_root=*/true, view);
  } catch (...) {  // bad_alloc from a vector: no tags this time
    recorded = false;
  }
  if (!recorded) {
    if (PyErr_Occurred()) clear_guard_error();
    clear();
  }
  bool ok = node.check_children(value, view);
  // Tags read before the full check and compared after it: a check that changed a dict (a
  // guard's __eq__ or __len__ running Python) leaves nothing recorded.
  if (ok && recorded && unchanged(value) && watch_root(value)) {
    recorded_ = true;
    root_ = value;
  } else {
    clear();
  }
  return ok;
}

bool DictTags::record(GuardManager& node, PyObject* value, bool is_root, const FrameView& view) {
  py::object parent = is_root ? py::object() : py::reinterpret_borrow<py::object>(value);
  for (size_t i = 0; i < node.children_.size(); ++i) {
    GuardManager& child = *node.children_[i];
    py::object child_value = py::reinterpret_steal<py::object>(child.accessor_.fetch(value, view));
    if (!child_value) return false;  // missing or raised: the full check fails too
    PyObject* v = child_value.ptr();  // kept alive by `value`'s container while the tags match
    bool covered = false;
    switch (child.accessor_.kind()) {
      case AccessorKind::kAttr:
        // `.__dict__`: the instance dict itself, as its slot holds it (no descriptor of the class).
        covered = is_tagged_dict(v) && child.accessor_.name() == "__dict__" &&
                  cpython::instance_dict(value) == v;
        if (covered) owners_.emplace_back(is_root ? nullptr : value, v);
        break;
      case AccessorKind::kItem:
        covered = is_tagged_dict(value) || PyTuple_CheckExact(value);
        break;
      default:
        break;
    }
    if (!covered || !leaves_fixed(child, v)) {
      residuals_.push_back(Residual{&child, parent});
      continue;
    }
    if (is_tagged_dict(v)) {
      dicts_.emplace_back(child_value, cpython::dict_version(v));
    } else if (!is_immutable_builtin(v) && !PyTuple_CheckExact(v)) {
      types_.emplace_back(v, py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(Py_TYPE(v))));
    }
    if (!record(child, v, /*is_root=*/false, view)) return false;
  }
  return true;
}

bool DictTags::watch_root(PyObject* value) noexcept {
  if (!PyType_SUPPORTS_WEAKREFS(Py_TYPE(value))) return false;
  auto* watch = new (std::nothrow) RootWatch{this};
  if (watch == nullptr) return false;
  PyObject* capsule = PyCapsule_New(watch, kCapsuleName, destroy_root_watch);  // new ref
  if (capsule == nullptr) {
    delete watch;
    PyErr_Clear();
    return false;
  }
  // Static: a PyCFunction keeps a pointer to its PyMethodDef for its whole life.
  static PyMethodDef root_death_def = {
      "_dict_tags_root_died", reinterpret_cast<PyCFunction>(&DictTags::on_root_death), METH_O,
      "torch_jit_cache: a DICT_TAGS record's value died; drop the record"};
  PyObject* callback = PyCFunction_New(&root_death_def, capsule);  // new ref; owns the capsule
  Py_DECREF(capsule);
  PyObject* weakref = callback != nullptr ? PyWeakref_NewRef(value, callback) : nullptr;  // new ref
  Py_XDECREF(callback);
  if (weakref == nullptr) {
    PyErr_Clear();
    return false;
  }
  root_watch_ = py::reinterpret_steal<py::object>(weakref);
  watch_ = watch;
  return true;
}

// The weakref callback (METH_O: self is the capsule, arg the dead weakref), called from the dying
// root's dealloc with no error set; returns a new reference and leaves no error. CPython holds the
// callback (and so the capsule) while it runs, so clear() may drop the weakref here.
PyObject* DictTags::on_root_death(PyObject* capsule, PyObject* /*weakref*/) noexcept {
  auto* watch = static_cast<RootWatch*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (watch == nullptr) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  if (watch->tags != nullptr) watch->tags->clear();
  Py_RETURN_NONE;
}

void DictTags::clear() noexcept {
  recorded_ = false;
  root_ = nullptr;
  // The callback must not reach this record any more, even through a weakref someone kept. The
  // watch is alive: the weakref (or, inside the callback, CPython) holds the capsule owning it.
  if (watch_ != nullptr) watch_->tags = nullptr;
  watch_ = nullptr;
  root_watch_ = py::object();
  dicts_.clear();
  owners_.clear();
  types_.clear();
  residuals_.clear();
}

}  // namespace tjc
