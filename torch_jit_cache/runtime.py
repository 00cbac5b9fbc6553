"""The thin Python face of the C++ runtime, for JIT authors. Needs no torch.

    prev = runtime.set_eval_frame(callback)  # callback(frame, entries) -> GuardedCode | SKIP | RUN_ORIGINAL
    runtime.GuardedCode(code, guards)        # code keeps the original's argument names as a prefix
    runtime.cache_entries(fn_or_code)        # [CacheEntry]
    g = runtime.GuardManager()               # guard tree builder (see DESIGN.md)
"""
from . import _C

GuardManager = getattr(_C, "GuardManager", None)
