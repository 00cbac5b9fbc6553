"""UserObjectVariable: an instance of a plain user class (not a module) read from the frame.

Its attributes are read through the object's source (`L['self'].k`), so each value read is
guarded where it lives (EQUALS_MATCH on constants, TENSOR_MATCH on tensors); the object itself is
guarded only by type, so another instance holding the same values hits the same entry. Methods
defined in Python are inlined with the object as `self`; attributes resolve in Python's order
(attribute.py), through the class's own __getattribute__ / __getattr__ / __setattr__ /
__delattr__ where it writes them in Python (traced: object_protocol.py); hooks written in C other
than object's make the object opaque. `obj[k]` and `k in obj` inline
the type's Python __getitem__/__contains__; collections.abc.Mapping's `in` and `.get` over such a
__getitem__ are modelled (below), since the tracer follows no try block.

DictSubclassVariable: an instance of a user subclass of dict (transformers' _CanRecordRegistry,
whose Python `get` calls `super().get(str(model.__class__))`). Its Python methods are inlined as
above; dict's own get/__getitem__/__contains__, reached directly or through super(), read the
underlying dict, guarded on what was read: a key found is guarded through its value
(`G['R']['k']`, which fails when the key goes; `dict.__getitem__(G['R'], 'k')` where the class
writes its own __getitem__, which a guard must not run: transformers' ACT2FN builds a module on
each read), a key not found by the dict's keys (DICT_KEYS:
stricter than the key's absence, since the guard tree has no leaf for absence alone).

EnvironVariable: os.environ. Its `get`, `[]` and `in` with a str key are constants of the trace,
guarded on what was read: a variable that is set through its value (`G['os'].environ['K']`, read
by _Environ's own __getitem__ at guard time: EQUALS_MATCH, failing when it is unset), an unset one
by the keys of `os.environ._data` (again stricter than the one variable's absence: setting any
other variable recompiles too). Never unguarded: a changed variable recompiles.

Classes read from the frame and super() are in classes.py. Implicit special-method calls (`len(obj)`) find the method on the type (`type_method`). Where it leaves the
trace it is the very object, loaded again from its source, after the stores the trace made to it
were replayed (side_effects.py).
"""
from __future__ import annotations

import abc
import collections.abc
import sys
import types

import torch

from ....guard.attribute_lookup import MISSING, Where, instance_dict, lookup, type_lookup
from ....guard.process_lived import holdable_key
from ....guard.sources import AttrSource, DictItemSource, ItemSource
from ....guard.trace_result import GuardKind, SourceOutput
from ..collections import dict_subclass_reads
from ..builtin_functions import lru_cache_calls, polyfills
from . import object_protocol, user_iterators
from .attribute import has_attribute, read_attribute, type_source
from ..base import (TracedAttributeError, TracedIndexError, TracedKeyError, TracedRaise, VariableTracker, catching_raise,
                    traced, unsupported)
from ..constant import ConstantVariable, raise_of_message
from ..collections.containers import TupleVariable
from .functions import UserFunctionVariable
from ..builtin_functions.operators import getitem


def is_plain_user_object(value) -> bool:
    """An instance of a user class whose attribute protocol the tracer follows (object_protocol.py):
    hooks that are object's, trusted renamings or Python functions."""
    cls = type(value)
    if cls.__module__ in ("builtins",) or instance_dict(value) is None and not _has_slots(cls):
        return False
    return object_protocol.hook_refusal(cls) is None


def has_attribute_hooks(value) -> bool:
    """A plain user object (not a tensor or module; a dict subclass's instance included) whose class
    has a __getattribute__ or __getattr__ of its own, decided from type(value) alone (no hook
    runs)."""
    cls = type(value)
    if not cls.__flags__ & _HEAPTYPE or type(cls) not in (type, abc.ABCMeta) or \
            issubclass(cls, (torch.Tensor, torch.nn.Module)):
        return False
    return object_protocol.has_hooks(cls) and is_plain_user_object(value)


