"""NNModuleVariable: torch.nn.Module instances read from the frame.

User modules are traced by inlining `type(m).forward`. Built-in leaf modules (Linear, Conv2d,
BatchNorm2d, ...) become calls to their torch.nn.functional form with the parameters and buffers
as graph inputs (read through AttrSource, so codegen loads them from the frame at call time).
Other torch.nn modules (GroupNorm, Hardswish, ReLU6, ...) are traced as user modules are, by
inlining their own forward (builtin_forward_refusal says which are not). Containers (Sequential,
ModuleList, ModuleDict) are unrolled. The built-in modules of
proxies.OPAQUE_BUILTIN_MODULES (LSTM, MultiheadAttention, the Transformer family) and classes
marked with tjc.allow_in_graph are called as one opaque node through a proxy (opaque_calls.py).
A compiled module (tjc.compile) is traced as the module it wraps, and one compiled in place
(tjc.compile_) as itself, their compiled call guarded by identity (_compiled_call_target).

`self.name = v` is recorded for replay with nn.Module.__setattr__ (side_effects.py), where its
outcome is known: a plain attribute (into __dict__), or a tensor (or None) replacing a buffer
(re-registered in _buffers). Assigning a Parameter or a module, storing over a parameter or a
submodule, and nn.Module's own state (training, the hook dicts, forward) are refused.
"""
from __future__ import annotations

import inspect
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

from .... import runtime
from ....guard.attribute_lookup import MISSING, Where, lookup, type_lookup
from ....frontend.module_wrapper import CompiledModule, own_compiled_call, unwrap
from ....frontend.proxies import builtin_opaque_reason, is_allowed_in_graph
from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import GuardKind, SourceOutput
from ..python_objects.attribute import _pin_keys, delete_attribute, has_attribute, read_attribute, store_attribute
from ..base import MethodVariable, TracedAttributeError, VariableTracker, catching_raise, traced, unsupported
from ..constant import ConstantVariable
from ..collections.containers import ListVariable, TupleVariable
from .module_list_slices import ModuleListSliceVariable
from ..collections.iterators import IteratorVariable
from ..python_objects.functions import UserFunctionVariable
from .module_hooks import call_with_hooks, guard_no_global_hooks, refuse_global_hooks
from ..python_objects.object_protocol import module_getattr
from .module_getattribute import (hooked_call, hooked_forward, hooked_getattr, object_getattr, own_getattribute, refuse_walk,
                                  module_getattr as traced_module_getattr)
from .module_sources import class_source, state_source, state_value, store_source
from .opaque_calls import call_opaque_module
from .parametrized_modules import PARAMETRIZATION_MODULES, parametrized_original
from ..torch_objects.tensor import TensorVariable, call_op, call_torch


def _linear(tx, mv, m, x):
    return call_torch(tx, F.linear, x, mv.attr(tx, "weight"), mv.attr(tx, "bias"))


def _conv(fn):
    def run(tx, mv, m, x):
        if m.padding_mode != "zeros":
            unsupported(f"{type(mv.module).__name__} with padding_mode={m.padding_mode!r}")
        return call_torch(tx, fn, x, mv.attr(tx, "weight"), mv.attr(tx, "bias"), m.stride, m.padding,
                   m.dilation, m.groups)
    return run


def _batch_norm(tx, mv, m, x):
    # Mirrors torch.nn.modules.batchnorm._BatchNorm.forward (torch 2.x).
    if m.momentum is None and m.training and m.track_running_stats:
        unsupported("BatchNorm with momentum=None (cumulative average) in training mode")
    factor = 0.0 if m.momentum is None else m.momentum
    if m.training and m.track_running_stats:
        # The graph updates the running stats in place: two names for one BatchNorm (in another
        # instance) would be two graph inputs aliasing one buffer.
        mv.require_identity()
    if m.training and m.track_running_stats and m.num_batches_tracked is not None:
        call_op(tx, "add_", [mv.attr(tx, "num_batches_tracked"), ConstantVariable(1)], {},
                method=True)
    bn_training = True if m.training else (m.running_mean is None and m.running_var is None)
    use_stats = not m.training or m.track_running_stats
    mean = mv.attr(tx, "running_mean") if use_stats else ConstantVariable(None)
    var = mv.attr(tx, "running_var") if use_stats else ConstantVariable(None)
    return call_torch(tx, F.batch_norm, x, mean, var, mv.attr(tx, "weight"), mv.attr(tx, "bias"),
               bn_training, factor, m.eps)


