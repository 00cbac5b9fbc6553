"""NNModuleVariable: torch.nn.Module instances read from the frame.

User modules are traced by inlining `type(m).forward`. Built-in leaf modules (Linear, Conv2d,
BatchNorm2d, ...) become calls to their torch.nn.functional form with the parameters and buffers
as graph inputs (read through AttrSource, so codegen loads them from the frame at call time).
Containers (Sequential, ModuleList, ModuleDict) are unrolled.
"""
from __future__ import annotations

import inspect
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...sources import AttrSource, ItemSource
from ...trace_result import GuardKind
from .base import VariableTracker, unsupported
from .constant import ConstantVariable
from .containers import IteratorVariable, ListVariable, TupleVariable
from .functions import UserFunctionVariable, UserMethodVariable
from .tensor import call_op


def _fn(tx, fn, *args, **kwargs):
    wrap = lambda v: v if isinstance(v, VariableTracker) else ConstantVariable(v)  # noqa: E731
    return call_op(tx, fn, [wrap(a) for a in args], {k: wrap(v) for k, v in kwargs.items()})


def _linear(tx, mv, m, x):
    return _fn(tx, F.linear, x, mv.attr(tx, "weight"), mv.attr(tx, "bias"))


def _conv(fn):
    def run(tx, mv, m, x):
        if m.padding_mode != "zeros":
            unsupported(f"{type(m).__name__} with padding_mode={m.padding_mode!r}")
        return _fn(tx, fn, x, mv.attr(tx, "weight"), mv.attr(tx, "bias"), m.stride, m.padding,
                   m.dilation, m.groups)
    return run


def _batch_norm(tx, mv, m, x):
    # Mirrors torch.nn.modules.batchnorm._BatchNorm.forward (torch 2.x).
    if m.momentum is None and m.training and m.track_running_stats:
        unsupported("BatchNorm with momentum=None (cumulative average) in training mode")
    factor = 0.0 if m.momentum is None else m.momentum
    if m.training and m.track_running_stats and m.num_batches_tracked is not None:
        call_op(tx, "add_", [mv.attr(tx, "num_batches_tracked"), ConstantVariable(1)], {},
                method=True)
    bn_training = True if m.training else (m.running_mean is None and m.running_var is None)
    use_stats = not m.training or m.track_running_stats
    mean = mv.attr(tx, "running_mean") if use_stats else ConstantVariable(None)
    var = mv.attr(tx, "running_var") if use_stats else ConstantVariable(None)
    return _fn(tx, F.batch_norm, x, mean, var, mv.attr(tx, "weight"), mv.attr(tx, "bias"),
               bn_training, factor, m.eps)


def _layer_norm(tx, mv, m, x):
    return _fn(tx, F.layer_norm, x, tuple(m.normalized_shape), mv.attr(tx, "weight"),
               mv.attr(tx, "bias"), m.eps)


def _gru_cell(tx, mv, m, x, hx=None):
    # Mirrors torch.nn.GRUCell.forward for batched input with a given hidden state.
    if hx is None or (isinstance(hx, ConstantVariable) and hx.as_python_constant() is None):
        unsupported("GRUCell without an explicit hidden state")
    if x.example.dim() != 2:
        unsupported("GRUCell with unbatched input")
    return _fn(tx, torch.gru_cell, x, hx, mv.attr(tx, "weight_ih"), mv.attr(tx, "weight_hh"),
               mv.attr(tx, "bias_ih"), mv.attr(tx, "bias_hh"))


def _embedding(tx, mv, m, x):
    if m.max_norm is not None:
        unsupported("Embedding with max_norm (renormalizes the weight in place)")
    return _fn(tx, F.embedding, x, mv.attr(tx, "weight"), m.padding_idx, None, m.norm_type,
               m.scale_grad_by_freq, m.sparse)


_LEAF_ARITY = {nn.GRUCell: 2}  # positional arguments a leaf accepts (default 1)

