"""OrderedDict, defaultdict and plain subclasses of dict and OrderedDict built in the trace: dicts
of constant keys whose class is made again after the graph (containers.py holds the dict tracker
they extend)."""
from __future__ import annotations

import collections
import types

from ....guard.attribute_lookup import MISSING, is_data_descriptor, type_lookup
from ....guard.trace_result import CallOutput, ConstantOutput, DictOutput, built_dict, rebuilt_dict_object
from ..base import MethodVariable, TracedAttributeError, VariableTracker, traced, unsupported
from ..constant import ConstantVariable
from .containers import constant_index, arity_error, key_tracker
from .dicts import DictVariable, dict_items
from ..python_objects.functions import UserMethodVariable

# What a class statement puts in every class's __dict__ (sets.py's list, and __init_subclass__'s
# absence), and copyreg's cache of the slot names a copy or pickle of an instance made
# (`__slotnames__`): none of it changes what an instance does.
_BOOKKEEPING = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                          "__firstlineno__", "__static_attributes__", "__slotnames__"})
_HEAPTYPE = 1 << 9


def _keyword_only(method: str, args: list, kwargs: dict, name: str, default):
    """The constant value of `method`'s one optional argument `name`, passed by position or keyword."""
    if len(args) + len(kwargs) > 1 or set(kwargs) - {name}:
        unsupported(f"{method} with arguments other than {name}=")
    value = (args or list(kwargs.values()) or [ConstantVariable(default)])[0]
    if not value.is_python_constant():
        unsupported(f"{method}({name}=) with a value that is not a constant")
    return value.as_python_constant()


# A subclass's own Python functions that the tracker runs for what they stand for: construction,
# `d[k]`, `d[k] = v`, `del d[k]` (dataclass's __init__ calls __post_init__ by name), `obj.name = v`;
# `==` and `!=` refuse (compare_op: `own_comparison`), as do repr() and str() (no constant). Any
# other special method would be skipped by a path the dict model takes (len, iteration): refused.
_ROUTED = frozenset({"__init__", "__getitem__", "__setitem__", "__delitem__", "__post_init__", "__missing__",
                     "__setattr__", "__eq__", "__ne__", "__repr__", "__str__"})
_ITEM_METHODS = frozenset({"__getitem__", "__setitem__", "__delitem__"})
# Special methods only a class statement, a subscript of the class or the copy and pickle protocols
# call, never an instance's item, attribute or iteration paths (deepcopy and copy refuse these
# objects); they may be any Python function.
_CLASS_TIME = frozenset({"__init_subclass__", "__class_getitem__", "__reduce__", "__reduce_ex__", "__getstate__",
                         "__setstate__", "__copy__", "__deepcopy__", "__replace__"})
# Special names a class may hold as plain values: what @dataclass and typing write (a field's
# default is a class attribute of its name), and `__hash__ = None` (dict's own).
_CLASS_DATA = frozenset({"__dataclass_fields__", "__dataclass_params__", "__match_args__", "__annotations__",
                         "__orig_bases__", "__parameters__"})
_COMPARISONS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")


def _member_refusal(klass, name: str, value) -> str | None:
    """Why `value`, `klass.__dict__[name]`, keeps instances from being dict trackers, or None."""
    dunder = name.startswith("__") and name.endswith("__")
    if isinstance(value, types.FunctionType):
        return None if not dunder or name in _ROUTED or name in _CLASS_TIME else f"{klass.__name__} defines {name}"
    if isinstance(value, classmethod) and name in ("__init_subclass__", "__class_getitem__"):
        return None
    if dunder:
        if name in _CLASS_DATA and not hasattr(type(value), "__get__") or name == "__hash__" and value is None:
            return None
        return f"{klass.__name__}.{name} is a {type(value).__name__}"
    if isinstance(value, (staticmethod, classmethod)) and isinstance(value.__func__, types.FunctionType):
        return None
    if hasattr(type(value), "__get__"):   # a property, a slot, another descriptor
        return f"{klass.__name__}.{name} is a {type(value).__name__} (a descriptor)"
    return None   # a plain class attribute (a dataclass field's default), read through the class


