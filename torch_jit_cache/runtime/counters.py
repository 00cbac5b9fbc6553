"""Every counter tjc.stats() reports, in one place: what each means, where it is counted, and how
the two kinds are merged.

Two kinds of counters, one view. The runtime's (hits, misses, compiles, evictions, fallbacks,
skips, cache_limit_hits, compile_waits, forced_misses) live in C++ (`RuntimeStats` in csrc/common/runtime_state.h)
because the eval-frame hook bumps them on every call: a plain integer increment, where a Python
counter would cost a call into Python per frame. The compile pipeline's (`PIPELINE`) live here,
because only the cache-miss callback bumps them, at most a few times per compile. `snapshot()` is
the one merge; `reset()` zeros both. `runtime.stats()` stays the runtime's alone (JIT authors
without torch see what the runtime counts).

Threads: the pipeline counters are bumped under the GIL by the callback; a compile racing a
snapshot may be counted in the next one.
"""
from __future__ import annotations

import dataclasses

from . import log, trace_log
from .. import runtime

# The compile pipeline's counters (convert_frame bumps them through count()).
PIPELINE = {
    # graphs in the entries made, traced or loaded from the disk cache (a frame split by graph
    # breaks has several): a program counts the same whether it traced or loaded (count_entry)
    "graphs": 0,
    "graphs_traced": 0,  # of those, the graphs traced in this process
    "graph_breaks": 0,  # graph breaks in the entries made, traced or loaded (a cut inside a callee counts once)
    "recompiles": 0,    # misses of a code that already had live entries
    "unsupported": 0,   # frames that run uncompiled because they could not be compiled (or thrash)
    # graphs that used the backend's callable of an identical earlier graph (backends/sharing.py)
    "shared_backend_compiles": 0,
    "disk_cache_hits": 0,    # entries loaded from the on-disk cache, untraced (pipeline/disk_cache/)
    "disk_cache_stores": 0,  # entries written to the on-disk cache
    "disk_cache_skips": 0,   # codes skipped untraced: an earlier process found no tensor work
    "ddp_pieces": 0,    # pieces that graphs compiled under a DDP forward were cut into (backends/ddp_split.py)
}


def count(name: str, n: int = 1) -> None:
    """Add `n` to the pipeline counter `name` (a KeyError for a name not in PIPELINE)."""
    PIPELINE[name] += n


@dataclasses.dataclass(frozen=True)
class MadeEntry:
    """What stats() counts of an entry made for a frame, stored with it in the disk cache so that
    loading it counts what tracing it did: whether it calls a graph, and the break it was cut at
    (None: none), which counts as a graph break where `counted_break`."""
    has_graph: bool
    break_reason: str | None
    counted_break: bool


def count_entry(code, made: MadeEntry) -> None:
    """Count an entry made for `code`, traced or loaded, and log its break once."""
    PIPELINE["graphs"] += made.has_graph
    PIPELINE["graph_breaks"] += made.counted_break
    trace_log.entry_made(made)
    if made.break_reason is not None:
        log.log_once("graph_breaks", (code.co_filename, made.break_reason),
                     f"graph break in {log.describe_code(code)}: {made.break_reason}")


def reset() -> None:
    """Zero every counter stats() reports (the runtime's and the pipeline's)."""
    runtime.reset_stats()
    for name in PIPELINE:
        PIPELINE[name] = 0


def snapshot() -> dict:
    """The user's view: the runtime's counters, with the frames the pipeline could not compile
    counted as fallbacks, and graphs, graph_breaks, recompiles and shared_backend_compiles."""
    out = dict(runtime.stats())
    out["fallbacks"] += PIPELINE["unsupported"]
    out["graphs"] = PIPELINE["graphs"]
    out["graphs_traced"] = PIPELINE["graphs_traced"]
    out["graph_breaks"] = PIPELINE["graph_breaks"]
    out["recompiles"] = PIPELINE["recompiles"]
    out["shared_backend_compiles"] = PIPELINE["shared_backend_compiles"]
    out["disk_cache_hits"] = PIPELINE["disk_cache_hits"]
    out["disk_cache_stores"] = PIPELINE["disk_cache_stores"]
    out["disk_cache_skips"] = PIPELINE["disk_cache_skips"]
    out["ddp_pieces"] = PIPELINE["ddp_pieces"]
    return out


trace_log.set_stats_source(snapshot)   # the trace's last record: the final counters
