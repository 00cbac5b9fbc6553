"""C functions that read the interpreter's state and take no arguments (`sys.get_int_max_str_digits()`,
`sys.getrecursionlimit()`): not pure (pure.py), since the state can change between calls
(`sys.set_int_max_str_digits(n)`), but each returns an immutable value of that state alone.

Called in the trace, the value is read through the guard source `G['sys'].getrecursionlimit.__call__()`
(sources.MethodCallSource) and is a constant guarded by its value like any scalar the frame reaches
(constant.py: on the first use of the tracker): a later call where the state differs compiles
again. Nothing the trace runs between the frame's entry, where the guards are checked, and the
read changes that state: the setters are no pure functions, so calling one is a graph break, and
the resume function after it reads the state again under its own guards.

    STATE_READERS        # module name -> the names of its reader functions, looked up by identity
    is_state_reader(fn)  # -> bool, never calls fn
"""
from __future__ import annotations

import sys

from ....guard.trace_result import GuardKind
from ....guard.sources import CallSource, MethodCallSource
from ..base import CallableVariable, unsupported

# Each returns an int, float or str of the interpreter's settings, and reads nothing else.
STATE_READERS: dict = {
    "sys": ("get_int_max_str_digits", "getrecursionlimit", "getswitchinterval", "getdefaultencoding",
            "getfilesystemencoding", "getfilesystemencodeerrors"),
}


def is_state_reader(fn) -> bool:
    name = getattr(fn, "__name__", None)
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    return (module is not None and name in STATE_READERS.get(module.__name__, ())
            and getattr(module, name, None) is fn)


class StateReaderVariable(CallableVariable):
    """One of STATE_READERS, read from the frame (it has a source)."""

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported(f"{self.fn.__name__}() called with arguments")
        return read_through_call(tx, self.fn, self.source)

    def __repr__(self):
        return f"StateReaderVariable({self.fn.__name__})"


def read_through_call(tx, fn, fn_source, args: tuple = (), kwargs: tuple = ()):
    """`fn(*args, **dict(kwargs))`'s value, read through `fn_source.__call__()` (MethodCallSource)
    or, with arguments, `call(fn_source, (args, kwargs))` (CallSource): a constant of the trace,
    guarded by value where it is used, as the guards call `fn` again at each check."""
    source = CallSource(fn_source, args, kwargs) if args or kwargs else MethodCallSource(fn_source, "__call__")
    try:
        value = source.load_step(fn)
    except Exception as e:   # the frame runs as written and raises there, as Python does
        unsupported(f"{getattr(fn, '__qualname__', fn)}() raised {type(e).__name__} while tracing")
    return tx.wrap(value, source)


def wrap_state_reader(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)   # a module's function: one object
    return StateReaderVariable(value, source)
