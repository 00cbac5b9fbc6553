"""BuiltinVariable: len, range, isinstance, enumerate, zip, min, max, abs, getattr, int, ...

Builtins run on constants in Python; on tensors only where the answer is static (len of a
tensor is its first dimension) or is a graph op (abs). print() and friends raise Unsupported.
"""
from __future__ import annotations

import ast
import builtins
import collections
import copy
import dataclasses
import functools
import itertools
import operator
import types
import weakref

from ....guard.attribute_lookup import MISSING, type_lookup
from ....guard.sources import AttrSource
from ....guard.trace_result import GuardKind
from ..python_objects import dataclass_fields, instance_checks, user_iterators
from . import polyfills, pure
from .builtin_calls import refused_call
from ..base import CallableVariable, TracedAttributeError, TracedRaise, provides, unsupported
from ..python_objects.classes import ClassVariable, call_super, register_builtin_model
from ..constant import ConstantVariable, raise_of_message
from ..collections.containers import BaseListVariable, ListVariable, TupleVariable, sort_order
from ..collections.dicts import DictVariable, dict_items
from ..collections.dict_subclasses import build_defaultdict, build_ordered_dict
from .builtins_identity import IDENTITY_HANDLERS
from .builtins_paths import PATH_HANDLERS
from .combinatorics import COMBINATORIC_HANDLERS
from .container_text import container_repr
from .copying import deepcopy
from ..collections.counters import build_counter
from ..collections.deques import build_deque
from ..collections.list_subclasses import ListSubclassVariable
from ..python_objects.exceptions import ExceptionVariable, constant_exception, traced_raise
from ..python_objects.functions import PureFunctionVariable, UserFunctionVariable
from ..python_objects.generators import GeneratorVariable
from .tee import tee
from .function_wraps import wraps
from ..collections.iterators import (REVERSED_TYPES, EnumerateVariable, IteratorVariable, ReversedListVariable, ZipVariable,
                                     dict_iterator, iterate, iterated_containers, iterator_type)
from ..collections.namedtuples import construct_namedtuple
from ..python_objects.partials import make_partial
from ..python_objects.new_object import NewObjectVariable
from ..modules.nn_module import NNModuleVariable
from .operators import binary_op, symbolic_truth
from ..collections.ranges import RangeVariable
from ..collections.sets import SetVariable, constants_of
from ..torch_objects.symbolic import SymNodeVariable
from ..torch_objects.tensor import TensorVariable, call_op
from ..python_objects.user_object import UserObjectVariable, catching_raise, is_sequence_mixin, sequence_call
from ..python_objects.weakrefs import make_weakref


def _consts(args, kwargs):
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        return None
    return [a.as_python_constant() for a in args], {k: v.as_python_constant()
                                                    for k, v in kwargs.items()}


def _fold(fn):
    def handler(tx, args, kwargs):
        return pure.fold(tx, fn, args, kwargs)
    return handler


def _len(tx, args, kwargs):
    (obj,) = args
    if isinstance(obj, (BaseListVariable, DictVariable)):
        return ConstantVariable(len(obj.items))
    if isinstance(obj, TensorVariable):
        if obj.example.dim() == 0:
            unsupported("len() of a 0-d tensor")
        if obj.has_symbolic_shape():
            return call_op(tx, "size", [obj, ConstantVariable(0)], {}, method=True)
        return ConstantVariable(obj.example.shape[0])
    if hasattr(obj, "module"):  # ModuleList and friends
        return obj.call_method(tx, "__len__", [], {})
    if hasattr(obj, "type_method"):   # a user object: its type's __len__ inlined, as len() does
        n = tx.call(obj.type_method(tx, "__len__"), [obj], {})
        value = n.as_python_constant() if n.is_python_constant() else None
        if type(value) is not int or value < 0:
            unsupported(f"__len__ of {obj} returned {n}")
        return n
    if hasattr(obj, "length"):  # a tracker that knows its length (Signature.parameters)
        return ConstantVariable(obj.length(tx))
    return _fold(len)(tx, args, kwargs)


def _range(tx, args, kwargs):
    c = _consts(args, kwargs)
    if c is None:
        unsupported("range() over non-constant bounds")
    return RangeVariable(range(*c[0]))


