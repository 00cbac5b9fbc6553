"""Reading `obj.name` off an object read from the frame (a user object or an nn.Module).

Where the answer comes from is decided by attribute_lookup.lookup (Python's order); this turns that
place into a tracker. Every value keeps a source through the object (`L['self'].name`, or
`L['self'].name.__func__` for a method), so its guard re-reads the attribute the same way Python
does at each call: when a later assignment changes where the name resolves, the guard fails.
What cannot be followed exactly (a custom __getattribute__ that attribute_lookup does not trust,
descriptors other than property,
__slots__ members, functions, staticmethod and classmethod) raises Unsupported, never a guess.

Stores and deletions (`obj.name = v`, `del obj.name`) are recorded for replay after the graph
(tracer/side_effects.py), never applied while tracing; a read that follows in the same trace sees
the stored tracker. Recorded only where the store is a plain one that replay repeats exactly: the
type's __setattr__/__delattr__ is object's (or nn.Module's, nn_module.py), its lookup is not
customised, and no data descriptor (property, __slots__ member) of that name is on the type; a
store lands in the instance __dict__, which wins over everything but data descriptors, so reading
the stored tracker back is what Python would read.
"""
from __future__ import annotations

import types

from ...attribute_lookup import Where, instance_dict, is_descriptor, lookup, type_lookup
from ...sources import AttrSource, ItemSource
from ...trace_result import GuardKind
from .base import unsupported
from .functions import UserFunctionVariable, UserMethodVariable


def read_attribute(tx, var, obj, name: str, on_getattr=None):
    """The tracker for `obj.name`, `var` being obj's tracker (with a source).

    `on_getattr(found_hook)` handles names that normal lookup does not find and the type's
    __getattr__ would answer (nn.Module's); without it such names are unsupported.
    """
    if var.source is None:
        unsupported(f"attribute {name!r} of an object with no source")
    stored = tx.output.side_effects.attr(var, obj, name)
    if stored is not None:   # stored earlier in this trace (refused if deleted)
        return stored
    found = lookup(obj, name)
    where, value = found.where, found.value
    cls_name = type(obj).__name__
    source = AttrSource(var.source, name)
    if where is Where.CUSTOM:
        unsupported(f"attribute {name!r} of {cls_name}, whose class overrides __getattribute__")
    if where is Where.DATA_DESCRIPTOR:
        if type(value) is property:
            if not isinstance(value.fget, types.FunctionType):
                unsupported(f"property {cls_name}.{name} has no Python getter")
            # Guarded where Python finds it (type(obj).name.fget): replacing the property on the
            # class fails the guard instead of running the old getter.
            getter = AttrSource(AttrSource(AttrSource(var.source, "__class__"), found.name), "fget")
            return tx.call(tx.wrap(value.fget, getter), [var], {})
        if isinstance(value, types.MemberDescriptorType) or name == "__class__" and \
                isinstance(value, types.GetSetDescriptorType) and value.__objclass__ is object:
            try:
                return tx.wrap(getattr(obj, name), source)  # a __slots__ member, or __class__
            except AttributeError:  # an empty slot: Python would go on to __getattr__
                unsupported(f"AttributeError: slot {name!r} of {cls_name} is empty")
        unsupported(f"attribute {name!r} of {cls_name} is a {type(value).__name__} (a data descriptor)")
    if where is Where.INSTANCE_DICT:
        return tx.wrap(value, source)
    if where is Where.CLASS:
        if isinstance(value, types.FunctionType):
            # `obj.name.__func__ is value`: fails once the instance gets an attribute of that name (a
            # plain function or value has no __func__) or the class's method is replaced.
            fsrc = AttrSource(source, "__func__")
            tx.output.add_guard(fsrc, GuardKind.ID_MATCH, value)
            return UserMethodVariable(UserFunctionVariable(value, fsrc), var, source)
        if isinstance(value, staticmethod):
            return tx.wrap(value.__func__, source)
        if isinstance(value, classmethod) and isinstance(value.__func__, types.FunctionType):
            cls = tx.wrap(type(obj), AttrSource(var.source, "__class__"))
            fsrc = AttrSource(source, "__func__")
            tx.output.add_guard(fsrc, GuardKind.ID_MATCH, value.__func__)
            return UserMethodVariable(UserFunctionVariable(value.__func__, fsrc), cls, source)
        if is_descriptor(value):
            unsupported(f"attribute {name!r} of {cls_name} is a {type(value).__name__} (a descriptor)")
        return tx.wrap(value, source)  # a plain class attribute, read through the instance
    if where is Where.GETATTR and on_getattr is not None:
        return on_getattr(found.value)
    if where is Where.GETATTR:
        unsupported(f"attribute {name!r} of {cls_name} would come from its __getattr__")
    unsupported(f"AttributeError: {cls_name!r} object has no attribute {name!r}")


