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

The re module's functions (`re.compile`, `re.search`, ... RE_FUNCTIONS) called on constants run
while tracing too (unittest's assertRaisesRegex compiles its pattern so): their result is a
function of the arguments alone (re's cache changes no answer). A Pattern made so is a
PatternVariable, whose methods run as a frame Pattern's do, with nothing to guard (it was made from
constants); it cannot leave the trace. On other arguments the function is inlined as Python.

    is_re_function(value), wrap_re_function(tx, value, source, g)   # the builder's rule
"""
from __future__ import annotations

import re

from ....guard.sources import AttrSource
from ....guard.trace_result import GuardKind
from ..base import MethodVariable, VariableTracker, unsupported
from .functions import wrap_function

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
    return _result(tx, _run(tx, getattr(pattern, name), args, kwargs, f"Pattern.{name}"))


def _result(tx, result):
    if isinstance(result, re.Match):
        return MatchVariable(result)
    if isinstance(result, re.Pattern):
        return PatternVariable(result)
    return tx.wrap_constant(result)


RE_FUNCTIONS = ("compile", "search", "match", "fullmatch", "findall", "split", "sub", "subn", "escape")
_RE_FUNCTIONS = tuple(getattr(re, name) for name in RE_FUNCTIONS)


def is_re_function(value) -> bool:
    return any(value is fn for fn in _RE_FUNCTIONS)


def wrap_re_function(tx, value, source, g):
    """The re function as a tracker that runs it on constants, or inlines it (a Python function,
    guarded as one) on anything else."""
    return ReFunctionVariable(value, wrap_function(tx, value, source, g))


class ReFunctionVariable(VariableTracker):
    def __init__(self, fn, inlined):
        super().__init__(inlined.source)
        self.fn, self.inlined = fn, inlined

    def python_type(self):
        return type(self.fn)

    def call_function(self, tx, args, kwargs):
        if self.fn in (re.sub, re.subn) and len(args) > 1 and not args[1].is_python_constant():
            return self.inlined.call_function(tx, args, kwargs)   # a replacement function
        if all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            return _result(tx, _run(tx, self.fn, args, kwargs, f"re.{self.fn.__name__}"))
        return self.inlined.call_function(tx, args, kwargs)

    def var_getattr(self, tx, name):
        return self.inlined.var_getattr(tx, name)

    def reconstruct(self, outputs):
        return self.inlined.reconstruct(outputs)

    def __repr__(self):
        return f"ReFunctionVariable(re.{self.fn.__name__})"


class PatternVariable(VariableTracker):
    """An re.Pattern made while tracing from constants (`re.compile` above)."""

    def __init__(self, pattern: re.Pattern):
        super().__init__(None)
        self.pattern = pattern

    def python_type(self):
        return re.Pattern

    def truthy(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name: str):
        if name in ("pattern", "flags", "groups"):
            return tx.wrap_constant(getattr(self.pattern, name))
        if name in PATTERN_METHODS:
            return MethodVariable(self, name)
        unsupported(f"re.Pattern.{name}")

    def call_method(self, tx, name, args, kwargs):
        if name not in PATTERN_METHODS:
            unsupported(f"re.Pattern.{name}")
        if name in ("sub", "subn") and args and not args[0].is_python_constant():
            unsupported(f"Pattern.{name} with a replacement that is not a constant")
        return _result(tx, _run(tx, getattr(self.pattern, name), args, kwargs, f"Pattern.{name}"))

    def reconstruct(self, outputs):
        unsupported("an re.Pattern made in the trace leaves it")

    def __repr__(self):
        return f"PatternVariable({self.pattern!r})"


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
