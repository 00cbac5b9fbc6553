// CompiledFunction: the callable compile() returns for a function — calls it with a cache-miss
// callback installed on this thread, and restores the previous callback after, from C.
//
// A Python wrapper (a function plus a context manager) costs about a microsecond per call; this
// type's vectorcall costs tens of nanoseconds. It has a __dict__ (functools.update_wrapper puts
// __name__, __doc__, __wrapped__ there), binds as a method like a function, and takes part in GC.
//
// CompiledFunction(fn, None) calls fn with interception off: what a backend generated (AOT-autograd's
// runtime wrappers, inductor's runner, any callable a backend returns) runs as it is, never traced
// again, and the hook is removed for its duration when no other thread needs it.
//
// Ownership: holds the wrapped callable, the callback and the callback's CacheOwner strongly (the
// owner is read once, here, so a call costs no attribute lookup). Threads: GIL held.
#include <Python.h>
#include <structmember.h>  // T_PYSSIZET, READONLY (3.11)

#include "bindings/bindings.h"
#include "common/runtime_state.h"
#include "runtime/thread_state.h"

namespace tjc::bindings {
namespace {

struct CompiledFunctionObject {
  PyObject_HEAD
  PyObject* fn;            // strong
  PyObject* callback;      // strong; nullptr: interception off
  PyObject* owner_object;  // strong or null: the CacheOwner the callback carries (cache_owner)
  CacheOwner* owner;       // borrowed from owner_object; null: the shared owner
  PyObject* dict;      // strong or null
  PyObject* weakrefs;
  vectorcallfunc vectorcall;
};

PyObject* compiled_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* o = reinterpret_cast<CompiledFunctionObject*>(self);
  // set_stance("force_eager"): the call runs as CompiledFunction(fn, None) would, uncompiled.
  const Interception ours = runtime_state().force_eager ? Interception{nullptr, nullptr, nullptr}
                                                        : Interception{o->callback, o->owner_object, o->owner};
  Interception previous = exchange_interception(ours);  // new refs
  PyObject* result = PyObject_Vectorcall(o->fn, args, nargsf, kwnames);
  // Restoring never raises, so a pending exception from the call stays as it is.
  Interception mine = exchange_interception(previous);
  release(mine);
  release(previous);
  return result;
}

PyObject* compiled_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* fn = nullptr;
  PyObject* callback = nullptr;
  static const char* names[] = {"fn", "callback", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:CompiledFunction", const_cast<char**>(names), &fn, &callback)) {
    return nullptr;
  }
  if (!PyCallable_Check(fn) || (callback != Py_None && !PyCallable_Check(callback))) {
    PyErr_SetString(PyExc_TypeError, "CompiledFunction(fn, callback): fn must be callable, callback callable or None");
    return nullptr;
  }
  py::object owner_object;
  CacheOwner* owner = nullptr;
  if (callback != Py_None) {
    try {
      owner = owner_of_callback(callback, &owner_object);
    } catch (py::error_already_set& e) {
      e.restore();
      return nullptr;
    }
  }
  auto* o = reinterpret_cast<CompiledFunctionObject*>(type->tp_alloc(type, 0));
  if (o == nullptr) return nullptr;
  o->fn = Py_NewRef(fn);
  o->callback = callback == Py_None ? nullptr : Py_NewRef(callback);
  o->owner_object = owner_object.release().ptr();  // null when there is none
  o->owner = owner;
  o->dict = nullptr;
  o->weakrefs = nullptr;
  o->vectorcall = compiled_call;
  return reinterpret_cast<PyObject*>(o);
}

int compiled_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* o = reinterpret_cast<CompiledFunctionObject*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(o->fn);
  Py_VISIT(o->callback);
  Py_VISIT(o->owner_object);
  Py_VISIT(o->dict);
  return 0;
}

int compiled_clear(PyObject* self) {
  auto* o = reinterpret_cast<CompiledFunctionObject*>(self);
  Py_CLEAR(o->fn);
  Py_CLEAR(o->callback);
  o->owner = nullptr;
  Py_CLEAR(o->owner_object);
  Py_CLEAR(o->dict);
  return 0;
}

void compiled_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  auto* o = reinterpret_cast<CompiledFunctionObject*>(self);
  if (o->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  compiled_clear(self);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* compiled_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyObject* compiled_repr(PyObject* self) {
  auto* o = reinterpret_cast<CompiledFunctionObject*>(self);
  return o->fn != nullptr ? PyUnicode_FromFormat("<compiled %R>", o->fn) : PyUnicode_FromString("<compiled>");
}

PyObject* get_fn(PyObject* self, void*) {
  auto* o = reinterpret_cast<CompiledFunctionObject*>(self);
  return Py_NewRef(o->fn != nullptr ? o->fn : Py_None);
}

PyObject* get_callback(PyObject* self, void*) {
  auto* o = reinterpret_cast<CompiledFunctionObject*>(self);
  return Py_NewRef(o->callback != nullptr ? o->callback : Py_None);
}

PyGetSetDef compiled_getset[] = {
    {"_torch_jit_cache_original", get_fn, nullptr, "the compiled callable", nullptr},
    {"_torch_jit_cache_callback", get_callback, nullptr, "the cache-miss callback", nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMemberDef compiled_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(CompiledFunctionObject, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(CompiledFunctionObject, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(CompiledFunctionObject, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot compiled_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(compiled_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(compiled_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(compiled_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(compiled_clear)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(compiled_descr_get)},
    {Py_tp_repr, reinterpret_cast<void*>(compiled_repr)},
    {Py_tp_getset, compiled_getset},
    {Py_tp_members, compiled_members},
    {Py_tp_doc, const_cast<char*>("CompiledFunction(fn, callback): calls fn with the eval-frame callback installed "
                                  "on this thread for the duration of the call; with callback None, with interception off.")},
    {0, nullptr},
};

PyType_Spec compiled_spec = {
    "torch_jit_cache._C.CompiledFunction",
    sizeof(CompiledFunctionObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    compiled_slots,
};

}  // namespace

void init_compiled_function(py::module_& m) {
  PyObject* type = PyType_FromSpec(&compiled_spec);  // new ref
  if (type == nullptr) throw py::error_already_set();
  m.add_object("CompiledFunction", py::reinterpret_steal<py::object>(type));
}

}  // namespace tjc::bindings
