"""Class statements in traced code: `class Name(bases): body` run inside the trace.

CPython runs a class statement as `__build_class__(body, "Name", *bases, **kw)` (LOAD_BUILD_CLASS
pushes the builtin): the body function runs with a fresh namespace as its locals (LOAD_NAME,
STORE_NAME, LOAD_LOCALS/LOAD_FROM_DICT_OR_DEREF for a name the enclosing function binds), then
`type(name, bases, namespace)` makes the class and fills the `__class__` cell the body's methods
close over for `super()`.

Here the body is inlined with a namespace of trackers (`tx.namespace`, handlers/load_store.py), so
methods keep their trackers: a method closing over the enclosing function's locals (a tensor
included) closes over the trace's very cells. A real class is then made at trace time
(TracedClassVariable.value) with the same name, bases and MRO, whose namespace holds stand-ins of
the same kinds (a function of the method's code with empty cells, staticmethod/classmethod/
property of such a function, the constants themselves, an inert object for anything else): the
rest of the tracer asks that class its *shape* (type_lookup, refusal, isinstance, issubclass),
while every *value* read from it comes from the namespace trackers (`class_member`). A stand-in is
never traced: builder.wrap refuses one (`is_stand_in`).

Each eager call makes a new class, and the compiled code makes none: so nothing the trace made from
a class statement may leave it. The class, an instance of it, its methods (and a constant holding
the class) refuse to be rebuilt after the graph (`reconstruct`), which makes a return, a store to a
global or an input's attribute, or a graph break while one is alive a clean fallback or an earlier
break, never another class handed to the caller. Only what the trace can reproduce is built:
bases whose metaclass is `type` or abc.ABCMeta and that do not define __init_subclass__, no keywords (metaclass=,
__init_subclass__ arguments), a body whose namespace holds constants, functions, staticmethod/
classmethod/property of functions, classes and other trackers (read back as they are); no
__set_name__ or other descriptor protocol on a class attribute's type (refused); __slots__ of
strings the trace knows (the trace-time class is made with them).
Alternatives rejected: running the real `__build_class__` at trace time (the body's cells hold
trackers, not values) and rebuilding the class after the graph (its methods would have to be made
again over the frame's cells, a second class statement in the transformed code: left for later).
"""
from __future__ import annotations

import abc
import builtins
import sys
import types

from ....guard.attribute_lookup import MISSING, type_lookup
from ....guard.sources import AttrSource, BuiltinSource
from ..base import TracedRaise, VariableTracker, unsupported
from .classes import ClassVariable
from ..constant import STAND_INS, ConstantVariable, is_constant_value
from .exceptions import ExceptionVariable, modelled_class
from .functions import BaseFunctionVariable, DecoratedVariable, NestedFunctionVariable, UserMethodVariable
from ..collections.dict_subclasses import construct as construct_dict, dict_subclass_refusal
from ..collections.list_subclasses import construct as construct_list, plain_list_subclass
from .new_object import UserClassVariable, refusal
from .object_hooks import ObjectHookVariable, object_hook_name
from .scalar_subclasses import (SCALAR_BASES, construct as construct_scalar, construct_with_truth, plain_scalar_base,
                                truth_scalar_base)

_HEAPTYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE


class BuildClassVariable(VariableTracker):
    """builtins.__build_class__, as LOAD_BUILD_CLASS pushes it."""

    def call_function(self, tx, args, kwargs):
        if kwargs:
            unsupported(f"class statement with keywords ({', '.join(kwargs)}): a metaclass or "
                        "__init_subclass__ arguments")
        if len(args) < 2 or not isinstance(args[0], NestedFunctionVariable) or \
                not isinstance(args[1], ConstantVariable) or type(args[1].value) is not str:
            unsupported("__build_class__ called other than by a class statement")
        body, name, bases = args[0], args[1].value, [_builtin_base(b) for b in args[2:]]
        for base in bases:
            _check_base(base)
        namespace = tx.run_class_body(body)
        classcell = namespace.pop("__classcell__", None)
        real = _make_class(name, [b.value for b in bases], namespace)
        cls_var = TracedClassVariable(real, namespace, list(bases))
        if classcell is not None:
            classcell.contents = cls_var   # the `__class__` cell super() reads (type.__new__ fills it)
        for key, value in namespace.items():
            # type.__new__ calls each attribute's __set_name__(cls, name), in the body's order
            if _python_descriptor(value) and type_lookup(value.cls, "__set_name__") is not MISSING:
                _set_name(tx, value, cls_var, key)
        return cls_var

    def reconstruct(self, outputs):
        # A break at the class statement itself (its body did what the trace cannot follow): the
        # resume function would read a new class at every call, failing its guard each time.
        unsupported("a class statement the trace cannot follow (its body, bases or keywords) runs "
                    "with the frame uncompiled")

    def __repr__(self):
        return "BuildClassVariable()"