def dict_subclass_refusal(cls) -> str | None:
    """Why instances of `cls`, a class-statement subclass of dict or of OrderedDict, cannot be dict
    trackers of their class built in the trace, or None. Its classes may define Python functions:
    methods of any name that is no special method (traced as Python with the object as self), those
    of _ROUTED and _CLASS_TIME, plain class attributes, staticmethods and classmethods; nothing else
    (no properties, __slots__, metaclass). The class is pinned by identity where it is read; a class
    changed in place later is not seen, as for other objects, but each method and class attribute
    is read through it and guarded where it is used. An OrderedDict subclass's own item methods are
    called where OrderedDict's C code calls them on a subclass (its __init__, update, setdefault,
    copy, and dict(od)'s keys-and-items merge), as UserDictSubclassVariable does."""
    if type(cls) is not type or not issubclass(cls, dict) or not cls.__flags__ & _HEAPTYPE:
        return "not a class-statement subclass of dict"
    builtin = next(klass for klass in cls.__mro__ if not klass.__flags__ & _HEAPTYPE)
    if builtin not in (dict, collections.OrderedDict):
        return f"it derives from the builtin {builtin.__name__}"
    for klass in cls.__mro__[:cls.__mro__.index(builtin)]:
        if not klass.__flags__ & _HEAPTYPE or "__slots__" in vars(klass):
            return f"{klass.__name__} is builtin or defines __slots__"
        for name, value in vars(klass).items():
            if name in _BOOKKEEPING:
                continue
            why = _member_refusal(klass, name, value)
            if why is not None:
                return why
    return None


def own_comparison(cls) -> bool:
    """Whether a user class of dict or OrderedDict writes its own comparison (a dataclass's __eq__)."""
    return any(type_lookup(cls, name) is not type_lookup(_base(cls), name) for name in _COMPARISONS)


def _base(cls):
    return collections.OrderedDict if issubclass(cls, collections.OrderedDict) else dict


