"""Which tensor arguments a torch op writes besides its result (call_op, tensor.py, keeps such an
op's node as a side effect and pins attribute tensors it writes by identity).

- `out=` given tensors: the op writes them whatever it returns (`torch.unbind_copy(x, out=ts)` and
  a custom op whose schema returns `()` return None); reads of them later in the graph see what it
  wrote.
- F.batch_norm with training=True updates its running statistics in place.
- a torch op (`torch.ops.ns.name`, an overload or its packet) whose schema marks an argument as
  written (`Tensor(a!)`) writes it; one whose schema returns nothing acts only by its effects
  (`schema_effect`): both keep their node (a custom op with `Tensor(a!)? z` and returns `()`).

And the reverse: torch helpers whose None result is a value, not a sign of an effect
(NONE_IS_A_VALUE): call_op otherwise takes a torch function that returns None for one that acts
on something outside the graph, and breaks there.
"""
from __future__ import annotations

import torch

from ..constant import ConstantVariable


# torch.nn.functional's mask helpers, which nn.MultiheadAttention and the nn.Transformer layers
# call on every forward: `_canonical_mask(None, ...)` has no mask to convert, `_none_or_dtype(None)`
# no dtype to read. Both only read their arguments (or raise) and return a value.
NONE_IS_A_VALUE = frozenset(getattr(torch.nn.functional, name) for name in ("_canonical_mask", "_none_or_dtype")
                            if hasattr(torch.nn.functional, name))


def out_tensors(out) -> list:
    """The tensor trackers an `out=` argument names: one tensor, or a list or tuple of them; []
    where it holds anything else."""
    items = [out] if getattr(out, "identity_family", None) == "tensor" else getattr(out, "items", None)
    if isinstance(items, (list, tuple)) and items and all(getattr(v, "identity_family", None) == "tensor" for v in items):
        return list(items)
    return []


def running_stats(target, args, kwargs) -> list:
    """The running-stat trackers F.batch_norm updates in place (training=True), else []."""
    if target is not torch.nn.functional.batch_norm:
        return []
    training = kwargs.get("training", args[5] if len(args) > 5 else None)
    if not (isinstance(training, ConstantVariable) and training.value):
        return []
    return [kwargs.get(name, args[i] if len(args) > i else None)
            for i, name in ((1, "running_mean"), (2, "running_var"))]


def _schemas(target) -> list:
    """The schemas of a torch op: an OpOverload's own, all of an OpOverloadPacket's overloads';
    [] for anything else."""
    if isinstance(target, torch._ops.OpOverload):
        return [target._schema]
    if isinstance(target, torch._ops.OpOverloadPacket):
        return [getattr(target, name)._schema for name in target.overloads()]
    return []


def schema_effect(target) -> bool:
    """Whether a torch op writes an argument or returns nothing, by its schema (module docstring)."""
    return any(not schema.returns or any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
               for schema in _schemas(target))


def _schema_written(target, args, kwargs) -> list:
    found = []
    for schema in _schemas(target):
        for i, a in enumerate(schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                v = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
                found += out_tensors(v)
    return found


def written(target, args, kwargs, inplace: bool) -> list:
    """The trackers an op call writes: an in-place op's self and its `out=` tensors, batch_norm's
    running statistics, the arguments a torch op's schema marks written."""
    own = [*args[:1], *(out_tensors(kwargs.get("out")) or [kwargs.get("out")])] if inplace or "out" in kwargs else []
    return own + running_stats(target, args, kwargs) + _schema_written(target, args, kwargs)