def wrap_hooked_object(tx, value, source, g):
    """The tracker of an object `has_attribute_hooks` chose, by its kind, guarded by its type: a
    dict subclass's instance reads its items as a dict, any other as a user object."""
    cls = DictSubclassVariable if issubclass(type(value), dict) else UserObjectVariable
    return wrap_by_type(cls)(tx, value, source, g)


def _has_slots(cls: type) -> bool:
    return any(vars(klass).get("__slots__") for klass in cls.__mro__[:-1]) and \
        all(klass.__flags__ & _HEAPTYPE for klass in cls.__mro__[:-1])


_HEAPTYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE: a class made by a class statement


class UserObjectVariable(VariableTracker):
    guarded_by_type = True
    exact_type = True
    user_operators = True   # `a + b`, `a == b` run the class's Python dunders (operators.py)
    # `value` is the very object `source` reaches (operators._pinned_relation compares identities)
    holds_frame_object = True

    def __init__(self, value, source):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def dict_key(self, tx):
        # An object that lives as long as the process and hashes and compares by identity
        # (process_lived.holdable_key: `table.get(typing.get_origin(t))`, the origin typing.Union):
        # a dict lookup by it finds exactly the entry keyed by that very object, so the lookup is
        # made with it, pinned by identity at its source.
        if self.source is None or not holdable_key(self.value):
            return super().dict_key(tx)
        tx.output.add_guard(self.source, GuardKind.ID_MATCH, self.value)
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # The type's __getattribute__ and __getattr__, as Python's slot runs them (object_protocol.py).
        return object_protocol.get_attribute(tx, self, name, lambda n: self.plain_getattr(tx, n))

    def object_getattr(self, tx, name: str) -> VariableTracker:
        """object.__getattribute__(obj, name), from the class's own hook (object_hooks.py)."""
        return object_protocol.object_getattr(tx, self, name)

    def object_setattr(self, tx, name: str, value) -> None:
        object_protocol.object_store(tx, self, name, value)

    def object_delattr(self, tx, name: str) -> None:
        object_protocol.object_delete(tx, self, name)

    def getattr_or(self, tx, name: str, default) -> VariableTracker:
        """getattr(obj, name, default): the lookup run once, its AttributeError caught."""
        value, found = catching_raise(tx, lambda: self.var_getattr(tx, name), TracedAttributeError)
        return value if found else default

    def plain_getattr(self, tx, name: str) -> VariableTracker:
        """`obj.name` where the type's __getattribute__ is object's or a trusted renaming."""
        found = lookup(self.value, name)
        if found.where is Where.CLASS and name in ("index", "count") and \
                is_sequence_mixin(type(self.value), name):
            return SequenceMethodVariable(self, name)
        if found.where is Where.CLASS and mixin_of(found.value) is not None:
            # `obj.get.__func__ is Mapping.get`, as read_attribute guards any method it binds.
            tx.output.add_guard(AttrSource(AttrSource(self.source, name), "__func__"),
                                GuardKind.ID_MATCH, found.value)
            return MixinMethodVariable(self, mixin_of(found.value), name)
        return read_attribute(tx, self, self.value, name)

    def special_method(self, tx, name: str):
        """`type(obj).name` for a special method (Python looks those up on the type): the function,
        guarded where it is found (`obj.__class__.name`), or None if it is not a Python function."""
        fn = type_lookup(type(self.value), name)
        if not isinstance(fn, types.FunctionType):
            return None
        return tx.wrap(fn, AttrSource(type_source(self.source, type(self.value)), name))

    def call_function(self, tx, args, kwargs):
        if lru_cache_calls.is_lru_wrapper(self.value):
            return lru_cache_calls.call(tx, self, args, kwargs)
        fn = self.special_method(tx, "__call__")
        if fn is None:
            unsupported(f"call of {self} (its __call__ is not a Python function)")
        return tx.call(fn, [self, *args], kwargs)

    def getitem(self, tx, key) -> VariableTracker:
        fn = self.special_method(tx, "__getitem__")
        if fn is None:
            unsupported(f"subscript of {self} (its __getitem__ is not a Python function)")
        return tx.call(fn, [self, key], {})

    def contains(self, tx, item) -> bool:
        raw = type_lookup(type(self.value), "__contains__")
        if is_sequence_mixin(type(self.value), "__contains__"):
            return sequence_call(tx, self, "__contains__", [item], {}).truthy(tx)
        if mixin_of(raw) is not None:
            return mixin_of(raw)(tx, self, [item], {}).truthy(tx)
        fn = self.special_method(tx, "__contains__")
        if fn is None:
            unsupported(f"membership test in {self} (its __contains__ is not a Python function)")
        return tx.call(fn, [self, item], {}).truthy(tx)

    def has_attribute(self, tx, name: str) -> bool:
        if object_protocol.has_hooks(type(self.value)):   # hasattr runs them, catching AttributeError
            return catching_raise(tx, lambda: self.var_getattr(tx, name), TracedAttributeError)[1]
        return has_attribute(tx, self, self.value, name)

    def get_iter(self, tx):
        return protocol_iter(tx, self)

    def unpack(self, tx):
        return protocol_unpack(tx, self)

    def var_setattr(self, tx, name: str, value) -> None:
        object_protocol.set_attribute(tx, self, name, value)

    def var_delattr(self, tx, name: str) -> None:
        object_protocol.delete_attribute(tx, self, name)

    def truthy(self, tx) -> bool:
        return python_truth(tx, self, type(self.value))

    def type_method(self, tx, name: str):
        """The function `name` on the object's class, as an implicit special-method call (`len(o)`)
        finds it, read as `type(o).name` and guarded there by identity."""
        fn = type_lookup(type(self.value), name)
        if not isinstance(fn, types.FunctionType):
            unsupported(f"{type(self.value).__name__}.{name} is not a Python function")
        return tx.wrap(fn, AttrSource(type_source(self.source, type(self.value)), name))

    def reconstruct(self, outputs):
        # The very object, loaded again: attribute stores the trace made are replayed on it first
        # (side_effects.py), so it is the object eager code returns, in the state it leaves it in.
        return SourceOutput(self.source)

    def __repr__(self):
        return f"UserObjectVariable({type(self.value).__name__} from {self.source})"