class BuiltDictSubclassVariable(DictVariable):
    """An OrderedDict or a defaultdict built in the trace (source None): a dict of constant keys
    whose class is made again after the graph (trace_result.built_dict), in the order of `items`.
    The methods whose meaning is dict's are traced, and OrderedDict's own that move keys
    (move_to_end, popitem(last=)), each a reorder of `items`; `copy` keeps the class (and the
    default factory). == is dict_equal's. Any other method of the class breaks."""

    _DICT_METHODS = frozenset({"keys", "values", "items", "get", "__getitem__", "__contains__", "update",
                               "pop", "setdefault", "clear", "__setitem__", "__delitem__", "popitem", "copy"})
    _ORDERED_METHODS = frozenset({"move_to_end"})
    # Its class is pinned (by the class it was built of, or TYPE_MATCH where read from the frame):
    # a bound C method of dict's it reaches answers `__name__`, `__qualname__` as dict's does.
    methods_of_static_base = True
    # OrderedDict, defaultdict and Counter define no __len__ or __bool__, nor may a user subclass
    # (dict_subclass_refusal): bool() of one is its length.
    truth_is_length = True

    def __init__(self, cls, items: dict, default_factory=None, cls_var=None):
        super().__init__(items)
        self.cls, self.default_factory = cls, default_factory
        # A user subclass's (dict_subclass_refusal) class tracker, read through its source, and the
        # instance __dict__ of the object.
        self.cls_var, self.attrs = cls_var, {}

    def python_type(self):
        return self.cls

    def as_python_constant(self):
        unsupported(f"a {self.cls.__name__} as a constant")

    def reconstruct(self, outputs):
        if self.cls_var is not None:
            # The class loaded again from where it was read: a constant in the transformed code
            # would hold it strongly from the cache entry.
            return outputs.once(self, lambda: CallOutput(
                ConstantOutput(rebuilt_dict_object), ("cls", "base", "items", "attrs"),
                (outputs.rebuild(self.cls_var), ConstantOutput(_base(self.cls)),
                 DictOutput(tuple((k, outputs.rebuild(v)) for k, v in self.items.items())),
                 DictOutput(tuple((k, outputs.rebuild(v)) for k, v in self.attrs.items())))))
        names, values = ("cls", "items"), (ConstantOutput(self.cls),
                                           DictOutput(tuple((k, outputs.rebuild(v)) for k, v in self.items.items())))
        if self.default_factory is not None:
            names, values = names + ("default_factory",), values + (outputs.rebuild(self.default_factory),)
        return outputs.once(self, lambda: CallOutput(ConstantOutput(built_dict), names, values))

    def _own(self, tx, name: str):
        """type(self).name bound to self where a user subclass writes it in Python, else None."""
        if self.cls_var is None or not isinstance(type_lookup(self.cls, name), types.FunctionType):
            return None
        return UserMethodVariable(self.cls_var.class_member(tx, name), self)

    def getitem(self, tx, key):
        own = self._own(tx, "__getitem__")
        return tx.call(own, [key], {}) if own is not None else self.model_getitem(tx, key)

    def setitem(self, tx, key, value):
        own = self._own(tx, "__setitem__")
        if own is not None:
            tx.call(own, [key, value], {})
        else:
            super().setitem(tx, key, value)

    def delitem(self, tx, key):
        own = self._own(tx, "__delitem__")
        if own is not None:
            tx.call(own, [key], {})
        else:
            super().delitem(tx, key)

    def init_items(self, tx, items: dict) -> None:
        """The base's own __init__ (and update) given `items`: dict's merges them."""
        self.mutating(tx, keys_change=True)
        self.items.update(items)

    def model_getitem(self, tx, key):
        """The base class's own `d[key]` (what super().__getitem__ reaches)."""
        k = constant_index(key)
        missing = self._own(tx, "__missing__") if k not in self.items else None
        if missing is not None:   # dict.__getitem__ of a subclass calls it for a key it lacks
            return tx.call(missing, [key], {})
        if k not in self.items and self.default_factory is not None:
            # defaultdict.__missing__: the factory's value, stored under the key, then returned.
            value = tx.call(self.default_factory, [], {})
            self.setitem(tx, key, value)
            return value
        return super().getitem(tx, key)

    def var_getattr(self, tx, name):
        if self.cls_var is None:
            return super().var_getattr(tx, name)
        if name == "__class__":
            return self.cls_var
        if name in self.attrs:
            return self.attrs[name]
        own = self._own(tx, name)
        if own is not None:
            return own
        if not hasattr(_base(self.cls), name) or name.startswith("__"):
            unsupported(f"attribute {name!r} of a {self.cls.__name__} built in the trace")
        return super().var_getattr(tx, name)

    def var_setattr(self, tx, name, value):
        # A name the class has (its methods, `__class__`, `__dict__`, `__doc__`) is refused; any
        # other goes to the instance __dict__, `__missing__` too (it has no effect there).
        if self.cls_var is None or hasattr(self.cls, name):
            unsupported(f"store to {self.cls.__name__}.{name}")
        self.attrs[name] = value

    def var_delattr(self, tx, name):
        if self.cls_var is None or name not in self.attrs:
            unsupported(f"deletion of {self.cls.__name__}.{name}")
        del self.attrs[name]

    def call_method(self, tx, name, args, kwargs):
        ordered = issubclass(self.cls, collections.OrderedDict)
        if name not in self._DICT_METHODS and not (ordered and name in self._ORDERED_METHODS):
            unsupported(f"{self.cls.__name__}.{name}")
        if name == "copy" and not args and not kwargs:
            if not ordered and self.cls_var is not None:   # dict.copy makes a dict, whatever the class
                return DictVariable(dict(self.items))
            # OrderedDict.copy and defaultdict.copy make one of the object's class.
            return BuiltDictSubclassVariable(self.cls, dict(self.items), self.default_factory, self.cls_var)
        if name in ("move_to_end", "popitem") and ordered:
            last = _keyword_only(name, args[1:] if name == "move_to_end" else args, kwargs, "last", True)
            if name == "popitem":
                return self.popitem(tx, last)
            k = constant_index(args[0]) if args else unsupported("OrderedDict.move_to_end without a key")
            if k not in self.items:
                unsupported(f"KeyError {k!r} (OrderedDict.move_to_end)")
            self.mutating(tx)
            value = self.items.pop(k)
            self.items = {k: value, **self.items} if not last else {**self.items, k: value}
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"BuiltDictSubclassVariable({self.cls.__name__}, {self.items!r})"


