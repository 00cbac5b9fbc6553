"""Modules that model code builds inside forward (`nn.Softmax(dim=1)(x)`), by their functional form.

Built for real from constants (torch's __init__ only stores settings), called as that form. The
module object never reaches the graph or the artifact: only the op and its constant settings do.
ClassVariable.call_function asks build_module first for every class it is asked to call.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...sources import AttrSource, ItemSource
from ...trace_result import GuardKind
from .base import VariableTracker, unsupported
from .module_hooks import GLOBAL_HOOK_DICTS
from .tensor import call_torch

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
    if not any(cls is c for c in _BUILT_IN_FORWARD):
        return None
    if cls_var.source is None:
        unsupported(f"{cls.__name__} built from a class the frame does not reach (hooks unguarded)")
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        unsupported(f"{cls.__name__}() with non-constant arguments")
    try:
        m = cls(*[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()})
    except Exception as e:
        unsupported(f"{cls.__name__}() raised {type(e).__name__}: {e}")
    if getattr(m, "inplace", False):
        unsupported(f"{cls.__name__}(inplace=True) built inside forward")
    if any(t is not None for t in m._buffers.values()) or any(True for _ in m.parameters()):
        unsupported(f"{cls.__name__}() built inside forward with a tensor setting")
    return BuiltModuleVariable(m, cls_var.source)


class BuiltModuleVariable(VariableTracker):
    """A module of _BUILT_IN_FORWARD built in the trace. Calling it runs nn.Module.__call__, which
    consults torch's global hook dicts: they are guarded empty, reached through the class's source
    (`cls.__call__.__globals__`, torch.nn.modules.module's namespace)."""

    def __init__(self, module, cls_source):
        super().__init__(None)
        self.module, self.cls_source = module, cls_source

    def python_type(self):
        return type(self.module)

    def call_function(self, tx, args, kwargs):
        from torch.nn.modules import module as mm
        if kwargs or len(args) != _BUILT_IN_ARITY.get(type(self.module), 1):
            unsupported(f"{type(self.module).__name__} built inside forward called with {len(args)} args")
        if any(getattr(mm, name, None) for name in GLOBAL_HOOK_DICTS):
            unsupported("global module hooks are registered")
        namespace = AttrSource(AttrSource(self.cls_source, "__call__"), "__globals__")
        for name in GLOBAL_HOOK_DICTS:
            tx.output.add_guard(ItemSource(namespace, name), GuardKind.LENGTH, 0)
        return _BUILT_IN_FORWARD[type(self.module)](tx, self.module, *args)

    def __repr__(self):
        return f"BuiltModuleVariable({type(self.module).__name__})"