def _layer_norm(tx, mv, m, x):
    return call_torch(tx, F.layer_norm, x, tuple(m.normalized_shape), mv.attr(tx, "weight"),
               mv.attr(tx, "bias"), m.eps)


def _gru_cell(tx, mv, m, x, hx=None):
    # Mirrors torch.nn.GRUCell.forward for batched input with a given hidden state.
    if hx is None or (isinstance(hx, ConstantVariable) and hx.as_python_constant() is None):
        unsupported("GRUCell without an explicit hidden state")
    if x.example.dim() != 2:
        unsupported("GRUCell with unbatched input")
    return call_torch(tx, torch.gru_cell, x, hx, mv.attr(tx, "weight_ih"), mv.attr(tx, "weight_hh"),
               mv.attr(tx, "bias_ih"), mv.attr(tx, "bias_hh"))


def _embedding(tx, mv, m, x):
    if m.max_norm is not None:
        unsupported("Embedding with max_norm (renormalizes the weight in place)")
    return call_torch(tx, F.embedding, x, mv.attr(tx, "weight"), m.padding_idx, None, m.norm_type,
               m.scale_grad_by_freq, m.sparse)


class LeafSettings:
    """A leaf module's settings (p, eps, stride, dim, ...) as the leaf functions read them.

    Each read goes through the module's tracker, so the value is guarded where it lives
    (EQUALS_MATCH on `L['self'].drop.p`): a setting changed after compiling (dropout annealed,
    eps tuned) fails the guard instead of running the constant baked into the graph. Tensor
    buffers read here (running_mean, num_batches_tracked) answer with their example tensor.
    """

    def __init__(self, tx, mv):
        self._tx, self._mv = tx, mv

    def __getattr__(self, name):
        v = self._mv.var_getattr(self._tx, name)
        return v.example if isinstance(v, TensorVariable) else v.as_python_constant()


LEAF_ARITY = {nn.GRUCell: 2}  # positional arguments a leaf accepts (default 1)

LEAF_MODULES = {
    nn.Linear: _linear,
    nn.GRUCell: _gru_cell,
    nn.Conv1d: _conv(F.conv1d), nn.Conv2d: _conv(F.conv2d), nn.Conv3d: _conv(F.conv3d),
    nn.BatchNorm1d: _batch_norm, nn.BatchNorm2d: _batch_norm, nn.BatchNorm3d: _batch_norm,
    nn.LayerNorm: _layer_norm,
    nn.Embedding: _embedding,
    nn.Dropout: lambda tx, mv, m, x: call_torch(tx, F.dropout, x, m.p, m.training, m.inplace),
    nn.ReLU: lambda tx, mv, m, x: call_torch(tx, F.relu, x, inplace=m.inplace),
    nn.GELU: lambda tx, mv, m, x: call_torch(tx, F.gelu, x, approximate=m.approximate),
    nn.SiLU: lambda tx, mv, m, x: call_torch(tx, F.silu, x, inplace=m.inplace),
    nn.LeakyReLU: lambda tx, mv, m, x: call_torch(tx, F.leaky_relu, x, m.negative_slope, m.inplace),
    nn.Tanh: lambda tx, mv, m, x: call_torch(tx, torch.tanh, x),
    nn.Sigmoid: lambda tx, mv, m, x: call_torch(tx, torch.sigmoid, x),
    nn.Softmax: lambda tx, mv, m, x: call_torch(tx, F.softmax, x, m.dim),
    nn.LogSoftmax: lambda tx, mv, m, x: call_torch(tx, F.log_softmax, x, m.dim),
    nn.Identity: lambda tx, mv, m, x: x,
    nn.Flatten: lambda tx, mv, m, x: call_torch(tx, torch.flatten, x, m.start_dim, m.end_dim),
    nn.MaxPool2d: lambda tx, mv, m, x: call_torch(tx, F.max_pool2d, x, m.kernel_size, m.stride,
                                           m.padding, m.dilation, m.ceil_mode,
                                           m.return_indices),
    nn.AvgPool2d: lambda tx, mv, m, x: call_torch(tx, F.avg_pool2d, x, m.kernel_size, m.stride,
                                           m.padding, m.ceil_mode, m.count_include_pad,
                                           m.divisor_override),
    nn.AdaptiveAvgPool2d: lambda tx, mv, m, x: call_torch(tx, F.adaptive_avg_pool2d, x,
                                                   m.output_size),
}
# torch.nn modules outside LEAF_MODULES are traced by inlining their own forward, as a user
# module's is: most are one functional call over settings the module stored, and each setting is
# an attribute read through the module's tracker, so it is guarded where it lives (a changed eps
# or min_val recompiles). What the forward does that the tracer cannot follow is a graph break
# inside it, moved to the call as for any inlined call. Refused outright (a clean break at the
# call): classes outside torch.nn's layer library (torch.nn.parallel's DistributedDataParallel
# and DataParallel, torch.nn.utils' wrappers: their forward drives communication and hooks), the
# recurrent family, and modules holding buffers, whose forward may update running statistics in
# place (the leaf table handles BatchNorm's, with the module pinned by identity).
_NOT_INLINED_BASES = (nn.RNNBase, nn.RNNCellBase)
_LAYER_LIBRARY = "torch.nn.modules."