# bool(obj): the type's __bool__, then its __len__, and the checks Python makes of their results.
_TRUTH_METHODS = ("__bool__", "__len__")


def python_truth(tx, obj, cls: type) -> bool:
    """bool(obj) for a user object of class `cls` as Python computes it: the type's __bool__, else
    its __len__ (nonzero), else True. A Python __bool__/__len__ is inlined (`obj.type_method`: read
    on the class and guarded by identity there) and what it reads is guarded where it lives (a
    list's LENGTH, an attribute's value), so a changed length recompiles. Python checks the result
    and raises where it refuses it (a __bool__ that gives no bool, a negative __len__), and so does
    the trace, with Python's message, as it does for a method set to None; a result whose kind the
    trace does not know is refused and the branch runs as written."""
    for name in _TRUTH_METHODS:
        found = type_lookup(cls, name)
        if found is MISSING:
            continue
        if found is None:   # `__bool__ = None`: Python calls it
            raise raise_of_message(TracedRaise, TypeError, "'NoneType' object is not callable")
        result = tx.call(obj.type_method(tx, name), [obj], {})
        return _checked_truth(name, result)
    return True


def _checked_truth(name: str, result) -> bool:
    if isinstance(result, ConstantVariable):
        value = result.value
        if name == "__bool__":
            if type(value) is bool:
                return value
            raise raise_of_message(TracedRaise, TypeError,
                                   f"__bool__ should return bool, returned {type(value).__name__}")
        if type(value) in (int, bool):
            if value < 0:
                raise raise_of_message(TracedRaise, ValueError, "__len__() should return >= 0")
            if value > sys.maxsize:
                raise raise_of_message(TracedRaise, OverflowError, "cannot fit 'int' into an index-sized integer")
            return bool(value)
        if type(value) in (str, bytes, float, type(None), tuple, complex):
            raise raise_of_message(TracedRaise, TypeError,
                                   f"'{type(value).__name__}' object cannot be interpreted as an integer")
    elif name == "__bool__" and hasattr(result, "type_method"):   # an object of a user class: no bool
        raise raise_of_message(TracedRaise, TypeError,
                               f"__bool__ should return bool, returned {result.python_type().__name__}")
    unsupported(f"{name} returned {result}, not a constant of the trace that Python accepts")