def _enumerate(tx, args, kwargs):
    args = [user_iterators.lazily(tx, args[0]), *args[1:]] if args else args
    if any(isinstance(a, GeneratorVariable) for a in args):   # lazy, item by item
        return _polyfill(polyfills.enumerate_, enumerate)(tx, args, kwargs)
    start = (args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0)))
    start = start.as_python_constant()
    if type(start) is not int:
        unsupported(f"enumerate(start={start!r})")
    return EnumerateVariable(_lazy_child(tx, args[0]), start)


def _lazy_child(tx, obj) -> IteratorVariable:
    """What enumerate, zip (and Python's iter) read `obj` through: the very iterator where `obj`
    is one, a live iterator over a list, else the items read now (watched: IteratorVariable)."""
    if isinstance(obj, IteratorVariable):
        return obj
    if isinstance(obj, ListVariable):
        return iterate(tx, obj)
    return dict_iterator(tx, obj) or IteratorVariable(obj.unpack(tx), origin=obj, kind=iterator_type(obj))


def _zip(tx, args, kwargs):
    if kwargs:
        unsupported("zip(strict=...)")
    args = [user_iterators.lazily(tx, a) for a in args]
    if any(isinstance(a, GeneratorVariable) for a in args):   # lazy, item by item
        return _polyfill(polyfills.zip_, zip)(tx, args, kwargs)
    return ZipVariable([_lazy_child(tx, a) for a in args])


def _minmax(fn):
    import torch

    sym_fn = torch.sym_min if fn is min else torch.sym_max

    def handler(tx, args, kwargs):
        if len(args) == 2 and not kwargs and any(isinstance(a, SymNodeVariable) for a in args) and \
                all(isinstance(a, SymNodeVariable) or type(a.as_python_constant()) in (int, float) for a in args):
            return call_op(tx, sym_fn, args, {})
        if len(args) != 1:
            return _fold(fn)(tx, args, kwargs)  # max(a, b, ...)
        # max(iterable): fold over its items (a list of constants read from the frame included).
        return _fold(fn)(tx, [TupleVariable(list(args[0].unpack(tx)))], kwargs)
    return handler


def _abs(tx, args, kwargs):
    if isinstance(args[0], (TensorVariable, SymNodeVariable)):
        return call_op(tx, operator.abs, args, {})
    return _fold(abs)(tx, args, kwargs)


def _getattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    if len(args) == 3:
        if hasattr(obj, "getattr_or"):   # a user object read from the frame: its lookup runs once
            return obj.getattr_or(tx, name, args[2])
        if hasattr(obj, "generic_getattr"):   # built in the trace: its lookup runs once
            value, found = catching_raise(tx, lambda: obj.var_getattr(tx, name), TracedAttributeError)
            return value if found else args[2]
        if hasattr(obj, "has_attribute"):  # modules and user objects: the answer is guarded
            if not obj.has_attribute(tx, name):
                return args[2]
            return obj.var_getattr(tx, name)
        module = getattr(obj, "module", None)
        if module is not None and not hasattr(module, name):
            return args[2]
        if obj.is_python_constant() and not hasattr(obj.as_python_constant(), name):
            return args[2]
    return obj.var_getattr(tx, name)


def _setattr(tx, args, kwargs):
    if len(args) != 3 or kwargs:
        unsupported("setattr() with other than three arguments")
    args[0].var_setattr(tx, args[1].as_python_constant(), args[2])   # recorded: side_effects.py
    return ConstantVariable(None)


def _delattr(tx, args, kwargs):
    if len(args) != 2 or kwargs:
        unsupported("delattr() with other than two arguments")
    args[0].var_delattr(tx, args[1].as_python_constant())
    return ConstantVariable(None)


def _hasattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    if hasattr(obj, "has_attribute"):  # modules and user objects: the answer is guarded
        return ConstantVariable(obj.has_attribute(tx, name))
    module = getattr(obj, "module", None)
    if module is not None:
        return ConstantVariable(hasattr(module, name))
    if obj.is_python_constant():
        return ConstantVariable(hasattr(obj.as_python_constant(), name))
    unsupported(f"hasattr on {obj}")


