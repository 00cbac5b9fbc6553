"""Python's iteration protocol over objects of user classes, and `iter()` / `next()` as builtins.

`iter(obj)` (GET_ITER, a for loop, `list(obj)`) on an object of a user class does what CPython's
PyObject_GetIter does, with the type's methods traced as Python:

- `type(obj).__iter__` a Python function: it is inlined, and its result must be an iterator (an
  iterator or generator tracker, or a user object whose type has `__next__`); a result known not
  to be one raises Python's TypeError ("iter() returned non-iterator of type 'list'");
- no `__iter__` but a Python `__getitem__`: Python's sequence iterator, `obj[0], obj[1], ...` until
  `__getitem__` raises IndexError or StopIteration (polyfills.sequence_iterator_), of the type
  `type(iter(obj))` has;
- `__iter__ = None`, or neither method: TypeError "'C' object is not iterable".

`next(obj)` and FOR_ITER over an object whose type has a Python `__next__` inline it; the
StopIteration it raises ends a loop (or gives next()'s default) and, with no default, propagates as
the traced raise it is, where the trace's `except StopIteration` catches it. The object itself is
the iterator: its state is its attributes, stored by the traced `__next__` and replayed after the
graph like any other store, so a graph break or the frame's return leaves it where eager does.

`iter(fn, sentinel)` is Python's callable iterator (polyfills.callable_iterator_): `fn()` until it
returns the sentinel (`is`, then `==`, as CPython compares) or raises StopIteration, exhausted for
good after that. A sequence iterator or callable iterator that leaves the trace before its first
item is made again as `iter(...)` of its rebuilt arguments; one already advanced is refused there,
as any started generator is (generators.py), and the frame runs as written from where it was made.
"""
from __future__ import annotations

import types

import torch

from ....guard.attribute_lookup import MISSING, type_lookup
from ..base import TracedRaise, unsupported
from ..constant import ConstantVariable, raise_of_message
from .exceptions import ExceptionVariable, traced_raise
from .functions import UserFunctionVariable
from .generators import GeneratorVariable
from ..collections.iterators import IteratorVariable, iterate
from ..builtin_functions import polyfills

# The types CPython gives the two iterators iter() makes itself (`type(iter(obj))`).
SEQUENCE_ITERATOR = type(iter(type("_Seq", (), {"__getitem__": lambda self, i: i})()))
CALLABLE_ITERATOR = type(iter(lambda: 0, 1))


def is_user_object(obj) -> bool:
    """A tracker of an object of a user class whose special methods it can inline (`type_method`)."""
    return hasattr(obj, "type_method") and hasattr(obj, "python_type")


def _cls(obj) -> type:
    return obj.python_type()


def has_python_next(obj) -> bool:
    return is_user_object(obj) and isinstance(type_lookup(_cls(obj), "__next__"), types.FunctionType)


def raised_class(raised: TracedRaise):
    """The class of the exception a traced raise carries, or None where the raise site does not
    model it."""
    if raised.value is not None:
        return raised.value.cls
    if raised.made_of is not None:
        return raised.made_of[0]
    return None


def _stop_iteration(raised) -> bool:
    cls = raised_class(raised)
    return isinstance(cls, type) and issubclass(cls, StopIteration)


def object_iter(tx, obj):
    """iter(obj) for a user object whose `__iter__` is not collections.abc.Sequence's mixin
    (user_object.sequence_iterator handles that one)."""
    cls = _cls(obj)
    fn = type_lookup(cls, "__iter__")
    getitem = type_lookup(cls, "__getitem__")
    if fn is None or fn is MISSING and getitem is MISSING:
        raise raise_of_message(TracedRaise, TypeError, f"'{cls.__name__}' object is not iterable")
    if isinstance(fn, types.FunctionType):
        it = tx.call(obj.type_method(tx, "__iter__"), [obj], {})
        _check_iterator(it)
        return it
    if fn is MISSING and isinstance(getitem, types.FunctionType):
        return _made_iterator(tx, polyfills.sequence_iterator_, [obj], SEQUENCE_ITERATOR)
    unsupported(f"iter() of a {cls.__name__} (its __iter__ or __getitem__ is not a Python function)")


def _check_iterator(it) -> None:
    """What `__iter__` returned: an iterator, else Python's TypeError where it is known not to be."""
    if isinstance(it, (IteratorVariable, GeneratorVariable)) or has_python_next(it):
        return
    if isinstance(it, ConstantVariable) or is_user_object(it) and type_lookup(_cls(it), "__next__") is MISSING:
        raise raise_of_message(TracedRaise, TypeError,
                               f"iter() returned non-iterator of type '{type_name(it)}'")
    try:
        cls = it.python_type()
    except Exception:   # noqa: BLE001 - Unsupported: the tracker does not know its type
        cls = None
    if cls in (list, tuple, dict, set, frozenset, str, bytes, range):
        raise raise_of_message(TracedRaise, TypeError, f"iter() returned non-iterator of type '{cls.__name__}'")
    unsupported(f"iter() returned {it}, not an iterator the trace knows")


