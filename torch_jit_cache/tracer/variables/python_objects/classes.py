"""Classes and super(), read as user objects are (user_object.py).

ClassVariable: a class read from the frame (guarded by identity) or given by type(obj); its
attributes are read from its MRO as `Class.name` returns them (Class.forward, classmethods,
staticmethods), each through its own source, so a replaced method fails a guard. Calling one is
folded for immutable torch values (torch.finfo, torch.device, torch.Size), makes the traced
exceptions (IndexError(...)) and the modules built inside forward (built_modules.py); user
classes build objects (new_object.py). SuperVariable:
super(), zero-argument or explicit; the member is found by its place in type(obj).__mro__ and read
through `L['self'].__class__.__mro__[i]`.
"""
from __future__ import annotations

import enum
import functools
import types

import torch

from ....guard.attribute_lookup import MISSING as MISSING_, is_data_descriptor, type_lookup
from ....guard.sources import AttrSource, ItemSource, MethodCallSource
from ....guard.trace_result import GuardKind, SuperOutput
from .attribute import type_source
from ..torch_objects.autograd_functions import AutogradFunctionApplyVariable, is_function_apply
from ..torch_objects.legacy_tensor_types import call_legacy_tensor_type
from ..base import TracedAttributeError, VariableTracker, traced, unsupported
from ..modules.built_modules import build_module
from ..constant import ConstantVariable, is_enum_member
from ..collections.containers import ListVariable
from .exceptions import ExceptionVariable, guard_modelled, modelled_class
from .functions import BaseFunctionVariable, PureFunctionVariable, UserMethodVariable, decorate
from .imports import class_import_source
from .instance_checks import TypeCheckVariable
from .object_hooks import ObjectHookVariable, object_hook_name
from ..builtin_functions.pure import PURE_TYPES, is_pure
from ..torch_objects.tensor import is_tensor_method
from .user_object import DICT_READS, DictReadVariable, DictSubclassVariable, MixinMethodVariable, mixin_of


def _class_member(tx, owner_var, raw, source, bind_to):
    """A member `raw` found in a class's __dict__, as `getattr` returns it: a function (bound to
    `bind_to` when it is not None), a staticmethod's function, a classmethod bound to the class, or
    a plain value; `source` reads that very member (guarded where it is found)."""
    if isinstance(raw, types.FunctionType):
        mixin = mixin_of(raw) if bind_to is not None else None
        if mixin is not None:
            return MixinMethodVariable(bind_to, mixin, raw.__name__)
        fn = tx.wrap(raw, source)
        return fn if bind_to is None else _bound(fn, bind_to)
    if isinstance(raw, staticmethod) and isinstance(raw.__func__, types.FunctionType):
        return tx.wrap(raw.__func__, source)
    if bind_to is None and is_function_apply(raw, owner_var.value):   # Fn.apply (autograd_functions.py)
        return AutogradFunctionApplyVariable(owner_var.value, owner_var.source)
    if isinstance(raw, classmethod) and isinstance(raw.__func__, types.FunctionType):
        return _bound(tx.wrap(raw.__func__, AttrSource(source, "__func__")), owner_var)
    if object_hook_name(raw) is not None:   # object.__setattr__ and friends (object_hooks.py)
        return ObjectHookVariable(object_hook_name(raw), bind_to, source)
    if is_tensor_method(raw) and bind_to is None:
        # torch.Tensor.view read from the class: the tensor method itself, called with the
        # tensor first (a torch callable to the builder, guarded by identity where it is found).
        return tx.wrap(raw, source)
    if bind_to is None and (type(raw) in _SELF_ON_CLASS or is_cached_property(raw)):
        return tx.wrap(raw, source)   # `Cls.prop` is the property itself (its fget, ...)
    if type_lookup(type(raw), "__get__") is not MISSING_:
        unsupported(f"class attribute of type {type(raw).__name__} (a descriptor)")
    return tx.wrap(raw, source)


# Descriptors whose __get__ returns the descriptor itself when read from the class.
_SELF_ON_CLASS = (property, types.MemberDescriptorType, types.GetSetDescriptorType, types.WrapperDescriptorType,
                  types.MethodDescriptorType)


