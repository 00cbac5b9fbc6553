"""id(obj) in the trace, where the object is one the frame holds and its identity can be guarded:
a class read through a source (guarded by identity where it is wrapped), a module of the frame
(guarded by identity here: nn_module.require_identity), a tensor read from the frame (a module's
tensor attribute, an argument) and a plain object read from the frame that can be weakly
referenced (an ID_MATCH guard at its source, held weakly). A list, dict or other object of the
frame that cannot be weakly referenced is not held at all: its guard reads `id(obj)` at each call
and compares the number (EQUALS_MATCH on `apply(source, ObjectId)`). The result is that object's
id, a constant of the graph, valid exactly while the guard passes. Anything else breaks: an object
built in the trace has no id yet, and a tensor an op made is a graph value.

A list, dict, set or tuple the trace built has no id yet, but `id(x)` of one is an identity token
(IdentityTokenVariable): `==` and `!=` between two tokens answer whether they name one object,
which is all CPython's tests ask of them (`oldid = id(s); s *= 10; id(s) == oldid`). A tracker the
trace built stands for one object, so one tracker is one object; two list, dict or set trackers,
both built in the trace, are two objects (each was made new); two tuple trackers may be one object
(CPython interns the empty tuple, and `t * 1` is `t`) and are refused. Anything else asked of a
token (arithmetic, a constant, a dict key) breaks: its number is not known. Returned, or held at a
break, it is the id of the list, dict or set made again after the graph (a tuple's is refused: the
one made again is new, where eager's may be a constant CPython shares)."""
from __future__ import annotations

import weakref

from ....guard.sources import ApplySource, ObjectId
from ....guard.trace_result import CallOutput, ConstantOutput, GuardKind, object_id
from ..base import VariableTracker, unsupported
from ..python_objects.classes import ClassVariable
from ..constant import ConstantVariable
from ..collections.containers import BaseListVariable, TupleVariable
from ..collections.dicts import DictVariable
from ..collections.sets import SetVariable
from ..modules.nn_module import NNModuleVariable
from ..torch_objects.tensor import TensorVariable


def _weakly_referable(value) -> bool:
    try:
        weakref.ref(value)
    except TypeError:
        return False
    return True


def identity(tx, args, kwargs):
    if kwargs or len(args) != 1:
        unsupported("id() takes exactly one argument")
    (obj,) = args
    if isinstance(obj, ClassVariable) and obj.source is not None and isinstance(obj.value, type):
        return ConstantVariable(id(obj.value))
    if isinstance(obj, NNModuleVariable) and obj.source is not None:
        obj.require_identity()
        return ConstantVariable(id(obj.identity_object()))
    effects = tx.output.side_effects
    if isinstance(obj, TensorVariable) and obj.source is not None and obj.real is not None:
        # The very tensor at its source (a module's tensor attribute, an argument): pinned there
        # by identity, held weakly. A tensor an op made, in place or not, has no source.
        tx.output.add_guard(obj.source, GuardKind.ID_MATCH, obj.real)
        return ConstantVariable(id(obj.real))
    if obj.source is None and isinstance(obj, (BaseListVariable, DictVariable, SetVariable)):
        return IdentityTokenVariable(obj)
    real = effects.real_object(obj) if obj.source is not None else None
    if real is None or effects.made_each_call(obj):
        unsupported(f"id() of {obj}: not an object of the frame that can be guarded by identity")
    if _weakly_referable(real):
        tx.output.add_guard(obj.source, GuardKind.ID_MATCH, real)
    else:   # a list or dict of the frame: its id itself, read at each call (no object held)
        tx.output.add_guard(ApplySource(obj.source, ObjectId), GuardKind.EQUALS_MATCH, id(real))
    return ConstantVariable(id(real))


class IdentityTokenVariable(VariableTracker):
    """id(obj) of a container the trace built (see above): an int whose value is not known."""

    def __init__(self, obj):
        super().__init__(None)
        self.obj = obj

    def python_type(self):
        return int

    def same_object(self, other) -> bool:
        """Whether this token and `other` name one object (see above), or a break."""
        if not hasattr(other, "same_object"):
            unsupported(f"comparison of id() of {self.obj}, a number not known to the trace, with {other}")
        if self.obj is other.obj:
            return True
        if isinstance(self.obj, TupleVariable) or isinstance(other.obj, TupleVariable):
            unsupported(f"identity of two tuples built in the trace ({self.obj}, {other.obj})")
        return False

    def reconstruct(self, outputs):
        # Returned or held at a break: the id of the object made again after the graph (itself
        # made once however many references reach it). A tuple made again is a new tuple, where
        # eager's may be one CPython shares (a constant of the code): refused.
        if isinstance(self.obj, TupleVariable):
            unsupported(f"id() of {self.obj}, a tuple built in the trace, leaves it")
        return outputs.once(self, lambda: CallOutput(ConstantOutput(object_id), ("obj",), (outputs.rebuild(self.obj),)))

    def __repr__(self):
        return f"IdentityTokenVariable({self.obj!r})"


IDENTITY_HANDLERS = {id: identity}