# -- collections.abc.Mapping's mixins ------------------------------------------------------------
# A user mapping (transformers' AttentionInterface) writes __getitem__ and inherits `in` and
# `.get` from Mapping, which call it and catch KeyError. The tracer follows no try block, so those
# two are modelled here: __getitem__ is inlined, and a KeyError the trace knows it raises (a dict
# tracker's keys are exact and guarded) is caught, as Mapping does; only where nothing in between
# had a try or with block of its own (translator._fail) and the grad/autocast state is as before.

def _mapping_contains(tx, obj, args, kwargs):
    if len(args) != 1 or kwargs:
        unsupported("Mapping.__contains__ with other than one argument")
    _, found = catching_raise(tx, lambda: obj.getitem(tx, args[0]))
    return ConstantVariable(found)


def _mapping_get(tx, obj, args, kwargs):
    if not 1 <= len(args) <= 2 or kwargs:
        unsupported("Mapping.get with other than one or two arguments")
    value, found = catching_raise(tx, lambda: obj.getitem(tx, args[0]))
    return value if found else (args[1] if len(args) == 2 else ConstantVariable(None))


_MAPPING_MIXINS = {
    "__contains__": _mapping_contains,
    "get": _mapping_get,
}


def mixin_of(fn):
    """The model of `fn` if it is one of Mapping's mixin methods, else None."""
    name = getattr(fn, "__name__", None)
    if name in _MAPPING_MIXINS and vars(collections.abc.Mapping).get(name) is fn:
        return _MAPPING_MIXINS[name]
    return None


class MixinMethodVariable(VariableTracker):
    """`obj.get` where get is Mapping's: called as modelled above, with obj as self."""

    def __init__(self, obj, model, name: str):
        super().__init__(None)
        self.obj, self.model, self.name = obj, model, name

    def call_function(self, tx, args, kwargs):
        return self.model(tx, self.obj, args, kwargs)

    def __repr__(self):
        return f"MixinMethodVariable({self.obj!r}.{self.name})"


# -- collections.abc.Sequence's iteration ---------------------------------------------------------
# A user sequence (transformers' _PerLayerConfigView) writes __getitem__ and __len__ and inherits
# __iter__ from Sequence: `seq[0], seq[1], ...` until __getitem__ raises IndexError (its __len__ is
# not asked). Traced as polyfills.sequence_iter_, a generator, so each item is read when the loop
# asks for it, as in Python; the IndexError that ends it is caught as above. Sequence's `in`,
# index, count (the same walk) and __reversed__ (by __len__) are their polyfills too.

_SEQUENCE = vars(collections.abc.Sequence)


def _sequence_polyfill(tx, name: str, obj, args, kwargs):
    fn, with_item = {"__iter__": (polyfills.sequence_iter_, True),
                     "__reversed__": (polyfills.sequence_reversed_, False),
                     "__contains__": (polyfills.sequence_contains_, True),
                     "index": (polyfills.sequence_index_, True),
                     "count": (polyfills.sequence_count_, True)}[name]
    if name == "__contains__":
        return tx.call(UserFunctionVariable(fn), [obj, *args, _SequenceItem()], kwargs)
    return tx.call(UserFunctionVariable(fn), [obj, *([_SequenceItem()] if with_item else []), *args], kwargs)


def is_sequence_mixin(cls: type, name: str) -> bool:
    """type(obj).name is collections.abc.Sequence's own (modelled here)."""
    return name in ("__iter__", "__reversed__", "__contains__", "index", "count") and \
        type_lookup(cls, name) is _SEQUENCE[name]