LEAF_MODULES = {
    nn.Linear: _linear,
    nn.GRUCell: _gru_cell,
    nn.Conv1d: _conv(F.conv1d), nn.Conv2d: _conv(F.conv2d), nn.Conv3d: _conv(F.conv3d),
    nn.BatchNorm1d: _batch_norm, nn.BatchNorm2d: _batch_norm, nn.BatchNorm3d: _batch_norm,
    nn.LayerNorm: _layer_norm,
    nn.Embedding: _embedding,
    nn.Dropout: lambda tx, mv, m, x: _fn(tx, F.dropout, x, m.p, m.training, m.inplace),
    nn.ReLU: lambda tx, mv, m, x: _fn(tx, F.relu, x, inplace=m.inplace),
    nn.GELU: lambda tx, mv, m, x: _fn(tx, F.gelu, x, approximate=m.approximate),
    nn.SiLU: lambda tx, mv, m, x: _fn(tx, F.silu, x, inplace=m.inplace),
    nn.LeakyReLU: lambda tx, mv, m, x: _fn(tx, F.leaky_relu, x, m.negative_slope, m.inplace),
    nn.Tanh: lambda tx, mv, m, x: _fn(tx, torch.tanh, x),
    nn.Sigmoid: lambda tx, mv, m, x: _fn(tx, torch.sigmoid, x),
    nn.Softmax: lambda tx, mv, m, x: _fn(tx, F.softmax, x, m.dim),
    nn.LogSoftmax: lambda tx, mv, m, x: _fn(tx, F.log_softmax, x, m.dim),
    nn.Identity: lambda tx, mv, m, x: x,
    nn.Flatten: lambda tx, mv, m, x: _fn(tx, torch.flatten, x, m.start_dim, m.end_dim),
    nn.MaxPool2d: lambda tx, mv, m, x: _fn(tx, F.max_pool2d, x, m.kernel_size, m.stride,
                                           m.padding, m.dilation, m.ceil_mode,
                                           m.return_indices),
    nn.AvgPool2d: lambda tx, mv, m, x: _fn(tx, F.avg_pool2d, x, m.kernel_size, m.stride,
                                           m.padding, m.ceil_mode, m.count_include_pad,
                                           m.divisor_override),
    nn.AdaptiveAvgPool2d: lambda tx, mv, m, x: _fn(tx, F.adaptive_avg_pool2d, x,
                                                   m.output_size),
}
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


# The hook dicts nn.Module.__call__ consults: on the instance, and module-global ones in
# torch.nn.modules.module. An inlined call runs `forward` alone, so the trace is valid only while
# all of them are empty; each is guarded (LENGTH 0), so a hook registered after compiling makes a
# miss and the retrace falls back (issue 13).
_MODULE_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                      "_global_backward_pre_hooks")


def _has_hooks(m: nn.Module) -> bool:
    from torch.nn.modules import module as mm
    return any(getattr(m, name, None) for name in _MODULE_HOOK_DICTS) or \
        any(getattr(mm, name, None) for name in _GLOBAL_HOOK_DICTS)


def _guard_no_hooks(tx, mv) -> None:
    """Guards that the hook dicts `mv.module.__call__` would consult are still empty."""
    out = tx.output
    for name in _MODULE_HOOK_DICTS:
        if name in vars(mv.module):
            out.add_guard(AttrSource(mv.source, name), GuardKind.LENGTH, 0)
    # The global dicts are reached from the frame through the module's class: nn.Module.__call__'s
    # globals are torch.nn.modules.module's namespace. Once per trace is enough.
    if not getattr(out, "global_hooks_guarded", False):
        out.global_hooks_guarded = True
        namespace = AttrSource(AttrSource(AttrSource(mv.source, "__class__"), "__call__"), "__globals__")
        for name in _GLOBAL_HOOK_DICTS:
            out.add_guard(ItemSource(namespace, name), GuardKind.LENGTH, 0)


