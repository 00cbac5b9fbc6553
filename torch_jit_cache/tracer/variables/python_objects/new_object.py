"""NewObjectVariable: an instance of a plain Python class that the trace itself constructs.

HuggingFace model code builds small objects inside forward (`DynamicCache(config=...)`, a layer
list of `DynamicLayer()`s, dataclass-like records) and then reads, mutates and returns them. Such
an object exists only in the trace: no real object is made while tracing. Its instance __dict__ is
tracked as a dict of trackers (`attrs`, in Python's insertion order), its methods are inlined with
`self` = the tracker, and where it leaves the trace (returned, stored on an object or global by a
replayed side effect, live at a graph break) it is rebuilt after the graph as
`object.__new__(cls)` with its final attributes put into its __dict__ in that order
(trace_result.ObjectOutput). Nothing the trace reads about it depends on the frame, so it needs no
guards of its own, and it can alias nothing read from the frame (it is new).

Only classes whose instances that rebuild reproduces exactly are constructed (`refusal`): any
metaclass that leaves calls to type.__call__ (abc.ABCMeta: transformers' cache layers derive from
an ABC; an abstract class is refused, as object.__new__ refuses it; a metaclass's own `__call__`
is run instead, `_call_through_metaclass`), Python classes only up to `object` (a builtin base's C state
would be lost), __slots__ (their members tracked in `slots`, read and stored as the member
descriptors do, set through them by the rebuild; a name outside them needs a __dict__),
object's __new__ or one written in Python (calling the class inlines it, `object.__new__(cls)` and
`super().__new__(cls)` in it make the object, and __init__ runs only on what it returned if that is
an instance of the class, as type.__call__ does; the rebuild never runs it again), a __getattr__
only as a Python function (not torch's: nn.Module's), no __del__ (an object that never leaves the
trace is never made, so its finaliser would never run), and an __init__ that is a Python function
(inlined) or object's. A __getattr__ runs as Python's slot runs it: only where the lookup below
raised AttributeError (the instance __dict__, then the class), inlined with the name; an AttributeError it raises is the miss that getattr with a default and hasattr catch.
__getattribute__, __setattr__ and __delattr__ are object's or Python functions: those are run step
by step (`obj.name` calls `type(obj).__getattribute__(obj, "name")`) down to object's own, the plain
operations on `attrs` (object_hooks.py); the rebuild fills the __dict__ directly, which is the state
those stores left. The class is reached through a source and guarded by identity (builder.py, held
weakly); its methods are read through that source (`cls.name`, UserClassVariable.class_member) and
guarded where they are found, so replacing a method fails the guard. A class made by a class
statement in the trace has no source: its members are its body's trackers
(class_statements.TracedClassVariable), and neither it nor its objects may leave the trace. (A class
changed in place so that it stops being plain, say a __setattr__ added later, is not seen, as
elsewhere.)

An object reached twice after the graph (returned and stored, or a local and a call argument at
a graph break) stays one object: its spec is made once (`outputs.once`) and codegen builds it once
and loads it again wherever that same spec appears (as for the containers the trace builds).
"""
from __future__ import annotations

import enum
import types

from ....guard.attribute_lookup import MISSING, is_data_descriptor, is_descriptor, type_lookup
from ....guard.sources import AttrSource, ItemSource, TypeSource
from ....guard.trace_result import GuardKind, ObjectOutput, SourceOutput
from .attribute import has_python_descriptor_method, type_source
from ..base import TracedAttributeError, VariableTracker, traced, unsupported
from .classes import ClassVariable, enum_lookup_class
from ..constant import ConstantVariable
from ..collections.dict_subclasses import construct as construct_dict, dict_subclass_refusal
from ..collections.list_subclasses import construct as construct_list, plain_list_subclass
from ..modules.built_modules import build_module
from ..collections.namedtuples import construct_namedtuple, is_namedtuple_class, plain_namedtuple_subclass
from .exceptions import ExceptionVariable, guard_modelled, modelled_class
from .functions import UserMethodVariable
from .model_output import construct as construct_model_output, is_model_output_class
from .object_hooks import OBJECT_HOOKS, InstanceDictVariable, replace_instance_dict
from .scalar_subclasses import construct as construct_scalar, construct_with_truth, plain_scalar_base, truth_scalar_base
from ..collections.sets import construct as construct_set, plain_subclass
from .user_object import (SequenceMethodVariable, catching_raise, is_sequence_mixin, protocol_iter, protocol_unpack,
                          python_truth, sequence_call)

_HEAPTYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_IS_ABSTRACT = 1 << 20   # Py_TPFLAGS_IS_ABSTRACT: abstract methods left, object.__new__ refuses it
_TYPE_CALL = vars(type)["__call__"]


def metaclass_call(cls: type):
    """What calling `cls` runs where its metaclass defines its own `__call__` (found on the
    metaclass's MRO, as the slot finds it), or None where it is type's: `__new__`, then
    `__init__` on an instance of the class. Any metaclass that leaves calls to type.__call__ builds
    objects as plain classes do (its other hooks act on the class, not on its instances)."""
    found = type_lookup(type(cls), "__call__")
    return None if found is _TYPE_CALL or found is MISSING else found


def is_subtype(sub: type, cls: type) -> bool:
    """PyType_IsSubtype: what type.__call__ asks of __new__'s result, never a metaclass's own
    __subclasscheck__ or __instancecheck__ (which would run user code and may answer otherwise)."""
    return cls in type.__dict__["__mro__"].__get__(sub)


def refusal(cls: type, *, init: bool = True, python_new: bool = False, slots: bool = False) -> str | None:
    """Why instances of `cls` cannot be built in the trace, or None. `init`: built by calling the
    class (a copy is built without running __init__, copying.py). `python_new`: a __new__ written
    in Python is admitted, where the trace runs it (calling the class) or bypasses it
    (`object.__new__(cls)`); a copy would run it after the graph, so copying.py refuses it.
    `slots`: __slots__ are admitted, where the object's slots are tracked (NewObjectVariable.slots);
    a copy reads only the __dict__, so copying.py refuses them."""
    if cls.__flags__ & _IS_ABSTRACT:
        # object.__new__ refuses a class with abstract methods left (ABCMeta's), which the trace
        # would not see.
        return f"it has abstract methods ({', '.join(sorted(cls.__abstractmethods__))})"
    for klass in cls.__mro__[:-1]:
        if not klass.__flags__ & _HEAPTYPE:
            return f"it derives from the builtin {klass.__name__}"
        if vars(klass).get("__slots__", ()) and not slots:   # empty slots (collections.abc's) add none
            return f"{klass.__name__} defines __slots__"
    if all("__slots__" in vars(klass) for klass in cls.__mro__[:-1]) and not slots:
        return "its instances have no __dict__"
    new = type_lookup(cls, "__new__")
    if new is not object.__new__ and not (python_new and _python_new(new)):
        return "it defines its own __new__"
    for hook in OBJECT_HOOKS:   # run step by step where written in Python (object_hooks.py)
        found = type_lookup(cls, hook)
        if found is not OBJECT_HOOKS[hook] and not isinstance(found, types.FunctionType):
            return f"its {hook} is a {type(found).__name__}"
    if type_lookup(cls, "__del__") is not MISSING:
        return "it defines __del__"
    getattr_hook = type_lookup(cls, "__getattr__")
    if getattr_hook is not MISSING and not isinstance(getattr_hook, types.FunctionType):
        return f"its __getattr__ is a {type(getattr_hook).__name__}"
    if getattr_hook is not MISSING and (getattr_hook.__module__ or "").startswith("torch"):
        # nn.Module's: a module built in forward is built_modules.py's business, not an object's.
        return f"it defines __getattr__ ({getattr_hook.__qualname__})"
    if not init:
        return None
    init = type_lookup(cls, "__init__")
    if init is not vars(object)["__init__"] and not isinstance(init, types.FunctionType):
        return f"its __init__ is a {type(init).__name__}"
    return None


def is_slot(attr) -> bool:
    """A member descriptor a Python class's __slots__ made (refusal admits no builtin base)."""
    return type(attr) is types.MemberDescriptorType


def has_instance_dict(cls: type) -> bool:
    return bool(cls.__dictoffset__)


def _python_new(raw) -> bool:
    """A class's __new__ as its __dict__ holds it (a class statement makes it a staticmethod)."""
    return isinstance(raw, staticmethod) and isinstance(raw.__func__, types.FunctionType)