# Python 3.11 wraps an exception __set_name__ raises in a RuntimeError ("Error calling
# __set_name__ on ..."); 3.12 lets it through as it is.
_SET_NAME_ERROR_WRAPPED = sys.version_info < (3, 12)


def _set_name(tx, descriptor, cls_var, key: str) -> None:
    try:
        tx.call(descriptor.type_method(tx, "__set_name__"), [descriptor, cls_var, ConstantVariable(key)], {})
    except TracedRaise:
        if _SET_NAME_ERROR_WRAPPED:
            unsupported("an exception raised by __set_name__ (this Python wraps it in a RuntimeError)")
        raise


def _builtin_base(base):
    """`dict`, `list`, `int`, `float`, `complex`, `str` or `bytes` named as a base (the builtin's
    tracker) as a class tracker: its objects are dicts of the class (dict_subclasses.py), where the
    class passes dict_subclass_refusal, lists of a plain subclass (list_subclasses.py), or constants
    of a plain scalar subclass (scalar_subclasses.py), none of which leaves the trace."""
    fn = getattr(base, "fn", None)
    if any(fn is kind for kind in (dict, list, *SCALAR_BASES)) and not isinstance(base, ClassVariable):
        return ClassVariable(fn)
    return base


def _check_base(base) -> None:
    if not isinstance(base, ClassVariable) or not isinstance(base.value, type):
        unsupported(f"class statement with base {base}")
    cls = base.value
    if type(cls) not in _METACLASSES:
        unsupported(f"class statement with base {cls.__name__}, whose metaclass is {type(cls).__name__}")
    if type_lookup(cls, "__init_subclass__") is not vars(object)["__init_subclass__"]:
        unsupported(f"class statement with base {cls.__name__}, which defines __init_subclass__")
    if not isinstance(base, TracedClassVariable) and base.source is None and \
            not any(cls is kind for kind in (object, dict, list, *SCALAR_BASES)):
        unsupported(f"class statement with base {cls.__name__}, which has no source")


def _stand_in_function(fn: BaseFunctionVariable):
    code = fn.code
    out = types.FunctionType(code, fn.f_globals, code.co_name, None,
                             tuple(types.CellType() for _ in code.co_freevars) or None)
    STAND_INS.add(out)
    return out


class _Inert:
    """What a class attribute the trace cannot make real (a tensor, a list) stands for in the
    trace-time class: no descriptor, no __set_name__."""

    __slots__ = ()


def _python_descriptor(value) -> bool:
    """An object built in the trace whose class's descriptor protocol (__get__, __set__,
    __delete__, __set_name__) is written in Python, where it has any: a functools.cached_property
    (or a subclass) made in a class body. Its hooks are traced (TracedClassVariable.descriptor_get,
    BuildClassVariable: __set_name__)."""
    if not hasattr(value, "cls_var") or not hasattr(value, "attrs"):
        return False
    hooks = [type_lookup(value.cls, hook) for hook in _OBJECT_PROTOCOL]
    return any(h is not MISSING for h in hooks) and \
        all(h is MISSING or isinstance(h, types.FunctionType) for h in hooks)


def _descriptor_stand_in(value):
    """An object of the descriptor's class that gives the trace-time class its shape (a data
    descriptor or not); never used for its state, its __init__ never run."""
    return object.__new__(value.cls)


