// Dict version tags and instance-dict slots, for guards that skip work while dicts are unchanged.
//
// `ma_version_tag` (PEP 509) takes a new, globally unique value on every change made through the
// dict, in 3.11, 3.12 and 3.13 (3.12 deprecated the field for extensions; 3.12 and 3.13 keep the
// watcher bits in its low byte and write a fresh version on insertdict, delitem, clear, ...). On
// 3.13 a store through an object's inline values is not one of them (kDictTagsFollowEveryChange). A dict whose tag equals the one read earlier
// has the same keys, in the same order, bound to the same objects. Checked against CPython 3.11.7,
// 3.12.1 and 3.13.0 (Include/cpython/dictobject.h, Objects/dictobject.c); the build stops on any
// other minor version, where the field may be gone (3.14 removes it).
//
// Threads: under the GIL. Arguments borrowed.
#pragma once

#include <Python.h>

#include <cstdint>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "csrc/cpython/dict_version.h knows ma_version_tag of CPython 3.11 to 3.13 only"
#endif

namespace tjc::cpython {

// Whether a dict's tag changes on EVERY change of what it holds, as DICT_TAGS needs. Not on 3.13:
// an object whose attributes live in inline values keeps them there after its __dict__ is
// materialized, and `obj.x = v` writes the inline values and notifies the dict's watchers without
// giving the dict a new tag (Objects/dictobject.c, store_instance_attr_lock_held drops
// _PyDict_NotifyEvent's new version). 3.11 and 3.12 move the values into the dict when it is
// materialized, so every store goes through it. Found by tests/python/test_guards_dict_tags.py.
inline constexpr bool kDictTagsFollowEveryChange = PY_VERSION_HEX < 0x030D0000;

// `dict` must be a dict (PyDict_Check).
inline uint64_t dict_version(PyObject* dict) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag;
#pragma GCC diagnostic pop
}

// The dict in `obj`'s instance-dict slot (borrowed), or null when it has none. Reads the slot
// without a lookup: no descriptor or __getattr__ runs. (On 3.11+ this materializes a managed dict
// from inline values, as reading `obj.__dict__` does.)
inline PyObject* instance_dict(PyObject* obj) {
  PyObject** slot = _PyObject_GetDictPtr(obj);
  if (slot == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  return *slot;
}

}  // namespace tjc::cpython
