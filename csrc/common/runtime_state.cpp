// The one RuntimeState instance (see runtime_state.h).
#include "common/runtime_state.h"

namespace tjc {

constinit RuntimeState g_runtime_state;

}  // namespace tjc