def _stand_in(value):
    if isinstance(value, NestedFunctionVariable):
        return _stand_in_function(value)
    if isinstance(value, DecoratedVariable):
        return value.kind(_stand_in_function(value.func))
    if isinstance(value, TracedClassVariable):
        return value.value
    if isinstance(value, BaseFunctionVariable):
        unsupported(f"class attribute {value}: a function the class statement did not make")
    if isinstance(value, ConstantVariable) and (is_constant_value(value.value) or type(value.value) is type):
        return value.value
    # Anything else is read back as its tracker, which is right only where Python would not call
    # into it: type() calls __set_name__, and a lookup through the class calls __get__.
    cls = value.python_type()
    for hook in _OBJECT_PROTOCOL:
        if type_lookup(cls, hook) is not MISSING:
            unsupported(f"class attribute {value}: its type defines {hook}")
    return _Inert()


_OBJECT_PROTOCOL = ("__set_name__", "__get__", "__set__", "__delete__")


# The metaclasses a base may have: type, and abc.ABCMeta (collections.abc's and abc.ABC's classes),
# which adds to type() only the set of abstract methods left, computed from the namespace (whose
# stand-ins carry no __isabstractmethod__: an @abstractmethod in the body is not traced) and the
# bases, and leaves calls to type.__call__ (new_object.py refuses a class with abstract methods).
_METACLASSES = (type, abc.ABCMeta)


def _slots(name: str, value) -> object:
    """`__slots__` as the body wrote it, where it is a string or a list or tuple of strings the
    trace knows: the trace-time class gets the same member descriptors, through which the objects
    built in the trace keep their slots (new_object.NewObjectVariable.slots)."""
    slots = value.as_python_constant() if value.is_python_constant() else None
    names = [slots] if type(slots) is str else slots
    if type(names) not in (list, tuple) or not all(type(n) is str for n in names):
        unsupported(f"class {name} defines __slots__ as {value}, not a string or strings")
    return slots


def _make_class(name: str, bases: list, namespace: dict) -> type:
    descriptors = {k: v for k, v in namespace.items() if _python_descriptor(v)}
    real_ns = {k: _slots(name, v) if k == "__slots__" else _stand_in(v) for k, v in namespace.items()
               if k not in descriptors}
    meta = abc.ABCMeta if any(type(b) is abc.ABCMeta for b in bases) else type
    try:
        cls = meta(name, tuple(bases), real_ns)
    except Exception as e:   # a layout conflict, a final base: Python raises it at the statement
        unsupported(f"class {name}: type() raised {e!r}")
    for k, v in descriptors.items():   # set after type(), which would run their __set_name__
        type.__setattr__(cls, k, _descriptor_stand_in(v))
    STAND_INS.add(cls)
    return cls


