"""`descriptor.__get__(obj)` of a descriptor written in C, in the trace: a getset descriptor
(`torch.Tensor.shape`), a `__slots__` member, a C method or slot wrapper of a class
(`str.upper`, `object.__repr__`), a classmethod written in C, called through `d.__get__(obj)` or
through the bound `d.__get__` the frame holds (a method-wrapper).

CPython's attribute lookup runs exactly that call when `obj.name` finds `d` on `type(obj)`: so where
`type(obj)` looks attributes up generically and its MRO finds this very `d` under `d.__name__`,
`d.__get__(obj)` is `obj.name`, traced as that read (a tensor's `shape` is the trace's own shape,
a user object's member its guarded value). Anything else (another class that does not reach `d`,
a class with its own `__getattribute__`, `d.__get__(None, cls)`) is a graph break, where eager runs
the call itself.

Such a descriptor of a static type lives as long as the process (process_lived.py): it is guarded
by identity, held strongly. A method-wrapper `d.__get__` is made anew at each read of `d.__get__`:
it is guarded by its type, the name of what it wraps and the identity of the descriptor it is
bound to (`L['g'].__self__`), never by its own identity.
"""
from __future__ import annotations

import types

from ....guard import process_lived
from ....guard.attribute_lookup import has_generic_getattribute, type_lookup
from ....guard.sources import AttrSource
from ....guard.trace_result import GuardKind
from ..base import unsupported

C_DESCRIPTOR_TYPES = (types.GetSetDescriptorType, types.MemberDescriptorType, types.MethodDescriptorType,
                      types.WrapperDescriptorType, types.ClassMethodDescriptorType)


def is_c_descriptor(value) -> bool:
    return type(value) in C_DESCRIPTOR_TYPES


def is_descriptor_get(value) -> bool:
    """A method-wrapper `d.__get__` of a C descriptor `d`."""
    return type(value) is types.MethodWrapperType and value.__name__ == "__get__" and \
        is_c_descriptor(value.__self__)


def get(tx, descriptor, args: list, kwargs: dict):
    """`descriptor.__get__(*args)`: the attribute read it is, where it is one (module docstring)."""
    if kwargs or len(args) not in (1, 2):
        unsupported(f"{descriptor.__name__}.__get__ with other than one or two positional arguments")
    obj = args[0]
    if obj.is_python_constant() and obj.as_python_constant() is None:
        unsupported(f"{descriptor.__name__}.__get__(None, ...) (the descriptor itself or its class's)")
    cls = obj.python_type()
    name = descriptor.__name__
    if not isinstance(cls, type) or not has_generic_getattribute(cls) or type_lookup(cls, name) is not descriptor:
        unsupported(f"{descriptor.__name__}.__get__ of a {getattr(cls, '__name__', cls)}, whose lookup of "
                    f"{name!r} does not find this descriptor")
    return obj.var_getattr(tx, name)


def _pin(tx, source, descriptor) -> None:
    if not process_lived.lives_for_the_process(descriptor):
        unsupported(f"{descriptor.__name__}.__get__ of a descriptor of {descriptor.__objclass__.__name__}, "
                    "a class that may die (it cannot be guarded by identity without holding it)")
    tx.output.add_guard(source, GuardKind.ID_MATCH, descriptor)


def call_get_method(tx, descriptor_var, args: list, kwargs: dict):
    """`d.__get__(...)` where `d` (`descriptor_var`) was read from the frame."""
    _pin(tx, descriptor_var.source, descriptor_var.value)
    return get(tx, descriptor_var.value, args, kwargs)


def call_descriptor_get(tx, wrapper_var, args: list, kwargs: dict):
    """A call of the method-wrapper `d.__get__` read from the frame (`wrapper_var`, guarded by type)."""
    descriptor = wrapper_var.value.__self__
    _pin(tx, AttrSource(wrapper_var.source, "__self__"), descriptor)
    tx.output.add_guard(AttrSource(wrapper_var.source, "__name__"), GuardKind.EQUALS_MATCH, "__get__")
    return get(tx, descriptor, args, kwargs)
