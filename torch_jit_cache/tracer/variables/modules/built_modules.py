"""Modules that model code builds inside forward (`nn.Softmax(dim=1)(x)`), by their functional form.

Built for real from constants (torch's __init__ only stores settings), called as that form: the
table's entry, else the class's own forward inlined, its `self.setting` reads answered from the
built module's __dict__ (constants of the trace: the module is made from constants on every call).
The module object never reaches the graph or the artifact: only the ops and constant settings do.
ClassVariable.call_function asks build_module first for every class it is asked to call.
"""
from __future__ import annotations

import inspect
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

from ....guard.attribute_lookup import MISSING, is_data_descriptor, type_lookup
from ....guard.sources import AttrSource
from ....guard.trace_result import CallOutput, ConstantOutput, GuardKind, SourceOutput
from ....frontend.proxies import builtin_opaque_reason
from ..base import VariableTracker, unsupported
from ..python_objects.functions import UserFunctionVariable, UserMethodVariable
from .module_hooks import guard_no_global_hooks, refuse_global_hooks
from ..torch_objects.tensor import call_torch

_BUILT_IN_FORWARD = {
    nn.Identity: lambda tx, m, x: x,
    nn.ReLU: lambda tx, m, x: call_torch(tx, F.relu, x),
    nn.GELU: lambda tx, m, x: call_torch(tx, F.gelu, x, approximate=m.approximate),
    nn.SiLU: lambda tx, m, x: call_torch(tx, F.silu, x),
    nn.Tanh: lambda tx, m, x: call_torch(tx, torch.tanh, x),
    nn.Sigmoid: lambda tx, m, x: call_torch(tx, torch.sigmoid, x),
    nn.Softmax: lambda tx, m, x: call_torch(tx, F.softmax, x, m.dim),
    nn.LogSoftmax: lambda tx, m, x: call_torch(tx, F.log_softmax, x, m.dim),
    nn.Flatten: lambda tx, m, x: call_torch(tx, torch.flatten, x, m.start_dim, m.end_dim),
    # Losses (`CrossEntropyLoss(ignore_index=-100)(logits, labels)` in HF heads): their forward,
    # with the settings __init__ stored; a weight tensor is not a constant argument, so m.weight is None.
    nn.CrossEntropyLoss: lambda tx, m, x, y: call_torch(
        tx, F.cross_entropy, x, y, weight=None, ignore_index=m.ignore_index, reduction=m.reduction,
        label_smoothing=m.label_smoothing),
    nn.NLLLoss: lambda tx, m, x, y: call_torch(tx, F.nll_loss, x, y, weight=None, ignore_index=m.ignore_index,
                                        reduction=m.reduction),
    nn.MSELoss: lambda tx, m, x, y: call_torch(tx, F.mse_loss, x, y, reduction=m.reduction),
    nn.L1Loss: lambda tx, m, x, y: call_torch(tx, F.l1_loss, x, y, reduction=m.reduction),
}
_BUILT_IN_ARITY = {nn.CrossEntropyLoss: 2, nn.NLLLoss: 2, nn.MSELoss: 2, nn.L1Loss: 2}   # else 1


def build_module(tx, cls_var, args, kwargs):
    """`cls(*args)` for a module class of _BUILT_IN_FORWARD with constant arguments, else None."""
    cls = cls_var.value
    if not any(cls is c for c in _BUILT_IN_FORWARD) and not _inlinable_class(cls):
        return None
    if cls_var.source is None:
        unsupported(f"{cls.__name__} built from a class the frame does not reach (hooks unguarded)")
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        unsupported(f"{cls.__name__}() with non-constant arguments")
    a = [v.as_python_constant() for v in args]
    k = {key: v.as_python_constant() for key, v in kwargs.items()}
    try:
        m = cls(*a, **k)
        # The arguments by name: what makes the module again where it outlives the graph.
        init_kwargs = inspect.signature(cls).bind(*a, **k).arguments
    except Exception as e:
        unsupported(f"{cls.__name__}() raised {type(e).__name__}: {e}")
    if getattr(m, "inplace", False):
        unsupported(f"{cls.__name__}(inplace=True) built inside forward")
    if any(t is not None for t in m._buffers.values()) or any(True for _ in m.parameters()):
        unsupported(f"{cls.__name__}() built inside forward with a tensor setting")
    return BuiltModuleVariable(m, cls_var.source, init_kwargs)


