"""ConstantVariable: an immutable Python value known while tracing (int, float, str, None, ...)."""
from __future__ import annotations

import operator
import types

import torch

from ...trace_result import ConstantOutput
from .base import TRACED_RAISES, VariableTracker, unsupported

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
# Methods on constants that are pure and safe to evaluate while tracing.
_SAFE_TYPES = (int, float, bool, str, bytes, complex, type(None), slice, type(Ellipsis))


class ConstantVariable(VariableTracker):
    def __init__(self, value, source=None):
        super().__init__(source)
        if type(value) in _SYMBOLIC:   # a symbolic size must stay a node (symbolic.py)
            raise AssertionError(f"ConstantVariable of a symbolic value {value!r} (tracer bug)")
        self.value = value

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def reconstruct(self, outputs):
        return ConstantOutput(self.value)

    def truthy(self, tx) -> bool:
        return bool(self.value)

    def var_getattr(self, tx, name):
        if isinstance(self.value, _SAFE_TYPES) or _is_dtype(self.value):
            try:
                attr = getattr(self.value, name)
            except AttributeError:
                unsupported(f"{type(self.value).__name__} has no attribute {name!r}")
            if callable(attr):
                return BoundConstantMethod(self, name)
            return ConstantVariable(attr)
        if isinstance(self.value, types.CodeType) and name.startswith("co_") and \
                not callable(getattr(self.value, name, None)):
            # A code object is immutable: its co_* fields (co_varnames, co_argcount) are constants.
            return wrap_constant_result(getattr(self.value, name))
        unsupported(f"attribute {name!r} of constant {self.value!r}")

    def call_function(self, tx, args, kwargs):
        # torch.finfo(dtype), torch.iinfo(dtype), torch.device('cpu'), torch.Size([2, 3]):
        # immutable values, folded
        # (their arguments are constants the trace has guarded).
        if _foldable_class(self.value) and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            try:
                return ConstantVariable(self.value(*[a.as_python_constant() for a in args],
                                                   **{k: v.as_python_constant() for k, v in kwargs.items()}))
            except Exception as e:
                unsupported(f"{self.value.__name__}() raised {e!r}")
        if isinstance(self.value, type) and self.value in TRACED_RAISES and not kwargs and \
                all(a.is_python_constant() for a in args):   # IndexError("..."), to be raised
            return ConstantVariable(self.value(*[a.as_python_constant() for a in args]))
        if isinstance(self.value, type):   # nn.Softmax(dim=1) and friends (nn_module.py)
            from .nn_module import build_module
            built = build_module(tx, self, args, kwargs)
            if built is not None:
                return built
        return super().call_function(tx, args, kwargs)

    def unpack(self, tx):
        if isinstance(self.value, (str, bytes, tuple, range, frozenset)):
            return [wrap_constant_result(c) for c in self.value]
        unsupported(f"iteration over constant {self.value!r}")

    def __repr__(self):
        return f"ConstantVariable({self.value!r})"


class BoundConstantMethod(VariableTracker):
    """`'a,b'.split` and friends: evaluated when every argument is a constant."""

    def __init__(self, obj: ConstantVariable, name: str):
        super().__init__(None)
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        if self.name == "join" and isinstance(self.obj.value, str) and len(args) == 1 and not kwargs \
                and not args[0].is_python_constant():   # " ".join(a generator or list of strings)
            args = [ConstantVariable(tuple(i.as_python_constant() for i in args[0].unpack(tx)))]
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported(f"{type(self.obj.value).__name__}.{self.name} on non-constant arguments")
        result = getattr(self.obj.value, self.name)(
            *[a.as_python_constant() for a in args],
            **{k: v.as_python_constant() for k, v in kwargs.items()})
        return wrap_constant_result(result)


def _is_dtype(value) -> bool:
    import torch
    return isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format,
                              torch.finfo, torch.iinfo, torch.Size))   # immutable torch values


def _foldable_class(value) -> bool:
    import torch
    return any(value is c for c in (torch.finfo, torch.iinfo, torch.device, torch.Size))


def is_constant_value(value) -> bool:
    """Immutable values a ConstantVariable may hold."""
    if isinstance(value, _SAFE_TYPES) or _is_dtype(value):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(is_constant_value(v) for v in value)
    return False


def wrap_constant_result(value) -> VariableTracker:
    """Wrap the result of evaluating a pure function on constants."""
    from .containers import ListVariable, TupleVariable
    if type(value) is tuple:
        return TupleVariable([wrap_constant_result(v) for v in value])
    if isinstance(value, list):
        return ListVariable([wrap_constant_result(v) for v in value])
    if type(value) is set and all(is_constant_value(v) for v in value):
        from .sets import SetVariable
        return SetVariable(value)
    if is_constant_value(value):
        return ConstantVariable(value)
    unsupported(f"a constant computation produced a {type(value).__name__}")


BINARY_OPERATORS = {
    "+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift,
    "@": operator.matmul, "*": operator.mul, "%": operator.mod, "|": operator.or_,
    "**": operator.pow, ">>": operator.rshift, "-": operator.sub, "/": operator.truediv,
    "^": operator.xor,
    "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv, "<<=": operator.ilshift,
    "@=": operator.imatmul, "*=": operator.imul, "%=": operator.imod, "|=": operator.ior,
    "**=": operator.ipow, ">>=": operator.irshift, "-=": operator.isub,
    "/=": operator.itruediv, "^=": operator.ixor,
}
COMPARE_OPERATORS = {"<": operator.lt, "<=": operator.le, "==": operator.eq,
                     "!=": operator.ne, ">": operator.gt, ">=": operator.ge}
