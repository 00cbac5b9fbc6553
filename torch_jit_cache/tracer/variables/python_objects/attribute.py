"""Reading `obj.name` off an object read from the frame (a user object or an nn.Module).

Where the answer comes from is decided by attribute_lookup.lookup (Python's order); this turns that
place into a tracker. Every value keeps a source through the object (`L['self'].name`, or
`L['self'].name.__func__` for a method), so its guard re-reads the attribute the same way Python
does at each call: when a later assignment changes where the name resolves, the guard fails.
A user descriptor's Python __get__ is traced (descriptor_get); a name found nowhere raises the
traced AttributeError with its absence guarded (`_missing`). With `generic=True` (object's own
lookup, called from a class's traced hook: object_protocol.py) values are guarded through
`vars(obj)` and the class's MRO, never through `obj.name`, whose guard would run the hook again.
What cannot be followed exactly (a descriptor written in C other than property, __slots__ members,
functions, staticmethod and classmethod) raises Unsupported, never a guess.

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

from ....guard.attribute_lookup import (MISSING, Where, generic_lookup, has_own_getattribute, instance_dict,
                                        is_descriptor, lookup, resolved_name, type_lookup)
from ....guard.sources import AttrSource, InstanceDictSource, ItemSource, TypeSource
from ....guard.trace_result import GuardKind
from ..base import TracedAttributeError, traced, unsupported
from ..constant import ConstantVariable
from .functions import UserFunctionVariable, UserMethodVariable


def read_attribute(tx, var, obj, name: str, on_getattr=None, *, generic: bool = False):
    """The tracker for `obj.name`, `var` being obj's tracker (with a source).

    `on_getattr(found_hook)` handles names that normal lookup does not find and the type's
    __getattr__ would answer (nn.Module's); without it such names, and names not found at all,
    raise the traced AttributeError (their absence guarded, `_missing`), which the caller may
    catch as Python does (a Python __getattr__, getattr with a default, hasattr).
    `generic`: object.__getattribute__(obj, name), called from the type's own Python hook: no
    renaming, and values guarded through the instance __dict__ and the class's MRO (`exact`),
    since a guard's getattr would run the type's hook, which may answer otherwise.
    """
    if var.source is None:
        unsupported(f"attribute {name!r} of an object with no source")
    renamed = name if generic else resolved_name(obj, name)
    if renamed is not None and deleted_in_trace(tx, var, obj, renamed):
        _missing(tx, var, obj, renamed)
    if renamed is not None:
        stored = tx.output.side_effects.attr(var, obj, renamed)
        if stored is not None:   # stored earlier in this trace (refused if deleted)
            return stored
    found = generic_lookup(obj, name) if generic else lookup(obj, name)
    where, value = found.where, found.value
    cls_name = type(obj).__name__
    # A guard's getattr would run the class's own hook: __getattribute__ always, __getattr__ once
    # the name is gone (modules excepted: nn.Module's __getattr__ is their store, on_getattr).
    exact = (generic or on_getattr is None) and \
        (has_own_getattribute(type(obj)) or type_lookup(type(obj), "__getattr__") is not MISSING)
    source = AttrSource(var.source, name)
    if where is Where.CUSTOM:
        unsupported(f"attribute {name!r} of {cls_name}, whose class overrides __getattribute__")
    if where is Where.DATA_DESCRIPTOR:
        if type(value) is property:
            if not isinstance(value.fget, types.FunctionType):
                unsupported(f"property {cls_name}.{name} has no Python getter")
            # Guarded where Python finds it (type(obj).name.fget): replacing the property on the
            # class fails the guard instead of running the old getter.
            getter = AttrSource(AttrSource(type_source(var.source, type(obj)), found.name), "fget")
            return tx.call(tx.wrap(value.fget, getter), [var], {})
        if name == "__class__" and isinstance(value, types.GetSetDescriptorType) and \
                value.__objclass__ is object:
            return tx.wrap(type(obj), type_source(var.source, type(obj)))
        if name == "__dict__" and isinstance(value, types.GetSetDescriptorType):
            return tx.instance_dict_view(var, obj)   # object_protocol.py, which builds on this module
        if isinstance(value, types.MemberDescriptorType) and not exact:
            try:
                return tx.wrap(getattr(obj, name), source)  # a __slots__ member
            except AttributeError:  # an empty slot: Python would go on to __getattr__
                unsupported(f"AttributeError: slot {name!r} of {cls_name} is empty")
        if has_python_descriptor_method(value, "__get__"):
            return descriptor_get(tx, var, obj, found.name)
        unsupported(f"attribute {name!r} of {cls_name} is a {type(value).__name__} (a data descriptor)")
    if where is Where.INSTANCE_DICT:
        return tx.wrap(value, ItemSource(dict_source(var.source, type(obj)), found.name) if exact else source)
    if where is Where.CLASS:
        if exact:   # the name is not in the instance __dict__ now: its keys pinned
            _pin_keys(tx, var, instance_dict(obj) or {}, (), type(obj))
        if isinstance(value, types.FunctionType):
            if exact:
                raw = class_dict_source(var.source, type(obj), found.name)
                tx.output.add_guard(raw, GuardKind.ID_MATCH, value)
                return UserMethodVariable(UserFunctionVariable(value, raw), var, None)
            # `obj.name.__func__ is value`: fails once the instance gets an attribute of that name (a
            # plain function or value has no __func__) or the class's method is replaced.
            fsrc = AttrSource(source, "__func__")
            tx.output.add_guard(fsrc, GuardKind.ID_MATCH, value)
            return UserMethodVariable(UserFunctionVariable(value, fsrc), var, source)
        if isinstance(value, staticmethod):
            if exact:
                return tx.wrap(value.__func__, AttrSource(class_dict_source(var.source, type(obj), found.name),
                                                          "__func__"))
            return tx.wrap(value.__func__, source)
        if isinstance(value, classmethod) and isinstance(value.__func__, types.FunctionType):
            cls = tx.wrap(type(obj), type_source(var.source, type(obj)))
            if exact:
                fsrc = AttrSource(class_dict_source(var.source, type(obj), found.name), "__func__")
                tx.output.add_guard(fsrc, GuardKind.ID_MATCH, value.__func__)
                return UserMethodVariable(UserFunctionVariable(value.__func__, fsrc), cls, None)
            fsrc = AttrSource(source, "__func__")
            tx.output.add_guard(fsrc, GuardKind.ID_MATCH, value.__func__)
            return UserMethodVariable(UserFunctionVariable(value.__func__, fsrc), cls, source)
        if has_python_descriptor_method(value, "__get__"):
            if not exact and instance_dict(obj) is not None:   # the instance __dict__ would win
                _pin_keys(tx, var, instance_dict(obj), (), type(obj))
            return descriptor_get(tx, var, obj, found.name)
        if is_descriptor(value):
            unsupported(f"attribute {name!r} of {cls_name} is a {type(value).__name__} (a descriptor)")
        if exact:
            return tx.wrap(value, class_dict_source(var.source, type(obj), found.name))
        return tx.wrap(value, source)  # a plain class attribute, read through the instance
    if where is Where.GETATTR and on_getattr is not None:
        return on_getattr(found.value)
    _missing(tx, var, obj, found.name or name)


def deleted_in_trace(tx, var, obj, name: str) -> bool:
    """Whether `obj.name` is gone for the rest of the trace: its last change in the trace deleted
    it from the instance __dict__, and nothing else would answer the name (no class attribute, no
    __getattr__, object's own __getattribute__), so Python raises AttributeError. The class is
    pinned by the object's type guard, as for any name found missing (`_missing`); a name the
    class could still answer is left to the read that refuses it (side_effects.attr)."""
    effects = tx.output.side_effects
    if not effects.has_attr_effect(var, obj, name) or not effects.attr_deleted(obj, name):
        return False
    cls = type(obj)
    return type_lookup(cls, name) is MISSING and type_lookup(cls, "__getattr__") is MISSING and \
        not has_own_getattribute(cls)


def _missing(tx, var, obj, name: str):
    """Raise the traced AttributeError of `obj.name` not found by object's lookup; its absence is
    guarded by the instance __dict__'s keys (the class by the object's type guard)."""
    d = instance_dict(obj)
    if d is not None:
        _pin_keys(tx, var, d, (), type(obj))
    message = f"{type(obj).__name__!r} object has no attribute {name!r}"
    raise traced(TracedAttributeError, f"AttributeError: {message}", AttributeError,
                 [ConstantVariable(message)])


def type_source(source, cls: type):
    """type(obj) for the object at `source` of type `cls`: `obj.__class__` (the guard text users
    know), or, where the class has its own __getattribute__, `type(obj)` (the hook not run)."""
    return TypeSource(source) if has_own_getattribute(cls) else AttrSource(source, "__class__")


def dict_source(source, cls: type):
    """obj.__dict__ for the object at `source`, read as type_source reads its class."""
    return InstanceDictSource(source) if has_own_getattribute(cls) else AttrSource(source, "__dict__")


def class_dict_source(source, cls: type, name: str):
    """`type(obj).__mro__[i].__dict__[name]`: the raw class attribute where Python finds it (no
    descriptor's __get__ runs to read it), for the object at `source` of the guarded type `cls`."""
    for i, klass in enumerate(cls.__mro__):
        if name in vars(klass):
            mro = AttrSource(type_source(source, cls), "__mro__")
            return ItemSource(AttrSource(ItemSource(mro, i), "__dict__"), name)
    raise KeyError(name)


def has_python_descriptor_method(attr, method: str) -> bool:
    """type(attr).method is a Python function outside torch and the standard library's skipped
    modules (a user descriptor's __get__/__set__/__delete__, inlined)."""
    fn = type_lookup(type(attr), method)
    return isinstance(fn, types.FunctionType) and type(attr) is not property


def descriptor_call(tx, var, obj, name: str, method: str, args: list):
    """type(d).method(d, obj, *args), d the user descriptor `type(obj).name`: read without running
    it (class_dict_source), guarded by its type (its attributes where read), and the method
    through d's class (by identity)."""
    d_source = class_dict_source(var.source, type(obj), name)
    raw = type_lookup(type(obj), name)
    fn = type_lookup(type(raw), method)
    if not isinstance(fn, types.FunctionType):
        unsupported(f"descriptor {type(obj).__name__}.{name}: its {method} is not a Python function")
    d_var = tx.wrap(raw, d_source)
    method_var = tx.wrap(fn, AttrSource(type_source(d_source, type(raw)), method))
    return tx.call(method_var, [d_var, var, *args], {})


def descriptor_get(tx, var, obj, name: str):
    """`obj.name` through the user descriptor type(obj).name: its __get__(obj, type(obj)), traced."""
    owner = tx.wrap(type(obj), type_source(var.source, type(obj)))
    return descriptor_call(tx, var, obj, name, "__get__", [owner])


def has_attribute(tx, var, obj, name: str, stores: tuple = ()) -> bool:
    """hasattr(obj, name), with guards that keep the answer true for the entry.

    True: the attribute is read as `obj.name` would be (read_attribute), so its value is guarded
    where it is found. False: every place Python looked is pinned by its keys: the instance
    __dict__ and the `stores` dicts that the type's __getattr__ reads (nn.Module's _parameters,
    _buffers, _modules); an attribute added later to any of them fails the guard. (The class is
    pinned by the object's type guard; a class mutated in place is not seen.)
    """
    if deleted_in_trace(tx, var, obj, name):
        return False
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
    if instance_dict(obj) is not None:   # without one (__slots__), the type decides: guarded
        _pin_keys(tx, var, d, stores)
    return False


def _pin_keys(tx, var, d: dict, stores: tuple, cls: type | None = None) -> None:
    """Guard the keys of the instance __dict__ `d` of `var` (of type `cls`, where it may have its
    own __getattribute__: dict_source), and of the `stores` dicts in it."""
    source = AttrSource(var.source, "__dict__") if cls is None else dict_source(var.source, cls)
    tx.output.add_guard(source, GuardKind.DICT_KEYS, tuple(d))
    for store in stores:
        if store in d:
            tx.output.add_guard(ItemSource(source, store), GuardKind.DICT_KEYS, tuple(d[store]))


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