def _sequence(kind):
    def handler(tx, args, kwargs):
        items = args[0].unpack(tx) if args else []
        return (TupleVariable if kind is tuple else ListVariable)(list(items))
    return handler


def _dict(tx, args, kwargs):
    made = DictVariable(dict_items(tx, args, kwargs))
    if not args and not kwargs:
        made.table = {}   # `dict()`: a new empty dict, as `{}` (its layout followed from here)
    return made


def _sum(tx, args, kwargs):
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    for item in args[0].unpack(tx):
        total = binary_op(tx, "+", total, item)
    return total


def _type(tx, args, kwargs):
    if len(args) != 1:
        unsupported("type() with three arguments")
    # A class whose attributes can be read (`type(self).forward`) through `obj.__class__`, where
    # python_type() is exactly the object's type (a tensor's may be a base of it).
    if isinstance(args[0], (UserObjectVariable, NNModuleVariable)) and args[0].source is not None:
        return tx.wrap(args[0].python_type(), AttrSource(args[0].source, "__class__"))
    if isinstance(args[0], NewObjectVariable):   # an object the trace built: its class, with its source
        return args[0].cls_var
    if isinstance(args[0], TracedNamedTupleVariable):   # its class, which may not leave the trace
        return TracedNamedTupleClassVariable(args[0].cls)
    if isinstance(args[0], ListSubclassVariable):   # its class's own tracker (list_subclasses.py)
        return args[0].cls_var
    return ClassVariable(args[0].python_type())


def _super(tx, args, kwargs):
    return call_super(tx, args, kwargs)


def _scalar(fn):
    def handler(tx, args, kwargs):
        if fn is bool and len(args) == 1 and not kwargs:
            made = symbolic_truth(tx, args[0])
            if made is not None:
                return made
            if getattr(args[0], "truth_is_length", False):   # whatever its items are
                return ConstantVariable(args[0].truthy(tx))
        if any(isinstance(a, TensorVariable) for a in args):
            unsupported(f"{fn.__name__}() of a tensor (data-dependent Python value)")
        if len(args) == 1 and not kwargs and getattr(args[0], "user_operators", False):
            return _of_user_object(tx, fn, args[0])
        return _fold(fn)(tx, args, kwargs)
    return handler


# bool/str/repr/hash of a user object: the class's Python special method (looked up on the type),
# whose result Python checks: a constant of the right type, else refused.
_USER_SPECIAL = {bool: ("__bool__", bool), str: ("__str__", str), repr: ("__repr__", str),
                 hash: ("__hash__", int)}


@provides
def user_hash(tx, obj):
    """hash(obj) of a user object: its class's Python __hash__ traced, checked (collections/object_keys.py)."""
    return _of_user_object(tx, hash, obj)


def _of_user_object(tx, fn, obj):
    if fn is bool:
        return ConstantVariable(obj.truthy(tx))
    name, result_type = _USER_SPECIAL[fn]
    cls = obj.python_type()
    if fn is str and type_lookup(cls, "__str__") is vars(object)["__str__"]:
        name = "__repr__"   # object.__str__ is repr()
    if fn is hash and type_lookup(cls, name) is None and hasattr(obj, "cls_var"):
        # `__hash__ = None` (a class that defines __eq__ alone, cmp_to_key's K): unhashable. An
        # object built in the trace reads it through its class's tracker (guarded where the class
        # comes from the frame; a class made in the trace is the trace's own).
        found = obj.cls_var.class_member(tx, name)
        if isinstance(found, ConstantVariable) and found.value is None:
            raise raise_of_message(TracedRaise, TypeError, f"unhashable type: '{cls.__name__}'")
    if not isinstance(type_lookup(cls, name), types.FunctionType):
        unsupported(f"{fn.__name__}() of a {cls.__name__}: its {name} is not a Python function")
    result = tx.call(obj.type_method(tx, name), [obj], {})
    value = result.as_python_constant() if result.is_python_constant() else None
    if type(value) is not result_type or fn is hash and not -2**60 < value < 2**60 or fn is hash and value == -1:
        unsupported(f"{cls.__name__}.{name} returned {result}, not a {result_type.__name__} constant")
    return result


