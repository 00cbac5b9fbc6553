"""The attribute protocol of a user object read from the frame, as CPython runs it, hooks included.

`obj.name` is the type's tp_getattro: for a class with a Python __getattribute__ or __getattr__,
CPython's slot_tp_getattr_hook calls type(obj).__getattribute__(obj, name) and, only where that
raises AttributeError, type(obj).__getattr__(obj, name). Both are traced here as the Python
functions they are (inlined with the object as self); a __getattribute__ that is object's (or a
trusted renaming, attribute_lookup.TRUSTED_GETATTRIBUTE) is attribute.read_attribute. Inside a
traced hook, `object.__getattribute__(self, n)` / `super().__getattribute__(n)` is object's
generic lookup (attribute.read_attribute with generic=True: data descriptors on the type, the
instance __dict__, the rest of the class, in that order, each value guarded where it lives without
running the hook again); a name it does not find raises the traced AttributeError, its absence
guarded by the instance __dict__'s keys, and the slot's fallback to __getattr__ catches it.

`obj.name = v` / `del obj.name` run type(obj).__setattr__ / __delattr__: a Python one is traced;
object's (reached directly, or as `object.__setattr__(self, n, v)` / `super().__setattr__(n, v)`
inside a traced hook) is `object_store` / `object_delete`: a data descriptor on the type takes the
store (a property's fset or a user descriptor's __set__, traced; a __slots__ member, recorded),
else it lands in the instance __dict__ (recorded). Recorded stores are replayed after the graph by
side_effects.py: from a traced hook as object.__setattr__(obj, n, v) (OBJECT_SET_ATTR: the hook ran
in the trace and must not run twice), and reads later in the trace see them.

`obj.__dict__` is InstanceDictView: `k in d`, `d[k]`, `d.get(k)` read the real __dict__ (and this
trace's stores), guarded on what was read; `d[k] = v` is a store that bypasses the type's
descriptors, recorded as object.__setattr__ where no data descriptor of that name is on the type
(the two are then the same store) and refused otherwise.

What cannot be followed exactly (a hook written in C other than object's, a descriptor whose
__get__/__set__ is not a Python function, a store the replay would not repeat) raises Unsupported.
"""
from __future__ import annotations

import types

from ....guard.attribute_lookup import MISSING, instance_dict, is_data_descriptor, resolved_name, type_lookup
from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import EffectKind, SourceOutput
from .attribute import (_pin_keys, descriptor_call, dict_source, has_own_getattribute,
                        has_python_descriptor_method, read_attribute, type_source)
from ..base import TracedAttributeError, TracedKeyError, VariableTracker, catching_raise, traced, unsupported
from ..constant import ConstantVariable


def hook_refusal(cls: type) -> str | None:
    """Why the attribute reads of `cls`'s instances cannot be followed, or None: a __getattribute__
    or __getattr__ that is neither object's, a trusted renaming nor a Python function (outside
    torch: nn.Module's __getattr__ is nn_module.py's)."""
    if has_own_getattribute(cls) and not isinstance(type_lookup(cls, "__getattribute__"), types.FunctionType):
        return f"its __getattribute__ is a {type(type_lookup(cls, '__getattribute__')).__name__}"
    hook = type_lookup(cls, "__getattr__")
    if hook is MISSING:
        return None
    if not isinstance(hook, types.FunctionType):
        return f"its __getattr__ is a {type(hook).__name__}"
    if (hook.__module__ or "").startswith("torch"):
        return f"its __getattr__ is {hook.__qualname__}"
    return None


def has_hooks(cls: type) -> bool:
    """Whether `obj.name` runs Python code of the class before or after object's lookup."""
    return has_own_getattribute(cls) or type_lookup(cls, "__getattr__") is not MISSING


def get_attribute(tx, var, name: str, plain):
    """`obj.name` for `var` (a UserObjectVariable); `plain(name)` is the read where the type's
    __getattribute__ is object's or trusted."""
    cls = type(var.value)

    def run():
        if has_own_getattribute(cls):
            return tx.call(var.type_method(tx, "__getattribute__"), [var, ConstantVariable(name)], {})
        if name == "__dict__" and resolved_name(var.value, name) == name and instance_dict(var.value) is not None:
            return InstanceDictView(var, var.value)   # (none: a __slots__ object, the lookup's miss)
        return plain(name)

    if type_lookup(cls, "__getattr__") is MISSING:
        return run()
    value, found = catching_raise(tx, run, TracedAttributeError)
    if found:
        return value
    return tx.call(var.type_method(tx, "__getattr__"), [var, ConstantVariable(name)], {})


