"""TJC_TRACE_DIR=DIR (or config.trace_dir): a structured trace of every compile, one JSON-lines file
per process, read by `python -m torch_jit_cache.report DIR` (docs/compile_report.md).

Contracts:
- Off by default. Every hook returns at once when tracing is off: one read of the module flag `_on`.
  None is on the cache-hit path, which is C++ and never calls Python; the hooks run only on a miss
  (the compile pipeline), for a fallback, at a cache-limit warning and at exit.
- A hook never raises into the user's program: a folder that cannot be written gives one warning and
  turns tracing off for the process; anything else a hook did not foresee is dropped the same way.
- Each record is one JSON object on one line with `"v": VERSION` and `"type"`; a compile is written as
  one record when it ends, so a process killed mid-compile leaves every line before it whole.
- The file is opened on the first record; a forked child opens its own (the pid is checked per write).
- The trace holds names, source text, graph code and guard text (with the constants guards compare,
  as TJC_LOG=guards prints them), never tensor data and never references to the user's objects.

Imports: the standard library only (config, counters, convert_frame and disk_cache import this module;
counters hands its snapshot over with `set_stats_source`).
"""
from __future__ import annotations

import atexit
import itertools
import json
import linecache
import logging
import os
import re
import socket
import sys
import threading
import time
import warnings
import weakref

VERSION = 1

_on = False          # the one flag every hook reads first
_dir = ""            # where this process's file goes
_file = None         # the open file, or None before the first record
_pid = None          # the process that opened _file (a forked child opens its own)
_lock = threading.Lock()   # one writer at a time: compiles run on several threads
_t0 = time.perf_counter()  # record times: seconds since the package was imported (wall clock: _start_time)
_start_time = time.time()
_ids = itertools.count(1)
_local = threading.local()  # .compile: the record of the compile this thread runs, or absent
_sources: set = set()       # (file, first line) whose source record is written
# id(transformed code) -> (weak reference to it, compile id): which compile made the entry a later
# recompile names (the runtime hands the callback CacheEntry objects whose .code is that code).
_entries: dict = {}
_stats_source = None        # counters.snapshot, handed over by counters (no import cycle)
_atexit_registered = False
_previous_showwarning = None

_WHERE = re.compile(r" at (?P<file>.+):(?P<line>\d+)(?: \((?P<instr>[^()]*)\))?$")


def configure(directory) -> None:
    """Trace into `directory` from now on ("" or None: off). config.trace_dir calls this."""
    global _on, _dir
    directory = os.fspath(directory) if directory else ""
    with _lock:
        if _file is not None and directory != _dir:
            _close()
        _dir = directory
        _on = bool(directory)
    if _on:
        _install_warning_hook()


def enabled() -> bool:
    return _on


def set_stats_source(snapshot) -> None:
    """`snapshot()` gives the process's final counters (tjc.stats()) for the record written at exit."""
    global _stats_source
    _stats_source = snapshot


def file_path():
    """The file this process writes, or None before its first record."""
    return getattr(_file, "name", None)


# --- hooks of the compile pipeline (pipeline/: convert_frame.py, disk_cache/entries.py; runtime/counters.py) ---

def begin(code, frame, entries) -> None:
    """A compile of `code` starts on this thread; `entries`: the live entries it missed (a recompile),
    each asked which of its guards failed for `frame`."""
    if not _on:
        return
    try:
        failures = [{"entry": _entry_id(e.code), "guard": e.explain(frame)} for e in entries]
        _local.compile = {
            "type": "compile", "id": next(_ids), "frame": _frame(code), "start": _now(),
            "trigger": {"kind": "recompile" if entries else "first call", "failures": failures},
            "stages": [], "result": None, "graph": None, "guards": None, "break": None, "resume": [],
            "disk_cache": [], "reason": None,
        }
        _source(code)
    except Exception as e:  # noqa: BLE001 - the module docstring: a hook never fails the program
        _give_up(e)


