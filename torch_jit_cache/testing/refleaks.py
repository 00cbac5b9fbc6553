"""check_refleaks(fn): run fn repeatedly and fail when memory keeps growing after warm-up.

How a run is judged (the rule is CPython's `regrtest -R`, Lib/test/libregrtest/refleak.py, written
again here): fn runs `warmups + runs` times; after each run the garbage is collected and counters are
read; the delta of a counter is its growth during that run. Warm-up deltas are ignored (they fill
caches: the first call of a compiled function traces and caches code). A counter *leaks* when every
one of the remaining `runs` deltas is >= 1; deltas such as [3, 0, 0] or [8, -8, 1] are noise (a cache
that filled late, a free list) and are tolerated.

The counters:
- on a debug interpreter (`sys.gettotalrefcount` exists): the total reference count and
  `sys.getallocatedblocks()`, as regrtest reads them. They see leaks nothing else can, such as a
  C++ Py_INCREF without its DECREF.
- always: the number of live objects of each tracked type (torch.Tensor, torch.nn.Module, code and
  frame objects, the runtime's CacheEntry, ...). Live objects are those gc.get_objects() returns
  plus what they refer to (code objects and pybind11 objects are not gc-tracked), plus the cache
  entries the runtime holds for every live code object (they are referenced only from C++).
  On a debug interpreter these counts are taken twice, before and after the measured runs, so that
  the bookkeeping does not itself show up in the reference totals; the leak rule is then "grew by
  at least one per run".
- weakref probes: `track(result)` is called with what fn returned and returns the objects to probe;
  every object probed during a measured run must be dead once that run's garbage is collected
  (checked then, and the weakrefs dropped before the counters are read).

What must stay true: nothing this module keeps between two readings of the debug counters may grow
with the number of runs (the deltas lists are allocated up front, ints come from a pool, as in
regrtest), or the checker would report its own bookkeeping as a leak.
"""
from __future__ import annotations

import collections
import gc
import sys
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

__all__ = ["RefleakError", "RefleakReport", "check_refleaks", "DEFAULT_TRACKED_TYPES", "live_counts"]

# Dotted names resolve only when their module is already imported: tracking torch.Tensor must not
# import torch (this package imports without torch), and a type whose module was never imported has
# no instances to count.
DEFAULT_TRACKED_TYPES = (
    "torch.Tensor",
    "torch.nn.Module",
    "torch.fx.GraphModule",
    types.CodeType,
    types.FrameType,
    types.FunctionType,
    "torch_jit_cache._C.CacheEntry",
    "torch_jit_cache._C.GuardManager",
    "torch_jit_cache._C.GuardedCode",
    "torch_jit_cache._C.CompiledFunction",
)

_CACHE_ENTRY = "torch_jit_cache._C.CacheEntry"


class RefleakError(AssertionError):
    """fn kept memory growing; `.report` (a RefleakReport) says which counters grew by how much."""

    def __init__(self, report: "RefleakReport"):
        super().__init__(str(report))
        self.report = report


@dataclass
class RefleakReport:
    """The growth of every counter during each measured run (warm-ups left out)."""

    name: str
    warmups: int
    runs: int
    deltas: dict = field(default_factory=dict)      # counter name -> [growth per measured run]
    leaking: list = field(default_factory=list)     # counter names judged to leak
    alive: list = field(default_factory=list)       # "run N: repr" for each probe still alive

    @property
    def failed(self) -> bool:
        return bool(self.leaking or self.alive)

    def __str__(self) -> str:
        verdict = "keeps growing memory" if self.failed else "is clean"
        lines = [f"{self.name} {verdict}: {self.runs} runs after {self.warmups} warm-up runs"]
        for counter in self.leaking:
            d = self.deltas[counter]
            lines.append(f"  {counter} grew by {d} per run (sum={sum(d)})")
        if self.alive:
            lines.append(f"  {len(self.alive)} probed object(s) outlived the run that created them:")
            lines.extend(f"    {a}" for a in self.alive)
        noise = [c for c in self.deltas if c not in self.leaking and any(self.deltas[c])]
        for counter in noise:
            lines.append(f"  {counter} changed by {self.deltas[counter]} (not every run: tolerated)")
        return "\n".join(lines)