def is_cached_property(value) -> bool:
    """functools.cached_property, or the same class from a fresh import of functools (its
    __get__(None, owner) returns the descriptor itself), not a subclass that may override it."""
    cls = type(value)
    return cls is functools.cached_property or (cls.__module__ == "functools" and
                                                 cls.__qualname__ == "cached_property" and
                                                 cls.__bases__ == (object,) and
                                                 _same_code(cls.__get__, functools.cached_property.__get__))


def _same_code(f, g) -> bool:
    a, b = getattr(f, "__code__", None), g.__code__
    return a is not None and (a.co_filename, a.co_code, a.co_consts) == (b.co_filename, b.co_code, b.co_consts)


def _bound(fn, obj):
    return UserMethodVariable(fn, obj)


# type's own descriptors that read the class's state without side effects: `__module__` (from its
# __dict__), `__mro__`, `__bases__`, `__base__`. (`__dict__` is a new mappingproxy at each read.)
_TYPE_MEMBERS = frozenset({"__module__", "__mro__", "__bases__", "__base__",
                           # numbers type's C struct holds (`cls.__flags__ & TPFLAGS_MAPPING`)
                           "__flags__", "__basicsize__", "__itemsize__", "__dictoffset__", "__weakrefoffset__"})
# Of those, what never changes after the class is made (its __flags__ do: the abstract bit, the
# type cache's version-tag bit), a constant for a class known from a guarded type.
_FIXED_SIZES = frozenset({"__basicsize__", "__itemsize__", "__dictoffset__", "__weakrefoffset__"})


def _type_member(tx, var, name):
    """`cls.name` for one of _TYPE_MEMBERS: through the class's source, guarded by value (the
    classes of `__mro__` by identity); without a source (a class known from a guarded type) the
    module name and _FIXED_SIZES are constants, and the rest is refused."""
    value = getattr(var.value, name)
    if var.source is not None:
        return tx.wrap(value, AttrSource(var.source, name))
    if type(value) is str or name in _FIXED_SIZES:   # fixed when the class was made
        return ConstantVariable(value)
    source = class_import_source(tx, var.value)
    if source is not None:
        return tx.wrap(value, AttrSource(source, name))
    unsupported(f"attribute {name!r} of class {var.value.__name__}, which has no source")


# How a builtin type that builtins.py models (list, tuple, dict, ...) is called when the trace
# holds it as a class (`type(seq)([...])`): builtins.py, which imports this module, registers its
# model here at import, so this module needs no import of it.
_BUILTIN_MODELS = []


def register_builtin_model(call) -> None:
    """`call(tx, cls, source, args, kwargs)`: the tracker of `cls(*args, **kwargs)`, or None where
    `cls` is not a builtin that `call` models."""
    _BUILTIN_MODELS.append(call)


_IMMUTABLE_TYPE = 1 << 8   # Py_TPFLAGS_IMMUTABLETYPE: no attribute can be set on the class


def _never_gains_attributes(cls) -> bool:
    """Whether no attribute can ever be added to `cls`, its bases and its metaclass (builtin
    classes: `function`, `int`), nor found through a metaclass `__getattr__`: a name missing now
    is missing on every later call, so its absence needs no guard."""
    meta = type(cls)
    return (all(k.__flags__ & _IMMUTABLE_TYPE for k in (*cls.__mro__, *meta.__mro__))
            and type_lookup(meta, "__getattr__") is MISSING_)


# type's C methods that, called without arguments, read the class's own state and run no other code:
# the classes that subclass it now (held weakly by the class), its MRO.
_TYPE_STATE_METHODS = ("__subclasses__", "mro")


class ClassStateMethodVariable(VariableTracker):
    """`Cls.__subclasses__` / `Cls.mro` of a class whose metaclass is `type`. Called, the list it
    returns now, read through `Cls.__subclasses__()` (sources.MethodCallSource, which the guard tree
    calls at each check: a class defined or freed later changes its length or an item, and
    recompiles): a new list each call, as eager's is, holding each class through its item of that
    source, guarded by identity."""

    def __init__(self, owner, name: str):
        super().__init__(None)
        self.owner, self.name = owner, name

    def call_function(self, tx, args, kwargs):
        cls = self.owner.value
        if args or kwargs:
            unsupported(f"{cls.__name__}.{self.name}() with arguments")
        if self.owner.source is None:
            unsupported(f"{cls.__name__}.{self.name}() of a class without a source")
        source = MethodCallSource(self.owner.source, self.name)
        found = getattr(cls, self.name)()
        tx.output.add_guard(source, GuardKind.LENGTH, len(found))
        return ListVariable([tx.wrap(klass, ItemSource(source, i)) for i, klass in enumerate(found)])

    def __repr__(self):
        return f"ClassStateMethodVariable({self.owner!r}.{self.name})"