class UserDictSubclassVariable(BuiltDictSubclassVariable):
    """An object of a user subclass of dict or OrderedDict built in the trace (dict_subclass_refusal):
    the dict model under the class's own Python functions. Attributes follow Python's order
    (object_hooks.py's `generic_*`: the instance __dict__ `attrs`, then the class, read through its
    tracker; a name found nowhere is a traced AttributeError); `obj.name = v` runs the class's own
    __setattr__ where it has one (whose `super().__setattr__` is the store into `attrs`). Where the
    base is OrderedDict, its C code calls a subclass's own item methods, and so does this model:
    __init__ and update store through its __setitem__, setdefault reads or stores through its
    __getitem__ / __setitem__, copy calls the class and stores each item read through them, and
    `dict(od)`, `d.update(od)`, `{**od}` and `f(**od)` read its keys() and each item by its own
    lookup (`mapping_items`). pop, popitem, clear, move_to_end, keys, values, items, get, `in` and
    len call none of them, in OrderedDict as in the model."""

    @property
    def own_comparison(self) -> bool:
        return own_comparison(self.cls)

    @property
    def user_class_var(self):
        """The tracker of its class (pinned by identity where read): `dataclasses.fields(obj)`."""
        return self.cls_var

    def _ordered_own(self, tx, name: str):
        """The class's own item method `name` where OrderedDict's code calls it, else None."""
        return self._own(tx, name) if _base(self.cls) is collections.OrderedDict else None

    def init_items(self, tx, items: dict) -> None:
        if self._ordered_own(tx, "__setitem__") is None:
            return super().init_items(tx, items)
        for k, v in items.items():
            self.setitem(tx, key_tracker(tx, k), v)
        return None

    def mapping_items(self, tx) -> dict:
        # dict's merge (dict(d), x.update(d), {**d}, f(**d)) reads the items of a dict whose type
        # keeps dict's own __iter__ as stored, whatever its keys() and __getitem__; any other
        # (an OrderedDict's, a class's own __iter__) through its keys() and each item by `d[k]`.
        if type_lookup(self.cls, "__iter__") is _DICT_ITER or \
                self._ordered_own(tx, "__getitem__") is None and self._own(tx, "keys") is None:
            return super().mapping_items(tx)
        keys = tx.call(self.var_getattr(tx, "keys"), [], {}).unpack(tx)
        return {constant_index(k): self.getitem(tx, k) for k in keys}

    def var_getattr(self, tx, name):
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name: str):
        """object.__getattribute__(obj, name) over the tracked __dict__ and the class."""
        if name == "__class__":
            return self.cls_var
        raw = type_lookup(self.cls, name)
        user_member = raw is not MISSING and _owner(self.cls, name).__flags__ & _HEAPTYPE
        if raw is not MISSING and is_data_descriptor(raw):
            unsupported(f"attribute {name!r} of a {self.cls.__name__} is a {type(raw).__name__} (a data descriptor)")
        if name in self.attrs:
            return self.attrs[name]
        if raw is MISSING:
            message = f"{self.cls.__name__!r} object has no attribute {name!r}"
            raise traced(TracedAttributeError, f"AttributeError: {message}", AttributeError,
                         [ConstantVariable(message)])
        if user_member:
            if isinstance(raw, types.FunctionType):
                return UserMethodVariable(self.cls_var.class_member(tx, name), self)
            return self.cls_var.class_member(tx, name)   # a value, a staticmethod's function, a classmethod
        if name.startswith("__"):
            unsupported(f"attribute {name!r} of a {self.cls.__name__} built in the trace")
        return MethodVariable(self, name)   # a method of dict or OrderedDict: the model's

    def var_setattr(self, tx, name, value):
        own = self._own(tx, "__setattr__")
        if own is not None:
            tx.call(own, [ConstantVariable(name), value], {})
        else:
            self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name: str, value) -> None:
        """object.__setattr__: into the instance __dict__, unless the class has a data descriptor."""
        raw = type_lookup(self.cls, name)
        if raw is not MISSING and is_data_descriptor(raw):
            unsupported(f"store to {self.cls.__name__}.{name}, a {type(raw).__name__}")
        self.attrs[name] = value

    def var_delattr(self, tx, name):
        if self._own(tx, "__delattr__") is not None:   # refused by dict_subclass_refusal; kept exact
            unsupported(f"del of an attribute of a {self.cls.__name__} with its own __delattr__")
        self.generic_delattr(tx, name)

    def generic_delattr(self, tx, name: str) -> None:
        if name not in self.attrs:
            unsupported(f"deletion of {self.cls.__name__}.{name}, not in its instance __dict__")
        del self.attrs[name]

    def call_method(self, tx, name, args, kwargs):
        ordered = _base(self.cls) is collections.OrderedDict
        if ordered and name == "update" and self._ordered_own(tx, "__setitem__") is not None:
            if len(args) > 1:
                unsupported("OrderedDict.update with more than one positional argument")
            self.init_items(tx, dict_items(tx, list(args), kwargs))
            return ConstantVariable(None)
        if ordered and name == "setdefault" and (self._ordered_own(tx, "__getitem__") is not None or
                                                 self._ordered_own(tx, "__setitem__") is not None):
            if kwargs or len(args) not in (1, 2):
                arity_error(collections.OrderedDict, name, args, kwargs)
            if constant_index(args[0]) in self.items:
                return self.getitem(tx, args[0])
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            self.setitem(tx, args[0], default)
            return default
        if ordered and name == "copy" and not args and not kwargs:
            # OrderedDict.copy of a subclass: type(self)(), then each item read and stored through
            # the object's own item methods.
            new = construct(tx, self.cls_var, [], {})
            for k in list(self.items):
                key = key_tracker(tx, k)
                new.setitem(tx, key, self.getitem(tx, key))
            return new
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"UserDictSubclassVariable({self.cls.__name__}, {self.items!r})"


