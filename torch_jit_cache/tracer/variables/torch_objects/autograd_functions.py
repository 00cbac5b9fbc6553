"""`Fn.apply(*args)` of a custom torch.autograd.Function where autograd records nothing.

When grad mode is off, or no tensor argument requires grad, `Function.apply` runs `forward` (and
`setup_context`, where the class defines one) and returns forward's outputs as they are: no
backward node is made, so `backward` can never run and the `ctx` object dies with the call. The
trace then inlines `forward` as Python, with a stand-in `ctx` (AutogradCtxVariable) that keeps
what forward stores on it for its own reads (`ctx.scale = 2.0` then `ctx.scale`), answers
`ctx.needs_input_grad` from the arguments, and makes the calls that only matter to a backward
(`save_for_backward`, `mark_non_differentiable`, `set_materialize_grads`) do nothing. That is BLOOM's GeLUFunction in inference.

Refused (a graph break at the call, which runs as written): a call where autograd would record
the function (grad mode on and a tensor argument that requires grad: its backward must run, and
inlining forward would differentiate forward's ops instead), forward or setup_context not plain
Python functions, keyword arguments without setup_context (Function.apply refuses them too),
`ctx.mark_dirty` (in-place outputs), a forward whose output requires grad (it read a tensor that
requires grad other than through its arguments: eager's output would not), and a forward that
returns one of its own arguments (apply returns a new tensor object for it).

The class's forward and setup_context are guarded by identity where they are read
(`G['Fn'].forward`), the class itself where the frame reads it.
"""
from __future__ import annotations

import inspect
import types

import torch

from ....guard.attribute_lookup import type_lookup
from ....guard.sources import AttrSource
from ..base import MethodVariable, VariableTracker, unsupported
from ..constant import ConstantVariable, is_constant_value
from ..collections.containers import TupleVariable
from .tensor import TensorVariable

_APPLY = vars(torch.autograd.Function)["apply"]
_NO_SETUP_CONTEXT = torch.autograd.function._SingleLevelFunction.setup_context
# FunctionCtx's methods that matter only to a backward: they do nothing where none runs.
_BACKWARD_ONLY = frozenset({"save_for_backward", "mark_non_differentiable", "set_materialize_grads",
                            "save_for_forward", "mark_shared_storage"})


def _static_function(cls, name: str):
    """`cls.name` as Python finds it in the MRO, a staticmethod's function unwrapped (MISSING where
    the class has none)."""
    raw = type_lookup(cls, name)
    return raw.__func__ if isinstance(raw, staticmethod) else raw


def is_function_apply(raw, cls) -> bool:
    """`raw`, found in `cls`'s MRO under "apply", is Function.apply, on a subclass of Function."""
    return raw is _APPLY and isinstance(cls, type) and issubclass(cls, torch.autograd.Function) \
        and cls is not torch.autograd.Function


class AutogradFunctionApplyVariable(VariableTracker):
    """`Fn.apply`, read through the class's source `cls_source` (`G['Fn']`); its own source is
    `G['Fn'].apply`, what a break rebuilds it from."""

    def __init__(self, cls: type, cls_source):
        super().__init__(AttrSource(cls_source, "apply") if cls_source is not None else None)
        self.cls, self.cls_source = cls, cls_source

    def python_type(self):
        return types.MethodType

    def _static(self, tx, name):
        fn = _static_function(self.cls, name)
        if not isinstance(fn, types.FunctionType):
            unsupported(f"{self.cls.__name__}.{name} is not a Python function")
        return tx.wrap(fn, AttrSource(self.cls_source, name))

    def call_function(self, tx, args, kwargs):
        name = self.cls.__qualname__
        if self.source is None:
            unsupported(f"{name}.apply with no source for its class")
        tensors = [a for a in [*args, *kwargs.values()] if isinstance(a, TensorVariable)]
        if torch.is_grad_enabled() and any(t.example.requires_grad for t in tensors):
            unsupported(f"{name}.apply on tensors that require grad (its backward must run)")
        ctx = AutogradCtxVariable(args)
        if _static_function(self.cls, "setup_context") is _NO_SETUP_CONTEXT:
            if kwargs:
                unsupported(f"{name}.apply with keyword arguments and no setup_context")
            out = tx.call(self._static(tx, "forward"), [ctx, *args], {})
        else:
            # Function.apply binds forward's defaults first: forward and setup_context get them all.
            forward = self._static(tx, "forward")
            bound = _bind_defaults(_static_function(self.cls, "forward"), name, list(args), kwargs)
            out = tx.call(forward, bound, {})
            tx.call(self._static(tx, "setup_context"), [ctx, TupleVariable(list(bound)), out], {})
        results = out.unpack(tx) if isinstance(out, TupleVariable) else [out]
        for r in results:
            if any(r is a for a in args):
                unsupported(f"{name}.forward returns one of its arguments")
            if isinstance(r, TensorVariable) and r.example.requires_grad:
                unsupported(f"{name}.forward's output requires grad where apply's would not")
        return out

    def __repr__(self):
        return f"AutogradFunctionApplyVariable({self.cls.__qualname__})"


def _bind_defaults(forward, name, args: list, kwargs: dict) -> list:
    """`forward`'s arguments, positionally, with its defaults filled in (Function.apply's
    bind_default_args); a default must be a constant (read as the function's own __defaults__)."""
    params = list(inspect.signature(forward).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params) or len(args) > len(params):
        unsupported(f"{name}.forward's parameters are not plain positional ones for {len(args)} arguments")
    out, rest = list(args), dict(kwargs)
    for p in params[len(args):]:
        if p.name in rest:
            out.append(rest.pop(p.name))
        elif p.default is not p.empty and is_constant_value(p.default):
            out.append(ConstantVariable(p.default))
        else:
            unsupported(f"{name}.apply without {p.name!r}, whose default is not a constant")
    if rest:
        unsupported(f"{name}.apply with keywords forward does not take: {sorted(rest)}")
    return out


class AutogradCtxVariable(VariableTracker):
    """The `ctx` of a forward that no backward will read (AutogradFunctionApplyVariable)."""

    def __init__(self, args):
        super().__init__(None)
        self.needs = [isinstance(a, TensorVariable) and a.example.requires_grad for a in args]
        self.attrs: dict = {}

    def python_type(self):
        return torch.autograd.function.FunctionCtx

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "needs_input_grad":
            return TupleVariable([ConstantVariable(n) for n in self.needs])
        if name in _BACKWARD_ONLY:
            return MethodVariable(self, name)   # `ctx.saved_tensors` is for backward: refused
        unsupported(f"attribute {name!r} of an autograd.Function's ctx")

    def var_setattr(self, tx, name, value):
        if hasattr(torch.autograd.function.BackwardCFunction, name):
            unsupported(f"store to ctx.{name}, an attribute of autograd's own")
        self.attrs[name] = value

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            unsupported(f"ctx.{name} with keyword arguments")
        if name in _BACKWARD_ONLY:
            return ConstantVariable(None)
        unsupported(f"ctx.{name}()")

    def __repr__(self):
        return "AutogradCtxVariable()"