def _resolve(spec) -> type | None:
    if isinstance(spec, type):
        return spec
    obj = None
    # The longest imported module prefix, then attributes: "torch.nn.Module" -> torch.nn, .Module.
    parts = spec.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is not None:
            obj = mod
            for p in parts[i:]:
                obj = getattr(obj, p, None)
                if obj is None:
                    return None
            break
    return obj if isinstance(obj, type) else None


def _type_name(t: type) -> str:
    mod = t.__module__
    return t.__qualname__ if mod == "builtins" else f"{mod}.{t.__qualname__}"


_HAVE_GC = 1 << 14   # Py_TPFLAGS_HAVE_GC: instances of a type without it are never in gc.get_objects()


def _subclasses(t: type) -> list:
    out, todo = [], [t]
    while todo:
        c = todo.pop()
        out.append(c)
        try:
            todo.extend(c.__subclasses__())
        except TypeError:    # type.__subclasses__ needs an argument
            pass
    return out


def live_counts(tracked: Iterable = DEFAULT_TRACKED_TYPES) -> dict:
    """{type name: live instances (subclasses included)} for each tracked type that resolves.

    gc-tracked objects come from gc.get_objects(). Instances of the tracked types the gc does not
    track (code objects, pybind11 objects) are found as referents of those, code objects also as
    constants of other code, and cache entries by asking the runtime for each live code object's.
    """
    resolved = [t for t in map(_resolve, tracked) if t is not None]
    objs = gc.get_objects()
    by_type = collections.Counter(map(type, objs))
    untracked = {c for t in resolved for c in _subclasses(t) if not c.__flags__ & _HAVE_GC}
    found: dict = {}
    if untracked:
        found = {id(x): x for x in gc.get_referents(*objs) if type(x) in untracked}
    del objs
    codes = [x for x in found.values() if type(x) is types.CodeType]
    todo = list(codes)
    while todo:      # code objects have no tp_traverse: reach nested code through co_consts
        for c in todo.pop().co_consts:
            if type(c) is types.CodeType and id(c) not in found:
                found[id(c)] = c
                codes.append(c)
                todo.append(c)
    entry_type = _resolve(_CACHE_ENTRY)
    if entry_type is not None and entry_type in resolved:
        from .. import _C     # entries live in the code object's extra slot, out of the gc's sight
        for code in codes:
            for entry in _C.cache_entries(code):
                found[id(entry)] = entry
    by_type.update(map(type, found.values()))
    del found, codes, todo
    counts = {}
    for base in resolved:
        counts[_type_name(base)] = sum(n for t, n in by_type.items() if issubclass(t, base))
    return counts


def _leaks(deltas: list) -> bool:
    # regrtest's check_rc_deltas: [5, 5, 6] and [10, 1, 1] leak; [3, 0, 0], [8, -8, 1] do not.
    return bool(deltas) and all(d >= 1 for d in deltas)