class NNModuleVariable(VariableTracker):
    def __init__(self, module: nn.Module, source):
        super().__init__(source)
        self.module = module

    def python_type(self):
        return type(self.module)

    def attr(self, tx, name):
        return self.var_getattr(tx, name)

    def _child_source(self, name):
        return AttrSource(self.source, name)

    def var_getattr(self, tx, name):
        m = self.module
        try:
            static = inspect.getattr_static(type(m), name)
        except AttributeError:
            static = None
        if isinstance(static, property):
            fget = UserFunctionVariable(static.fget, None)
            return tx.call(fget, [self], {})
        d = m.__dict__
        if name in d:
            return tx.wrap(d[name], self._child_source(name))
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, {}):
                return tx.wrap(d[store][name], self._child_source(name))
        if isinstance(static, types.FunctionType):
            fsrc = AttrSource(self._child_source(name), "__func__")
            tx.output.add_guard(fsrc, GuardKind.ID_MATCH, static)  # as for forward in _forward
            return UserMethodVariable(UserFunctionVariable(static, fsrc), self)
        if isinstance(static, staticmethod):
            return tx.wrap(static.__func__, self._child_source(name))
        if static is not None and not callable(static) and not hasattr(static, "__get__"):
            return tx.wrap(static, self._child_source(name))
        unsupported(f"attribute {name!r} of module {type(m).__name__}")

    # -- containers -----------------------------------------------------------------------------
    def _children(self, tx):
        if not isinstance(self.module, _CONTAINERS):
            unsupported(f"iteration over module {type(self.module).__name__}")
        tx.output.add_guard(self.source, GuardKind.LENGTH, len(self.module))
        return [(k, self.var_getattr(tx, k)) for k in self.module._modules]

    def unpack(self, tx):
        children = self._children(tx)
        if isinstance(self.module, nn.ModuleDict):
            return [ConstantVariable(k) for k, _ in children]
        return [v for _, v in children]

    def truthy(self, tx):
        if isinstance(self.module, _CONTAINERS):
            return bool(self._children(tx))
        return True

    def getitem(self, tx, key):
        k = key.as_python_constant()
        children = self._children(tx)
        if isinstance(self.module, nn.ModuleDict):
            if k not in self.module._modules:
                unsupported(f"KeyError {k!r}")
            return self.var_getattr(tx, k)
        if isinstance(k, int) and -len(children) <= k < len(children):
            return children[k][1]
        unsupported(f"index {k!r} into {type(self.module).__name__}")

    def call_method(self, tx, name, args, kwargs):
        if isinstance(self.module, _CONTAINERS):
            if name == "__len__":
                return ConstantVariable(len(self._children(tx)))
            if name in ("keys", "values", "items", "children") and \
                    (isinstance(self.module, nn.ModuleDict) or name == "children"):
                pairs = self._children(tx)
                if name == "keys":
                    return ListVariable([ConstantVariable(k) for k, _ in pairs])
                if name in ("values", "children"):
                    return IteratorVariable([v for _, v in pairs])
                return ListVariable([TupleVariable([ConstantVariable(k), v]) for k, v in pairs])
            if name == "__getitem__":
                return self.getitem(tx, args[0])
        if name == "forward":
            return self._forward(tx, args, kwargs)
        return tx.call(self.var_getattr(tx, name), args, kwargs)

    # -- calls ----------------------------------------------------------------------------------
    def call_function(self, tx, args, kwargs):
        cls = type(self.module)
        if cls.__call__ is not nn.Module.__call__:
            unsupported(f"module {cls.__name__} overrides __call__")
        if _has_hooks(self.module):
            unsupported(f"module {cls.__name__} has hooks")
        _guard_no_hooks(tx, self)
        return self._forward(tx, args, kwargs)

    def _forward(self, tx, args, kwargs):
        m, cls = self.module, type(self.module)
        if cls is nn.Sequential:
            if kwargs or len(args) != 1:
                unsupported("Sequential called with more than one argument")
            x = args[0]
            for child in self.unpack(tx):
                x = tx.call(child, [x], {})
            return x
        leaf = LEAF_MODULES.get(cls)
        if leaf is not None:
            if kwargs or not 1 <= len(args) <= _LEAF_ARITY.get(cls, 1):
                unsupported(f"{cls.__name__} called with {len(args)} args and {list(kwargs)}")
            return leaf(tx, self, m, *args)
        if cls.__module__.startswith("torch.nn"):
            unsupported(f"built-in module {cls.__name__} is not supported")
        # `m.forward = fn` on the instance wins over the class's forward, as in Python.
        if "forward" in vars(m):
            return tx.call(tx.wrap(vars(m)["forward"], AttrSource(self.source, "forward")), args, kwargs)
        forward = inspect.getattr_static(cls, "forward", None)
        if not isinstance(forward, types.FunctionType):
            unsupported(f"module {cls.__name__} has no Python forward")
        fsrc = AttrSource(AttrSource(self.source, "forward"), "__func__")
        # `m.forward.__func__ is forward`: fails once the instance gets a forward of its own (a plain
        # function has no __func__) or the class's forward is replaced.
        tx.output.add_guard(fsrc, GuardKind.ID_MATCH, forward)
        return tx.call(UserFunctionVariable(forward, fsrc), [self, *args], kwargs)

    def __repr__(self):
        return f"NNModuleVariable({type(self.module).__name__} from {self.source})"
