"""SymNodeVariable: a Python int, float or bool that is symbolic in the trace (a dynamic size).

Made where an op on fake tensors returns a SymInt/SymFloat/SymBool (`x.size(1)`, `x.shape`,
`T // n_head`, `T > block_size`): the value is an fx node, so the graph computes it from its inputs
at run time, and its example is the SymInt, whose hint is the size seen while tracing.

Arithmetic and comparisons on it are graph ops (operators.py); passed to a tensor op it is the
node. Where the trace needs a real Python value (a branch on `T > 8`, `range(T)`, a dict key) the
example answers with its hint and the ShapeEnv records a guard on the symbols (`s0 > 8`, `s0 == 5`)
that the entry checks in C++ (tracer/fake_shapes.py): the trace stays exact, at the price of
specializing that use.

An unbacked value (`.item()`, a nonzero count: config.capture_scalar_outputs) has no hint and no
input to guard: where the trace needs it as a real value (`if n > 3`, `range(n)`) it is a graph
break, before that instruction, and the resume function gets the value as a plain int. torch itself
answers what it can without a guard (a size that is >= 0 whatever it is: guard_size_oblivious).
"""
from __future__ import annotations

import torch

from ....guard.sources import AttrSource
from ....guard.trace_result import GuardKind
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable

SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PYTHON_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def is_symbolic(value) -> bool:
    """A symbolic scalar, or a tuple (torch.Size) / list holding one."""
    if isinstance(value, SYMBOLIC_TYPES):
        return not _is_constant_symbol(value)
    if isinstance(value, (tuple, list)):
        return any(is_symbolic(v) for v in value)
    return False


def folded(value):
    """A symbolic scalar whose expression is a number (`s0 * 0.0`, a specialized size) as that
    Python number (no guard: it holds for every value of the symbols), else `value`."""
    if isinstance(value, SYMBOLIC_TYPES) and _is_constant_symbol(value):
        return _PYTHON_TYPES[type(value)](value.node.expr)
    return value


def _is_constant_symbol(value) -> bool:
    # A SymInt whose expression is a number (a specialized size) is still a SymInt object.
    return value.node.expr.is_number if hasattr(value.node, "expr") else False


class SymNodeVariable(VariableTracker):
    def __init__(self, output, node, example):
        super().__init__(None)
        self.output, self.node, self.example = output, node, example

    def python_type(self):
        return _PYTHON_TYPES[type(self.example)]

    def as_python_constant(self):
        """The value as a Python constant: specializes the symbols to the traced values (the
        ShapeEnv guards them), as torch.compile does where code needs a real int."""
        return _concrete(self.python_type(), self.example, "needed as a constant")

    def as_fx_arg(self):
        return self.node

    def as_example(self):
        return self.example

    def reconstruct(self, outputs):
        return outputs.graph_output(self.node)

    def truthy(self, tx) -> bool:
        return _concrete(bool, self.example, "branched on")

    def call_method(self, tx, name, args, kwargs):
        if name in ("__index__", "__int__") and not args and not kwargs:
            return _constant(as_int(self.example, f"{name}()"))
        unsupported(f"method {name} of a symbolic {self.python_type().__name__}")

    def __repr__(self):
        return f"SymNodeVariable({self.example})"


class SymbolicSliceVariable(VariableTracker):
    """`slice(a, b, c)` with a symbolic bound: a graph argument (fx keeps slices of nodes), or a
    constant slice where one is needed (specialized, as above)."""

    def __init__(self, parts):
        super().__init__(None)
        self.parts = list(parts)

    def python_type(self):
        return slice

    def as_python_constant(self):
        return slice(*[p.as_python_constant() for p in self.parts])

    def as_fx_arg(self):
        return slice(*[p.as_fx_arg() for p in self.parts])

    def as_example(self):
        return slice(*[p.as_example() for p in self.parts])

    def reconstruct(self, outputs):
        unsupported("a slice with a symbolic bound live at a graph break")

    def __repr__(self):
        return f"SymbolicSliceVariable({self.parts})"


def _concrete(kind, value, use: str):
    """kind(value) for a symbolic value: a guard on backed symbols; a graph break where the value
    depends on data (an unbacked symbol: no guard can check it)."""
    try:
        return kind(value)
    except Exception as e:  # noqa: BLE001 - GuardOnDataDependentSymNode, or otherwise undecidable
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

        if isinstance(e, GuardOnDataDependentSymNode):
            unsupported(f"a data-dependent {kind.__name__} {use} ({value}: from .item(), .tolist() or a "
                        "value-dependent size): the graph cannot decide it without the data")
        unsupported(f"a symbolic {kind.__name__} {use}: {type(e).__name__}: {e}")


def as_int(value, use: str) -> int:
    """An int for `value` (an int or SymInt): see _concrete."""
    return value if type(value) is int else _concrete(int, value, f"needed as an int by {use}")


def _constant(value):
    return ConstantVariable(value)


def wrap_symbolic(output, node, value) -> VariableTracker:
    """The tracker for a scalar op result: symbolic, or a constant when it is a number."""
    number = folded(value)
    if number is not value:
        return _constant(number)
    return SymNodeVariable(output, node, value)


def _is_unspecialized_attribute(out, source) -> bool:
    """Whether `source` is an attribute of an object whose changing ints become symbols: any
    traced object's but an nn.Module's (VariableTracker.specializes_int_attributes)."""
    if not isinstance(source, AttrSource):
        return False
    owner = out.by_source.get(source.base)
    return owner is not None and not owner.specializes_int_attributes


def wrap_dynamic_scalar(tx, value, source, g):
    """An int or float the frame plan makes dynamic (FramePlan.scalar_is_dynamic): a graph input,
    read at call time, guarded by its type. None where it stays a constant (the plan keeps it
    static, or the shape environment specialized it: ints 0 and 1)."""
    out = tx.output
    plan = out.frame_plan
    if not (g.enabled and plan is not None and plan.scalar_is_dynamic(
            source, value, is_argument=source.is_frame_input(), is_attribute=_is_unspecialized_attribute(out, source))
            and plan.symbolic):
        return None
    make = out.fake_shapes.symint if type(value) is int else out.fake_shapes.symfloat
    symbolic = make(value, source)
    if not isinstance(symbolic, SYMBOLIC_TYPES):
        return None
    g(GuardKind.TYPE_MATCH, type(value))
    return SymNodeVariable(out, out.add_placeholder(source, symbolic), symbolic)