def timed(name: str, stage, *args):
    """`stage(*args)`, its time recorded as the compile stage `name` (stages of a compile that
    fails are recorded up to the one that failed)."""
    record = getattr(_local, "compile", None) if _on else None
    if record is None:
        return stage(*args)
    t = time.perf_counter()
    try:
        return stage(*args)
    finally:
        record["stages"].append([name, round(time.perf_counter() - t, 6)])


def traced(result, traced_frame, ops) -> None:
    """The trace the entry comes from: the graph's code and `ops` (its operations' names; None: no
    graph), the break the frame was cut at, with the line of the frame where it is cut."""
    record = getattr(_local, "compile", None) if _on else None
    if record is None:
        return
    try:
        if ops is not None:
            record["graph"] = {"code": result.graph.code.strip("\n"), "op_count": len(ops), "ops": list(ops)}
        if traced_frame.cut and traced_frame.break_reason:
            brk = _break(traced_frame.break_reason)
            brk["frame_line"] = getattr(getattr(result.output.plan, "instr", None), "lineno", None)
            brk["in_callee"] = bool(traced_frame.in_callee)
            record["break"] = brk
    except Exception as e:  # noqa: BLE001
        _give_up(e)


def resume_functions(fns) -> None:
    """The resume functions the entry's code calls after its break."""
    record = getattr(_local, "compile", None) if _on else None
    if record is None:
        return
    record["resume"] = [getattr(f, "co_qualname", None) or getattr(f, "__qualname__", None) or repr(f) for f in fns]


def entry_made(made) -> None:
    """An entry was made, traced or loaded (counters.count_entry): whether it has a graph, its break."""
    record = getattr(_local, "compile", None) if _on else None
    if record is None:
        return
    record["has_graph"] = bool(made.has_graph)
    if made.break_reason is not None and record["break"] is None:   # loaded: the stored break text
        record["break"] = _break(made.break_reason)
    if record["break"] is not None:
        record["break"]["counted"] = bool(made.counted_break)


def disk_cache(action: str, detail: str = "") -> None:
    """A disk-cache event of this compile: "load", "store", "not stored", "skip"."""
    record = getattr(_local, "compile", None) if _on else None
    if record is None:
        return
    record["disk_cache"].append({"action": action, "detail": str(detail)})


def end(outcome) -> None:
    """The compile ends with `outcome`: a GuardedCode (an entry), the runtime's SKIP / SKIP_TREE_IF_QUIET
    / RUN_ORIGINAL, a str (why the frame runs uncompiled) or an exception (raised to the caller)."""
    if not _on:
        return
    record = getattr(_local, "compile", None)
    _local.compile = None
    if record is None:
        return
    try:
        record["seconds"] = round(_now() - record["start"], 6)
        if hasattr(outcome, "guards") and hasattr(outcome, "code"):
            loaded = any(d["action"] == "load" for d in record["disk_cache"])
            record["result"] = "loaded" if loaded else "entry" if record["graph"] or record["break"] else "no graph"
            record["guards"] = str(outcome.guards)
            code = outcome.code
            _entries[id(code)] = (weakref.ref(code, lambda _, key=id(code): _entries.pop(key, None)), record["id"])
        elif isinstance(outcome, str):
            record["result"], record["reason"] = "fallback", outcome
        elif isinstance(outcome, BaseException):
            record["result"], record["reason"] = "error", f"{type(outcome).__name__}: {outcome}"
        else:
            record["result"] = "skip" if outcome is not None else "interrupted"
        _write(record)
    except Exception as e:  # noqa: BLE001
        _give_up(e)


def fallback(code, reason: str) -> None:
    """`code` runs uncompiled for `reason`, decided without a compile (its entries keep dying)."""
    if not _on:
        return
    try:
        _source(code)
        _write({"type": "fallback", "frame": _frame(code), "time": _now(), "reason": reason})
    except Exception as e:  # noqa: BLE001
        _give_up(e)


def cache_limit(message: str) -> None:
    """A code reached the cache limit (the runtime's warning, in its words)."""
    if not _on:
        return
    try:
        _write({"type": "cache_limit", "time": _now(), "message": message})
    except Exception as e:  # noqa: BLE001
        _give_up(e)


# --- writing -------------------------------------------------------------------------------------

def _now() -> float:
    return round(time.perf_counter() - _t0, 6)


