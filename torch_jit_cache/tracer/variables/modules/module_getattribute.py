"""An nn.Module whose class writes its own __getattribute__ in Python.

`m.name` runs CPython's slot_tp_getattr_hook: type(m).__getattribute__(m, name), and, only where
that raises AttributeError, type(m).__getattr__(m, name) (nn.Module's: _parameters, _buffers,
_modules; or the class's own, traced by object_protocol.module_getattr). Here the hook is inlined
with the module's tracker as self; `super().__getattribute__(n)` / `object.__getattribute__(self,
n)` inside it is object's lookup on the module (attribute.read_attribute with generic=True: values
guarded through the instance __dict__ and the class's MRO, a name it lacks the traced
AttributeError with the instance __dict__'s keys pinned), which the slot's fallback catches.

Guards on such a module never run its hook (a guard's getattr would, with whatever effects it
has): what the tracer reads off the module itself (training, the hook dicts, a child module, a
_compiled_call_impl) is read through `vars(m)` and its class through `type(m)` (module_sources.py).

`forward` is read as nn.Module.__call__ reads it, `self.forward`, through the hook. Refused (a
graph break): a hook that is not a Python function of the user's (written in C, or torch's), hooks
on torch.nn's own classes, and the module walks (parameters(), children(), iteration, `in`) and
stores, whose reads of the stores would have to pass the hook too.
"""
from __future__ import annotations

import types

import torch.nn as nn

from ....guard.attribute_lookup import MISSING, has_own_getattribute, type_lookup
from ....guard.sources import AttrSource
from ..base import TracedAttributeError, catching_raise, unsupported
from ..constant import ConstantVariable
from ..python_objects.attribute import read_attribute
from ..python_objects.functions import UserFunctionVariable
from ..python_objects.object_protocol import InstanceDictView
from .module_sources import class_source


def own_getattribute(cls: type):
    """The Python __getattribute__ of module class `cls` that `m.name` runs, or None where it is
    object's (or a trusted renaming); Unsupported where it cannot be traced."""
    if not has_own_getattribute(cls):
        return None
    hook = type_lookup(cls, "__getattribute__")
    if not isinstance(hook, types.FunctionType):
        unsupported(f"module {cls.__name__}: its __getattribute__ is a {type(hook).__name__}")
    if (hook.__module__ or "").startswith("torch") or cls.__module__.startswith("torch."):
        unsupported(f"module {cls.__name__}: its __getattribute__ is {hook.__qualname__} of torch")
    return hook


def refuse_walk(mv, what: str) -> None:
    """Unsupported for a walk of the module's stores where its class has its own hook."""
    if has_own_getattribute(type(mv.module)):
        unsupported(f"{what} of module {type(mv.module).__name__}, whose class overrides __getattribute__")


def hooked_getattr(tx, mv, name: str, hook):
    """`m.name` through the class's own `hook`, then its __getattr__ where the hook raised
    AttributeError (mv._module_getattr: nn.Module's, or the class's own)."""
    cls = type(mv.module)
    if mv.source is None:
        unsupported(f"attribute {name!r} of module {cls.__name__} with no source")
    fn = tx.wrap(hook, AttrSource(class_source(mv.source, mv.module), "__getattribute__"))

    def run():
        return tx.call(fn, [mv, ConstantVariable(name)], {})

    fallback = type_lookup(cls, "__getattr__")
    if fallback is MISSING:
        return run()
    value, found = catching_raise(tx, run, TracedAttributeError)
    if found:
        return value
    return mv._module_getattr(tx, name, fallback)


def object_getattr(tx, mv, name: str):
    """object.__getattribute__(m, name), from the class's own hook: object's lookup alone (a name
    in the module's stores is not found here; the slot's __getattr__ answers it). `__dict__` is
    the module's instance dict, read key by key (object_protocol.InstanceDictView)."""
    if name == "__dict__":
        return InstanceDictView(mv, mv.module)
    return read_attribute(tx, mv, mv.module, name, generic=True)


def module_getattr(tx, mv, name: str):
    """nn.Module.__getattr__(m, name) for a module whose class has its own hook, traced as the
    Python it is: its `self.__dict__` reads pass the hook, as they do in eager (a hook that counts
    its reads counts them too), and what it answers is read through the dict the hook returned."""
    fn = UserFunctionVariable(nn.Module.__getattr__, AttrSource(class_source(mv.source, mv.module), "__getattr__"))
    return tx.call(fn, [mv, ConstantVariable(name)], {})


# What nn.Module.__call__ (_wrapped_call_impl, then _call_impl) reads off a module with no hooks,
# in order, each through the class's hook in eager: before `self.forward`, then the hook dicts
# whose emptiness lets it call forward directly (`or` over them: all read while all are empty).
_CALL_READS = ("_compiled_call_impl", "_call_impl")
_HOOK_READS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks")


def hooked_call(tx, mv, args, kwargs):
    """m(*args, **kwargs) for a module whose class has its own hook: nn.Module.__call__'s reads of
    the module traced through the hook, in eager's order (so the hook's effects are eager's), each
    answer required to be what the call goes on with where the module has no hooks: no compiled
    call, nn.Module's _call_impl, empty hook dicts. Anything else is refused."""
    m, cls = mv.module, type(mv.module)
    if "_compiled_call_impl" in vars(m):
        unsupported(f"call of module {cls.__name__} with a _compiled_call_impl and its own __getattribute__")
    compiled, impl = (mv.var_getattr(tx, name) for name in _CALL_READS)
    if not (isinstance(compiled, ConstantVariable) and compiled.value is None) or \
            getattr(getattr(impl, "func", None), "fn", None) is not nn.Module._call_impl:
        unsupported(f"call of module {cls.__name__}: its hook answers nn.Module.__call__'s own names")
    forward = mv.var_getattr(tx, "forward")
    for name in _HOOK_READS:
        if mv.var_getattr(tx, name).truthy(tx):
            unsupported(f"call of module {cls.__name__}, which has {name} and its own __getattribute__")
    return tx.call(forward, args, kwargs)


def hooked_forward(tx, mv, args, kwargs):
    """nn.Module.__call__'s `self.forward(...)` for a module whose class has its own hook."""
    return tx.call(mv.var_getattr(tx, "forward"), args, kwargs)