def _user_or_fold(fn):
    def handler(tx, args, kwargs):
        if len(args) == 1 and not kwargs and getattr(args[0], "user_operators", False):
            return _of_user_object(tx, fn, args[0])
        if fn is hash and not (len(args) == 1 and args[0].is_python_constant() and
                               not pure.hash_is_per_process(args[0].as_python_constant())):
            unsupported("hash() of other than numbers, None, tuples of them or a user object "
                        "(a str's hash differs per process)")
        return _fold(fn)(tx, args, kwargs)
    return handler


def _text(fn, otherwise=_scalar):
    """str() and repr(): of an exception made in the trace, from a real one with its class and
    args (exceptions.py); of anything else as `otherwise(fn)` says."""
    def handler(tx, args, kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVariable):
            return ConstantVariable(fn(args[0].example()))
        if len(args) == 1 and not kwargs and isinstance(args[0], SetVariable):
            return ConstantVariable(args[0].text())   # in its own order (sets.py)
        if len(args) == 1 and not kwargs and (text := container_repr(tx, args[0])) is not None:
            return ConstantVariable(text)   # list, tuple and dict item by item (container_text.py)
        return otherwise(fn)(tx, args, kwargs)
    return handler


def _print(tx, args, kwargs):
    unsupported("print() (a side effect)")


def _reversed(tx, args, kwargs):
    if hasattr(args[0], "get_iter") and is_sequence_mixin(args[0].python_type(), "__reversed__"):
        return sequence_call(tx, args[0], "__reversed__", [], {})
    if isinstance(args[0], ListVariable):
        return ReversedListVariable(args[0])
    if (made := dict_iterator(tx, args[0], reverse=True)) is not None:
        return made
    return IteratorVariable(list(reversed(args[0].unpack(tx))), watch=args[:1],
                            kind=iterator_type(args[0], REVERSED_TYPES))


def _all_any(fn):
    def handler(tx, args, kwargs):
        args = [user_iterators.lazily(tx, args[0])]
        if isinstance(args[0], GeneratorVariable):   # stops at the first decisive item, as Python
            gen = args[0]
            return ConstantVariable(fn(item.truthy(tx) for item in iter(gen.next_item, None)))
        return ConstantVariable(fn(item.truthy(tx) for item in args[0].unpack(tx)))
    return handler


def _set(tx, args, kwargs):
    if kwargs or len(args) > 1:
        unsupported("set() with more than one argument")
    return SetVariable(constants_of(args[0].unpack(tx), "set()") if args else ())


def _frozenset(tx, args, kwargs):
    if kwargs or len(args) > 1:
        unsupported("frozenset() with more than one argument")
    if args and isinstance(args[0], ConstantVariable) and type(args[0].value) is frozenset:
        return args[0]   # frozenset(fs) is fs itself, as CPython answers for an exact frozenset
    return ConstantVariable(frozenset(constants_of(args[0].unpack(tx), "frozenset()") if args else ()))


def _sorted(tx, args, kwargs):
    """sorted(items, key=fn, reverse=b): the items reordered as sorted orders them (sort_order)."""
    if len(args) != 1 or set(kwargs) - {"key", "reverse"}:
        unsupported("sorted() with other than one iterable, key= and reverse=")
    if isinstance(args[0], SetVariable) and "key" not in kwargs and len({type(v) for v in args[0].items}) <= 1 \
            and all(v == v for v in args[0].items):
        # Distinct items of one type (no NaN) sort alike from any order: a set's order is not needed.
        items = [ConstantVariable(v) for v in args[0].items]
    else:
        items = args[0].unpack(tx)
    order = sort_order(tx, items, kwargs.get("key"), kwargs.get("reverse"), "sorted()")
    return ListVariable([items[j] for j in order])


def _polyfill(fn, kind: type | None = None):
    """A builtin traced through its Python version (polyfills.py). `kind`: the type of the iterator
    the builtin returns (map, filter, ...), which isinstance and type() see instead of the
    polyfill's generator type."""
    def handler(tx, args, kwargs):
        result = tx.call(UserFunctionVariable(fn), args, kwargs)
        if kind is not None and isinstance(result, GeneratorVariable):
            result.kind = kind
            result.remake = None
            if fn in _REMADE_AS:   # made again as the builtin itself, not the polyfill's generator
                result.remake = (_REMADE_AS[fn], list(args), dict(kwargs))
                # The builtin took iter() of each argument when it was made: a dict changed since
                # would raise or show through there, not in a builtin made again over it.
                result.remake_watch = [(c, c.version) for c in iterated_containers(args)
                                       if isinstance(c, DictVariable)]
        return result
    return handler