class UserClassVariable(ClassVariable):
    """A plain user class read from the frame (guarded by identity): calling it constructs a
    NewObjectVariable. Everything else a class does (isinstance, `is`, its attributes read from
    its MRO: classes.ClassVariable) is unchanged."""

    def reconstruct(self, outputs):
        # Loaded again from where it was read: a constant in the transformed code would hold the
        # user's class strongly from the cache entry.
        return SourceOutput(self.source) if self.source is not None else super().reconstruct(outputs)

    def can_build(self) -> bool:
        """Whether its members can be read as values (through its source, here)."""
        return self.source is not None

    def class_member(self, tx, name: str):
        """`cls.name` as the tracker of a value read through the guarded class."""
        return tx.wrap(getattr(self.value, name), AttrSource(self.source, name))

    def property_getter(self, tx, name: str):
        """The getter of the property `cls.name`, guarded where it is found."""
        return tx.wrap(type_lookup(self.value, name).fget, AttrSource(AttrSource(self.source, name), "fget"))

    def call_function(self, tx, args, kwargs):
        cls = self.value
        if is_model_output_class(cls):   # an OrderedDict and a dataclass: modelled, not inlined
            return construct_model_output(tx, self, args, kwargs)
        if enum_lookup_class(cls):   # Mode(1): a member looked up, not an object built
            return super().call_function(tx, args, kwargs)
        if is_namedtuple_class(cls) or plain_namedtuple_subclass(cls):   # a tuple tracker with its fields
            return construct_namedtuple(tx, cls, self.source, args, kwargs)
        if modelled_class(cls) and not kwargs:   # an exception class that adds nothing (exceptions.py)
            guard_modelled(tx, cls, self.source)
            return ExceptionVariable(cls, args, cls_source=self.source)
        if plain_subclass(cls) or plain_subclass(cls, frozenset):   # a set tracker of that class
            return construct_set(tx, self, args, kwargs)
        if dict_subclass_refusal(cls) is None and self.can_build():   # a dict tracker of that class
            return construct_dict(tx, self, args, kwargs)
        if plain_list_subclass(cls) and self.can_build():   # a list tracker of that class
            return construct_list(tx, self, args, kwargs)
        if plain_scalar_base(cls) is not None:   # `class Digits(int): pass`: a constant of its class
            return construct_scalar(tx, cls, args, kwargs)
        if truth_scalar_base(cls) is not None:   # `class Flag(int)` with its own __bool__
            return construct_with_truth(tx, self, args, kwargs)
        built = build_module(tx, self, args, kwargs)   # a module made by torch's code alone (built_modules.py)
        if built is not None:
            return built
        through_meta = metaclass_call(cls)
        if through_meta is not None:
            return self._call_through_metaclass(tx, through_meta, args, kwargs)
        return self.type_call(tx, args, kwargs)

    def type_call(self, tx, args, kwargs):
        """type.__call__(cls, ...): what calling the class does where its metaclass leaves the
        call to type, and what a metaclass's own `__call__` reaches through `super().__call__`."""
        cls = self.value
        obj = self._allocate(tx, args, kwargs)
        if not (isinstance(obj, NewObjectVariable) and is_subtype(obj.cls, cls)):
            return obj
        # type.__call__: __init__ runs only on an instance of the class, that of type(obj).
        init = type_lookup(obj.cls, "__init__")
        if init is vars(object)["__init__"]:
            # object.__init__ refuses arguments only where __new__ is object's too.
            if (args or kwargs) and type_lookup(obj.cls, "__new__") is object.__new__:
                unsupported(f"{cls.__qualname__}() takes no arguments")
            return obj
        if not isinstance(init, types.FunctionType):
            unsupported(f"construction of {obj.cls.__qualname__}: its __init__ is a {type(init).__name__}")
        result = tx.call(obj.cls_var.class_member(tx, "__init__"), [obj, *args], kwargs)
        if not (isinstance(result, ConstantVariable) and result.value is None):
            unsupported(f"{cls.__qualname__}.__init__ returned {result}, not None")
        return obj

    def _call_through_metaclass(self, tx, found, args, kwargs):
        """`cls(...)` where the metaclass has its own `__call__`, run as the slot runs it: a Python
        function is inlined bound to the class; an object that is no descriptor (TypedDict's
        `__call__ = dict`) is called with the arguments alone. Read through `type(cls).__call__`,
        guarded by identity, so a metaclass given another `__call__` later compiles again."""
        meta = type(self.value)
        if isinstance(meta, enum.EnumType):
            # enum's own machinery (the member lookup is classes.enum_lookup_class's model).
            unsupported(f"call of the Enum class {self.value.__qualname__} other than a member lookup")
        if self.source is None:
            unsupported(f"call of {self.value.__qualname__} through its metaclass {meta.__name__}: "
                        "the class has no source")
        fn = tx.wrap(found, AttrSource(TypeSource(self.source), "__call__"))
        if isinstance(found, types.FunctionType):
            return tx.call(fn, [self, *args], kwargs)
        if not hasattr(type(found), "__get__"):
            return tx.call(fn, list(args), kwargs)
        unsupported(f"call of {self.value.__qualname__} through its metaclass {meta.__name__}: "
                    f"its __call__ is a {type(found).__name__}")

    def _allocate(self, tx, args, kwargs):
        """What `cls.__new__(cls, *args, **kwargs)` returns: a new object where __new__ is
        object's, else the class's Python __new__ inlined (object.__new__ inside it is `new_object`).
        A NewObjectVariable of the class (or a subclass) is to be initialised; anything else that
        is not an instance of the class is returned as it is, as type.__call__ does."""
        cls = self.value
        why = refusal(cls, python_new=True, slots=True)
        if why is not None or not self.can_build():
            unsupported(f"construction of {cls.__qualname__} in the trace: "
                        f"{why or 'the class has no source'}")
        if type_lookup(cls, "__new__") is object.__new__:
            return NewObjectVariable(cls, self)
        made = tx.call(self.class_member(tx, "__new__"), [self, *args], kwargs)
        if isinstance(made, NewObjectVariable):
            return made
        if is_subtype(made.python_type(), cls):   # an existing instance: __init__ would run on it
            unsupported(f"{cls.__qualname__}.__new__ returned {made}, an instance not built in the trace")
        return made

    def new_object(self, tx):
        """`object.__new__(cls)`: a new object of this class, its __init__ not run."""
        why = refusal(self.value, init=False, python_new=True, slots=True)
        if why is not None or not self.can_build():
            unsupported(f"object.__new__({self.value.__qualname__}) in the trace: "
                        f"{why or 'the class has no source'}")
        return NewObjectVariable(self.value, self)