class TracedClassVariable(UserClassVariable):
    """A class a class statement made in the trace: `value` is the trace-time class (its shape),
    `namespace` the trackers of its body, `bases` the base classes' trackers."""

    made_in_trace = True   # each call makes it anew: nothing about it is guarded

    def __init__(self, value: type, namespace: dict, bases: list):
        super().__init__(value, None)
        self.namespace, self.bases = namespace, bases

    def can_build(self) -> bool:
        return True

    def call_function(self, tx, args, kwargs):
        if modelled_class(self.value) and not kwargs:
            # `class Stop(Exception): pass`, then `raise Stop("...")`: an exception of the class
            # and its args (exceptions.py), raised and caught in the trace. Nothing to guard: the
            # class is the trace's own; the exception is never rebuilt (it has no source).
            return ExceptionVariable(self.value, args, cls_var=self)
        if dict_subclass_refusal(self.value) is None:
            # A dict of the class (dict_subclasses.py), which refuses to be rebuilt after the
            # graph, as its class does (reconstruct).
            return construct_dict(tx, self, args, kwargs)
        if plain_list_subclass(self.value):   # a list of the class (list_subclasses.py), kept in the trace
            return construct_list(tx, self, args, kwargs)
        if plain_scalar_base(self.value) is not None:   # `class Tag(str): pass`: a constant of the class
            return construct_scalar(tx, self.value, args, kwargs)
        if truth_scalar_base(self.value) is not None:   # `class Flag(int)` with its own __bool__
            return construct_with_truth(tx, self, args, kwargs)
        # Refused before UserClassVariable's special cases (named tuples, model outputs), which
        # would make objects of the trace-time class that a rebuild would hand to the caller.
        why = refusal(self.value, slots=True)   # slots: NewObjectVariable.slots
        if why is not None:
            unsupported(f"construction of {self.value.__qualname__} in the trace: {why}")
        return super().call_function(tx, args, kwargs)

    def reconstruct(self, outputs):
        unsupported(f"class {self.value.__qualname__} made in the trace leaves it (each call makes a "
                    "new class, which the compiled code would not)")

    def _owner(self, klass):
        """The TracedClassVariable for `klass` in this class's bases (or itself), else None."""
        if klass is self.value:
            return self
        for base in self.bases:
            if isinstance(base, TracedClassVariable):
                found = base._owner(klass)
                if found is not None:
                    return found
        return None

    def _sourced_bases(self) -> list:
        """The bases, made outside the trace, of this class and of its bases made in it."""
        out = []
        for base in self.bases:
            out += base._sourced_bases() if isinstance(base, TracedClassVariable) else \
                [base] if base.value is not object else []
        return out

    def _sourced_base(self, name: str, raw):
        """A base (reached through sources) whose own lookup of `name` finds `raw`. Read through
        that base, the guard on `base.name` redoes its MRO lookup at every call; with two such
        bases another one could gain `name` ahead of it in the combined MRO unseen: refused."""
        if len(self._sourced_bases()) > 1:
            unsupported(f"attribute {name!r} inherited by {self.value.__name__} from one of several "
                        "bases made outside the trace")
        for base in self.bases:
            if isinstance(base, TracedClassVariable):
                found = base._sourced_base(name, raw)
            elif base.source is not None and type_lookup(base.value, name) is raw:
                found = base
            else:
                found = None
            if found is not None:
                return found
        return None

    def find(self, name: str, after: type | None = None):
        """(class in the MRO that holds `name`, its raw stand-in), searching after `after`."""
        mro = self.value.__mro__
        start = mro.index(after) + 1 if after is not None else 0
        for klass in mro[start:]:
            if name in vars(klass):
                return klass, vars(klass)[name]
        return None, MISSING

    def member(self, tx, name: str, after: type | None = None, bind=None):
        """`name` found on the MRO (after `after`, for super()) as the tracker Python's lookup gives
        through an instance (`bind`: the instance) or the class (`bind` None): a function bound to
        `bind`, a staticmethod's function, a classmethod bound to this class, a property's getter
        run on `bind`, or the value."""
        klass, raw = self.find(name, after)
        if klass is None:
            unsupported(f"attribute {name!r} of class {self.value.__name__}: not in its MRO")
        owner = self._owner(klass)
        if owner is None:
            return self._inherited(tx, name, raw, bind)
        if name not in owner.namespace:
            if is_constant_value(raw):   # __module__, __doc__, the __hash__ = None type() sets
                return ConstantVariable(raw)
            unsupported(f"attribute {name!r} of class {klass.__name__} made in the trace")
        value = owner.namespace[name]
        if _python_descriptor(value) and type_lookup(value.cls, "__get__") is not MISSING:
            return self._traced_get(tx, value, bind)
        if isinstance(value, DecoratedVariable):
            if value.kind is staticmethod:
                return value.func
            if value.kind is classmethod:
                return UserMethodVariable(value.func, self)
            if bind is None:
                unsupported(f"property {klass.__name__}.{name} read from the class")
            return tx.call(value.func, [bind], {})
        if isinstance(value, BaseFunctionVariable) and bind is not None:
            return UserMethodVariable(value, bind)
        return value

    def _traced_get(self, tx, descriptor, bind):
        """type(d).__get__(d, bind, cls) traced (bind None: read from the class)."""
        get = descriptor.type_method(tx, "__get__")
        return tx.call(get, [descriptor, bind if bind is not None else ConstantVariable(None), self], {})

    def descriptor_get(self, tx, name: str, obj):
        """`obj.name` where the MRO finds a descriptor of a Python class made in the body of a
        class made in the trace (`_python_descriptor`), else None."""
        klass, _ = self.find(name)
        owner = self._owner(klass) if klass is not None else None
        value = owner.namespace.get(name) if owner is not None else None
        if value is None or not _python_descriptor(value) or type_lookup(value.cls, "__get__") is MISSING:
            return None
        return self._traced_get(tx, value, obj)

    def descriptor_set(self, tx, name: str, obj, value) -> bool:
        """`obj.name = value` through such a descriptor's Python __set__, traced; False where the
        MRO finds none (the store is the instance's)."""
        klass, _ = self.find(name)
        owner = self._owner(klass) if klass is not None else None
        d = owner.namespace.get(name) if owner is not None else None
        if d is None or not _python_descriptor(d) or type_lookup(d.cls, "__set__") is MISSING:
            return False
        tx.call(d.type_method(tx, "__set__"), [d, obj, value], {})
        return True

    def _inherited(self, tx, name, raw, bind):
        """A member of a base that is not made in the trace, read through that base's source."""
        if bind is not None and object_hook_name(raw) is not None:   # super().__setattr__ (object_hooks.py)
            return ObjectHookVariable(object_hook_name(raw), bind)
        if bind is not None and raw is vars(object)["__init__"]:   # super().__init__() reaching object
            return _ObjectInit()
        holder = self.find(name)[0]
        if bind is None and _builtin_class(holder) and all(_builtin_class(b.value) for b in self._sourced_bases()):
            # A builtin's own (a slot wrapper: `getattr(cls, "__lt__") is getattr(object, "__lt__")`,
            # as functools.total_ordering asks), read as `object.name` or `int.name` is: every base
            # made outside the trace is a builtin, whose attributes never change.
            return tx.wrap(holder, BuiltinSource(holder.__name__)).var_getattr(tx, name)
        if type(raw) is property and isinstance(raw.fget, types.FunctionType) and bind is not None:
            base = self._sourced_base(name, raw)
            if base is None:
                unsupported(f"property {name!r} of a base of {self.value.__name__} with no source")
            getter = tx.wrap(raw.fget, AttrSource(AttrSource(base.source, name), "fget"))
            return tx.call(getter, [bind], {})
        if isinstance(raw, (types.FunctionType, staticmethod, classmethod)) or \
                type_lookup(type(raw), "__get__") is MISSING:
            base = self._sourced_base(name, raw)
            if base is None:
                unsupported(f"attribute {name!r} of a base of {self.value.__name__} with no source")
            src = AttrSource(base.source, name)
            if isinstance(raw, staticmethod):
                return tx.wrap(raw.__func__, src)
            if isinstance(raw, classmethod):
                return UserMethodVariable(tx.wrap(raw.__func__, AttrSource(src, "__func__")), self)
            fn = tx.wrap(raw, src)
            return UserMethodVariable(fn, bind) if isinstance(raw, types.FunctionType) and \
                bind is not None else fn
        unsupported(f"attribute {name!r} of {self.value.__name__} is a {type(raw).__name__} (a descriptor)")

    # -- what UserClassVariable and NewObjectVariable read through --------------------------------
    def class_member(self, tx, name: str):
        return self.member(tx, name)

    def property_getter(self, tx, name: str):
        klass, raw = self.find(name)
        owner = self._owner(klass) if klass is not None else None
        if owner is not None and isinstance(owner.namespace.get(name), DecoratedVariable):
            return owner.namespace[name].func
        base = self._sourced_base(name, raw)
        if base is None or type(raw) is not property:
            unsupported(f"property {name!r} of {self.value.__name__}")
        return tx.wrap(raw.fget, AttrSource(AttrSource(base.source, name), "fget"))

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(getattr(self.value, name))
        if name in ("__dict__", "__mro__", "__bases__", "__class__", "__subclasses__"):
            unsupported(f"{name} of class {self.value.__name__} made in the trace")
        return self.member(tx, name)

    def var_setattr(self, tx, name, value):
        unsupported(f"store to attribute {name!r} of class {self.value.__name__} made in the trace")

    def __repr__(self):
        return f"TracedClassVariable({self.value.__qualname__})"


def _builtin_class(cls) -> bool:
    """A static type that the builtins module names (object, int, dict, ...)."""
    return not cls.__flags__ & _HEAPTYPE and getattr(builtins, cls.__name__, None) is cls


class _ObjectInit(VariableTracker):
    """object.__init__ bound to an object built in the trace: does nothing, takes no arguments."""

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported("object.__init__() takes exactly one argument (the instance to initialize)")
        return ConstantVariable(None)


class NamespaceVariable(VariableTracker):
    """The class body's namespace, as LOAD_LOCALS pushes it for LOAD_FROM_DICT_OR_DEREF."""

    def __init__(self, namespace: dict):
        super().__init__(None)
        self.namespace = namespace
