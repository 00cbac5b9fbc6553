// Placeholder until the runtime bindings land; replaced by the owner of this file.
#include "bindings/bindings.h"

namespace tjc::bindings {
void init_runtime(py::module_&) {}
}  // namespace tjc::bindings
