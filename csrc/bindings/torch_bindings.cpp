// Placeholder until the torch bindings land; replaced by the owner of this file.
#include "bindings/bindings.h"

namespace tjc::bindings {
void init_torch(py::module_&) {}
}  // namespace tjc::bindings
