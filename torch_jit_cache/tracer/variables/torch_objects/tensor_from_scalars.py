"""`torch.tensor(data)`, `torch.as_tensor(data)` and `x.new_tensor(data)` where `data` (a number,
or nested lists and tuples of numbers) holds symbolic scalars or 0-d tensors: built by the graph.

Run on the examples, torch reads each symbolic scalar as a Python number: a backed size is then
specialized (a guard, one graph per value) and an unbacked one (`.item()`, a nonzero count under
config.capture_scalar_outputs) cannot be read at all. Here each number becomes a 0-d tensor of
its own (`torch.full((), n)`: its dtype is the one torch.tensor infers for that Python number),
the rows are stacked level by level (stacking promotes bool < int < float as torch.tensor's
inference does), and the result is cast where a dtype is asked for, or is the tensor's own for
`new_tensor` (a cast truncates toward zero as torch.tensor's conversion does). The device is the
call's, `new_tensor`'s tensor's, else the default device, as for `torch.full`.

A 0-d tensor in a list (`torch.tensor([t, 2.0])`) is read by torch as a number of its own dtype
(the inference promotes it with the others as stacking does); here it is stacked as it is, and the
result is detached (torch.tensor copies values, never autograd history). A tensor elsewhere than
in a list (`torch.tensor(t)`, a copy), of more than 0 dims, on another device than the result's,
or a floating one asked for as an integer (torch raises TypeError there) is refused.

Refused (None: the call runs on the examples as before) where data holds anything but lists,
tuples, numbers and symbolic scalars, is ragged or has an empty level, or where an option other
than dtype, device and `requires_grad=False` is given.
"""
from __future__ import annotations

import torch

from ..constant import ConstantVariable
from ..collections.containers import BaseListVariable, ListVariable, TupleVariable
from .symbolic import SymNodeVariable

FROM_DATA = (torch.tensor, torch.as_tensor)
_OPTIONS = frozenset({"dtype", "device", "requires_grad"})


def _is_tensor(item) -> bool:
    return getattr(item, "identity_family", None) == "tensor"


def _shape(item):
    """The nested shape of `item`, or None where it is not a rectangular nest of numbers."""
    if isinstance(item, SymNodeVariable):
        return ()
    if _is_tensor(item):
        return () if item.example.dim() == 0 else None
    if isinstance(item, ConstantVariable):
        return () if type(item.value) in (int, float, bool) else None
    if isinstance(item, BaseListVariable) and item.python_type() in (list, tuple) and item.items:
        shapes = {_shape(i) for i in item.items}
        if len(shapes) != 1 or None in shapes:
            return None
        return (len(item.items), *shapes.pop())
    return None


def _has_symbol(item) -> bool:
    """Whether `item` holds a symbolic scalar or, within a list or tuple, a tensor."""
    if isinstance(item, BaseListVariable):
        return any(_has_symbol(i) or _is_tensor(i) for i in item.items)
    return isinstance(item, SymNodeVariable)


def _tensors(item) -> list:
    if isinstance(item, BaseListVariable):
        return [t for i in item.items for t in _tensors(i)]
    return [item.example] if _is_tensor(item) else []


def _torch_refuses(tensors, dtype) -> bool:
    """torch.tensor raises TypeError reading a floating tensor as a number of an integer or bool
    dtype (as an index); a complex one is refused here for any dtype but complex."""
    if dtype is None:
        return False
    return any(t.is_complex() and not dtype.is_complex or
               t.is_floating_point() and not (dtype.is_floating_point or dtype.is_complex) for t in tensors)


def _option(kwargs, name):
    value = kwargs.get(name)
    if value is None:
        return None
    return value.as_python_constant() if value.is_python_constant() else NotImplemented


def from_symbolic_scalars(tx, call_op, data, kwargs, like=None):
    """The tracker of a tensor made from `data` in the graph, or None (see the module's docstring).
    `like`: the tensor tracker of `like.new_tensor(data)`, whose dtype and device are the defaults."""
    if not _has_symbol(data) or _shape(data) is None or set(kwargs) - _OPTIONS:
        return None
    dtype, device = _option(kwargs, "dtype"), _option(kwargs, "device")
    if NotImplemented in (dtype, device) or _option(kwargs, "requires_grad") not in (None, False):
        return None
    if like is not None:
        dtype = like.example.dtype if dtype is None else dtype
        device = like.example.device if device is None else device
    tensors = _tensors(data)
    if {t.device for t in tensors} - {torch.device(device) if device is not None else torch.get_default_device()} \
            or _torch_refuses(tensors, dtype):
        return None
    options = {} if device is None else {"device": ConstantVariable(device)}

    def build(item):
        if isinstance(item, BaseListVariable):
            return call_op(tx, torch.stack, [ListVariable([build(i) for i in item.items])], {})
        return item if _is_tensor(item) else call_op(tx, torch.full, [TupleVariable([]), item], options)

    made = build(data)
    if dtype is not None and made.example.dtype != dtype:
        made = call_op(tx, "to", [made, ConstantVariable(dtype)], {}, method=True)
    if made.example.requires_grad:
        made = call_op(tx, "detach", [made], {}, method=True)
    return made