def module_getattr(tx, var, name: str, hook):
    """type(m).__getattr__(m, name) for an nn.Module whose class writes its own in Python
    (diffusers' ModelMixin: its config's names, then `super().__getattr__`, nn.Module's, which
    classes.py hands back to `var._module_getattr`), reached where normal lookup found nothing."""
    cls = type(var.module)
    if not isinstance(hook, types.FunctionType) or (hook.__module__ or "").startswith("torch"):
        unsupported(f"attribute {name!r} of {cls.__name__}, whose __getattr__ is {hook!r}")
    fn = tx.wrap(hook, AttrSource(type_source(var.source, cls), "__getattr__"))
    return tx.call(fn, [var, ConstantVariable(name)], {})


def object_getattr(tx, var, name: str):
    """object.__getattribute__(obj, name), called from the type's own hook."""
    if name == "__dict__":
        return InstanceDictView(var, var.value)
    return read_attribute(tx, var, var.value, name, generic=True)


def set_attribute(tx, var, name: str, value) -> None:
    """`obj.name = value`: the type's Python __setattr__ traced, or object's."""
    hook = type_lookup(type(var.value), "__setattr__")
    if hook is object.__setattr__:
        object_store(tx, var, name, value, EffectKind.SET_ATTR)
    elif isinstance(hook, types.FunctionType):
        tx.call(var.type_method(tx, "__setattr__"), [var, ConstantVariable(name), value], {})
    else:
        unsupported(f"store to {type(var.value).__name__}.{name}: its __setattr__ is a {type(hook).__name__}")


def delete_attribute(tx, var, name: str) -> None:
    hook = type_lookup(type(var.value), "__delattr__")
    if hook is object.__delattr__:
        object_delete(tx, var, name, EffectKind.DEL_ATTR)
    elif isinstance(hook, types.FunctionType):
        tx.call(var.type_method(tx, "__delattr__"), [var, ConstantVariable(name)], {})
    else:
        unsupported(f"deletion of {type(var.value).__name__}.{name}: its __delattr__ is a "
                    f"{type(hook).__name__}")


def _data_descriptor(cls: type, name: str):
    attr = type_lookup(cls, name)
    return attr if attr is not MISSING and is_data_descriptor(attr) else None


# What a store or a deletion runs on a data descriptor of the type: the property's function, the
# descriptor protocol's method, and what the property lacks when that function is not Python's.
_DESCRIPTOR_ACTIONS = {
    "store": ("store to", "fset", "__set__", "setter"),
    "deletion": ("deletion of", "fdel", "__delete__", "deleter"),
}


def _through_descriptor(tx, var, name: str, attr, action: str, args: list) -> bool:
    """Whether `attr`, the type's data descriptor of `name` (or None), took the store or deletion:
    a property's fset/fdel or a Python __set__/__delete__, traced with `args` after the object."""
    what, accessor, method, role = _DESCRIPTOR_ACTIONS[action]
    cls = type(var.value)
    if type(attr) is property:
        fn = getattr(attr, accessor)
        if not isinstance(fn, types.FunctionType):
            unsupported(f"{what} {cls.__name__}.{name}: a property without a Python {role}")
        traced_fn = tx.wrap(fn, AttrSource(AttrSource(type_source(var.source, cls), name), accessor))
        tx.call(traced_fn, [var, *args], {})
        return True
    if attr is not None and has_python_descriptor_method(attr, method):
        descriptor_call(tx, var, var.value, name, method, list(args))
        return True
    return False


def object_store(tx, var, name: str, value, kind=EffectKind.OBJECT_SET_ATTR) -> None:
    """object.__setattr__(obj, name, value). `kind`: how a store into the object is replayed
    (SET_ATTR where the type's __setattr__ is object's: STORE_ATTR is the same store)."""
    obj, cls = var.value, type(var.value)
    if var.source is None:
        unsupported(f"store to attribute {name!r} of an object with no source")
    attr = _data_descriptor(cls, name)
    if _through_descriptor(tx, var, name, attr, "store", [value]):
        return
    if attr is not None and not isinstance(attr, types.MemberDescriptorType):
        unsupported(f"store to {cls.__name__}.{name}, a {type(attr).__name__} on the class "
                    "(a data descriptor the trace does not follow)")
    if attr is None and instance_dict(obj) is None:
        unsupported(f"AttributeError: store to {cls.__name__}.{name}, which has no __dict__")
    tx.output.side_effects.store_attr(var, obj, name, value, by_identity=False, kind=kind)


