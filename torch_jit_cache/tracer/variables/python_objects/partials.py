"""functools.partial (the C type) in the trace.

A partial read from the frame (`PartialVariable`) is guarded by its parts; one made in the trace
(`PartialCallVariable`) is modelled as CPython builds it: a partial of a partial made in the trace
is flattened into one (its func, its args first, its keywords updated by the new ones), so
`.func`, `.args` and `.keywords` read what eager's do. `.keywords` is the partial's own dict:
a change made through it changes later calls, as in eager. A partial of a frame partial is not
flattened here (CPython flattens it only while it has no `__dict__`, which the trace cannot see
without creating one): calling it is the same call either way, but its attributes are refused."""

from __future__ import annotations

import functools

from ....guard.sources import AttrSource
from ....guard.trace_result import CallOutput, ConstantOutput, DictOutput, GuardKind, SourceOutput, TupleOutput, call_with
from ..base import VariableTracker, unsupported
from ..collections.containers import TupleVariable
from ..collections.dicts import DictVariable

PARTS = ("func", "args", "keywords")


def _keyword_items(keywords: DictVariable) -> dict:
    if not all(type(k) is str for k in keywords.items):
        unsupported("a partial's keywords dict holds a key that is not a str")
    return dict(keywords.items)


class PartialVariable(VariableTracker):
    """A functools.partial read from the frame, guarded by its parts (func, args, keywords, each
    wrapped from its own source) rather than by the identity of an object made per call.
    `identity_guard` is called when the trace relies on the object itself."""

    def __init__(self, value, func, args: TupleVariable, keywords: DictVariable, source, identity_guard):
        super().__init__(source)
        self.value = value
        self.func, self.args, self.keywords = func, args, keywords
        self._identity_guard = identity_guard

    def python_type(self):
        return functools.partial

    def as_python_constant(self):
        self._identity_guard()
        return self.value

    def var_getattr(self, tx, name):
        if name in PARTS:
            return getattr(self, name)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        return tx.call(self.func, [*self.args.items, *args], {**_keyword_items(self.keywords), **kwargs})

    def reconstruct(self, outputs):
        return SourceOutput(self.source)   # the caller's very partial

    def __repr__(self):
        return f"PartialVariable({self.func!r})"


def make_partial(tx, args, kwargs):
    """functools.partial(fn, *args, **kwargs) in the trace."""
    if not args:
        unsupported("functools.partial() without a function")
    func, bound, keywords = args[0], list(args[1:]), dict(kwargs)
    flattened = True
    if isinstance(func, PartialCallVariable):
        if not func.flattened:
            flattened = False
        else:
            bound = [*func.args.items, *bound]
            keywords = {**_keyword_items(func.keywords), **keywords}
            func = func.func
    elif isinstance(func, PartialVariable) or func.python_type() is functools.partial:
        flattened = False   # see the module's docstring
    return PartialCallVariable(func, TupleVariable(bound), DictVariable(keywords), flattened)


class PartialCallVariable(VariableTracker):
    """functools.partial(fn, ...) made in the trace: calling it calls fn with the bound arguments
    first. Returned or held at a break, it is made again from its rebuilt parts (CPython flattens
    again where this one did not)."""

    def __init__(self, func, args: TupleVariable, keywords: DictVariable, flattened: bool = True):
        super().__init__(None)
        self.func, self.args, self.keywords, self.flattened = func, args, keywords, flattened

    def python_type(self):
        return functools.partial

    def var_getattr(self, tx, name):
        if name in PARTS:
            if not self.flattened:
                unsupported(f"attribute {name!r} of a partial of a partial read from the frame")
            return getattr(self, name)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        return tx.call(self.func, [*self.args.items, *args], {**_keyword_items(self.keywords), **kwargs})

    def reconstruct(self, outputs):
        return outputs.once(self, lambda: CallOutput(ConstantOutput(call_with), ("fn", "args", "kwargs"), (
            ConstantOutput(functools.partial), TupleOutput((outputs.rebuild(self.func),
                                                            *(outputs.rebuild(a) for a in self.args.items))),
            DictOutput(tuple((k, outputs.rebuild(v)) for k, v in _keyword_items(self.keywords).items())))))

    def __repr__(self):
        return f"PartialCallVariable({self.func!r})"


def wrap_partial(tx, value, source, g):
    g(GuardKind.TYPE_MATCH, functools.partial)
    return PartialVariable(value, tx.wrap(value.func, AttrSource(source, "func"), g.enabled),
                           tx.wrap(value.args, AttrSource(source, "args"), g.enabled),
                           tx.wrap(value.keywords, AttrSource(source, "keywords"), g.enabled),
                           source, identity_guard=lambda: g(GuardKind.ID_MATCH, value))