# What an instance of a class built in the trace must find torch's own: making it runs torch's code
# alone, and reading it is nn.Module's protocol.
_TORCH_MADE = ("__init__", "__new__", "__getattribute__", "__getattr__", "__setattr__", "__delattr__")


def _torch_made(cls, name: str) -> bool:
    """Whether the class that gives `cls` its `name` is object or one of torch.nn's layer library."""
    owner = next(klass for klass in cls.__mro__ if name in vars(klass))
    return owner is object or owner.__module__.startswith("torch.nn.modules.")


def _inlinable_class(cls) -> bool:
    """A module class whose own Python forward is inlined when built in the trace: one of torch.nn's
    layer library (not a container, not one called opaquely), or a subclass of one, or of nn.Module,
    that writes no __init__, __new__ or attribute hook of its own (transformers'
    `SiLUActivation`: only a forward), so that building it for real at trace time runs torch's
    code alone; nn.Module's __call__; a plain forward."""
    if not isinstance(cls, type) or not issubclass(cls, nn.Module) or type(cls) is not type or \
            builtin_opaque_reason(cls) is not None:
        return False
    if not all(_torch_made(cls, name) for name in _TORCH_MADE):
        return False
    if issubclass(cls, (nn.Sequential, nn.ModuleList, nn.ModuleDict)) or cls.__call__ is not nn.Module.__call__:
        return False
    forward = getattr(cls, "forward", None)
    return isinstance(forward, types.FunctionType) and forward is not nn.Module.forward


class BuiltModuleVariable(VariableTracker):
    """A module of _BUILT_IN_FORWARD built in the trace. Calling it runs nn.Module.__call__, which
    consults torch's global hook dicts: they are guarded empty, reached through the class's source
    (`cls.__call__.__globals__`, torch.nn.modules.module's namespace)."""

    def __init__(self, module, cls_source, init_kwargs):
        super().__init__(None)
        self.module, self.cls_source, self.init_kwargs = module, cls_source, init_kwargs

    def reconstruct(self, outputs):
        # Live at a graph break (one inside its inlined forward): `cls(**settings)` again.
        if any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(type(self.module)).parameters.values()):
            unsupported(f"{type(self.module).__name__} built inside forward with *args cannot be made again")
        return outputs.once(self, lambda: CallOutput(SourceOutput(self.cls_source), tuple(self.init_kwargs),
                                                     tuple(ConstantOutput(v) for v in self.init_kwargs.values())))

    def python_type(self):
        return type(self.module)

    def call_function(self, tx, args, kwargs):
        cls = type(self.module)
        if cls in _BUILT_IN_FORWARD and (kwargs or len(args) != _BUILT_IN_ARITY.get(cls, 1)):
            unsupported(f"{type(self.module).__name__} built inside forward called with {len(args)} args")
        refuse_global_hooks(f"{cls.__name__} built inside forward called")
        guard_no_global_hooks(tx, self.cls_source)
        table = _BUILT_IN_FORWARD.get(type(self.module))
        if table is not None:
            return table(tx, self.module, *args)
        forward = type(self.module).forward
        fsrc = AttrSource(self.cls_source, "forward")
        tx.output.add_guard(fsrc, GuardKind.ID_MATCH, forward)
        return tx.call(UserFunctionVariable(forward, fsrc), [self, *args], kwargs)

    def var_getattr(self, tx, name):
        """A setting __init__ stored (`self.inplace`, `self.min_val`): a constant of the trace; a
        plain function of the class (`self._check_input_dim`): that method, guarded by identity
        where Python finds it (on the class, the instance's __dict__ holding no such name)."""
        cls, d = type(self.module), self.module.__dict__
        if name in d and not name.startswith("_"):
            return tx.wrap_constant(d[name])
        fn = type_lookup(cls, name)
        if name not in d and isinstance(fn, types.FunctionType) and not is_data_descriptor(fn):
            fsrc = AttrSource(self.cls_source, name)
            tx.output.add_guard(fsrc, GuardKind.ID_MATCH, fn)
            return UserMethodVariable(UserFunctionVariable(fn, fsrc), self)
        if fn is MISSING and any(name in d[s] and d[s][name] is None for s in ("_parameters", "_buffers")):
            return tx.wrap_constant(None)   # nn.Module.__getattr__: a parameter or buffer set to None
        unsupported(f"attribute {name!r} of {cls.__name__} built inside forward")

    def __repr__(self):
        return f"BuiltModuleVariable({type(self.module).__name__})"
