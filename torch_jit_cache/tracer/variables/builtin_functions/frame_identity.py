"""Identity (`a is b`) of trackers the trace cannot compare by tracker alone (operators.is_op):
objects read from the frame, answered as they are now and pinned by guards so that the answer
holds at a later call (an identity guard held weakly, an alias or distinct relation between two
sources, an identity held strongly for what lives for the process), and objects known to differ
by their exact types.
"""
from __future__ import annotations

import types

import torch

from ....guard import process_lived
from ....guard.trace_result import GuardKind
from ..torch_objects.tensor import TensorVariable


def both_pinned(tx, a, b) -> bool:
    """Two objects read from the frame, of one exact type (`field.default is MISSING`): compared
    as they are now, each pinned by identity (ID_MATCH, held weakly) so that the answer holds."""
    if not (a.exact_type and b.exact_type and a.source is not None and b.source is not None):
        return False
    values = [getattr(v, "value", _NO_VALUE) for v in (a, b)]
    if any(v is _NO_VALUE or type(v).__weakrefoffset__ == 0 for v in values):
        return False
    for v, value in zip((a, b), values):
        tx.output.add_guard(v.source, GuardKind.ID_MATCH, value)
    return True


_NO_VALUE = object()


def process_lived_identity(tx, a, b) -> bool | None:
    """An object the trace knows (`int.__lt__`) against one read from the frame that lives for the
    process (`object.__lt__`, a slot wrapper no weak reference can hold): compared now, the frame's
    pinned by identity (held strongly: it never dies). None where that does not apply."""
    for known, other in ((a, b), (b, a)):
        if known.identity_family == "constant" and getattr(other, "holds_frame_object", False) and \
                other.source is not None and process_lived.lives_for_the_process(other.value):
            tx.output.add_guard(other.source, GuardKind.ID_MATCH, other.value)
            return known.identity_object() is other.value
    return None


def pinned_relation(tx, a, b) -> bool | None:
    """Two objects read from the frame whose trackers hold the very objects their sources reach
    (`holds_frame_object`: a sentinel `object()`, a __slots__ object, neither weakly referable):
    whether they are one object now, pinned by an ALIAS_OF or DISTINCT_FROM guard on the two
    sources, which holds neither. None where that does not apply."""
    if not (getattr(a, "holds_frame_object", False) and getattr(b, "holds_frame_object", False)
            and a.source is not None and b.source is not None):
        return None
    same = a.value is b.value
    tx.output.side_effects.pin(a, same, b, f"identity test between {a} and {b}")
    return same


def types_apart(a, b) -> bool:
    """An object the trace knows (a constant, a class: `tp is Generic`, `x is MISSING`) against one
    whose exact type the guards pin: objects of different types are different objects."""
    for known, other in ((a, b), (b, a)):
        if known.identity_family == "constant" and other.exact_type and other.source is not None:
            return type(known.identity_object()) is not other.python_type()
        if isinstance(known, TensorVariable) and other.exact_type and other.source is not None:
            # a tensor against a sentinel `object()` (cached_property's `val is _NOT_FOUND`)
            return not issubclass(other.python_type(), torch.Tensor)
        if made_function(known) and other.exact_type and other.source is not None:
            # `getattr(cls, "__lt__") is not getattr(object, "__lt__")` (functools.total_ordering)
            return other.python_type() is not types.FunctionType
    return False


def made_function(v) -> bool:
    """A function the trace made (a def or lambda run in it): an object of exactly the function type."""
    return v.source is None and isinstance(getattr(v, "code", None), types.CodeType) and \
        v.python_type() is types.FunctionType
