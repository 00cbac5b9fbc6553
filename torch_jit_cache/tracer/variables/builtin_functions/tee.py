"""itertools.tee in the trace: n iterators over one input, traced through its Python version
(polyfills.tee_), each seen as CPython's tee iterator type."""
from __future__ import annotations

import itertools

from ....guard.trace_result import Unsupported
from . import polyfills
from ..base import unsupported
from ..python_objects.functions import UserFunctionVariable

_TEE = type(itertools.tee(())[0])


def tee(tx, args, kwargs):
    """itertools.tee(iterable, n=2) over what CPython reads with iter(): a builtin container or
    iterator. An iterator with __copy__ (a tee's own) is copied by CPython instead of read, and a
    user class's iterator may have one: refused."""
    try:
        kind = (args[0] if args else kwargs["iterable"]).python_type()
    except (KeyError, Unsupported):
        kind = None
    if kind is None or kind.__module__ not in ("builtins", "itertools") or hasattr(kind, "__copy__"):
        unsupported(f"itertools.tee of a {getattr(kind, '__name__', 'value')} (it may copy itself)")
    made = tx.call(UserFunctionVariable(polyfills.tee_), args, kwargs)
    for one in made.items:
        one.kind = _TEE
    return made