def has_attribute(tx, var, obj, name: str, stores: tuple = ()) -> bool:
    """hasattr(obj, name), with guards that keep the answer true for the entry.

    True: the attribute is read as `obj.name` would be (read_attribute), so its value is guarded
    where it is found. False: every place Python looked is pinned by its keys: the instance
    __dict__ and the `stores` dicts that the type's __getattr__ reads (nn.Module's _parameters,
    _buffers, _modules); an attribute added later to any of them fails the guard. (The class is
    pinned by the object's type guard; a class mutated in place is not seen.)
    """
    if tx.output.side_effects.has_attr_effect(var, obj, name):
        tx.output.side_effects.attr(var, obj, name)   # stored in this trace: present (deleted: refused)
        return True
    found = lookup(obj, name)
    d = instance_dict(obj) or {}
    present = found.where in (Where.DATA_DESCRIPTOR, Where.INSTANCE_DICT, Where.CLASS) or \
        found.where is Where.GETATTR and any(name in d.get(store, {}) for store in stores)
    if present:
        var.var_getattr(tx, name)   # Unsupported where the read cannot be followed exactly
        return True
    if found.where is Where.CUSTOM or found.where is Where.GETATTR and not stores:
        unsupported(f"hasattr({type(obj).__name__}, {name!r}): its lookup is customised")
    if var.source is None:
        unsupported(f"hasattr on an object with no source ({type(obj).__name__})")
    _pin_keys(tx, var, d, stores)
    return False


def _pin_keys(tx, var, d: dict, stores: tuple) -> None:
    """Guard the keys of the instance __dict__ `d` of `var`, and of the `stores` dicts in it."""
    dict_source = AttrSource(var.source, "__dict__")
    tx.output.add_guard(dict_source, GuardKind.DICT_KEYS, tuple(d))
    for store in stores:
        if store in d:
            tx.output.add_guard(ItemSource(dict_source, store), GuardKind.DICT_KEYS, tuple(d[store]))


def _check_plain(var, obj, name: str, hook: str, impl) -> None:
    """Unsupported unless `obj.name = v` (hook "__setattr__") or `del obj.name` ("__delattr__") is
    `impl` storing into the instance __dict__, with nothing of that name on the type to intercept
    it or to win over the instance dict on a later read."""
    cls = type(obj)
    what = "store to" if hook == "__setattr__" else "deletion of"
    if var.source is None:
        unsupported(f"{what} attribute {name!r} of an object with no source")
    if type_lookup(cls, hook) is not impl:
        unsupported(f"{what} {cls.__name__}.{name}: the class defines its own {hook}")
    found = lookup(obj, name)
    if found.where is Where.CUSTOM:
        unsupported(f"{what} {cls.__name__}.{name}: the class overrides __getattribute__")
    if found.where is Where.DATA_DESCRIPTOR:
        unsupported(f"{what} {cls.__name__}.{name}, a {type(found.value).__name__} on the class "
                    "(a data descriptor: property, __slots__ member)")
    if instance_dict(obj) is None:
        unsupported(f"{what} attribute {name!r} of a {cls.__name__}, which has no __dict__")


def store_attribute(tx, var, obj, name: str, value, *, impl=object.__setattr__,
                    by_identity: bool = False) -> None:
    """Record `obj.name = value` for replay (`var` is obj's tracker); `impl` is the __setattr__
    the type must have. `by_identity`: obj is guarded by identity (side_effects.py, aliasing)."""
    _check_plain(var, obj, name, "__setattr__", impl)
    tx.output.side_effects.store_attr(var, obj, name, value, by_identity=by_identity)


def delete_attribute(tx, var, obj, name: str, *, impl=object.__delattr__, by_identity: bool = False,
                     stores: tuple = ()) -> None:
    """Record `del obj.name` for replay. The name must be in the instance __dict__ (or stored
    earlier in this trace); the instance dict's keys are guarded, and the `stores` dicts' (a
    module's _parameters, _buffers, _modules, which nn.Module.__delattr__ looks in first)."""
    _check_plain(var, obj, name, "__delattr__", impl)
    effects = tx.output.side_effects
    if effects.has_attr_effect(var, obj, name):
        effects.attr(var, obj, name)   # deleted twice: AttributeError in Python, refused here
    else:
        d = instance_dict(obj)
        if name not in d:
            unsupported(f"deletion of {type(obj).__name__}.{name}, which is not in its __dict__")
        _pin_keys(tx, var, d, stores)
        for store in stores:
            if name in d.get(store, ()):
                unsupported(f"deletion of {type(obj).__name__}.{name}, which is in its {store}")
    effects.delete_attr(var, obj, name, by_identity=by_identity)