def builtin_forward_refusal(m: nn.Module, owner: type | None = None) -> str | None:
    """Why the function of torch.nn class `owner` (default: m's class; not in LEAF_MODULES) is not
    inlined with module `m`, or None."""
    owner = type(m) if owner is None else owner
    original = parametrized_original(owner)
    if original is not None and not original.__module__.startswith("torch."):
        return None   # a user's module class, parametrized: traced as that user module is
    owner = original or owner
    if owner is nn.Module:   # nn.Module.train(self), __setattr__, register_buffer: its own state
        return "a method of nn.Module itself"
    if not owner.__module__.startswith(_LAYER_LIBRARY) and owner.__module__ not in PARAMETRIZATION_MODULES:
        return f"{owner.__module__} is not torch.nn's layer library"
    if isinstance(m, _NOT_INLINED_BASES):
        return "a recurrent module"
    held = [k for k, t in m._buffers.items() if t is not None]
    if held:
        return f"it holds buffers ({', '.join(held)})"
    return None


_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


def is_parameter_list(m) -> bool:
    """An nn.ParameterList whose class keeps ParameterList's own item protocol."""
    return isinstance(m, nn.ParameterList) and all(
        type_lookup(type(m), name) is vars(nn.ParameterList)[name] for name in ("__iter__", "__getitem__", "__len__"))
# nn.Module's generator methods traced by their result (NNModuleVariable._members): the stores
# each walk reads, whose keys are guarded on every module visited.
_MEMBER_STORES = {"named_parameters": ("_modules", "_parameters"), "named_buffers": ("_modules", "_buffers"),
                  "named_children": ("_modules",), "named_modules": ("_modules",)}
_MODULE_STORES = ("_parameters", "_buffers", "_modules")  # what nn.Module.__getattr__ reads, in order
# Attributes a store may not replace: nn.Module's own state (read by __call__, __getattr__ and this
# tracer from the real module, never through the trace's stores), and `forward`, which _forward
# looks up on the real instance.
_MODULE_OWN_STATE = frozenset(vars(nn.Module())) | {"forward"}
_BUFFER = getattr(nn, "Buffer", None)


def _plain_graph_module_call(cls) -> bool:
    """Whether calling an instance of `cls` is nn.Module.__call__ by another name: a GraphModule's
    class gets a `call_wrapped` __call__ from recompile(), which hands over to nn.Module.__call__
    (its _WrappedCall only rewrites the traceback of an error) unless the module it was made from
    had its own __call__ (`cls_call`)."""
    if not issubclass(cls, torch.fx.GraphModule):
        return False
    call, wrapped = type_lookup(cls, "__call__"), type_lookup(cls, "_wrapped_call")
    code = getattr(call, "__code__", None)
    return code is not None and code.co_qualname == "GraphModule.recompile.<locals>.call_wrapped" \
        and code.co_filename == torch.fx.graph_module.__file__ \
        and type(wrapped) is torch.fx.graph_module._WrappedCall and wrapped.cls_call is None