_DICT_ITER = vars(dict)["__iter__"]


def _owner(cls, name: str):
    """The class of cls.__mro__ whose __dict__ holds `name`."""
    return next(klass for klass in cls.__mro__ if name in vars(klass))


class BaseDictMethod(VariableTracker):
    """super().name on a user subclass instance, reaching dict's or OrderedDict's own method: the
    dict model's, never the subclass's override of it."""

    def __init__(self, obj: BuiltDictSubclassVariable, name: str):
        super().__init__(None)
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        obj, name = self.obj, self.name
        if name == "__init__":   # dict.__init__ merges without the subclass's __setitem__
            obj.init_items(tx, dict_items(tx, args, kwargs))
            return ConstantVariable(None)
        if name in ("__getitem__", "__setitem__", "__delitem__"):
            if kwargs or len(args) != (2 if name == "__setitem__" else 1):
                arity_error(dict, name, args, kwargs)
            if name == "__getitem__":
                return obj.model_getitem(tx, args[0])
            (DictVariable.setitem if name == "__setitem__" else DictVariable.delitem)(obj, tx, *args)
            return ConstantVariable(None)
        return obj.call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"BaseDictMethod({self.obj!r}.{self.name})"


def base_dict_method(obj, klass, name):
    """The tracker of super().name reaching `klass`'s member `name`, or None where it is none of
    what BaseDictMethod models."""
    if isinstance(obj, BuiltDictSubclassVariable) and obj.cls_var is not None and klass in (dict, _base(obj.cls)) and (
            name in ("__init__", "__getitem__", "__setitem__", "__delitem__") or
            name in BuiltDictSubclassVariable._DICT_METHODS or name in BuiltDictSubclassVariable._ORDERED_METHODS):
        return BaseDictMethod(obj, name)
    return None


def construct(tx, cls_var, args, kwargs):
    """`cls(...)` for a user subclass (dict_subclass_refusal): a new object of the class, then its
    __init__: the class's own, traced as Python, or its base's (the items of the arguments)."""
    obj = UserDictSubclassVariable(cls_var.value, {}, cls_var=cls_var)
    init = obj._own(tx, "__init__")
    if init is None:
        obj.init_items(tx, dict_items(tx, args, kwargs))
        return obj
    result = tx.call(init, args, kwargs)
    if not (isinstance(result, ConstantVariable) and result.value is None):
        unsupported(f"{cls_var.value.__qualname__}.__init__ returned {result}, not None")
    return obj


def build_ordered_dict(tx, args, kwargs):
    return BuiltDictSubclassVariable(collections.OrderedDict, dict_items(tx, args, kwargs))


def build_defaultdict(tx, args, kwargs):
    factory = args[0] if args else ConstantVariable(None)
    if isinstance(factory, ConstantVariable) and factory.value is None:
        factory = None
    return BuiltDictSubclassVariable(collections.defaultdict, dict_items(tx, args[1:], kwargs), factory)
