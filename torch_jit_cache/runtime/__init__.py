"""The thin Python face of the C++ runtime, for JIT authors. Needs no torch.

    prev = runtime.set_eval_frame(callback)  # callback(frame, entries) -> GuardedCode | SKIP | RUN_ORIGINAL
                                             #   | SKIP_TREE_IF_QUIET | SKIP_TREE
    runtime.GuardedCode(code, guards)        # code keeps the original's argument names as a prefix
    runtime.cache_entries(fn_or_code)        # [CacheEntry]: .code, .guards, .hits, .evicted, .explain(frame)
    runtime.cache_entries(fn, owner=compiled)  # only the entries of one compile() call
    g = runtime.GuardManager()               # guard tree builder (docs/guards.md)

The callback is called only on a cache miss, with this thread's hook suspended (frames it runs
are not intercepted). `frame` is valid only while the callback runs; `entries` are the code's
live cache entries, and `entry.explain(frame)` says which guard failed for each.

Owners: every compile() call owns its entries, what its callback decided (SKIP, run-only at the
cache limit) and its cache limit; a callback names its owner in a `cache_owner` attribute holding a
`CacheOwner`, and its entries are evicted when that owner dies. Plain callbacks share one owner, so
one code has one cache across `eval_frame` blocks. `set_skip` (and `tjc.disable`) applies to every
owner. Two threads that miss the same code for the same owner at once compile it once: the others
wait (without the GIL) and use its entry.

SKIP_TREE_IF_QUIET is SKIP for a code whose callees may still matter: the runtime watches its runs,
and once two of them compiled nothing and hit no entry (frame_action 'skip-watch' -> 'skip-tree'),
its later runs take the frames they call along uncompiled, with the hook removed (3.11 inlines
Python calls only without one). A run that compiled or hit something makes it a plain 'skip'.
SKIP_TREE makes it 'skip-tree' at once: for another compiler's entry points (TorchDynamo's), whose
callees are that compiler's business.

Guard-complete hook: `set_guard_complete_hook(hook)` (None clears it; returns the previous one)
installs one process-wide `hook(hit: bool) -> bool`, asked once per intercepted call of a code
that already has entries (never a first call, never a skipped code), after the lookup: False turns
a hit into a miss (the callback compiles again; at the cache limit the original code runs), and on
a miss its answer is ignored. tjc.set_enable_guard_collectives builds on it so that the ranks of an
SPMD program recompile together. An exception it raises reaches the caller; reset() clears it.

`eval_frame(callback)` is the context manager most callers want: it sets the callback for the
duration of a `with` block and restores the previous one on exit, even on error.
"""
from .. import _C

GuardManager = _C.GuardManager
GuardedCode = _C.GuardedCode
CacheEntry = _C.CacheEntry
CacheOwner = _C.CacheOwner
Frame = _C.Frame
CallbackAction = _C.CallbackAction
SKIP = _C.SKIP
RUN_ORIGINAL = _C.RUN_ORIGINAL
SKIP_TREE_IF_QUIET = _C.SKIP_TREE_IF_QUIET
SKIP_TREE = _C.SKIP_TREE
# Whether GuardNode.dict_tags() (DICT_TAGS: a subtree skipped while its dicts keep their version
# tags) is available: not on 3.13, whose tags miss stores through inline values.
DICT_TAGS_SUPPORTED = _C.DICT_TAGS_SUPPORTED

set_eval_frame = _C.set_eval_frame
cache_entries = _C.cache_entries
frame_action = _C.frame_action
set_skip = _C.set_skip
set_cache_limit = _C.set_cache_limit
hook_installed = _C.hook_installed
set_guard_complete_hook = _C.set_guard_complete_hook


def without_interception(fn):
    """A C callable that calls `fn` with this thread's callback off: no frame `fn` runs is
    intercepted, and the hook is removed meanwhile unless another thread needs it. For what a
    backend generated: compiled artifacts run as they are, never traced again."""
    return _C.CompiledFunction(fn, None)


def reset():
    """Drop every cache (entries are evicted; `CacheEntry.evicted` turns True), clear the
    guard-complete hook and zero stats().

    Safe while compiled frames are running: a running entry is released when it finishes.
    """
    _C.reset()
    _C.reset_stats()


def reset_stats():
    """Zero stats() and keep every cache."""
    _C.reset_stats()


def stats():
    """Counters since the last reset(): hits, misses, compiles, evictions, fallbacks, skips,
    cache_limit_hits, compile_waits (misses that waited for another thread's compile),
    forced_misses (hits the guard-complete hook turned into misses)."""
    return _C.stats()


class eval_frame:
    """Intercept frames on this thread with `callback` inside a `with` block.

    Restores the previous callback on exit, even on error. Its own `__exit__` is never
    intercepted (it is marked skip), so callbacks see only the frames of the block.
    """

    __slots__ = ("_callback", "_prior")

    def __init__(self, callback):
        self._callback = callback
        self._prior = None

    def __enter__(self):
        self._prior = set_eval_frame(self._callback)
        return self

    def __exit__(self, *exc_info):
        set_eval_frame(self._prior)
        self._prior = None
        return False


set_skip(eval_frame.__exit__)


__all__ = [
    "CacheEntry", "CacheOwner", "CallbackAction", "Frame", "GuardManager", "GuardedCode", "RUN_ORIGINAL", "SKIP",
    "SKIP_TREE", "SKIP_TREE_IF_QUIET",
    "cache_entries", "eval_frame", "frame_action", "hook_installed", "reset", "reset_stats", "set_eval_frame",
    "set_cache_limit", "set_guard_complete_hook", "set_skip", "stats", "without_interception",
]
