"""Compiled regular expressions read from the frame (an re.Pattern, an open object: open_object.py)
matched against constants while tracing, and the re.Match results.

A Pattern is immutable: what its search methods return is a function of its pattern and flags and
of the arguments. So where every argument is a constant, the call runs while tracing, with the
pattern and flags guarded by value through the object's source (a pattern compiled anew from the
same text passes the guards: same text and flags, same answers). A str, list, tuple or None result
is a constant; a match is a MatchVariable holding the real re.Match, whose reads (`group()`,
`span()`, truth) fold, and which cannot leave the trace (no source to rebuild it from). Python's
error on the arguments (a bytes pattern given a str) is raised in the trace.

    PATTERN_METHODS               # the methods run while tracing
    call_pattern_method(tx, obj, name, args, kwargs)
"""
from __future__ import annotations

import re

from ....guard.sources import AttrSource
from ....guard.trace_result import GuardKind
from ..base import MethodVariable, VariableTracker, unsupported

PATTERN_METHODS = frozenset({"search", "match", "fullmatch", "findall", "split", "sub", "subn"})
MATCH_READS = frozenset({"group", "groups", "groupdict", "span", "start", "end", "expand", "__getitem__"})
MATCH_ATTRIBUTES = frozenset({"string", "pos", "endpos", "lastindex", "lastgroup"})


def _run(tx, fn, args, kwargs, what: str):
    from .exceptions import constant_exception, traced_raise

    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        unsupported(f"{what} on values that are not Python constants")
    try:
        return fn(*[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()})
    except Exception as e:  # noqa: BLE001 - Python's own error on these constants: what eager raises
        made = constant_exception(tx, e)
        if made is None:
            unsupported(f"{what} raised {e!r}")
        raise traced_raise(made) from None


def call_pattern_method(tx, obj, name: str, args, kwargs):
    pattern = obj.value
    if name in ("sub", "subn") and args and not args[0].is_python_constant():
        unsupported(f"Pattern.{name} with a replacement that is not a constant")
    for attr in ("pattern", "flags"):
        tx.output.add_guard(AttrSource(obj.source, attr), GuardKind.EQUALS_MATCH, getattr(pattern, attr))
    result = _run(tx, getattr(pattern, name), args, kwargs, f"Pattern.{name}")
    if isinstance(result, re.Match):
        return MatchVariable(result)
    return tx.wrap_constant(result)


class MatchVariable(VariableTracker):
    """An re.Match made while tracing by a Pattern method on constants."""

    # bool(m) asks `truthy` as for a user object (builtins.py); re.Match has no Python special
    # methods, so its operators and comparisons find none and break.
    user_operators = True

    def __init__(self, match: re.Match):
        super().__init__(None)
        self.match = match

    def python_type(self):
        return re.Match

    def truthy(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name: str):
        if name in MATCH_ATTRIBUTES:
            return tx.wrap_constant(getattr(self.match, name))
        if name in MATCH_READS:
            return MethodVariable(self, name)
        unsupported(f"re.Match.{name}")

    def call_method(self, tx, name, args, kwargs):
        if name not in MATCH_READS:
            unsupported(f"re.Match.{name}")
        return tx.wrap_constant(_run(tx, getattr(self.match, name), args, kwargs, f"re.Match.{name}"))

    def getitem(self, tx, key):
        return self.call_method(tx, "__getitem__", [key], {})

    def reconstruct(self, outputs):
        unsupported("an re.Match made in the trace leaves it")

    def __repr__(self):
        return f"MatchVariable({self.match!r})"