class NNModuleVariable(VariableTracker):
    identity_family = "module"
    specializes_int_attributes = True

    def __init__(self, module: nn.Module, source, identity_guard=None):
        super().__init__(source)
        self.module = module
        self._identity_guard = identity_guard

    def require_identity(self):
        """Guards this module by identity (ID_MATCH at its source), for a trace that relies on the
        object itself rather than on what it holds: an `is` test, an opaque call (the graph holds
        the module), a walk that dedups by identity (parameters()), a store. Otherwise a module is
        guarded by type and by every value the trace read from it, so another instance with equal
        structure and values passes the same guards (docs/cache.md)."""
        if self._identity_guard is not None:
            self._identity_guard()

    def python_type(self):
        return type(self.module)

    def reconstruct(self, outputs):
        return SourceOutput(self.source)

    def attr(self, tx, name):
        return self.var_getattr(tx, name)

    def var_getattr(self, tx, name):
        hook = own_getattribute(type(self.module))
        if hook is not None:   # the class's own __getattribute__, traced (module_getattribute.py)
            out = hooked_getattr(tx, self, name, hook)
            if isinstance(out, TensorVariable):
                out.mark_module_state()
            return out
        if (name in _MEMBER_STORES or "named_" + name in _MEMBER_STORES) and name not in self.module.__dict__ \
                and type_lookup(type(self.module), name) is getattr(nn.Module, name):
            return MethodVariable(self, name)   # m.parameters(): traced by its result (_members)
        out = read_attribute(tx, self, self.module, name, on_getattr=lambda hook: self._module_getattr(tx, name, hook))
        if isinstance(out, TensorVariable):
            out.mark_module_state()   # a static input for CUDA graphs, as torch.compile's
        return out

    def object_getattr(self, tx, name):
        """object.__getattribute__(m, name), from the class's own hook (object_hooks.py)."""
        return object_getattr(tx, self, name)

    def has_attribute(self, tx, name) -> bool:
        if own_getattribute(type(self.module)) is not None:   # hasattr runs the hooks, catching AttributeError
            return catching_raise(tx, lambda: self.var_getattr(tx, name), TracedAttributeError)[1]
        if type_lookup(type(self.module), "__getattr__") is not nn.Module.__getattr__:
            unsupported(f"hasattr on module {type(self.module).__name__}, which defines its own __getattr__")
        return has_attribute(tx, self, self.module, name, stores=_MODULE_STORES)

    def var_setattr(self, tx, name, value):
        m, cls = self.module, type(self.module)
        if name in _MODULE_OWN_STATE:
            unsupported(f"store to {cls.__name__}.{name} (nn.Module's own state)")
        if type_lookup(cls, "__getattr__") is not nn.Module.__getattr__:
            unsupported(f"store to {cls.__name__}.{name}: the class defines its own __getattr__")
        # side_effects.py keys a store's effects by the real object (by_identity=True): every
        # module of the trace is pinned (OutputGraph.pin_modules_by_identity).
        tx.output.pin_modules_by_identity()
        real = value.real if isinstance(value, TensorVariable) else None
        if isinstance(value, NNModuleVariable) or isinstance(real, nn.Parameter) or \
                _BUFFER is not None and isinstance(real, _BUFFER):
            kind = type(value.module if real is None else real).__name__
            unsupported(f"store of a {kind} to {cls.__name__}.{name} (registered by nn.Module.__setattr__)")
        d = m.__dict__
        for store in ("_parameters", "_modules"):
            if name in d.get(store, {}):
                unsupported(f"store to {cls.__name__}.{name}, which is in its {store}")
        if name in d.get("_buffers", {}):
            # nn.Module.__setattr__ re-registers the buffer: a tensor or None, through
            # register_buffer, which runs the global buffer-registration hooks.
            if not isinstance(value, TensorVariable) and not \
                    (isinstance(value, ConstantVariable) and value.value is None):
                unsupported(f"store of {value} to buffer {cls.__name__}.{name} (TypeError in Python)")
            if type_lookup(cls, "register_buffer") is not nn.Module.register_buffer:
                unsupported(f"store to buffer {cls.__name__}.{name}: the class defines its own register_buffer")
            from torch.nn.modules import module as mm
            if mm._global_buffer_registration_hooks:
                unsupported("store to a buffer while global buffer-registration hooks are registered")
            namespace = AttrSource(AttrSource(AttrSource(self.source, "__class__"), "__setattr__"),
                                   "__globals__")
            tx.output.add_guard(ItemSource(namespace, "_global_buffer_registration_hooks"),
                                GuardKind.LENGTH, 0)
        # Where the store lands is decided by these dicts' keys at call time: pinned.
        dict_source = AttrSource(self.source, "__dict__")
        for store in _MODULE_STORES:
            if store in d:
                tx.output.add_guard(ItemSource(dict_source, store), GuardKind.DICT_KEYS, tuple(d[store]))
        store_attribute(tx, self, m, name, value, impl=nn.Module.__setattr__, by_identity=True)

    def var_delattr(self, tx, name):
        if name in _MODULE_OWN_STATE:
            unsupported(f"deletion of {type(self.module).__name__}.{name} (nn.Module's own state)")
        tx.output.pin_modules_by_identity()   # as for a store
        delete_attribute(tx, self, self.module, name, impl=nn.Module.__delattr__, by_identity=True,
                         stores=_MODULE_STORES)

    def _module_getattr(self, tx, name, hook):
        """nn.Module.__getattr__: what normal lookup did not find, from _parameters, _buffers or
        _modules, first match in that order."""
        if hook is not nn.Module.__getattr__:   # a Python one is traced (object_protocol.py)
            return module_getattr(tx, self, name, hook)
        if own_getattribute(type(self.module)) is not None:   # its __dict__ reads pass the class's hook
            return traced_module_getattr(tx, self, name)
        d = self.module.__dict__
        for store in _MODULE_STORES:
            if name in d.get(store, {}):
                return tx.wrap(d[store][name], store_source(self.source, self.module, store, name))
        if self.source is None:
            unsupported(f"AttributeError: module {type(self.module).__name__} has no attribute {name!r}")
        # Raised in the trace, where a try catches it (a subclass's __getattr__ that defers to
        # nn.Module's and answers the names it lacks); its absence is pinned by the keys of the
        # instance __dict__ and the three stores, so a name registered later compiles again.
        _pin_keys(tx, self, d, _MODULE_STORES, type(self.module))
        message = f"'{type(self.module).__name__}' object has no attribute '{name}'"
        raise traced(TracedAttributeError, f"AttributeError: {message}", AttributeError, [ConstantVariable(message)])

    # -- containers -----------------------------------------------------------------------------
    def _children(self, tx):
        refuse_walk(self, "the items")
        if is_parameter_list(self.module):
            # ParameterList holds its items in _parameters under "0", "1", ... (its __getitem__
            # reads `getattr(self, str(i))`); each is read, and guarded, as that attribute.
            tx.output.add_guard(self.source, GuardKind.LENGTH, len(self.module))
            tx.output.add_guard(ItemSource(AttrSource(self.source, "__dict__"), "_parameters"),
                                GuardKind.DICT_KEYS, tuple(self.module._parameters))
            return [(str(i), self.var_getattr(tx, str(i))) for i in range(len(self.module))]
        if not isinstance(self.module, _CONTAINERS):
            unsupported(f"iteration over module {type(self.module).__name__}")
        tx.output.add_guard(self.source, GuardKind.LENGTH, len(self.module))
        # The keys in their order: a ModuleDict with other names (or the same in another order)
        # would pass the guards on each child read by name.
        tx.output.add_guard(ItemSource(AttrSource(self.source, "__dict__"), "_modules"),
                            GuardKind.DICT_KEYS, tuple(self.module._modules))
        return [(k, self.var_getattr(tx, k)) for k in self.module._modules]

    def contains(self, tx, item) -> bool:
        """`key in module`: ModuleDict looks the key up in _modules (guarded by its keys); other
        modules iterate or raise, which is not followed here."""
        refuse_walk(self, "membership test")
        if type(self.module) is not nn.ModuleDict:
            unsupported(f"membership test in module {type(self.module).__name__}")
        modules = self.module._modules
        tx.output.add_guard(ItemSource(AttrSource(self.source, "__dict__"), "_modules"),
                            GuardKind.DICT_KEYS, tuple(modules))
        return item.as_python_constant() in modules

    def unpack(self, tx):
        children = self._children(tx)
        if isinstance(self.module, nn.ModuleDict):
            return [ConstantVariable(k) for k, _ in children]
        return [v for _, v in children]

    def truthy(self, tx):
        # bool(m): __bool__, else __len__, else True, looked up on the type as Python does.
        cls = type(self.module)
        length = type_lookup(cls, "__len__")
        if type_lookup(cls, "__bool__") is MISSING:
            if length is MISSING:
                return True
            if any(length is vars(c).get("__len__") for c in (*_CONTAINERS, nn.ParameterList)):
                return bool(self._children(tx))
        unsupported(f"truth value of module {cls.__name__} (it defines __bool__ or __len__)")

    def getitem(self, tx, key):
        k = key.as_python_constant()
        children = self._children(tx)
        if isinstance(self.module, nn.ModuleDict):
            if k not in self.module._modules:
                unsupported(f"KeyError {k!r}")
            return self.var_getattr(tx, k)
        if isinstance(k, int) and -len(children) <= k < len(children):
            return children[k][1]
        if isinstance(k, slice) and type(self.module) is nn.ModuleList:
            # `self.layers[:n]` makes a new ModuleList per call: traced as its children, so no
            # guard ever holds the short-lived list (an entry guarding it would die with it).
            return ModuleListSliceVariable([v for _, v in children][k])
        unsupported(f"index {k!r} into {type(self.module).__name__}")

    def _members(self, tx, name, args, kwargs):
        """m.parameters(), named_modules(), children(), ...: the items nn.Module's generator
        yields, each reached by its attribute path from this module (so each is guarded as a read
        of it is), with the key sets of every module's stores that the walk read guarded too: a
        parameter or submodule added or removed later fails them."""
        if type_lookup(type(self.module), name) is not getattr(nn.Module, name):
            unsupported(f"{type(self.module).__name__}.{name} is overridden")
        refuse_walk(self, f"{name}()")
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported(f"{name}() with non-constant arguments")
        a = [v.as_python_constant() for v in args]
        k = {key: v.as_python_constant() for key, v in kwargs.items()}
        named = name if name.startswith("named_") else "named_" + name
        try:
            if name in ("parameters", "buffers"):   # (recurse=True): the named form's names
                k = dict(zip(("recurse",), a), **k)
                a = []
            # named_parameters(prefix="model"): the walk runs without the prefix, so each name is
            # the attribute path from this module; the prefix is put before it in the result.
            bound = inspect.signature(getattr(nn.Module, named)).bind(self.module, *a, **k)
            prefix = bound.arguments.pop("prefix", "")
            if not isinstance(prefix, str):
                unsupported(f"{name}() with a prefix of type {type(prefix).__name__}")
            items = list(getattr(self.module, named)(*bound.args[1:], **bound.kwargs))
        except Exception as e:
            unsupported(f"{name}() raised {type(e).__name__}: {e}")
        stores = _MEMBER_STORES[named]
        for path, sub in [("", self.module), *self.module.named_modules(remove_duplicate=False)]:
            if not isinstance(sub, nn.Module):
                continue
            node = self._path(tx, path)
            # The walk skips what it met before (a shared submodule, a tied weight): which objects
            # are the same is pinned by identity, not by the values guarded.
            node.require_identity()
            for store in stores:
                tx.output.add_guard(ItemSource(AttrSource(node.source, "__dict__"), store),
                                    GuardKind.DICT_KEYS, tuple(sub.__dict__[store]))
        out = []
        for path, value in items:
            v = self._path(tx, path)
            full = f"{prefix}.{path}" if prefix and path else prefix or path
            out.append(TupleVariable([ConstantVariable(full), v]) if name.startswith("named_") else v)
        return IteratorVariable(out)

    def _path(self, tx, path: str):
        v = self
        for part in path.split(".") if path else ():
            v = v.var_getattr(tx, part)
        return v

    def call_method(self, tx, name, args, kwargs):
        if name in _MEMBER_STORES or "named_" + name in _MEMBER_STORES:
            return self._members(tx, name, args, kwargs)
        if name == "__len__" and is_parameter_list(self.module):
            return ConstantVariable(len(self._children(tx)))
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
            if isinstance(self.module, CompiledModule):
                # `compiled.forward(x)`: its property runs the wrapped module's forward, compiled.
                return self._wrapped(tx).call_method(tx, name, args, kwargs)
            return self._forward(tx, args, kwargs)
        return tx.call(self.var_getattr(tx, name), args, kwargs)

    # -- calls ----------------------------------------------------------------------------------
    def call_function(self, tx, args, kwargs):
        call = type_lookup(type(self.module), "__call__")
        if call is not nn.Module.__call__ and isinstance(call, types.FunctionType) and \
                not call.__module__.startswith("torch."):
            # A Python __call__ of the user's class (one that ends in super().__call__(...), as
            # transformers' checkpointing layers once did): inlined like any method, guarded
            # where it is found; super().__call__ comes back to module_call below.
            fn = tx.wrap(call, AttrSource(class_source(self.source, self.module), "__call__"))
            return tx.call(fn, [self, *args], kwargs)
        return self.module_call(tx, args, kwargs)

    def module_call(self, tx, args, kwargs, *, own_call: bool = False):
        """nn.Module.__call__ on this module: its forward hooks and pre-hooks inlined around
        forward (module_hooks.py). `own_call`: reached through super().__call__ from the class's own __call__."""
        if own_getattribute(type(self.module)) is not None and builtin_opaque_reason(type(self.module)) is None \
                and not is_allowed_in_graph(type(self.module)):
            if type_lookup(type(self.module), "__call__") is not nn.Module.__call__ and not own_call:
                unsupported(f"module {type(self.module).__name__} overrides __call__")
            refuse_global_hooks(f"module {type(self.module).__name__} called")
            guard_no_global_hooks(tx, class_source(self.source, self.module))
            return hooked_call(tx, self, args, kwargs)   # its reads pass the class's hook (module_getattribute.py)
        target = self._compiled_call_target(tx)
        if target is not self:
            # The compiled call runs the wrapped module's _call_impl, never type(m).__call__.
            return target.module_call(tx, args, kwargs, own_call=True)
        return call_with_hooks(tx, self, args, kwargs,
                               lambda a, k: self._forward(tx, a, k, own_call=own_call))

    def _wrapped(self, tx):
        """The module a CompiledModule wraps, read through its `original_module` (guarded by
        type and values as any module is; its dict is the compiled module's, so tags cover both)."""
        return tx.wrap(unwrap(self.module), AttrSource(self.source, "original_module"))

    def _compiled_call_target(self, tx):
        """What nn.Module.__call__ runs for this module, as a module to inline: `self` for a plain
        module (`_compiled_call_impl` is nn.Module's class attribute None) and for one compiled in
        place (its call runs `type(m)._call_impl` on it), the wrapped module for a CompiledModule
        (as Dynamo traces an OptimizedModule's `_orig_mod`), both on their own cache at run time,
        which the inlined trace does not use. The compiled call is guarded by identity, so one set
        anew is noticed; a call set by anything else (torch's Module.compile()) runs as it is.

        Not noticed: a plain module given a `_compiled_call_impl` after it was traced (no guard on
        an attribute it does not have, as before compile_ existed)."""
        m = self.module
        if not isinstance(m, CompiledModule) and m.__dict__.get("_compiled_call_impl") is None:
            return self
        call = own_compiled_call(m)
        if call is None:
            unsupported(f"module {type(m).__name__} has a _compiled_call_impl that torch_jit_cache did not set")
        tx.output.add_guard(state_source(self.source, m, "_compiled_call_impl"), GuardKind.ID_MATCH, call)
        return self._wrapped(tx) if isinstance(m, CompiledModule) else self

    def _forward(self, tx, args, kwargs, own_call: bool = False):
        m, cls = self.module, type(self.module)
        # m(x) runs type(m).__call__, which calls self.forward: both resolve like any attribute.
        if type_lookup(cls, "__call__") is not nn.Module.__call__ and not own_call \
                and not _plain_graph_module_call(cls):
            unsupported(f"module {cls.__name__} overrides __call__")
        if own_getattribute(cls) is not None and builtin_opaque_reason(cls) is None and not is_allowed_in_graph(cls):
            return hooked_forward(tx, self, args, kwargs)   # `self.forward` through the class's hook
        forward = lookup(m, "forward")
        if forward.where is Where.INSTANCE_DICT:
            # `m.forward = fn` on the instance wins over the class's forward, as in Python.
            return tx.call(tx.wrap(forward.value, AttrSource(self.source, "forward")), args, kwargs)
        if forward.where is not Where.CLASS or not isinstance(forward.value, types.FunctionType):
            unsupported(f"forward of module {cls.__name__} is not a method of its class "
                        f"(found: {forward.where.value})")
        # `m.forward.__func__ is forward`, for leaves and containers too: fails once the instance
        # gets a forward of its own (a plain function has no __func__) or the class's is replaced.
        fsrc = AttrSource(AttrSource(self.source, "forward"), "__func__")
        tx.output.add_guard(fsrc, GuardKind.ID_MATCH, forward.value)
        if cls is nn.Sequential:
            if kwargs or len(args) != 1:
                unsupported("Sequential called with more than one argument")
            x = args[0]
            for child in self.unpack(tx):
                x = tx.call(child, [x], {})
            return x
        why = builtin_opaque_reason(cls) or \
            ("marked with tjc.allow_in_graph" if is_allowed_in_graph(cls) else None)
        if why is not None:   # one node calling a proxy of the module (opaque_calls.py)
            return call_opaque_module(tx, self, args, kwargs, why)
        leaf = LEAF_MODULES.get(cls)
        if leaf is not None:
            if kwargs or not 1 <= len(args) <= LEAF_ARITY.get(cls, 1):
                unsupported(f"{cls.__name__} called with {len(args)} args and {list(kwargs)}")
            return leaf(tx, self, LeafSettings(tx, self), *args)
        if cls.__module__.startswith("torch.nn"):
            why = builtin_forward_refusal(m)
            if why is not None:
                unsupported(f"built-in module {cls.__name__} is not supported: {why}")
        return tx.call(UserFunctionVariable(forward.value, fsrc), [self, *args], kwargs)

    def __repr__(self):
        return f"NNModuleVariable({type(self.module).__name__} from {self.source})"

    def require_guardable(self, what, name):
        # A module outside _modules: its state goes unguarded.
        unsupported(f"opaque call of {what}: module {name!r} is not a registered submodule")

    def identity_object(self):
        self.require_identity()
        return self.module


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def wrap_module(tx, value, source, g):
    if source is None:
        unsupported(f"module {type(value).__name__} not reachable from the frame")
    g(GuardKind.TYPE_MATCH, type(value))
    # Not by identity unless the trace relies on the object itself (require_identity): N equal
    # instances of one class share one entry.
    tx.output.add_guard(state_source(source, value, "training"), GuardKind.EQUALS_MATCH,
                        state_value(value, "training"))
    # Whatever is guarded below this module (its attributes, submodules, hook dicts) is
    # rechecked only when a dict it was read from changed (version tags, csrc/guards/dict_tags.h;
    # not on 3.13, runtime.DICT_TAGS_SUPPORTED).
    if runtime.DICT_TAGS_SUPPORTED:
        g(GuardKind.DICT_TAGS)
    mv = NNModuleVariable(value, source, identity_guard=lambda: g(GuardKind.ID_MATCH, value))
    if tx.output.modules_by_identity:
        mv.require_identity()
    return mv
