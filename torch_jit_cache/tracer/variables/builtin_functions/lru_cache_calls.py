"""A call of a `functools.lru_cache` / `functools.cache` wrapper in the trace.

A wrapper's cache is state eager keeps: each call counts a hit or a miss (`cache_info()`), and a
miss runs the function and fills the cache. A trace that ran `__wrapped__` instead would leave the
statistics and the cache as no eager run does (tests/python/test_trace_side_effects.py), so a call
of a user's wrapper is either a read of its cache (below) or a graph break at the call, which
runs the wrapper as written.

Called without arguments (transformers' `is_torch_distributed_available()`), a wrapper's one
cached value is what every call returns until `cache_clear()`: it is read through
`G['f'].__call__()` as state_readers.py reads the interpreter's settings, a lookup of the cache at
each guard check, and is a constant of the graph guarded by value. The body runs once per cache
fill, as eager's calls run it (after a `cache_clear()` the next guard check runs it and sees the new
value); the cache's hit count then counts guard checks instead of calls. Called with immutable
constant arguments (`is_torch_greater_or_equal("2.5", accept_dev=True)`), the same holds for the
cache entry of those arguments, read through `call(G['f'], (args, kwargs))` (a CallSource), the
wrapper pinned by identity so that no other function runs at guard time. The trace's call is the
one eager makes for this call; a result that is not an immutable constant (a cached list eager
code could change) is refused after it, and the call runs again as written (a hit eager does not
count). Arguments that are not immutable constants (a tensor, a list) leave the call to run as
written. (Tracing
through `__wrapped__` where the call is pure would need the compiled code to call the wrapper
again after the graph, as a replayed effect: not done.)

One library's caches are read while tracing: typing caches its subscriptions (`typing.List[V]`,
`typing.Optional[t]`, `Generic[T]` through `_tp_cache`), whose functions build an alias from
type-like arguments and change nothing else. Such a call runs while tracing, through the real
wrapper, on arguments that are classes, typing's objects, None, str (forward references), numbers
(Literal) or tuples of them, each pinned by identity or value where the frame reached it; its alias
is a constant of the trace, the very object eager's call returns from the same cache (typing's
private cache counts that one call at compile time, no call at run time).
"""
from __future__ import annotations

import functools
import sys
import types

from ....guard.trace_result import GuardKind
from ..base import unsupported
from ..constant import is_type_alias
from .state_readers import read_through_call

LRU_WRAPPER_TYPE = functools._lru_cache_wrapper
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes)


def is_lru_wrapper(value) -> bool:
    return type(value) is LRU_WRAPPER_TYPE


def _immutable(value) -> bool:
    if type(value) in _IMMUTABLE:
        return True
    return type(value) in (tuple, frozenset) and all(_immutable(v) for v in value)


def call(tx, wrapper_var, args: list, kwargs: dict):
    """`wrapper(*args, **kwargs)` of an lru_cache wrapper read from the frame (`wrapper_var`)."""
    name = getattr(wrapper_var.value, "__qualname__", "?")
    if wrapper_var.source is not None and not args and not kwargs:
        return read_through_call(tx, wrapper_var.value, wrapper_var.source)
    if wrapper_var.source is not None and _typing_function(wrapper_var.value.__wrapped__):
        return _typing_subscription(tx, wrapper_var.value, args, kwargs)
    constants = _constant_arguments(args, kwargs)
    if wrapper_var.source is not None and constants is not None:
        tx.output.add_guard(wrapper_var.source, GuardKind.ID_MATCH, wrapper_var.value)
        value = read_through_call(tx, wrapper_var.value, wrapper_var.source, *constants)
        if not value.is_python_constant() or not _immutable(value.as_python_constant()):
            # A cached object eager code could change (a list): the call runs as written.
            unsupported(f"the lru_cache wrapper {name} returned a {value.python_type().__name__}, not an "
                        "immutable constant")
        return value
    unsupported(f"call of the lru_cache wrapper {name} with arguments that are not constants (its cache "
                "statistics and contents are eager's)")


def _constant_arguments(args: list, kwargs: dict):
    """(args, kwargs pairs) as values where every argument is an immutable constant, else None."""
    if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
        return None
    positional = tuple(v.as_python_constant() for v in args)
    keywords = tuple((k, v.as_python_constant()) for k, v in kwargs.items())
    if not all(_immutable(v) for v in [*positional, *(v for _, v in keywords)]):
        return None
    return positional, keywords


def _typing_function(fn) -> bool:
    typing = sys.modules.get("typing")
    return isinstance(fn, types.FunctionType) and typing is not None and fn.__globals__ is vars(typing)


def _type_like(value) -> bool:
    if isinstance(value, tuple):
        return all(_type_like(v) for v in value)
    return _immutable(value) or isinstance(value, type) or is_type_alias(value) or \
        type(value).__module__ == "typing"


def _real_argument(tx, var):
    """The value of a type-like argument of a typing subscription, or None where it is not one.
    A constant tracker's value is guarded where it was read (a class by identity); an object of
    typing's read from the frame is pinned by identity here."""
    if var.is_python_constant():
        value = var.as_python_constant()
        return (value,) if _type_like(value) else None
    value = getattr(var, "value", None)
    if var.source is None or value is None or type(value).__module__ != "typing":
        return None
    tx.output.add_guard(var.source, GuardKind.ID_MATCH, value)
    return (value,)


def _typing_subscription(tx, wrapper, args: list, kwargs: dict):
    values = []
    for arg in [*args, *kwargs.values()]:
        found = _real_argument(tx, arg)
        if found is None:
            unsupported(f"typing's cached {wrapper.__qualname__} with {arg}, not a type-like value")
        values.append(found[0])
    positional, keywords = values[:len(args)], dict(zip(kwargs, values[len(args):]))
    try:
        result = wrapper(*positional, **keywords)
    except Exception as e:  # noqa: BLE001 - eager raises it: the call runs as written
        unsupported(f"typing's {wrapper.__qualname__} raised {e!r}")
    if not _type_like(result):
        unsupported(f"typing's {wrapper.__qualname__} returned a {type(result).__name__}")
    return tx.wrap_constant(result)