def protocol_iter(tx, obj):
    """iter(obj) of a user object: Sequence's __iter__ (modelled), else the type's own protocol
    (user_iterators.py)."""
    it = sequence_iterator(tx, obj)
    return it if it is not None else user_iterators.object_iter(tx, obj)


def protocol_unpack(tx, obj):
    """The items of a user object read whole (`list(obj)`, `*obj`), as protocol_iter yields them;
    an object Python would first ask for a length hint is refused."""
    it = sequence_iterator(tx, obj)
    if it is not None:
        return it.unpack(tx)
    user_iterators.refuse_length_hint(obj)
    return user_iterators.drain(tx, user_iterators.object_iter(tx, obj))


def sequence_iterator(tx, obj):
    """iter(obj) where type(obj).__iter__ is Sequence's (a generator tracker), else None."""
    if not is_sequence_mixin(obj.python_type(), "__iter__"):
        return None
    return _sequence_polyfill(tx, "__iter__", obj, [], {})


def sequence_call(tx, obj, name: str, args, kwargs):
    """obj.name(*args) for one of Sequence's mixins (see is_sequence_mixin)."""
    return _sequence_polyfill(tx, name, obj, args, kwargs)


class SequenceMethodVariable(VariableTracker):
    """`seq.index` / `seq.count` where they are Sequence's: called as their polyfills."""

    def __init__(self, obj, name: str):
        super().__init__(None)
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        return sequence_call(tx, self.obj, self.name, args, kwargs)

    def __repr__(self):
        return f"SequenceMethodVariable({self.obj!r}.{self.name})"


class _SequenceItem(VariableTracker):
    """`item(seq, i)` of polyfills.sequence_iter_: (True, seq[i]), or (False, None) on IndexError."""

    def call_function(self, tx, args, kwargs):
        seq, i = args
        value, found = catching_raise(tx, lambda: getitem(tx, seq, i), TracedIndexError)
        return TupleVariable([ConstantVariable(found), value if found else ConstantVariable(None)])


# -- dict subclasses ------------------------------------------------------------------------------

def is_dict_subclass_object(value) -> bool:
    return isinstance(value, dict) and type(value) is not dict and is_plain_user_object(value)


class DictSubclassVariable(UserObjectVariable):
    def plain_getattr(self, tx, name: str) -> VariableTracker:
        found = lookup(self.value, name)
        if found.where is Where.CLASS and name in DICT_READS and found.value is vars(dict)[name]:
            return DictReadVariable(self, name)
        if found.where is Where.CLASS and name in dict_subclass_reads.VIEWS and \
                any(found.value is m for m in (vars(dict)[name], vars(collections.OrderedDict)[name])):
            return dict_subclass_reads.DictViewMethodVariable(self, name)
        return super().plain_getattr(tx, name)

    def type_method(self, tx, name: str):
        # len() and bool() of the object: dict's own __len__ reads its guarded keys.
        if name == "__len__" and dict_subclass_reads.keeps_dicts(type(self.value), name):
            return dict_subclass_reads.DictLenVariable(self)
        return super().type_method(tx, name)

    def getitem(self, tx, key) -> VariableTracker:
        if type_lookup(type(self.value), "__getitem__") is vars(dict)["__getitem__"]:
            return _dict_getitem(tx, self, [key], {})
        return super().getitem(tx, key)

    def contains(self, tx, item) -> bool:
        if type_lookup(type(self.value), "__contains__") is vars(dict)["__contains__"]:
            if not dict_subclass_reads.keeps_dicts(type(self.value), "__getitem__") and item.is_python_constant():
                # `in` reads no value: the guarded keys answer it (read() would guard `d[k]`,
                # which runs the class's own __getitem__).
                return item.as_python_constant() in dict_subclass_reads.guarded_keys(tx, self)
            return self.read(tx, item)[0]
        return super().contains(tx, item)

    def read(self, tx, key):
        """(found, value tracker or None) for the underlying dict's `key`, guarded (see above)."""
        if not key.is_python_constant() or type(key.as_python_constant()) not in (str, int):
            unsupported(f"a key of {self} that is not a str or int constant")
        k, d = key.as_python_constant(), self.value
        if dict.__contains__(d, k):
            # A class's own __getitem__ is not what `d[k]` in a guard may run: dict's is read.
            own = type_lookup(type(d), "__getitem__") is vars(dict)["__getitem__"]
            return True, tx.wrap(dict.__getitem__(d, k), (ItemSource if own else DictItemSource)(self.source, k))
        if not all(type(x) in (str, int) for x in dict.keys(d)):
            unsupported(f"a missing key of {self}, whose keys are not all str or int")
        tx.output.add_guard(self.source, GuardKind.DICT_KEYS, tuple(dict.keys(d)))
        return False, None

    def __repr__(self):
        return f"DictSubclassVariable({type(self.value).__name__} from {self.source})"


