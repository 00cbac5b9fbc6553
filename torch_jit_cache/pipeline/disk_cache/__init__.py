"""The on-disk cache (TJC_CACHE_DIR): what a compile made, stored so a later process loads it untraced.

The package, one room per step: keys.py (keys, versions, digests), names.py (objects named
instead of held), guard_codec.py, graph_codec.py and output_codec.py (what a trace made, as data),
entries.py (the files: store and load).

convert_frame calls two functions: `load(compiler, frame, resolve)` on a miss before tracing, and
`store(compiler, frame, result, rewritten, shape_guards)` after an entry is made. Neither raises:
whatever goes wrong (an unreadable directory, a corrupt file, a backend failing on load) means the
frame is traced as if there were no disk cache, with a warning (corrupt or stale file, once per file)
or a `disk_cache` log line (what is not stored and why).

What an entry holds (one pickled dict per file, after a magic and a sha256 of the payload):
  - the graph as data, node by node (op, name, target, args, kwargs; functions by module + qualname),
    rebuilt into an fx Graph without retracing. No parameters, buffers or modules: a call_module
    node's module is stored as the source that reaches it, and called on load through a proxy of
    what the frame holds there; graphs with get_attr nodes are not stored;
  - the graph inputs (Sources), the output spec and side effects as data (output_codec.py; at a
    graph break, the cut instruction's index, planned again on load, and the resume functions made
    again as a compile makes them, each resume code's own entries under its own key); the
    transformed code is made again by codegen on load, with the new compiled callable (cheaper to
    reason about than patching constants of marshalled code, and as fast);
  - the guards as (source, kind, encoded value), each value by its kind's codec (the kind's row in
    guards.GUARD_KINDS; guard_codec.py): constants as themselves; types, functions, modules and
    builtins by module + qualname (re-bound on load, only when that name reaches the very object at
    store time); tensors by the state their TENSOR_MATCH leaf compares (read from the C++ leaf; the
    dims shape guards read left out), compared with the frame's tensor's on load; sources as
    themselves; a module's or tensor's identity as its group, bound on load to what its source
    reaches (guard_codec.py says why that is as strict). Any other live object's identity is not
    stored;
  - the shape guards (shape_guards.ShapeGuards, sympy over sources) of a symbolic entry;
  - the state torch's GLOBAL_STATE leaf compared when compiled (read from the leaf);
  - a sha256 of every user source file whose objects the guards re-bind, and of the frame's own file:
    an edited file makes the entry stale (an inlined helper's body is not in any guard).

Keys: a directory per (code: file, qualname, first line, a digest of its bytecode, names and
constants, nested codes included), the backend's name, the trace settings, and keys.versions(): the
Python, torch and torch_jit_cache versions, a digest of this package's own files and the torch settings
that change a trace (keys.py says which and why). The versions are stored in the entry too and
checked on load.

Concurrency: a file is written to a temporary name and moved in place with os.replace, so a reader
sees a whole file or none; two processes storing the same entry each write their own complete file.
Loading unpickles files from the cache directory: it must be writable by its user only, as inductor's.
"""
from __future__ import annotations

from .entries import BACKENDS, enabled, load, store, store_skip
from .names import NotStored

__all__ = ["BACKENDS", "NotStored", "enabled", "load", "store", "store_skip"]