def check_refleaks(fn: Callable[[], Any], warmups: int = 3, runs: int = 3, *,
                   track: Callable[[Any], Iterable] | None = None,
                   track_types: Iterable = DEFAULT_TRACKED_TYPES,
                   name: str | None = None) -> RefleakReport:
    """Run fn() `warmups + runs` times; raise RefleakError when memory keeps growing after warm-up.

    track: called as track(result) with what fn returned each run; returns the objects to probe
        with weakrefs; each must be dead once the run that created it is over (warm-up runs are
        not probed).
    track_types: the types (or dotted names) whose live instances are counted.
    Returns the RefleakReport (deltas of every counter) when nothing leaks.
    Raises RefleakError (an AssertionError) whose message is the report.
    """
    if warmups < 0 or runs < 1:
        raise ValueError(f"need warmups >= 0 and runs >= 1, got warmups={warmups}, runs={runs}")
    name = name or getattr(fn, "__qualname__", None) or repr(fn)
    report = RefleakReport(name=name, warmups=warmups, runs=runs)
    debug = hasattr(sys, "gettotalrefcount")
    tracked = tuple(track_types)
    total = warmups + runs

    # Allocated up front so that the measuring loop allocates nothing that outlives a run (regrtest).
    int_pool = {v: v for v in range(-1000, 1000)}
    pooled = int_pool.setdefault
    rc_deltas = [0] * total
    alloc_deltas = [0] * total
    type_rows = [None] * total           # release: live_counts() after each run
    counts_before = counts_after = None

    def collect():
        sys._clear_type_cache()
        gc.collect()

    def probe(result):
        refs = []
        for obj in track(result):
            try:
                refs.append(weakref.ref(obj))
            except TypeError:
                raise TypeError(f"track() returned a {type(obj).__name__}, which cannot be weakly "
                                f"referenced; return the objects that own it instead") from None
        return refs

    def totals():
        return (sys.gettotalrefcount() if debug else 0), sys.getallocatedblocks()

    collect()
    baseline = None
    if warmups == 0:
        baseline = counts_before = live_counts(tracked)
        collect()
    rc_before, alloc_before = totals()
    for i in range(total):
        result = fn()
        refs = probe(result) if track is not None and i >= warmups else None
        result = None
        collect()
        if refs:
            # Checked and dropped before the counters are read: the probes are not fn's growth.
            report.alive.extend(f"run {i + 1}: {_type_name(type(obj))} {_short_repr(obj)}"
                                for obj in (ref() for ref in refs) if obj is not None)
            refs = None
        rc_after, alloc_after = totals()
        d = rc_after - rc_before
        rc_deltas[i] = pooled(d, d)
        d = alloc_after - alloc_before
        alloc_deltas[i] = pooled(d, d)
        del d
        if not debug:
            type_rows[i] = live_counts(tracked)
        elif i == warmups - 1:
            counts_before = live_counts(tracked)
            collect()
            rc_after, alloc_after = totals()
        rc_before, alloc_before = rc_after, alloc_after
    if debug:
        counts_after = live_counts(tracked)

    measured = slice(warmups, total)
    if debug:
        report.deltas["references (sys.gettotalrefcount)"] = rc_deltas[measured]
        report.deltas["memory blocks (sys.getallocatedblocks)"] = alloc_deltas[measured]
        for key in report.deltas:
            if _leaks(report.deltas[key]):
                report.leaking.append(key)
        if counts_before is not None:
            # Two readings only (see the module doc): a type leaks when it grew by >= 1 per run.
            for key, after in counts_after.items():
                grown = after - counts_before.get(key, 0)
                if grown:   # the mean growth per run: only two readings were taken
                    per_run = grown // runs if grown % runs == 0 else round(grown / runs, 2)
                    report.deltas[f"live {key}"] = [per_run] * runs
                if grown >= runs:
                    report.leaking.append(f"live {key}")
    else:
        rows = type_rows
        baseline = rows[warmups - 1] if warmups else baseline
        for key in rows[-1]:
            series = []
            prev = baseline.get(key, 0)
            for row in rows[measured]:
                cur = row.get(key, 0)
                series.append(cur - prev)
                prev = cur
            if any(series):
                report.deltas[f"live {key}"] = series
            if _leaks(series):
                report.leaking.append(f"live {key}")
    if report.failed:
        raise RefleakError(report)
    return report


def _short_repr(obj) -> str:
    try:
        text = repr(obj)
    except Exception:
        text = f"<{type(obj).__name__} at {id(obj):#x}>"
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."