class ClassVariable(ConstantVariable):
    """A class read from the frame (guarded by identity) or given by type(obj). A constant for
    isinstance and `is`; its attributes are read from its MRO as `Class.name` returns them, each
    through its own source (`L['self'].__class__.forward`), so a replaced method fails a guard."""

    def var_getattr(self, tx, name):
        cls = self.value
        if name in ("__name__", "__qualname__"):
            value = getattr(cls, name)
            return tx.wrap(value, AttrSource(self.source, name)) if self.source is not None \
                else ConstantVariable(value)
        # type.__getattribute__: a data descriptor of the metaclass wins (type's own __dict__,
        # __annotations__ and __doc__ are getsets that read only the class's own __dict__, not its
        # bases'), then the class's MRO, then the metaclass's other attributes.
        meta = type(cls)
        meta_attr = type_lookup(meta, name)
        if name in _TYPE_MEMBERS and meta_attr is vars(type).get(name) and \
                type_lookup(meta, "__getattribute__") is type.__getattribute__:
            return _type_member(tx, self, name)
        if name == "__doc__" and meta_attr is vars(type)["__doc__"] and \
                type_lookup(meta, "__getattribute__") is type.__getattribute__ and \
                type(cls.__doc__) in (str, type(None)):
            # type's __doc__ getset: the class's own docstring (a str or None), guarded by value.
            if self.source is not None:
                return tx.wrap(cls.__doc__, AttrSource(self.source, name))
            if _never_gains_attributes(cls):
                return ConstantVariable(cls.__doc__)
        if type_lookup(meta, "__getattribute__") is not type.__getattribute__ or \
                meta_attr is not MISSING_ and is_data_descriptor(meta_attr):
            unsupported(f"attribute {name!r} of class {cls.__name__} comes from its metaclass")
        raw = type_lookup(cls, name)
        if raw is MISSING_ and name in _TYPE_STATE_METHODS and meta is type and meta_attr is vars(type)[name]:
            return ClassStateMethodVariable(self, name)
        if raw is MISSING_:
            if meta_attr is MISSING_ and _never_gains_attributes(cls):
                # `type(fn).__exit__`, as contextlib.ExitStack.push tries: AttributeError, which the
                # frame's own try may catch; such a class can never be given the name.
                raise traced(TracedAttributeError, f"class {cls.__name__} has no attribute {name!r}",
                             AttributeError,
                             [ConstantVariable(f"type object '{cls.__name__}' has no attribute '{name}'")])
            unsupported(f"attribute {name!r} of class {cls.__name__}: not in its MRO")
        if cls in PURE_TYPES and is_pure(getattr(cls, name)):   # bytes.fromhex, complex.conjugate
            return PureFunctionVariable(getattr(cls, name))
        source = self.source if self.source is not None else class_import_source(tx, cls)
        if source is None:
            unsupported(f"attribute {name!r} of class {cls.__name__}, which has no source")
        return _class_member(tx, self, raw, AttrSource(source, name), None)

    def call_function(self, tx, args, kwargs):
        # torch.finfo(dtype), torch.iinfo(dtype), torch.device('cpu'), torch.Size([2, 3]):
        # immutable values, folded (their arguments are constants the trace has guarded).
        if _foldable_class(self.value) and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            try:
                return ConstantVariable(self.value(*[a.as_python_constant() for a in args],
                                                   **{k: v.as_python_constant() for k, v in kwargs.items()}))
            except Exception as e:
                unsupported(f"{self.value.__name__}() raised {e!r}")
        if enum_lookup_class(self.value) and len(args) == 1 and not kwargs and args[0].is_python_constant():
            # Mode(1): the member with that value, a lookup in the class's value map.
            value = args[0].as_python_constant()
            if type_lookup(self.value, "_missing_") is not vars(enum.Enum)["_missing_"] and \
                    _member_of_value(self.value, value) is None:
                unsupported(f"{self.value.__name__}({value!r}) would run the class's own _missing_")
            try:
                return ConstantVariable(self.value(value))
            except ValueError as e:
                unsupported(f"{self.value.__name__}() raised {e!r}")
        if modelled_class(self.value) and not kwargs:   # IndexError("..."), to be raised
            guard_modelled(tx, self.value, self.source)
            return ExceptionVariable(self.value, args)
        if self.value is types.MethodType and len(args) == 2 and not kwargs and \
                isinstance(args[0], BaseFunctionVariable) and not args[1].is_python_constant():
            return UserMethodVariable(args[0], args[1])   # types.MethodType(fn, obj): fn bound to obj
        made = call_legacy_tensor_type(tx, self.value, args, kwargs)   # torch.LongTensor([1, 2])
        if made is not None:
            return made
        decorated = decorate(self.value, args, kwargs)   # @staticmethod in a class body (class_statements.py)
        if decorated is not None:
            return decorated
        built = build_module(tx, self, args, kwargs)   # nn.Softmax(dim=1) and friends (built_modules.py)
        if built is not None:
            return built
        for call in _BUILTIN_MODELS:   # type(seq)([...]): the builtin's own model
            made = call(tx, self.value, self.source, args, kwargs)
            if made is not None:
                return made
        if is_structseq(self.value):
            return _structseq(self.value, args, kwargs)
        return super().call_function(tx, args, kwargs)

    def __repr__(self):
        return f"ClassVariable({self.value.__qualname__})"