def object_delete(tx, var, name: str, kind=EffectKind.OBJECT_DEL_ATTR) -> None:
    """object.__delattr__(obj, name)."""
    obj, cls = var.value, type(var.value)
    if var.source is None:
        unsupported(f"deletion of attribute {name!r} of an object with no source")
    attr = _data_descriptor(cls, name)
    if _through_descriptor(tx, var, name, attr, "deletion", []):
        return
    if attr is not None:
        unsupported(f"deletion of {cls.__name__}.{name}, a {type(attr).__name__} on the class")
    effects = tx.output.side_effects
    if effects.has_attr_effect(var, obj, name):
        effects.attr(var, obj, name)   # deleted twice: AttributeError in Python, refused here
    else:
        d = instance_dict(obj)
        if d is None or name not in d:
            unsupported(f"AttributeError: deletion of {cls.__name__}.{name}, which is not in its __dict__")
        _pin_keys(tx, var, d, (), cls)
    effects.delete_attr(var, obj, name, by_identity=False, kind=kind)


class InstanceDictView(VariableTracker):
    """`obj.__dict__` of a user object or module read from the frame (see the module's comment);
    `real` is the object."""

    def __init__(self, obj_var, real):
        super().__init__(dict_source(obj_var.source, type(real)) if obj_var.source is not None else None)
        self.obj, self.real = obj_var, real

    def python_type(self):
        return dict

    def reconstruct(self, outputs):
        # The very dict, loaded again after the trace's stores to the object were replayed.
        return SourceOutput(self.source)

    def _key(self, key) -> str:
        # A str, or one of a str subclass that keeps str's hash and == (it finds what the str finds).
        value = key.as_python_constant() if key.is_python_constant() else None
        if not isinstance(value, str) or type(value) is not str and (
                type_lookup(type(value), "__hash__") is not vars(str)["__hash__"] or
                type_lookup(type(value), "__eq__") is not vars(str)["__eq__"]):
            unsupported(f"a key of {self} that is not a constant str")
        return str.__str__(value)

    def read(self, tx, key):
        """(found, value tracker or None) for `obj.__dict__[key]`, guarded on what was read."""
        name, obj = self._key(key), self.real
        effects = tx.output.side_effects
        if effects.has_attr_effect(self.obj, obj, name):
            if _data_descriptor(type(obj), name) is not None:
                unsupported(f"{self}[{name!r}] after a store through the type's descriptor {name!r}")
            return True, effects.attr(self.obj, obj, name)   # deleted: refused
        d = instance_dict(obj)
        if name in d:   # its value's guard fails when the key goes
            return True, tx.wrap(d[name], ItemSource(self.source, name))
        _pin_keys(tx, self.obj, d, (), type(obj))
        return False, None

    def contains(self, tx, item) -> bool:
        return self.read(tx, item)[0]

    def getitem(self, tx, key):
        found, value = self.read(tx, key)
        if not found:
            message = repr(self._key(key))
            raise traced(TracedKeyError, f"KeyError: {message} in {self}", KeyError,
                         [ConstantVariable(self._key(key))])
        return value

    def setitem(self, tx, key, value) -> None:
        name = self._key(key)
        if not hasattr(self.obj, "object_setattr"):
            unsupported(f"{self}[{name!r}] = ...: a module's __dict__ (its stores are nn.Module's)")
        if _data_descriptor(type(self.real), name) is not None:
            unsupported(f"{self}[{name!r}] = ...: the type has a data descriptor {name!r}, which "
                        "object.__setattr__ would run")
        object_store(tx, self.obj, name, value)

    def var_getattr(self, tx, name: str):
        if name in ("get", "__contains__", "__getitem__", "__setitem__"):
            return _DictViewMethod(self, name)
        unsupported(f"{self}.{name}")

    def __repr__(self):
        return f"InstanceDictView({self.source})"


class _DictViewMethod(VariableTracker):
    def __init__(self, view, name: str):
        super().__init__(None)
        self.view, self.name = view, name

    def call_function(self, tx, args, kwargs):
        view = self.view
        if kwargs:
            unsupported(f"{view}.{self.name} with keyword arguments")
        if self.name == "get" and 1 <= len(args) <= 2:
            found, value = view.read(tx, args[0])
            return value if found else (args[1] if len(args) == 2 else ConstantVariable(None))
        if self.name == "__contains__" and len(args) == 1:
            return ConstantVariable(view.contains(tx, args[0]))
        if self.name == "__getitem__" and len(args) == 1:
            return view.getitem(tx, args[0])
        if self.name == "__setitem__" and len(args) == 2:
            view.setitem(tx, *args)
            return ConstantVariable(None)
        unsupported(f"{view}.{self.name} with {len(args)} arguments")

    def __repr__(self):
        return f"_DictViewMethod({self.view!r}.{self.name})"
