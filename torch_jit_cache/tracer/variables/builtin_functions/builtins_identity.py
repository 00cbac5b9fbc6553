"""id(obj) in the trace, where the object is one the frame holds and its identity can be guarded:
a class read through a source (guarded by identity where it is wrapped), a module of the frame
(guarded by identity here: nn_module.require_identity), a tensor read from the frame (a module's
tensor attribute, an argument) and a plain object read from the frame that can be weakly
referenced (an ID_MATCH guard at its source, held weakly). The result is that object's id, a
constant of the graph, valid exactly while the guard passes. Anything else breaks: an object built
in the trace has no id yet, a tensor an op made is a graph value, and a list or dict cannot be
guarded by identity without being held (the guard tree refuses that), so its id would outlive the
entry."""
from __future__ import annotations

import weakref

from ....guard.trace_result import GuardKind
from ..base import unsupported
from ..python_objects.classes import ClassVariable
from ..constant import ConstantVariable
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
    real = effects.real_object(obj) if obj.source is not None else None
    if real is None or effects.made_each_call(obj) or not _weakly_referable(real):
        unsupported(f"id() of {obj}: not an object of the frame that can be guarded by identity")
    tx.output.add_guard(obj.source, GuardKind.ID_MATCH, real)
    return ConstantVariable(id(real))


IDENTITY_HANDLERS = {id: identity}