# The builtin a polyfill's generator not started yet is made again as (generators.py): those that
# take only iter() of their arguments when made (itertools.product, which reads its inputs whole
# when made, is combinatorics.py's: made again over the tuples it read).
# itertools traced through their Python versions, each seen as its own type; made again as themselves.
_ITERTOOLS = {itertools.repeat: polyfills.repeat_, itertools.count: polyfills.count_, itertools.cycle: polyfills.cycle_,
              itertools.islice: polyfills.islice_, itertools.accumulate: polyfills.accumulate_,
              itertools.takewhile: polyfills.takewhile_, itertools.dropwhile: polyfills.dropwhile_,
              itertools.filterfalse: polyfills.filterfalse_, itertools.compress: polyfills.compress_,
              itertools.starmap: polyfills.starmap_, itertools.pairwise: polyfills.pairwise_,
              itertools.groupby: polyfills.groupby_}
_REMADE_AS = {polyfills.map_: map, polyfills.filter_: filter, polyfills.zip_: zip, polyfills.enumerate_: enumerate,
              polyfills.chain_: itertools.chain, polyfills.chain_from_iterable_: itertools.chain.from_iterable,
              **{fn: cls for cls, fn in _ITERTOOLS.items()}}


class PolyfillVariable(CallableVariable):
    """A helper reached as an attribute of a builtin (itertools.chain.from_iterable), traced
    through its Python version (polyfills.py)."""

    def __init__(self, fn, source=None, kind: type | None = None):
        super().__init__(fn, source)
        self.kind = kind

    def call_function(self, tx, args, kwargs):
        return _polyfill(self.fn, self.kind)(tx, args, kwargs)


def _namedtuple(tx, args, kwargs):
    """collections.namedtuple(...) of constants in the trace: the class made now, as eager makes it
    (its __module__ the calling function's module, as namedtuple finds it from its caller). Eager
    makes a new class on every call, so neither it nor its instances may leave the trace."""
    if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
        unsupported("collections.namedtuple() of values that are not constants")
    consts = {k: v.as_python_constant() for k, v in kwargs.items()}
    if consts.get("module") is None:
        consts["module"] = tx.f_globals.get("__name__")
    try:
        cls = collections.namedtuple(*[a.as_python_constant() for a in args], **consts)
    except (TypeError, ValueError) as e:
        unsupported(f"collections.namedtuple() raised {e!r}")
    return TracedNamedTupleClassVariable(cls)


class TracedNamedTupleClassVariable(ClassVariable):
    """A namedtuple class made in the trace (_namedtuple): called, it builds TracedNamedTupleVariables."""

    def __init__(self, cls: type):
        super().__init__(cls)

    def call_function(self, tx, args, kwargs):
        return construct_namedtuple(tx, self.value, None, args, kwargs, kind=TracedNamedTupleVariable)

    def reconstruct(self, outputs):
        unsupported(f"namedtuple class {self.value.__name__} made in the trace leaves it "
                    "(eager makes a new class on each call)")


class TracedNamedTupleVariable(TupleVariable):
    """An instance of a namedtuple class made in the trace: read in the trace only."""

    def reconstruct(self, outputs):
        unsupported(f"a {self.cls.__name__} (a namedtuple class made in the trace) leaves it "
                    "(eager makes a new class on each call)")


def _deepcopy(tx, args, kwargs):
    return deepcopy(tx, args, kwargs)


def _eval(tx, args, kwargs):
    # eval() of a constant string that is a literal (`eval(repr(False))`): its value, which no
    # globals or locals can change (ast.literal_eval reads nothing else); anything else breaks.
    if kwargs or len(args) != 1 or not (isinstance(args[0], ConstantVariable) and type(args[0].value) is str):
        unsupported("eval() of other than one constant string")
    try:
        value = ast.literal_eval(ast.parse(args[0].value, mode="eval"))
    except Exception:   # noqa: BLE001 - not a literal: eval would read names, or raise its own error
        unsupported(f"eval() of {args[0].value[:40]!r}, which is not a literal")
    return tx.wrap_constant(value)


