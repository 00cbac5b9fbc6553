"""Every piece of process-wide state the compiler decides from, in one list, and what reset() does
with each: after `tjc.reset()` a compile makes what it would make in a fresh process.

The C++ half is `RuntimeState` (csrc/common/runtime_state.h, whose members say the same) and each
code's `ExtraState`; `runtime.reset()` clears it (the first row). The rows below it are the Python
half. A row names the module that owns the state and the function that restores a fresh process's
value; a module not imported yet holds its fresh value, so it is left unimported. Rows in `KEPT`
survive reset() on purpose: what the user set (config, disable(), allow_in_graph, the stance, the
disk cache) and caches derived from an object alone (a code's decoding), which answer the same
whenever they are asked.

tests/python/test_process_state.py checks the list is whole: every mutable container of the
package's modules is, after a compile and reset(), as a fresh process has it, or listed in `KEPT`.
"""
from __future__ import annotations

import dataclasses
import sys

_PACKAGE = __name__.split(".")[0]   # Piece.module is relative to it


@dataclasses.dataclass(frozen=True)
class Piece:
    module: str     # the owning module, under torch_jit_cache
    state: str      # its attribute(s) holding the state
    what: str
    reset: str = ""   # the module's function that restores a fresh process's value ("": kept)


RESET = (
    Piece("runtime", "C++ RuntimeState, every code's ExtraState",
          "every code's cache entries, every compile() call's decisions per code (skip, run-only at the "
          "cache limit, skip-tree watching, the cache-limit warning), the guard-complete hook (guard "
          "collectives), the runtime's counters", "reset"),
    Piece("runtime.counters", "PIPELINE", "the compile pipeline's counters (graphs, graph_breaks, recompiles, ...)", "reset"),
    Piece("runtime.log", "_SEEN", "warnings and log lines given once", "forget_once"),
    Piece("backends", "_WARNED_FALLBACK", "backends that warned of falling back to eager", "forget_warnings"),
    Piece("backends.sharing", "_MEMO", "backend callables shared by identical graphs", "clear"),
    Piece("api", "_MODULE_COMPILERS", "the compiler modules of one class share (identical blocks)",
          "forget_module_compilers"),
    Piece("pipeline.convert_frame", "_LIVE", "each live compile() call's memory per code: automatic-dynamic sizes, "
          "symbolic traces refused, float symbols refused, entries shared or pinned to their modules, "
          "returns after evictions", "forget_compilers"),
    Piece("tracer.fake_shapes", "ShapeEnv method caches", "torch's ShapeEnv caches of the last trace",
          "forget_shape_envs"),
    Piece("tracer.variables.parallel.fsdp2", "_ac_regions", "activation-checkpoint region numbers in graphs",
          "forget_regions"),
)

KEPT = (
    Piece("config", "config", "the user's settings"),
    Piece("frontend.stance", "_current", "the user's set_stance"),
    Piece("runtime", "ExtraState disabled, cache_limit", "tjc.disable / runtime.set_skip and "
          "runtime.set_cache_limit: the user's, per code"),
    Piece("frontend.proxies", "_ALLOWED", "the user's allow_in_graph marks"),
    Piece("pipeline.disk_cache", "TJC_CACHE_DIR files", "the on-disk cache: a later process's as much as this one's "
          "(TJC_DISABLE_DISK_CACHE=1 turns it off; deleting config.cache_dir clears it)"),
    Piece("pipeline.disk_cache.entries", "last_loaded", "test support: the last graph loaded, weakly"),
    Piece("pipeline.disk_cache.keys", "lru caches", "digests of files and folders, fixed for the process"),
    Piece("backends", "_REGISTRY", "registered backends"),
    Piece("runtime.guard_collectives", "_groups", "the gloo group guard collectives vote on (making one is a "
          "collective); the hook that uses it is cleared"),
    Piece("frontend.module_wrapper", "_CLASSES", "the compiled-module class made for a module class"),
    Piece("graph_break.resume", "_RESUME_CODES", "which codes are resume codes (each made per entry, "
          "dying with it)"),
    Piece("bytecode.instructions", "_CACHE", "a code's decoded instructions"),
    Piece("tracer.variables.builtin_functions.builtin_calls", "_SIGNATURES", "a builtin's signature"),
    Piece("tracer.variables.constant", "STAND_INS", "classes and functions a trace made (weak)"),
    Piece("tracer.variables.torch_objects.numpy_values", "_PURE_IDS", "ids of numpy's pure functions"),
)


def reset() -> None:
    """Restore a fresh process's value of every piece in RESET, in order (the C++ caches first:
    evicting entries runs no compile, and what follows forgets what decided them)."""
    for piece in RESET:
        name = f"{_PACKAGE}.{piece.module}"
        module = sys.modules.get(name)
        if module is not None:   # else never imported: its state is a fresh process's
            getattr(module, piece.reset)()