class EnvironVariable(DictSubclassVariable):
    """os.environ (an os._Environ, a MutableMapping over the bytes-keyed `_data`); see above. Not a
    dict: it shares DictSubclassVariable's read protocol (`read`, DictReadVariable) only."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in DICT_READS:
            return DictReadVariable(self, name)
        return UserObjectVariable.var_getattr(self, tx, name)

    def getitem(self, tx, key) -> VariableTracker:
        return _dict_getitem(tx, self, [key], {})

    def contains(self, tx, item) -> bool:
        return self.read(tx, item)[0]

    def read(self, tx, key):
        if not key.is_python_constant() or type(key.as_python_constant()) is not str:
            unsupported("os.environ read with a key that is not a str constant")
        k, env = key.as_python_constant(), self.value
        if k in env:
            return True, tx.wrap(env[k], ItemSource(self.source, k))
        keys = tuple(env._data)
        if not all(type(x) in (str, bytes) for x in keys):
            unsupported("os.environ._data with keys other than str or bytes")
        tx.output.add_guard(AttrSource(self.source, "_data"), GuardKind.DICT_KEYS, keys)
        return False, None

    def __repr__(self):
        return f"EnvironVariable({self.source})"


def _dict_get(tx, obj, args, kwargs):
    if not 1 <= len(args) <= 2 or kwargs:
        unsupported("dict.get with other than one or two arguments")
    found, value = obj.read(tx, args[0])
    return value if found else (args[1] if len(args) == 2 else ConstantVariable(None))


def _dict_getitem(tx, obj, args, kwargs):
    if len(args) != 1 or kwargs:
        unsupported("dict.__getitem__ with other than one argument")
    found, value = obj.read(tx, args[0])
    if not found:
        if type(obj) is DictSubclassVariable and type_lookup(type(obj.value), "__missing__") is MISSING:
            # dict's own lookup of a missing key (read() guarded the keys): KeyError(key), caught
            # in the trace where the code catches it
            raise traced(TracedKeyError, f"KeyError: {args[0]} in {obj}", KeyError, [args[0]])
        unsupported(f"KeyError: {args[0]} in {obj}")
    return value


def _dict_contains(tx, obj, args, kwargs):
    if len(args) != 1 or kwargs:
        unsupported("dict.__contains__ with other than one argument")
    return ConstantVariable(obj.read(tx, args[0])[0])


DICT_READS = {"get": _dict_get, "__getitem__": _dict_getitem, "__contains__": _dict_contains}


class DictReadVariable(VariableTracker):
    """dict's get/__getitem__/__contains__ bound to a DictSubclassVariable (directly or by super())."""

    def __init__(self, obj, name: str):
        super().__init__(None)
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        return DICT_READS[self.name](tx, self.obj, args, kwargs)

    def __repr__(self):
        return f"DictReadVariable({self.obj!r}.{self.name})"


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def wrap_by_type(cls):
    """The rule for an object guarded by its type alone (its attributes and items where read)."""
    def wrap_object(tx, value, source, g):
        g(GuardKind.TYPE_MATCH, type(value))
        return cls(value, source)
    return wrap_object
