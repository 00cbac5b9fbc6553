"""The exception the thread handles when the traced frame is entered (its caller's `except` block:
what `sys.exception()` gives there), known to the trace where it is None and guarded so.

Outside every except block of the trace, three things read it: `sys.exc_info()` / `sys.exception()`,
the `__context__` a raise gives its exception (chain_context leaves UNKNOWN_CONTEXT), and a bare
`raise` (RuntimeError "No active exception to reraise" where it is None). Where the thread handles
nothing when the frame is traced, and the frame's globals hold the `sys` module as `sys`, the trace
takes it as None under two guards: `G['sys']` is the sys module (ID_MATCH) and
`G['sys'].exception()` is None (NONE_MATCH; the guards are checked where the frame is entered, so
they read the caller's). A call from inside an except block then misses and is traced again, with
the caller's exception unknown as before (held and passed on, reads refused: exceptions.py).

`sys.exception()` while tracing is the caller's, or one the compiler itself handles (the tracer
inside an `except` of its own): either is not None, and the trace then knows nothing. So None there
is the caller's None. Resume functions run outside every except block of the frame (a break inside
a try block is refused), so their entry sees the same caller's exception, under their own guards.
"""
from __future__ import annotations

import sys

from ....guard.sources import GlobalSource, MethodCallSource
from ....guard.trace_result import GuardKind

_SYS = GlobalSource("sys")


def caller_handles_none(tx) -> bool:
    """Whether the trace may take the exception handled at frame entry as None (guarded the first
    time it says so, once per trace)."""
    out = tx.output
    known = getattr(out, "caller_handles_none", None)
    if known is None:
        known = _guard_handled_none(out)
        out.caller_handles_none = known
    return known


def _guard_handled_none(out) -> bool:
    if sys.exception() is not None:
        return False
    f_globals = out.root_globals
    if type(f_globals) is not dict or f_globals.get("sys") is not sys:
        return False
    out.add_guard(_SYS, GuardKind.ID_MATCH, sys)
    out.add_guard(MethodCallSource(_SYS, "exception"), GuardKind.NONE_MATCH, None)
    return True
