"""A trace folder (runtime/trace_log.py's files) read into processes, frames and compiles for the page.

Reading is lenient: a line that is not JSON (the last line of a process killed mid-write), a record
of a type this version does not know, or a record written by a newer format version is skipped and
counted in `Process.skipped`; fields a record lacks read as empty.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re

from ..runtime.trace_log import VERSION


@dataclasses.dataclass
class Frame:
    """One code object the compiler saw: its compiles (the first, then recompiles) and fallbacks."""
    key: tuple                 # (name, file, first line)
    compiles: list = dataclasses.field(default_factory=list)    # compile records, in order
    fallbacks: list = dataclasses.field(default_factory=list)   # fallback records
    source: list = None        # the lines of its block, from its first line; None: not recorded

    @property
    def name(self) -> str:
        return self.key[0]

    @property
    def file(self) -> str:
        return self.key[1]

    @property
    def line(self) -> int:
        return self.key[2]

    @property
    def recompiles(self) -> int:
        return sum(1 for c in self.compiles if c.get("trigger", {}).get("kind") == "recompile")

    def breaks_by_line(self) -> dict:
        """{line of this frame's source: {reason text: [compile ids]}}: each break marked where the
        frame is cut, and where it failed when that is a line of this block too."""
        out: dict = {}
        for c in self.compiles:
            brk = c.get("break")
            if not brk:
                continue
            lines = {brk.get("frame_line")}
            if brk.get("file") == self.file:
                lines.add(brk.get("line"))
            for line in lines - {None}:
                text = brk.get("text") or brk.get("reason") or ""
                out.setdefault(line, {}).setdefault(text, []).append(c.get("id"))
        return out


@dataclasses.dataclass
class Process:
    path: str
    info: dict = dataclasses.field(default_factory=dict)       # the "process" record
    frames: dict = dataclasses.field(default_factory=dict)     # key -> Frame, in first-seen order
    compiles: list = dataclasses.field(default_factory=list)
    fallbacks: list = dataclasses.field(default_factory=list)
    cache_limits: list = dataclasses.field(default_factory=list)
    stats: dict = None                                         # the final counters; None: no exit record
    skipped: int = 0

    @property
    def label(self) -> str:
        rank = self.info.get("rank")
        who = f"rank {rank}" if rank is not None else "process"
        return f"{who} (pid {self.info.get('pid', '?')})"

    def short(self, text) -> str:
        """`text` with the process's working folder left out of the paths in it (as a user ran it)."""
        cwd = self.info.get("cwd")
        text = "" if text is None else str(text)
        return text.replace(cwd.rstrip("/") + "/", "") if cwd and cwd != "/" else text

    def compile_by_id(self, cid):
        return next((c for c in self.compiles if c.get("id") == cid), None)

    def summary(self) -> dict:
        """The page's counts: from the final counters where the process wrote them, else counted."""
        counted = {
            "frames": len(self.frames),
            "compiles": len(self.compiles),
            "graphs": sum(1 for c in self.compiles if c.get("graph")),
            "graph_breaks": sum(1 for c in self.compiles if c.get("break") and c["break"].get("counted", True)),
            "recompiles": sum(1 for c in self.compiles if c.get("trigger", {}).get("kind") == "recompile"),
            "fallbacks": sum(1 for c in self.compiles if c.get("result") == "fallback") + len(self.fallbacks),
            "cache_limit_hits": len(self.cache_limits),
        }
        if self.stats:
            for name in ("graphs", "graph_breaks", "recompiles", "fallbacks", "cache_limit_hits"):
                if name in self.stats:
                    counted[name] = self.stats[name]
        counted["compile_seconds"] = sum(c.get("seconds") or 0 for c in self.compiles)
        return counted

    def stage_seconds(self) -> dict:
        """Seconds per compile stage over every compile; "other" is the rest of each compile's time
        (imports on the first compile, the callback's own work)."""
        out: dict = {}
        for c in self.compiles:
            spent = 0.0
            for name, seconds in c.get("stages") or ():
                out[name] = out.get(name, 0.0) + seconds
                spent += seconds
            if c.get("seconds") is not None:
                out["other"] = out.get("other", 0.0) + max(0.0, c["seconds"] - spent)
        return out

    def start_time(self) -> float:
        """When the first compile or fallback happened (the timeline starts there)."""
        times = [c.get("start") or 0 for c in self.compiles] + [r.get("time") or 0 for r in self.fallbacks]
        return min(times, default=0.0)

    def end_time(self) -> float:
        times = [(c.get("start") or 0) + (c.get("seconds") or 0) for c in self.compiles]
        times += [r.get("time") or 0 for r in self.fallbacks + self.cache_limits]
        return max(times, default=0.0)


def load_file(path: str) -> Process:
    proc = Process(path)
    sources = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                proc.skipped += 1
                continue
            if not isinstance(record, dict) or record.get("v", 0) > VERSION:
                proc.skipped += 1
                continue
            kind = record.get("type")
            if kind == "process":
                proc.info = record
            elif kind == "source":
                sources[(record.get("file"), record.get("line"))] = record.get("lines") or []
            elif kind == "compile":
                proc.compiles.append(record)
                _frame(proc, record).compiles.append(record)
            elif kind == "fallback":
                proc.fallbacks.append(record)
                _frame(proc, record).fallbacks.append(record)
            elif kind == "cache_limit":
                proc.cache_limits.append(record)
            elif kind == "stats":
                proc.stats = record.get("stats")
            else:
                proc.skipped += 1
    for frame in proc.frames.values():
        frame.source = sources.get((frame.file, frame.line))
    return proc


def load(directory: str) -> list:
    """Every trace file in `directory` (or the one file named), ranks in order, then by pid."""
    if os.path.isfile(directory):
        paths = [directory]
    else:
        paths = [os.path.join(directory, n) for n in sorted(os.listdir(directory)) if n.endswith(".jsonl")]
    procs = [load_file(p) for p in paths]
    procs.sort(key=lambda p: (p.info.get("rank") is None, p.info.get("rank") or 0, p.info.get("pid") or 0))
    return procs


def _frame(proc: Process, record: dict) -> Frame:
    info = record.get("frame") or {}
    key = (info.get("name", "?"), info.get("file", "?"), info.get("line", 0))
    if key not in proc.frames:
        proc.frames[key] = Frame(key)
    return proc.frames[key]


# --- which guard failed ---------------------------------------------------------------------------

_MANAGER = re.compile(r"^((?:\|  )*)\+- (.+)$")
_LEAF = re.compile(r"^((?:\|  )*)\| ([A-Z_]+):")
# (what a failure's text holds, the leaf kind that failed): the runtime's words for each kind.
_KIND_HINTS = (
    ("< min", "SYMBOLIC_SHAPES"), ("> max", "SYMBOLIC_SHAPES"), ("type(", "TYPE_MATCH"),
    (" == ", "EQUALS_MATCH"), (".dim()", "TENSOR_MATCH"), (".size()", "TENSOR_MATCH"),
    (".stride()", "TENSOR_MATCH"), ("dtype", "TENSOR_MATCH"), ("device", "TENSOR_MATCH"),
    ("requires_grad", "TENSOR_MATCH"), ("len(", "LENGTH"), ("is not None", "NOT_NONE"),
    ("is None", "NONE_MATCH"), ("id(", "ID_MATCH"), ("keys", "DICT_KEYS"),
)


def _at_boundary(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_")


def failing_guard_lines(guard_text: str, failure: str) -> set:
    """The indices of the lines of a guard tree (its printed text) that `failure` (an entry's
    explanation of a miss: "L['n'] == 2 failed: got 5") names: the manager of the source it names and
    the leaf of the kind that failed (all its leaves where the kind is not told), or a root leaf
    ("GLOBAL_STATE: grad_mode: ...", a symbolic-shape bound). Empty where nothing matches."""
    lines = guard_text.splitlines()
    explicit = re.match(r"^([A-Z_]+): ", failure)
    kind = explicit[1] if explicit else next((k for hint, k in _KIND_HINTS if hint in failure), None)
    best = None   # (source length, index, prefix)
    for i, line in enumerate(lines):
        m = _MANAGER.match(line)
        if m:
            at = failure.find(m[2])
            if at >= 0 and _at_boundary(failure, at, at + len(m[2])) and (best is None or len(m[2]) > best[0]):
                best = (len(m[2]), i, m[1])
    out = set()
    if kind == "SYMBOLIC_SHAPES" or explicit:
        source = lines[best[1]][len(best[2]) + 3:] if best else None
        for i, line in enumerate(lines):
            m = _LEAF.match(line)
            if m and m[2] == kind and (source is None or source in line):
                out.add(i)
        if out:
            return out
    if best is None:
        return out
    _, index, prefix = best
    leaves = []
    for i in range(index + 1, len(lines)):
        if not lines[i].startswith(prefix + "|"):
            break
        m = _LEAF.match(lines[i])
        if m and m[1] == prefix + "|  ":
            leaves.append((i, m[2]))
    chosen = [i for i, k in leaves if k == kind] or [i for i, _ in leaves]
    return {index, *chosen}
