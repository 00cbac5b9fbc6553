"""Refusing ops whose output size depends on tensor values, before they run in the trace.

A graph keeps an op's output size only as the trace saw it: `torch.arange(0, b.max())` traced with
b = [3] gives a 3-element example, and whatever the trace then reads of it (`.shape[0]`, `len()`,
a loop over it) becomes a constant of the graph, silently wrong for b = [5]. By default such an op is a graph break: it is refused before it runs
on the examples, so it runs at call time, eagerly, after the graph before it.

What counts, seen from the aten ops a call dispatches (a TorchDispatchMode, entered only around one
example op at a time):
- an op torch tags `dynamic_output_shape` (nonzero, unique, masked_select, repeat_interleave with
  tensor repeats, a boolean-mask index); aten.index.Tensor carries the tag for any tensor index, but
  only a bool/uint8 index makes the size depend on values, so integer indices pass;
- `_local_scalar_dense` reached from the call itself rather than inside another kernel: a tensor
  handed where Python wants a number (an arange end, a size, a slice bound) is read with `.item()`
  by torch's argument parser. Kernels that read a scalar inside (linalg's error checks) run below
  the mode and are not seen. A tensor whose value the fake tensors know is read harmlessly: fake
  tensors carry the value of a small tensor made from constants alone (`FakeTensor.constant`:
  `torch.div(seq_len, w, rounding_mode="trunc")` with both ints constants of the trace), and the
  graph recomputes the same value at call time from the same constants, which the trace's guards
  hold fixed. The node keeps the tensor as its argument, as eager does.
A subscript is judged from its index instead (`judge_subscript`): a 0-d integer tensor used as an
index selects one entry, whose size does not depend on the value, and the graph reads the index at
call time (the example op, on fake tensors that have no value to read, selects entry 0 in its place:
`subscript_example`); a tensor slice bound or a boolean mask is refused.

The mode costs one Python call per aten op while tracing (never on the compiled path).

Under the switches of config.py the trace captures such ops instead, on fake tensors:
`capture_scalar_outputs` lets a tensor be read as a number (an unbacked SymInt/SymFloat),
`capture_dynamic_output_shape_ops` lets an op with a value-dependent size run (its result has an
unbacked size). Each refusal names the switch that would have let the op into the graph.
"""
from __future__ import annotations

import dataclasses

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..base import unsupported

_DYNAMIC_SHAPE = torch.Tag.dynamic_output_shape
_MASK_DTYPES = (torch.bool, torch.uint8)


def _mask_index(indices) -> bool:
    return any(isinstance(t, torch.Tensor) and t.dtype in _MASK_DTYPES for t in indices or ())


def _known_value(tensor) -> bool:
    """Whether the fake tensor carries its value (see the module docstring)."""
    return getattr(tensor, "constant", None) is not None


def known_value(tensor):
    """The value a fake tensor carries (a real tensor), or None (see the module docstring)."""
    return getattr(tensor, "constant", None)


class _ValueSizes(TorchDispatchMode):
    """Raises Unsupported on the first aten op whose output size would depend on tensor values."""

    def __init__(self, name: str, allow_scalar_reads: bool, capture: Capture):
        super().__init__()
        self.name = name
        self.allow_scalar_reads = allow_scalar_reads or capture.scalars
        self.capture = capture

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and not self.allow_scalar_reads \
                and not _known_value(args[0]):
            unsupported(f"{self.name}(): a tensor's value is used as a number (a size, an arange end, "
                        "a slice bound): the result's size would be a constant of the graph"
                        + self.capture.hint("capture_scalar_outputs"))
        if _DYNAMIC_SHAPE in func.tags and not self.capture.shapes:
            index_op = func.overloadpacket in (torch.ops.aten.index, torch.ops.aten._unsafe_index)
            if not index_op or _mask_index(args[1] if len(args) > 1 else kwargs.get("indices")):
                unsupported(f"{self.name}(): the size of {func.overloadpacket.__name__}'s result "
                            "depends on tensor values" + self.capture.hint("capture_dynamic_output_shape_ops"))
        return func(*args, **kwargs)


@dataclasses.dataclass(frozen=True)
class Capture:
    """What the trace may capture as unbacked symbols: config.py's switches."""
    scalars: bool = False
    shapes: bool = False

    @classmethod
    def current(cls) -> "Capture":
        from ....config import config

        return cls(config.capture_scalar_outputs, config.capture_dynamic_output_shape_ops)

    def hint(self, switch: str) -> str:
        """The end of a refusal's reason: what would let the op into the graph."""
        from ....config import config

        if not getattr(config, switch):
            return (f" (set torch_jit_cache.config.{switch} = True, or TJC_{switch.upper()}=1, to "
                    "trace it as an unbacked symbol)")
        return ""


def refusing_value_sizes(name: str, allow_scalar_reads: bool = False, capture: Capture | None = None):
    """The context to run one example op `name` in (see the module docstring)."""
    return _ValueSizes(name, allow_scalar_reads, capture or Capture())


def judge_subscript(index, capture: Capture | None = None) -> None:
    """Refuses a subscript whose index has a slice with a tensor bound; its other 0-d tensors are
    indices of their own, read as numbers harmlessly (see the module docstring). Under
    capture_scalar_outputs the bound is still refused: torch cannot slice by a tensor bound on fake
    tensors (`x[:t]` needs an int); `x[:t.item()]` slices by an unbacked SymInt."""
    capture = capture or Capture()
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if isinstance(item, slice) and any(isinstance(b, torch.Tensor) for b in (item.start, item.stop, item.step)):
            unsupported("a slice bounded by a tensor value: the result's size would be a constant of the graph"
                        + ("; slice by t.item() instead" if capture.scalars else capture.hint("capture_scalar_outputs")))


def subscript_example(index):
    """The index the example op of a subscript runs with: each 0-d integer tensor (an index read as
    a number at call time, by the graph's own getitem/setitem) replaced by 0, which selects an
    entry of the same sizes and strides."""
    if isinstance(index, tuple):
        return tuple(subscript_example(i) for i in index)
    if isinstance(index, torch.Tensor) and index.dim() == 0 and not index.is_floating_point() \
            and not index.is_complex() and index.dtype not in _MASK_DTYPES:
        return 0
    return index