def type_name(it) -> str:
    return type(it.value).__name__ if isinstance(it, ConstantVariable) else _cls(it).__name__


def _made_iterator(tx, fn, args, kind: type):
    gen = tx.call(UserFunctionVariable(fn), list(args), {})
    gen.kind = kind
    gen.remake = (iter, list(args), {})
    return gen


def object_next(tx, obj):
    """next(obj) for a user object: its type's Python `__next__`, inlined; a StopIteration it
    raises propagates."""
    cls = _cls(obj)
    fn = type_lookup(cls, "__next__")
    if fn is MISSING:
        raise raise_of_message(TracedRaise, TypeError, f"'{cls.__name__}' object is not an iterator")
    if not isinstance(fn, types.FunctionType):
        unsupported(f"next() of a {cls.__name__} (its __next__ is not a Python function)")
    return tx.call(obj.type_method(tx, "__next__"), [obj], {})


def next_or_none(tx, obj):
    """The next item of a user iterator, or None where its `__next__` raised StopIteration (a for
    loop's end)."""
    state = (torch.is_grad_enabled(), len(tx.output.autocast_blocks))
    try:
        return object_next(tx, obj)
    except TracedRaise as raised:
        if not _stop_iteration(raised):
            raise
        raised.__traceback__ = None   # the frames it crossed: freed now, not by the collector
        if (torch.is_grad_enabled(), len(tx.output.autocast_blocks)) != state:
            unsupported("StopIteration raised inside a grad-mode or autocast block")
        return None


def refuse_length_hint(obj) -> None:
    """list(), tuple(), sorted() and str.join ask an object other than a list or tuple for its
    length first (a hint: its type's __len__, else __length_hint__), which the trace does not run;
    where the type has either, reading it whole breaks instead."""
    cls = _cls(obj)
    for name in ("__len__", "__length_hint__"):
        if type_lookup(cls, name) is not MISSING:
            unsupported(f"reading a {cls.__name__} whole (Python would ask its {name} first)")


def drain(tx, it) -> list:
    """The items still to come of an iterator (`list(it)`, unpacking), each taken in turn."""
    if not has_python_next(it):
        return it.unpack(tx)
    refuse_length_hint(it)
    items = []
    while (item := next_or_none(tx, it)) is not None:
        items.append(item)
    return items


def lazily(tx, obj):
    """What a consumer that may stop early (enumerate, zip, any, all) reads a user object through:
    iter(obj), made now as Python makes it, and where that is a user class's iterator, a generator
    taking one next() of it per item asked for (polyfills.iterator_items_). Anything else as it is."""
    if not (is_user_object(obj) and hasattr(obj, "get_iter")):
        return obj
    it = obj.get_iter(tx)
    if not has_python_next(it):
        return it
    return tx.call(UserFunctionVariable(polyfills.iterator_items_), [it], {})


# -- the builtins ---------------------------------------------------------------------------------

def _message_of(call) -> str:
    try:
        call()
    except TypeError as e:
        return str(e)
    raise AssertionError("expected a TypeError")


# The running interpreter's own words (3.11: "iter(v, w): v must be callable"; 3.12 names it otherwise).
_NOT_CALLABLE = _message_of(lambda: iter(1, None))


def iter_(tx, args, kwargs):
    if len(args) == 2:
        fn, sentinel = args
        if isinstance(fn, ConstantVariable) or type_lookup(fn.python_type(), "__call__") is MISSING:
            raise raise_of_message(TracedRaise, TypeError, _NOT_CALLABLE)
        return _made_iterator(tx, polyfills.callable_iterator_, [fn, sentinel], CALLABLE_ITERATOR)
    obj = args[0]
    if isinstance(obj, (IteratorVariable, GeneratorVariable)):   # iter(it) is it
        return obj
    if hasattr(obj, "get_iter"):   # a user class's iteration, traced lazily (user_object.py)
        return obj.get_iter(tx)
    # Over a list or dict, GET_ITER's iterator: `origin` lets a graph break keep Python's own
    # iterator over the very container (tracer/rebuild.py, Rebuilder.live_iterator).
    return obj if obj.yields_lazily else iterate(tx, obj)


def next_(tx, args, kwargs):
    it = args[0]
    if is_user_object(it) and not it.yields_lazily:
        if len(args) > 1:
            item = next_or_none(tx, it)
            return args[1] if item is None else item
        return object_next(tx, it)
    item = it.next_item() if it.yields_lazily else None
    if item is None:
        if len(args) > 1:
            return args[1]
        # Exhausted: StopIteration, with no args (a generator that returned a value gives it as
        # the args the first time, which is not modelled).
        if it.yields_lazily and not (isinstance(it, GeneratorVariable) and not (
                isinstance(it.child.result, ConstantVariable) and it.child.result.value is None)):
            raise traced_raise(ExceptionVariable(StopIteration, []))
        unsupported("next() on an exhausted or unknown iterator")
    return item
