// The registry of objects Python vouches for as living as long as the process (process_lived.h).
#include "guards/process_lived.h"

#include <unordered_set>

namespace tjc {

namespace {

// Leaked on purpose: the references it keeps must never be released after the interpreter is
// finalized. Protected by the GIL.
std::unordered_set<PyObject*>& registry() {
  static auto* objects = new std::unordered_set<PyObject*>();
  return *objects;
}

}  // namespace

void vouch_process_lived(PyObject* obj) {
  if (registry().insert(obj).second) Py_INCREF(obj);
}

bool is_process_lived(PyObject* obj) noexcept {
  const auto& objects = registry();
  return !objects.empty() && objects.count(obj) != 0;
}

}  // namespace tjc