def enum_lookup_class(cls) -> bool:
    """An Enum class whose call with one value is a plain lookup of the member: enum's own
    metaclass, members that are constants (is_enum_member). A _missing_ of the user's is admitted
    only where the value is found without it (the call site checks `_member_of_value`)."""
    return isinstance(cls, type) and type(cls) is enum.EnumType and issubclass(cls, enum.Enum) and \
        all(is_enum_member(m) for m in cls.__members__.values())


def _member_of_value(cls, value):
    """The member Enum.__new__ finds before it would ask _missing_: the value itself when it is a
    member of exactly this class, else the one the value map holds (a hashable value); None."""
    if type(value) is cls:
        return value
    try:
        return vars(cls)["_value2member_map_"].get(value)
    except (KeyError, TypeError):   # no map, or an unhashable value (its linear search is not followed)
        return None


def is_structseq(cls) -> bool:
    """A C struct sequence type (torch.return_types.max, os.stat_result) whose fields are all
    named and all in the sequence: built from one sequence of exactly that many items."""
    return isinstance(cls, type) and issubclass(cls, tuple) and \
        isinstance(getattr(cls, "n_sequence_fields", None), int) and \
        getattr(cls, "n_fields", None) == cls.n_sequence_fields and getattr(cls, "n_unnamed_fields", 1) == 0


def _structseq(cls, args, kwargs):
    from ..collections.containers import BaseListVariable, TupleVariable
    if kwargs or len(args) != 1 or not isinstance(args[0], BaseListVariable) or \
            len(args[0].items) != cls.n_sequence_fields:
        unsupported(f"{cls.__qualname__}() called with other than one sequence of {cls.n_sequence_fields} items")
    try:   # some refuse to be made from Python (sys.flags): eager raises at the call
        cls((None,) * cls.n_sequence_fields)
    except Exception as e:  # noqa: BLE001
        unsupported(f"{cls.__qualname__}() raised {type(e).__name__}: {e}")
    fields = getattr(cls, "__match_args__", None)
    return TupleVariable(list(args[0].items), fields=list(fields) if fields else None, cls=cls)


def _foldable_class(value) -> bool:
    return any(value is c for c in (torch.finfo, torch.iinfo, torch.device, torch.Size, complex, bytes))


