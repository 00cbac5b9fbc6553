"""WeakRefVariable: `weakref.ref(obj[, callback])` made in the trace.

The trace holds the referent's tracker, not a real object: calling the reference gives that
tracker back where eager's referent is surely alive at the call, that is where the frame reaches
it (it has a source: the caller holds the frame's arguments and what they reach) or the calling
frame holds it right now (a local or a value on its stack). Anywhere else eager's referent may
already be gone (`weakref.ref(torch.ones(2))()` is None), so the call is a graph break.

A reference that leaves the trace (returned, live at a graph break) is made again after the graph
as `weakref.ref(rebuilt referent[, rebuilt callback])`: the very object eager's refers to, so a
reference without a callback is CPython's shared one, as eager's is. A reference that never leaves
the trace is never made, and neither is its callback called (as under torch.compile). A referent
whose type has no weak references raises TypeError in eager: a graph break here.

FrameWeakRefVariable: a `weakref.ref` read from the frame. Calling it reads the referent through
MethodCallSource `L['w'].__call__()` (under TYPE_MATCH on the reference: the C++ tree reads it
without running user code), guarded as any value read there: None once the referent died, else
the referent's own guards (a tensor's TENSOR_MATCH, a graph input loaded through that source at
call time). The guard tree holds neither the reference nor the referent.
"""
from __future__ import annotations

import weakref

from ....guard.sources import MethodCallSource
from ....guard.trace_result import GuardKind, CallOutput, ConstantOutput, DictOutput, TupleOutput, call_with
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable


class WeakRefVariable(VariableTracker):
    def __init__(self, referent: VariableTracker, callback: VariableTracker | None):
        super().__init__(None)
        self.referent, self.callback = referent, callback

    def python_type(self):
        return weakref.ReferenceType

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported("a weak reference called with arguments")
        if self.referent.source is None and not _held_by_frame(tx, self.referent):
            unsupported("a weak reference made in the trace, called where its referent may be gone")
        return self.referent

    def truthy(self, tx) -> bool:
        return True

    def reconstruct(self, outputs):
        parts = (outputs.rebuild(self.referent),) if self.callback is None else \
            (outputs.rebuild(self.referent), outputs.rebuild(self.callback))
        return outputs.once(self, lambda: CallOutput(ConstantOutput(call_with), ("fn", "args", "kwargs"), (
            ConstantOutput(weakref.ref), TupleOutput(parts), DictOutput(()))))

    def __repr__(self):
        return f"WeakRefVariable({self.referent!r})"


def _held_by_frame(tx, v) -> bool:
    return any(x is v for x in tx.stack) or any(x is v for x in tx.locals.values())


def make_weakref(tx, args, kwargs):
    """weakref.ref(obj) / weakref.ref(obj, callback): the handler of BUILTIN_HANDLERS."""
    if kwargs or not 1 <= len(args) <= 2:
        unsupported("weakref.ref() with other than an object and a callback")
    referent = args[0]
    try:
        cls = referent.python_type()
    except Exception:
        cls = None
    if cls is None or not isinstance(cls, type) or not cls.__weakrefoffset__:
        unsupported(f"weakref.ref() of {referent} (its type may have no weak references)")
    callback = args[1] if len(args) == 2 else None
    if isinstance(callback, ConstantVariable) and callback.value is None:
        callback = None
    return WeakRefVariable(referent, callback)


class FrameWeakRefVariable(VariableTracker):
    def python_type(self):
        return weakref.ReferenceType

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported("a weak reference called with arguments")
        source = MethodCallSource(self.source, "__call__")
        return tx.wrap(source.load_step(self.value), source)

    def truthy(self, tx) -> bool:
        return True

    def __init__(self, value, source):
        super().__init__(source)
        self.value = value   # held during the trace only (the tracker dies with the trace)

    def __repr__(self):
        return f"FrameWeakRefVariable({self.source})"


def wrap_frame_weakref(tx, value, source, g):
    if not g.enabled:
        unsupported("a weak reference read without guards")
    g(GuardKind.TYPE_MATCH, weakref.ReferenceType)
    return FrameWeakRefVariable(value, source)
