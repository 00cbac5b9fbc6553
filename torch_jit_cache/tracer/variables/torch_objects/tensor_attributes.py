"""Python attributes a user stores on tensors (`x.tag = flag`, `y.grad = g`), and reads of them.

A tensor carries an instance `__dict__` like any Python object; a store there changes nothing the
graph computes, so it is a side effect (tracer/side_effects.py), replayed after the graph on the
very tensor: the frame's own (loaded through its source) or the graph's output (the object the
caller gets). Reads later in the trace see the stored tracker. A name the tensor's class defines
(`data`, `requires_grad`, `shape`, methods) is no plain attribute: only `grad` is stored, and only
a tensor of the same shape, dtype and device, or None (what its setter accepts; anything else
breaks, and eager raises there). A tensor the graph made that is a frame tensor itself (an in-place
op's result) is refused: the graph's output need not be that object.

A frame tensor's own `__dict__` entries (a function set on a parameter, `t.add_one = fn`) are read
through their source `x.name` and guarded by what they are, as any attribute of the frame.

tensor.py calls this module with its tracker `t`; `type(t)` is the tensor tracker's class here
(this module sits below tensor.py and does not import it).
"""
from __future__ import annotations

import torch

from ....guard.sources import AttrSource
from ..base import unsupported
from ..constant import ConstantVariable


def _is_frame_alias(tx, t) -> bool:
    return t.source is None and any(isinstance(v, type(t)) and v.source is not None and
                                    v.example is t.example for v in list(tx.output.by_source.values()))


def store(tx, t, name: str, value) -> None:
    if name != "grad" and hasattr(torch.Tensor, name):
        unsupported(f"STORE_ATTR {name} on a tensor (an attribute its class defines)")
    if name == "grad":
        ok = isinstance(value, ConstantVariable) and value.value is None or \
            isinstance(value, type(t)) and value.example.shape == t.example.shape and \
            value.example.dtype == t.example.dtype and value.example.device == t.example.device
        if not ok:
            unsupported("x.grad = a value its setter may refuse")
    if _is_frame_alias(tx, t):
        unsupported(f"STORE_ATTR {name} on a graph tensor that is a frame tensor itself")
    tx.output.side_effects.store_attr(t, t, name, value, by_identity=True)


def load(tx, t, name: str):
    """The tracker of `t.name` where it is a stored or frame `__dict__` attribute, else None."""
    effects = tx.output.side_effects
    if effects.has_attr_effect(t, t, name):
        if effects.attr_deleted(t, name):
            unsupported(f"tensor attribute .{name} read after the trace deleted it")
        return effects.attr(t, t, name)
    if hasattr(torch.Tensor, name) or t.source is None or t.real is None:
        return None
    if name in vars(t.real):
        return tx.wrap(vars(t.real)[name], AttrSource(t.source, name))
    return None


def stored(tx, t, name: str) -> bool:
    """Whether the trace stored `t.name` (hasattr answers True after it)."""
    effects = tx.output.side_effects
    return effects.has_attr_effect(t, t, name) and not effects.attr_deleted(t, name)
