"""Where guards read a module's own state from: `m.name`, or, where the module's class has its own
__getattribute__ (module_getattribute.py), past that hook (`vars(m)[name]`, `type(m)`), so that no
guard runs it, with whatever effects it has."""
from __future__ import annotations

from ....guard.attribute_lookup import has_own_getattribute
from ....guard.sources import AttrSource, InstanceDictSource, ItemSource, TypeSource


def class_source(source, module):
    """type(m): `m.__class__`, or `type(m)` past the class's own hook."""
    return TypeSource(source) if has_own_getattribute(type(module)) else AttrSource(source, "__class__")


def state_source(source, module, name: str):
    """The module's own attribute `name` (one in its __dict__): `m.name`, or `vars(m)[name]`."""
    if has_own_getattribute(type(module)) and name in vars(module):
        return ItemSource(InstanceDictSource(source), name)
    return AttrSource(source, name)


def store_source(source, module, store: str, name: str):
    """`name` in the module's `store` (_parameters, _buffers, _modules): `m.name` as
    nn.Module.__getattr__ answers it, or `vars(m)[store][name]`."""
    if has_own_getattribute(type(module)):
        return ItemSource(ItemSource(InstanceDictSource(source), store), name)
    return AttrSource(source, name)


def state_value(module, name: str):
    """The module's own attribute `name`, read where state_source reads it (the hook not run)."""
    if has_own_getattribute(type(module)) and name in vars(module):
        return vars(module)[name]
    return getattr(module, name)
