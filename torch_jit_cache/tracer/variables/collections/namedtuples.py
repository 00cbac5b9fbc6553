"""Namedtuple classes: which classes are built as a tuple tracker with fields (a class
collections.namedtuple or typing.NamedTuple made, and plain subclasses of one), and their
construction in the trace. Returned or held at a break, such a tuple is made again by its class's
`_make` (codegen._rebuild_tuple)."""
from __future__ import annotations

import inspect
import types

from ....guard.sources import AttrSource
from ....guard.trace_result import GuardKind
from ..base import unsupported
from ..constant import ConstantVariable
from .containers import TupleVariable


def is_namedtuple_class(cls) -> bool:
    """A class collections.namedtuple made (typing.NamedTuple's too): tuple its only base, the
    generated __new__ (compiled from a string) taking the fields as arguments."""
    new = getattr(vars(cls).get("__new__"), "__func__", None) if isinstance(cls, type) else None
    return cls.__bases__ == (tuple,) and type(cls) is type and "_fields" in vars(cls) and \
        isinstance(getattr(new, "__code__", None), types.CodeType) and new.__code__.co_filename == "<string>"


def keeps_tuple_protocol(cls: type) -> bool:
    """Whether `cls` reads its items, length and iteration as tuple does (what a tracker assumes)."""
    return all(getattr(cls, n, None) is getattr(tuple, n) for n in ("__getitem__", "__iter__", "__len__"))


def construct_namedtuple(tx, cls: type, source, args: list, kwargs: dict, kind=None):
    """`cls(*args, **kwargs)` for a namedtuple class read through `source`: its fields bound as its
    __new__ binds them, the missing ones from `cls.__new__.__defaults__` (where Python finds them,
    and where old code still sets them), which must be constants and are guarded by value. A class
    the trace made has no source and nothing to guard: `kind` is the tracker its tuples get."""
    if not keeps_tuple_protocol(cls):
        unsupported(f"{cls.__name__}() overrides tuple's __getitem__, __iter__ or __len__")
    defaults = cls.__new__.__defaults__
    if defaults is not None and not all(is_constant_default(d) for d in defaults):
        unsupported(f"{cls.__name__}() with defaults that are not constants")
    if source is not None:
        guard = (GuardKind.NONE_MATCH,) if defaults is None else (GuardKind.EQUALS_MATCH, defaults)
        tx.output.add_guard(AttrSource(AttrSource(source, "__new__"), "__defaults__"), *guard)
    elif kind is None:
        unsupported(f"construction of {cls.__name__} in the trace: the class has no source")
    try:
        bound = inspect.signature(cls).bind(*args, **kwargs)
    except TypeError as e:
        unsupported(f"{cls.__name__}() raised {e!r}")
    values = dict(bound.arguments)
    fields = list(cls._fields)
    missing = fields[len(fields) - len(defaults or ()):]
    items = []
    for name in fields:
        if name in values:
            items.append(values[name])
        elif name in missing:
            items.append(ConstantVariable(defaults[missing.index(name)]))
        else:   # bind() would have raised
            unsupported(f"{cls.__name__}() without {name!r}")
    return (kind or TupleVariable)(items, fields=fields, cls=cls)


def is_constant_default(value) -> bool:
    # Immutable values only: a default shared by every instance must stay one object.
    return value is None or type(value) in (bool, int, float, str, bytes, complex)


# What a subclass of a namedtuple class may define and still be built as a tuple tracker of its
# class: tuple operations on the tracker are the namedtuple's, so no dunder of its own may change
# them (its plain methods are looked up, and refused, where called).
_PLAIN_CLASS_NAMES = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                                "__annotations__", "__firstlineno__", "__static_attributes__", "__slots__"})


def plain_namedtuple_subclass(cls) -> bool:
    """A class statement's subclass of a namedtuple class (`class P(namedtuple("P", "a b")): ...`)
    that defines no dunder of its own: built and rebuilt as the namedtuple is (`cls._make`)."""
    if not isinstance(cls, type) or type(cls) is not type or len(cls.__bases__) != 1:
        return False
    for klass in cls.__mro__:
        if is_namedtuple_class(klass):
            return klass is not cls
        if type(klass) is not type or len(klass.__bases__) != 1 or vars(klass).get("__slots__") or \
                any(n.startswith("__") and n.endswith("__") and n not in _PLAIN_CLASS_NAMES for n in vars(klass)):
            return False
    return False