def is_user_class(value) -> bool:
    """A class a UserClassVariable stands for: made by a class statement, outside torch."""
    return isinstance(value, type) and bool(value.__flags__ & _HEAPTYPE) and \
        not (value.__module__ or "").startswith("torch")


class NewObjectVariable(VariableTracker):
    """An object the trace constructed: its class (a UserClassVariable) and its attributes."""

    dict_version = 0   # bumped when a name is added to or removed from `attrs` (containers.py)
    user_operators = True   # `a + b`, `a == b` run the class's Python dunders (operators.py)

    def __init__(self, cls: type, cls_var: UserClassVariable):
        super().__init__(None)
        self.cls, self.cls_var = cls, cls_var
        self.attrs: dict = {}   # the instance __dict__
        self.slots: dict = {}   # the __slots__ members set so far (is_slot), by name

    def python_type(self):
        return self.cls

    def _class_attr(self, tx, name: str):
        """`cls.name` as the tracker of a value read through the guarded class."""
        return self.cls_var.class_member(tx, name)

    def _hook(self, tx, hook: str):
        """type(obj).hook bound to obj where the class writes it in Python, None where it is
        object's (refusal admits nothing else)."""
        if type_lookup(self.cls, hook) is OBJECT_HOOKS[hook]:
            return None
        return UserMethodVariable(self._class_attr(tx, hook), self)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if type_lookup(self.cls, "__getattr__") is MISSING:
            return self._getattribute(tx, name)
        # Python's slot: __getattribute__, and only where it raises AttributeError the class's
        # __getattr__ (inlined; an AttributeError it raises is the miss getattr/hasattr catch).
        value, found = catching_raise(tx, lambda: self._getattribute(tx, name), TracedAttributeError)
        if found:
            return value
        return tx.call(UserMethodVariable(self._class_attr(tx, "__getattr__"), self), [ConstantVariable(name)], {})

    def _getattribute(self, tx, name: str) -> VariableTracker:
        hook = self._hook(tx, "__getattribute__")
        if hook is None:
            return self.generic_getattr(tx, name)
        return tx.call(hook, [ConstantVariable(name)], {})

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        """object.__getattribute__(obj, name): Python's order over the tracked __dict__."""
        if name == "__class__":
            return self.cls_var
        if name == "__dict__" and has_instance_dict(self.cls):   # else no such attribute (__slots__)
            return InstanceDictVariable(self)
        attr = type_lookup(self.cls, name)
        if is_slot(attr):
            if name not in self.slots:
                message = f"'{self.cls.__name__}' object has no attribute '{name}'"
                raise traced(TracedAttributeError, f"AttributeError: {message}", AttributeError,
                             [ConstantVariable(message)])
            return self.slots[name]
        if attr is not MISSING and is_data_descriptor(attr):
            if type(attr) is property and isinstance(attr.fget, types.FunctionType):
                return tx.call(self.cls_var.property_getter(tx, name), [self], {})
            if (got := self._traced_class_descriptor(tx, name)) is not None:
                return got
            unsupported(f"attribute {name!r} of a {self.cls.__name__} built in the trace is a "
                        f"{type(attr).__name__} (a data descriptor)")
        if name in self.attrs:
            return self.attrs[name]
        if name in ("index", "count") and is_sequence_mixin(self.cls, name):
            return SequenceMethodVariable(self, name)
        if attr is MISSING:
            message = f"{self.cls.__name__!r} object has no attribute {name!r}"
            raise traced(TracedAttributeError, f"AttributeError: {message}", AttributeError,
                         [ConstantVariable(message)])
        if isinstance(attr, types.FunctionType):
            return UserMethodVariable(self._class_attr(tx, name), self)
        if isinstance(attr, (staticmethod, classmethod)) or not is_descriptor(attr):
            return self._class_attr(tx, name)   # the function, a bound classmethod, or a value
        if vars(object).get(name) is attr:
            return ObjectMethodVariable(self, name)
        if has_python_descriptor_method(attr, "__get__") and getattr(self.cls_var, "source", None) is not None:
            return self._descriptor_get(tx, name, attr)
        if (got := self._traced_class_descriptor(tx, name)) is not None:
            return got
        unsupported(f"attribute {name!r} of {self.cls.__name__} is a {type(attr).__name__} "
                    "(a descriptor)")

    def _traced_class_descriptor(self, tx, name: str):
        """A descriptor in the body of a class made in the trace (class_statements.py), or None."""
        get = getattr(self.cls_var, "descriptor_get", None)
        return get(tx, name, self) if get is not None else None

    def _descriptor_get(self, tx, name: str, attr):
        """`obj.name` through a non-data descriptor of its class whose __get__ is Python (a
        functools.cached_property, which stores in the instance __dict__ that later reads find
        first): type(d).__get__(d, obj, cls), traced. d is read raw from the class's __dict__
        where the MRO finds it, and __get__ through d's class, both guarded."""
        i = next(i for i, klass in enumerate(self.cls.__mro__) if name in vars(klass))
        mro = ItemSource(AttrSource(self.cls_var.source, "__mro__"), i)
        d_source = ItemSource(AttrSource(mro, "__dict__"), name)
        d_var = tx.wrap(attr, d_source)
        get = tx.wrap(type_lookup(type(attr), "__get__"), AttrSource(type_source(d_source, type(attr)), "__get__"))
        return tx.call(get, [d_var, self, self.cls_var], {})

    def type_method(self, tx, name: str):
        """The function `name` on the class, as an implicit special-method call finds it (never the
        instance's own attribute)."""
        if not isinstance(type_lookup(self.cls, name), types.FunctionType):
            unsupported(f"{self.cls.__name__}.{name} is not a Python function")
        return self._class_attr(tx, name)

    def call_function(self, tx, args, kwargs):
        # `obj(...)` runs type(obj).__call__, never an instance attribute named __call__.
        if not isinstance(type_lookup(self.cls, "__call__"), types.FunctionType):
            unsupported(f"call of a {self.cls.__name__} (its __call__ is not a Python function)")
        return tx.call(UserMethodVariable(self._class_attr(tx, "__call__"), self), args, kwargs)

    def getitem(self, tx, key) -> VariableTracker:
        # Python looks special methods up on the type, never in the instance __dict__.
        if not isinstance(type_lookup(self.cls, "__getitem__"), types.FunctionType):
            unsupported(f"subscript of a {self.cls.__name__} (its __getitem__ is not a Python function)")
        return tx.call(UserMethodVariable(self._class_attr(tx, "__getitem__"), self), [key], {})

    def setitem(self, tx, key, value) -> None:
        tx.call(UserMethodVariable(self.type_method(tx, "__setitem__"), self), [key, value], {})

    def delitem(self, tx, key) -> None:
        tx.call(UserMethodVariable(self.type_method(tx, "__delitem__"), self), [key], {})

    def get_iter(self, tx):
        return protocol_iter(tx, self)

    def unpack(self, tx):
        return protocol_unpack(tx, self)

    def contains(self, tx, item) -> bool:
        if is_sequence_mixin(self.cls, "__contains__"):
            return sequence_call(tx, self, "__contains__", [item], {}).truthy(tx)
        if not isinstance(type_lookup(self.cls, "__contains__"), types.FunctionType):
            unsupported(f"membership test in {self}")
        return tx.call(UserMethodVariable(self._class_attr(tx, "__contains__"), self), [item], {}).truthy(tx)

    def has_attribute(self, tx, name: str) -> bool:
        # hasattr runs the lookup (the class's __getattribute__, a property's getter) and catches
        # AttributeError.
        return catching_raise(tx, lambda: self.var_getattr(tx, name), TracedAttributeError)[1]

    def _check_plain_store(self, name: str, what: str) -> None:
        attr = type_lookup(self.cls, name)
        if attr is not MISSING and is_data_descriptor(attr):
            unsupported(f"{what} {self.cls.__name__}.{name}, a {type(attr).__name__} on the class")

    def var_setattr(self, tx, name: str, value) -> None:
        hook = self._hook(tx, "__setattr__")
        if hook is None:
            self.generic_setattr(tx, name, value)
        else:
            tx.call(hook, [ConstantVariable(name), value], {})

    def var_delattr(self, tx, name: str) -> None:
        hook = self._hook(tx, "__delattr__")
        if hook is None:
            self.generic_delattr(tx, name)
        else:
            tx.call(hook, [ConstantVariable(name)], {})

    def generic_setattr(self, tx, name: str, value) -> None:
        """object.__setattr__(obj, name, value): a store into a slot or the tracked __dict__."""
        if is_slot(type_lookup(self.cls, name)):
            self.slots[name] = value
            return
        if name == "__dict__" and type(type_lookup(self.cls, name)) is types.GetSetDescriptorType:
            replace_instance_dict(self, value)   # the __dict__ a class statement's type() made
            return
        setter = getattr(self.cls_var, "descriptor_set", None)   # class_statements.py
        if setter is not None and setter(tx, name, self, value):
            return
        self._check_plain_store(name, "store to")
        if not has_instance_dict(self.cls):
            unsupported(f"AttributeError: store to {self.cls.__name__}.{name}, which has no __dict__")
        self.dict_version += name not in self.attrs
        self.attrs[name] = value

    def generic_delattr(self, tx, name: str) -> None:
        if is_slot(type_lookup(self.cls, name)) and name in self.slots:
            del self.slots[name]
            return
        self._check_plain_store(name, "deletion of")
        if name not in self.attrs:
            unsupported(f"AttributeError: deletion of {self.cls.__name__}.{name}, which is not set")
        del self.attrs[name]
        self.dict_version += 1

    def truthy(self, tx) -> bool:
        return python_truth(tx, self, self.cls)

    def reconstruct(self, outputs):
        if self.cls_var.source is None:   # a class made in the trace (class_statements.py)
            unsupported(f"{self} leaves the trace, and its class was made in it")
        # Slot members after the __dict__'s names: the rebuild sets each through its class's slot.
        return outputs.once(self, lambda: ObjectOutput(
            SourceOutput(self.cls_var.source), (*self.attrs, *self.slots),
            tuple(outputs.rebuild(v) for v in [*self.attrs.values(), *self.slots.values()])))

    def __repr__(self):
        return f"NewObjectVariable({self.cls.__name__})"


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def wrap_class(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    if is_user_class(value):   # calling it builds an object in the trace
        return UserClassVariable(value, source)
    return ClassVariable(value, source)


class ObjectMethodVariable(VariableTracker):
    """`obj.name` where the lookup on an object built in the trace found one of object's own C
    methods (`__reduce_ex__`, `__getstate__`, ...), bound to it: what deepcopy's protocol checks
    its reads resolve to (copying.py). Only the answer is modelled: calling it, or any other use,
    is refused."""

    def __init__(self, obj: VariableTracker, name: str):
        super().__init__(None)
        self.obj, self.name = obj, name

    def python_type(self):
        return type(getattr(object(), self.name))

    def call_function(self, tx, args, kwargs):
        unsupported(f"call of object's {self.name} on {self.obj}")

    def __repr__(self):
        return f"ObjectMethodVariable({self.obj!r}.{self.name})"
