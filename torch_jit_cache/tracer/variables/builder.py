"""Wrap a real value read from the frame (with its Source) into a tracker, adding its guards.

Guards added here: TENSOR_MATCH for tensors; TYPE_MATCH + EQUALS_MATCH for scalars and strings;
TYPE_MATCH + ID_MATCH for modules, functions and classes (plus EQUALS_MATCH on `.training` and
DICT_TAGS for nn.Modules: the guards below a module skipped while its dicts are unchanged); for functions made inside another function (closures, lambdas: often made anew per
call) and functools.partial objects, guards on their parts instead (`__code__` by identity, closure
cells, defaults and globals where read; partial's func, args and keywords); TYPE_MATCH alone for
plain user objects, dict subclasses and os.environ (their attributes and items are guarded
where read); TYPE_MATCH + LENGTH for lists and tuples; TYPE_MATCH + DICT_KEYS for dicts; SAME_AS
when one tensor is reached through a second source; torch.dtype, torch.layout and
torch.memory_format by identity (held strongly), torch.device by value (its type and index).
`guard=False` is for attributes of trusted
modules (torch.relu, math.pi): only the module itself is guarded.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator
import os
import types

import torch
import torch.nn as nn

from ... import runtime
from ...sources import AttrSource, ItemSource, LocalSource
from ...trace_result import GuardKind
from .base import VariableTracker, unsupported
from .builtins import BUILTIN_HANDLERS, BuiltinVariable
from .classes import ClassVariable
from .constant import ConstantVariable, is_constant_value
from .contexts import context_class, refuse_autocast_object
from .containers import DictVariable, ListVariable, RangeVariable, TupleVariable
from .distributed import wrap_distributed
from .functions import (PartialVariable, PureFunctionVariable, PythonModuleVariable,
                        SignatureFunctionVariable, UserFunctionVariable, UserMethodVariable)
from .new_object import UserClassVariable, is_user_class
from .nn_module import BuiltinModuleMethodVariable, NNModuleVariable, builtin_module_owner
from .opaque import OpaqueVariable
from .sets import SetVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable, TorchFunctionVariable
from .user_object import (DictSubclassVariable, EnvironVariable, UserObjectVariable, is_dict_subclass_object,
                          is_plain_user_object)

_SCALARS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis))
_TORCH_SINGLETONS = (torch.dtype, torch.layout, torch.memory_format)


def _torch_callable_ids() -> frozenset:
    spaces = [torch, torch.nn.functional, torch.linalg, torch.fft, torch.special, torch.nn.init]
    return frozenset(id(v) for ns in spaces for v in vars(ns).values()
                     if callable(v) and not isinstance(v, type))


_TORCH_IDS = _torch_callable_ids()


def is_torch_callable(value) -> bool:
    if isinstance(value, type):
        return False
    if id(value) in _TORCH_IDS:
        return True
    if isinstance(value, types.MethodType):
        # A Python function bound to an object (a module's `forward`, a distribution's `rsample`):
        # the object is state the graph would not see (its parameters would get no gradient).
        # Wrapped as a method: its function and its object, each through its own source.
        return False
    objclass = getattr(value, "__objclass__", None)
    if isinstance(objclass, type) and issubclass(objclass, torch._C.TensorBase):
        return True
    mod = getattr(value, "__module__", None) or ""
    return callable(value) and (mod == "torch" or mod.startswith("torch."))


def _is_argument(source, value) -> bool:
    """A tensor the frame was called with (or found in a container it was called with), as
    dynamic=True understands "input": not a parameter, buffer or other attribute."""
    if isinstance(value, nn.Parameter):
        return False
    while isinstance(source, ItemSource):
        source = source.base
    return isinstance(source, LocalSource)


def wrap(tx, value, source, guard: bool = True):
    out = tx.output
    if source is not None and source in out.by_source:
        return out.by_source[source]
    vt = _wrap(tx, value, source, guard and source is not None)
    if source is not None:
        out.by_source[source] = vt
        if isinstance(vt, (UserObjectVariable, ListVariable, DictVariable)):
            # Guarded by type, not identity: side_effects.py keeps mutation of such objects sound.
            out.side_effects.reached(value, vt)
    return vt


def wrap_constant(value) -> VariableTracker:
    """The tracker of a value computed from constants while tracing (a folded call's result, an
    item of a constant string or tuple): tuples and lists item by item, sets of constants, and
    constants; anything else is refused. The translator offers it as `tx.wrap_constant`, so
    trackers below this module (constant.py) make containers without importing them."""
    if type(value) is tuple:
        return TupleVariable([wrap_constant(v) for v in value])
    if isinstance(value, list):
        return ListVariable([wrap_constant(v) for v in value])
    if type(value) is set and all(is_constant_value(v) for v in value):
        return SetVariable(value)
    if is_constant_value(value):
        return ConstantVariable(value)
    unsupported(f"a constant computation produced a {type(value).__name__}")


def _wrap(tx, value, source, guard):
    out = tx.output

    def g(kind, v=None, src=source):
        if guard:
            out.add_guard(src, kind, v)

    if isinstance(value, torch.Tensor):
        if source is None:
            unsupported("a tensor that is not reachable from the frame (cannot be a graph input)")
        out.add_guard(source, GuardKind.TENSOR_MATCH, value)
        known = out.by_id.get(id(value))
        if known is not None:
            out.add_guard(source, GuardKind.SAME_AS, known.source)
            return known
        plan = out.frame_plan
        choices = plan.choose(source, value, is_argument=_is_argument(source, value)) \
            if plan is not None else None
        # A fake tensor, with symbolic sizes where the plan says (dynamic.py, fake_shapes.py). A
        # static plan still records the sizes seen (automatic dynamic shapes) but makes no symbol.
        symbolic = plan is not None and plan.symbolic
        example = out.fake_shapes.fakeify(value, source, choices if symbolic else None)
        vt = TensorVariable(out, example, source=source, real=value)
        out.by_id[id(value)] = vt
        out.keepalive.append(value)
        return vt
    plan = out.frame_plan
    if type(value) is int and guard and plan is not None and plan.int_is_dynamic(
            source, value, is_argument=_is_argument(source, value)) and plan.symbolic:
        symbolic = out.fake_shapes.symint(value, source)
        if not isinstance(symbolic, int):   # a graph input: the int is read at call time
            g(GuardKind.TYPE_MATCH, int)
            return SymNodeVariable(out, out.add_placeholder(source, symbolic), symbolic)
    if type(value) in _SCALARS:   # subclasses (numpy.float64, an IntEnum) are not constants here
        g(GuardKind.TYPE_MATCH, type(value))
        g(GuardKind.EQUALS_MATCH, value)
        return ConstantVariable(value, source)
    if isinstance(value, _TORCH_SINGLETONS):
        g(GuardKind.ID_MATCH, value)   # held strongly: guards.py
        return ConstantVariable(value, source)
    if type(value) is torch.device:
        # Made anew by every torch.device(...) and x.device: equal devices are different objects,
        # so guarded by value, through the two fields that make it.
        g(GuardKind.TYPE_MATCH, torch.device)
        g(GuardKind.EQUALS_MATCH, value.type, AttrSource(source, "type"))
        g(GuardKind.EQUALS_MATCH, value.index, AttrSource(source, "index"))
        return ConstantVariable(value, source)
    if isinstance(value, nn.Module):
        if source is None:
            unsupported(f"module {type(value).__name__} not reachable from the frame")
        g(GuardKind.TYPE_MATCH, type(value))
        g(GuardKind.ID_MATCH, value)
        out.add_guard(AttrSource(source, "training"), GuardKind.EQUALS_MATCH, value.training)
        # Whatever is guarded below this module (its attributes, submodules, hook dicts) is
        # rechecked only when a dict it was read from changed (version tags, csrc/guards/dict_tags.h;
        # not on 3.13, runtime.DICT_TAGS_SUPPORTED).
        if runtime.DICT_TAGS_SUPPORTED:
            g(GuardKind.DICT_TAGS)
        return NNModuleVariable(value, source)
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list, torch.Size) or \
            (isinstance(value, tuple) and hasattr(type(value), "_fields")):
        g(GuardKind.TYPE_MATCH, type(value))
        g(GuardKind.LENGTH, len(value))
        items = [wrap(tx, v, ItemSource(source, i) if source is not None else None, guard)
                 for i, v in enumerate(value)]
        if isinstance(value, list):
            return ListVariable(items, source)
        return TupleVariable(items, source, fields=list(getattr(type(value), "_fields", ())) or None,
                             cls=type(value))
    if type(value) is dict:
        if not all(isinstance(k, (str, int)) for k in value):
            unsupported("a dict with keys other than str and int")
        g(GuardKind.TYPE_MATCH, dict)
        g(GuardKind.DICT_KEYS, tuple(value))
        return DictVariable({k: wrap(tx, v, ItemSource(source, k) if source is not None
                                     else None, guard) for k, v in value.items()}, source)
    if type(value) is range:
        g(GuardKind.TYPE_MATCH, range)
        g(GuardKind.EQUALS_MATCH, value)
        return RangeVariable(value)
    if isinstance(value, types.ModuleType):
        g(GuardKind.ID_MATCH, value)
        return PythonModuleVariable(value, source)
    if any(value is b for b in BUILTIN_HANDLERS):
        g(GuardKind.ID_MATCH, value)
        return BuiltinVariable(value, source)
    if isinstance(value, type):
        ctx = context_class(value, source)   # torch.no_grad and friends (contexts.py)
        if ctx is not None:
            g(GuardKind.ID_MATCH, value)
            return ctx
    refuse_autocast_object(value)   # callable, but no torch function (contexts.py)
    # torch.distributed: collectives are captured, the rest breaks before it runs (distributed.py)
    found = wrap_distributed(tx, value, source, guard)
    if found is not None:
        return found
    owner = builtin_module_owner(value)
    if owner is not None:   # nn.Embedding.forward (super().forward(x)): a method, not a torch op
        g(GuardKind.ID_MATCH, value)
        return BuiltinModuleMethodVariable(value, owner, source)
    if is_torch_callable(value):
        g(GuardKind.ID_MATCH, value)
        return TorchFunctionVariable(value, source)
    if value is inspect.signature:   # its parameters' names, from the code (functions.py)
        g(GuardKind.ID_MATCH, value)
        return SignatureFunctionVariable(value, source)
    if isinstance(value, types.FunctionType):
        g(GuardKind.TYPE_MATCH, types.FunctionType)
        if guard and value.__code__.co_flags & inspect.CO_NESTED:
            # Made inside another function, maybe anew per call: guarded by its code and by what
            # the trace reads from it, not by the identity of a short-lived object (functions.py).
            g(GuardKind.ID_MATCH, value.__code__, AttrSource(source, "__code__"))
            return UserFunctionVariable(value, source, identity_guard=lambda: g(GuardKind.ID_MATCH, value))
        g(GuardKind.ID_MATCH, value)
        # The body traced is the function's code: `fn.__code__ = other` keeps the function's
        # identity, so the code is guarded too.
        g(GuardKind.ID_MATCH, value.__code__, AttrSource(source, "__code__") if source is not None else None)
        return UserFunctionVariable(value, source)
    if type(value) is functools.partial and source is not None:
        g(GuardKind.TYPE_MATCH, functools.partial)
        return PartialVariable(value, wrap(tx, value.func, AttrSource(source, "func"), guard),
                               list(wrap(tx, value.args, AttrSource(source, "args"), guard).items),
                               dict(wrap(tx, value.keywords, AttrSource(source, "keywords"), guard).items),
                               source, identity_guard=lambda: g(GuardKind.ID_MATCH, value))
    if isinstance(value, types.MethodType):
        fsrc = AttrSource(source, "__func__") if source is not None else None
        ssrc = AttrSource(source, "__self__") if source is not None else None
        return UserMethodVariable(wrap(tx, value.__func__, fsrc, guard),
                                  wrap(tx, value.__self__, ssrc, guard), source)
    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) in (
            "math", "_operator", "operator") or (isinstance(value, type(math.sqrt))
                                                  and value in vars(operator).values()):
        g(GuardKind.ID_MATCH, value)
        return PureFunctionVariable(value, source)
    if isinstance(value, type):
        g(GuardKind.ID_MATCH, value)
        if is_user_class(value):   # calling it builds an object in the trace (new_object.py)
            return UserClassVariable(value, source)
        return ClassVariable(value, source)
    if value is builtins.print:
        return BuiltinVariable(value, source)
    if source is not None and value is os.environ:   # reads are guarded constants (user_object.py)
        g(GuardKind.TYPE_MATCH, type(value))
        return EnvironVariable(value, source)
    if source is not None and is_dict_subclass_object(value):
        g(GuardKind.TYPE_MATCH, type(value))
        return DictSubclassVariable(value, source)
    if source is not None and is_plain_user_object(value):
        g(GuardKind.TYPE_MATCH, type(value))
        return UserObjectVariable(value, source)
    if source is not None:   # used nowhere yet: a graph break where it is used (opaque.py)
        g(GuardKind.TYPE_MATCH, type(value))
        return OpaqueVariable(type(value), source)
    unsupported(f"value of type {type(value).__name__} read from {source}")
