// Placeholder until the runtime bindings land; replaced by the owner of this file.
#include "bindings/bindings.h"
#include "runtime/stats.h"

namespace tjc::bindings {
void init_runtime(py::module_& m) {
  m.def("_set_cache_limit", [](int limit) { set_cache_limit(limit); });
}
}  // namespace tjc::bindings
