"""Which tensor arguments a torch op writes besides its result (call_op, tensor.py, keeps such an
op's node as a side effect and pins attribute tensors it writes by identity).

- `out=` given tensors: the op writes them whatever it returns (`torch.unbind_copy(x, out=ts)` and
  a custom op whose schema returns `()` return None); reads of them later in the graph see what it
  wrote.
- F.batch_norm with training=True updates its running statistics in place.

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