def _callable(tx, args, kwargs):
    # callable(v) is "type(v) has __call__" (a tensor or a number is not callable; a class is).
    return ConstantVariable(type_lookup(args[0].python_type(), "__call__") is not MISSING)


BUILTIN_HANDLERS = {
    len: _len, range: _range, isinstance: instance_checks.isinstance_, enumerate: _enumerate, zip: _zip,
    min: _minmax(min), max: _minmax(max), abs: _abs, getattr: _getattr, hasattr: _hasattr,
    setattr: _setattr, delattr: _delattr,
    int: _scalar(int), float: _scalar(float), bool: _scalar(bool), str: _text(str),
    tuple: _sequence(tuple), list: _sequence(list), dict: _dict, sum: _sum, iter: user_iterators.iter_,
    next: user_iterators.next_, type: _type, print: _print, reversed: _reversed, all: _all_any(all),
    any: _all_any(any), sorted: _sorted, repr: _text(repr, _user_or_fold), hash: _user_or_fold(hash),
    callable: _callable, eval: _eval, slice: _fold(slice), set: _set, frozenset: _frozenset,
    map: _polyfill(polyfills.map_, map), filter: _polyfill(polyfills.filter_, filter),
    itertools.chain: _polyfill(polyfills.chain_, itertools.chain),
    **{cls: _polyfill(fn, cls) for cls, fn in _ITERTOOLS.items()}, itertools.tee: tee,
    functools.reduce: _polyfill(polyfills.reduce_), functools.partial: make_partial, collections.deque: build_deque,
    functools.wraps: wraps, collections.namedtuple: _namedtuple, dataclasses.fields: dataclass_fields.fields,
    super: _super, issubclass: instance_checks.issubclass_, copy.deepcopy: _deepcopy,
    collections.OrderedDict: build_ordered_dict, collections.defaultdict: build_defaultdict,
    collections.Counter: build_counter,
    weakref.ref: make_weakref,
    **PATH_HANDLERS, **IDENTITY_HANDLERS, **COMBINATORIC_HANDLERS,
}


class BuiltinVariable(CallableVariable):
    """A builtin (len, range, isinstance, ...) handled by BUILTIN_HANDLERS. A call whose shape
    Python refuses raises Python's TypeError in the trace before the handler reads arguments."""

    def call_function(self, tx, args, kwargs):
        refused = refused_call(self.fn, len(args), tuple(kwargs))
        if refused is not None:
            made = constant_exception(tx, refused)
            if made is None:
                unsupported(f"{self.fn.__name__}() called as Python refuses: {refused}")
            raise traced_raise(made)
        return BUILTIN_HANDLERS[self.fn](tx, args, kwargs)

    def var_getattr(self, tx, name):
        if self.fn is itertools.chain and name == "from_iterable":
            return PolyfillVariable(polyfills.chain_from_iterable_, kind=itertools.chain)
        if self.fn is dict and name == "fromkeys":
            return PolyfillVariable(polyfills.dict_fromkeys_)
        if isinstance(self.fn, type) and pure.is_pure(getattr(self.fn, name, None)):
            return PureFunctionVariable(getattr(self.fn, name))   # str.upper, int.from_bytes
        if isinstance(self.fn, type):
            # A class (dict, list, OrderedDict, ...) is handled here for its calls only: the rest
            # as any class (__name__, its methods, ...).
            return ClassVariable(self.fn, self.source).var_getattr(tx, name)
        return super().var_getattr(tx, name)

    def __repr__(self):
        return f"BuiltinVariable({self.fn.__name__})"


assert builtins.len is len


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def is_handled_builtin(value) -> bool:
    return any(value is b for b in BUILTIN_HANDLERS)


def _call_builtin_class(tx, cls, source, args, kwargs):
    return BuiltinVariable(cls, source).call_function(tx, args, kwargs) if is_handled_builtin(cls) else None


register_builtin_model(_call_builtin_class)


def wrap_builtin(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    return BuiltinVariable(value, source)


def wrap_print(tx, value, source, g):
    return BuiltinVariable(value, source)   # unguarded: its call is a graph break anyway