def call_super(tx, args, kwargs):
    """super(cls, obj), or super() in a method: its class from the `__class__` cell the compiler
    made, obj from the method's first argument (what CPython's zero-argument super reads)."""
    if kwargs:
        unsupported("super() with keyword arguments")
    if not args:
        code = tx.code
        if "__class__" not in code.co_freevars or code.co_argcount + code.co_kwonlyargcount < 1:
            unsupported("super() outside a method")
        first = code.co_varnames[0]
        obj = tx.cell(first).load(tx) if first in code.co_cellvars else tx.load_local(first)
        cls = tx.cell("__class__").load(tx)
    elif len(args) == 2:
        cls, obj = args
    else:
        unsupported("super() with one argument")
    if not cls.is_python_constant() or not isinstance(cls.as_python_constant(), type):
        unsupported(f"super() of {cls}")
    return SuperVariable(cls.as_python_constant(), obj, cls)


def _plain_class_value(raw) -> bool:
    """A class attribute that super() hands out as it is: no descriptor (its type has no __get__),
    such as a number or a string, read through the class that holds it and guarded by value there."""
    return not hasattr(type(raw), "__get__")


class SuperVariable(VariableTracker):
    """super(cls, obj): attribute reads search type(obj).__mro__ after cls. type(obj) is pinned by
    obj's type guard, so the class holding the member is found by position in that MRO and read
    from there (`L['self'].__class__.__mro__[2].get`)."""

    def __init__(self, cls: type, obj, cls_var=None):
        super().__init__(None)
        self.cls, self.obj, self.cls_var = cls, obj, cls_var

    def reconstruct(self, outputs):
        # At a break before `super().name` (a member the trace does not follow), made again from
        # the class's and the object's own trackers.
        if self.cls_var is None:
            return super().reconstruct(outputs)
        return outputs.once(self, lambda: SuperOutput(outputs.rebuild(self.cls_var),
                                                      outputs.rebuild(self.obj)))

    def var_getattr(self, tx, name):
        if isinstance(self.obj, ClassVariable) and isinstance(self.obj.value, type) and \
                issubclass(self.obj.value, self.cls):
            return self._class_getattr(tx, name)
        cls_var = getattr(self.obj, "cls_var", None)
        if hasattr(cls_var, "find"):   # an object of a class made in the trace (class_statements.py)
            return cls_var.member(tx, name, after=self.cls, bind=self.obj)
        objtype = self.obj.python_type()
        mro = objtype.__mro__
        # type(obj) through a source: the object's own (`L['self'].__class__`), or, for an object
        # built in the trace (new_object.py), the class it was built from, guarded by identity.
        if self.obj.source is not None:
            class_source = type_source(self.obj.source, objtype)
        elif cls_var is not None and cls_var.source is not None:
            class_source = cls_var.source
        elif getattr(self.obj, "cls_source", None) is not None:   # a module built in the trace
            class_source = self.obj.cls_source
        else:
            class_source = None
        if self.cls not in mro or class_source is None:
            unsupported(f"super({self.cls.__name__}, {self.obj}): not an instance with a source")
        for i in range(mro.index(self.cls) + 1, len(mro)):
            if name in vars(mro[i]):
                break
        else:
            unsupported(f"AttributeError: 'super' object has no attribute {name!r}")
        raw = vars(mro[i])[name]
        klass = ItemSource(AttrSource(class_source, "__mro__"), i)
        if isinstance(raw, (types.FunctionType, staticmethod, classmethod)) and \
                not mro[i].__module__.startswith(("torch.", "builtins")):
            owner = tx.wrap(objtype, class_source)
            bind = None if isinstance(raw, (staticmethod, classmethod)) else self.obj
            return _class_member(tx, owner, raw, AttrSource(klass, name), bind)
        from ..collections.dict_subclasses import base_dict_method   # imports this module's importers
        if (method := base_dict_method(self.obj, mro[i], name)) is not None:
            return method
        if object_hook_name(raw) == "__init__" or object_hook_name(raw) is not None and (
                hasattr(self.obj, "generic_getattr") or hasattr(self.obj, "object_getattr")):
            return ObjectHookVariable(object_hook_name(raw), self.obj)   # object_hooks.py
        if raw is vars(type)["__call__"] and hasattr(self.obj, "type_call"):   # in a metaclass's own __call__
            return _TypeCall(self.obj)
        if raw is type.__instancecheck__ or raw is type.__subclasscheck__:   # in a metaclass's own check
            return TypeCheckVariable(raw, self.obj)
        if mixin_of(raw) is not None:
            return MixinMethodVariable(self.obj, mixin_of(raw), name)
        if isinstance(self.obj, DictSubclassVariable) and name in DICT_READS and raw is vars(dict)[name]:
            return DictReadVariable(self.obj, name)
        if name == "__call__" and raw is torch.nn.Module.__call__ and hasattr(self.obj, "module_call"):
            return _ModuleCall(self.obj)
        if name == "__getattr__" and raw is torch.nn.Module.__getattr__ and hasattr(self.obj, "_module_getattr"):
            return _ModuleGetattr(self.obj)   # from a module class's own __getattr__
        module = hasattr(self.obj, "module_call") or hasattr(self.obj, "cls_source")   # built in the trace
        if isinstance(raw, types.FunctionType) and module and \
                issubclass(mro[i], torch.nn.Module) and mro[i].__module__.startswith("torch.nn"):
            # super().forward(x) in a subclass of nn.Embedding, nn.Linear, ...: the built-in
            # class's function, read through its place in the MRO (builder.py makes it
            # builtin_module_methods.BuiltinModuleMethodVariable: a leaf's forward is its op).
            return _bound(tx.wrap(raw, AttrSource(klass, name)), self.obj)
        if _plain_class_value(raw):
            return tx.wrap(raw, AttrSource(klass, name))
        unsupported(f"super().{name}: a {type(raw).__name__} of {mro[i].__name__}")

    def _class_getattr(self, tx, name):
        """super(cls, klass).name, klass a subclass of cls (`super().__new__(cls)` in a __new__,
        super() in a classmethod): searched in klass.__mro__ after cls and read through klass's
        source, as the class attribute it is (a staticmethod's function, a classmethod bound to
        klass, object.__new__ to make a new object)."""
        mro = self.obj.value.__mro__
        found = next((i for i in range(mro.index(self.cls) + 1, len(mro)) if name in vars(mro[i])), None)
        if found is None:
            unsupported(f"AttributeError: 'super' object has no attribute {name!r}")
        if self.obj.source is None:
            unsupported(f"super({self.cls.__name__}, {self.obj}): a class with no source")
        raw = vars(mro[found])[name]
        if (mro[found].__module__ or "").startswith(("torch.", "builtins")) and object_hook_name(raw) != "__new__":
            unsupported(f"super().{name} of a class: a member of {mro[found].__qualname__}")
        source = AttrSource(ItemSource(AttrSource(self.obj.source, "__mro__"), found), name)
        if isinstance(raw, (types.FunctionType, staticmethod, classmethod)) or \
                object_hook_name(raw) == "__new__":
            return _class_member(tx, self.obj, raw, source, None)
        if _plain_class_value(raw):
            return tx.wrap(raw, source)
        unsupported(f"super().{name} of a class: a {type(raw).__name__} of {mro[found].__name__}")

    def __repr__(self):
        return f"SuperVariable({self.cls.__name__}, {self.obj!r})"