def _frame(code) -> dict:
    return {"name": code.co_qualname, "file": code.co_filename, "line": code.co_firstlineno}


def _entry_id(code):
    item = _entries.get(id(code))
    return item[1] if item is not None and item[0]() is code else None


def _break(text: str) -> dict:
    """A break's reason text ('<reason> at <file>:<line> (<instruction>)') in fields."""
    m = _WHERE.search(text)
    if m is None:
        return {"text": text, "reason": text, "file": None, "line": None, "instruction": None}
    return {"text": text, "reason": text[:m.start()], "file": m["file"], "line": int(m["line"]),
            "instruction": m["instr"]}


def _source(code) -> None:
    """One "source" record per (file, first line): the lines of the block the code starts (a resume
    function shares its origin's)."""
    key = (code.co_filename, code.co_firstlineno)
    if key in _sources:
        return
    _sources.add(key)
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return
    import inspect   # only here: 30 ms to import, and only a traced compile needs it
    try:
        block = inspect.getblock(lines[code.co_firstlineno - 1:])
    except Exception:  # noqa: BLE001 - tokenize errors on odd files: no source shown
        return
    _write({"type": "source", "file": code.co_filename, "line": code.co_firstlineno,
            "lines": [line.rstrip("\n") for line in block]})


def _write(record: dict) -> None:
    record = {"v": VERSION, **record}
    text = json.dumps(record, default=str) + "\n"
    with _lock:
        if not _on:
            return
        if _file is None or _pid != os.getpid():
            _open()
        _file.write(text)
        _file.flush()


def _open() -> None:
    """Open this process's file and write its first record (caller holds _lock)."""
    global _file, _pid, _atexit_registered
    _pid = os.getpid()
    _sources.clear()   # each file holds the sources its compiles show
    rank = os.environ.get("RANK")
    name = f"tjc_trace{'.rank' + rank if rank is not None else ''}.pid{_pid}.jsonl"
    os.makedirs(_dir, exist_ok=True)
    _file = open(os.path.join(_dir, name), "w", encoding="utf-8")
    torch = sys.modules.get("torch")
    _file.write(json.dumps({
        "v": VERSION, "type": "process", "pid": _pid, "rank": int(rank) if rank and rank.isdigit() else None,
        "world_size": os.environ.get("WORLD_SIZE"), "host": socket.gethostname(), "argv": sys.argv, "cwd": os.getcwd(),
        "python": sys.version.split()[0], "torch": getattr(torch, "__version__", None),
        "start_unix": _start_time, "time": _now(),
    }, default=str) + "\n")
    if not _atexit_registered:
        atexit.register(_at_exit)
        _atexit_registered = True


def _close() -> None:
    global _file
    if _file is not None and _pid == os.getpid():
        _file.close()
    _file = None


def _at_exit() -> None:
    """The process's final counters, when it wrote a trace."""
    if not _on or _file is None or _pid != os.getpid():
        return
    try:
        stats = _stats_source() if _stats_source is not None else None
        _write({"type": "stats", "time": _now(), "stats": stats})
        with _lock:
            _close()
    except Exception as e:  # noqa: BLE001
        _give_up(e)


def _give_up(e: BaseException) -> None:
    """Tracing off for the process, with one warning; the user's program goes on."""
    global _on
    _on = False
    _local.compile = None
    logging.getLogger("torch_jit_cache").warning(
        "torch_jit_cache: structured trace to %s turned off: %s: %s", _dir or "?", type(e).__name__, e)


def _install_warning_hook() -> None:
    """The runtime's cache-limit warning (raised in C++) is recorded as it is shown."""
    global _previous_showwarning
    if warnings.showwarning is _showwarning:
        return
    _previous_showwarning = warnings.showwarning
    warnings.showwarning = _showwarning


def _showwarning(message, category, filename, lineno, file=None, line=None):
    text = str(message)
    if _on and text.startswith("torch_jit_cache:") and "reached the cache limit" in text:
        cache_limit(text)
    previous = _previous_showwarning or warnings._showwarning_orig
    return previous(message, category, filename, lineno, file, line)
