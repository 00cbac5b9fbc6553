"""The shape of a call to a builtin the tracer answers: whether Python would refuse it.

A builtin's handler (builtins.py) reads the arguments it needs; a call Python refuses before it
reads any argument (an unknown keyword, one argument too many) must raise Python's own TypeError
in the trace, as the call raises in eager.
"""
from __future__ import annotations

import inspect

# The signatures of BUILTIN_HANDLERS' builtins (None: Python gives none), read once each. Keyed
# by those builtins only: the standard library's own objects, never the user's.
_SIGNATURES: dict = {}


def refused_call(fn, n_args: int, names) -> TypeError | None:
    """The TypeError Python raises when builtin `fn` is called with `n_args` positional arguments
    and the keywords `names` (too many, too few, a keyword it does not take), or None where
    Python accepts the call's shape or `fn` has no signature to check it against. Python refuses
    such a call before it reads any argument, so the error is Python's own: `fn` called with
    empty tuples of the same shape (only when the shape is already known to be refused)."""
    if fn not in _SIGNATURES:
        try:
            _SIGNATURES[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            _SIGNATURES[fn] = None
    sig = _SIGNATURES[fn]
    if sig is None:
        return None
    try:
        sig.bind(*range(n_args), **dict.fromkeys(names))
        return None
    except TypeError:
        pass
    try:
        fn(*[()] * n_args, **dict.fromkeys(names, ()))
    except TypeError as e:
        return e
    except Exception:   # noqa: BLE001 - the signature was narrower than the builtin: no refusal
        return None
    return None