class _TypeCall(VariableTracker):
    """super().__call__ inside a metaclass's own `__call__`, bound to a user class tracker
    (new_object.UserClassVariable): calling it builds the object as type.__call__ does."""

    def __init__(self, cls_var):
        super().__init__(None)
        self.cls_var = cls_var

    def python_type(self):
        return types.MethodWrapperType

    def call_function(self, tx, args, kwargs):
        return self.cls_var.type_call(tx, args, kwargs)

    def __repr__(self):
        return f"_TypeCall({self.cls_var!r})"


class _ModuleGetattr(VariableTracker):
    """super().__getattr__(name) reaching nn.Module.__getattr__: _parameters, _buffers, _modules."""

    def __init__(self, module_var):
        super().__init__(None)
        self.module_var = module_var

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1 or not args[0].is_python_constant():
            unsupported("nn.Module.__getattr__ with other than one constant name")
        return self.module_var._module_getattr(tx, args[0].as_python_constant(), torch.nn.Module.__getattr__)


class _ModuleCall(VariableTracker):
    """super().__call__ reaching nn.Module.__call__ from a module class's own __call__."""

    def __init__(self, module_var):
        super().__init__(None)
        self.module_var = module_var

    def call_function(self, tx, args, kwargs):
        return self.module_var.module_call(tx, args, kwargs, own_call=True)
