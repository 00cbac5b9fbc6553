"""itertools.combinations, combinations_with_replacement, permutations, product and zip_longest,
traced as their Python versions (polyfills.py), each seen as its own type.

What each reads when it is made is read then, as CPython does: the combinatoric ones read their
input whole into a tuple, product each of its inputs (so a list changed after, or a generator's
effects and errors, fall where eager's do), and zip_longest takes iter() of each input; the items
are then made one at a time as the consumer asks. `r` is checked by the real class on an empty pool, so a bad `r` raises Python's own
error in the trace. One not started yet is made again after the graph as the class over the rebuilt
tuple or iterators; one started is refused there, as a started generator is (generators.py).
"""
from __future__ import annotations

import itertools

from ..base import unsupported
from ..constant import ConstantVariable
from ..collections.containers import TupleVariable
from ..python_objects.exceptions import constant_exception, traced_raise
from ..python_objects.functions import UserFunctionVariable
from ..python_objects.user_iterators import drain, iter_
from . import polyfills


def _r_error(tx, cls, r):
    """Python's error for this `r` (a tracker; None: permutations' default) as a traced raise, or
    None where the class accepts it."""
    if r is not None and not isinstance(r, ConstantVariable):
        unsupported(f"{cls.__name__}() with an r that is not a constant")
    try:
        cls((), *([] if r is None else [r.value]))
    except Exception as e:  # noqa: BLE001 - Python's own error on this r: what eager raises
        made = constant_exception(tx, e)
        if made is None:
            unsupported(f"{cls.__name__}() raised {e!r}")
        return traced_raise(made)
    return None


def _made(tx, fn, cls, args, kwargs):
    gen = tx.call(UserFunctionVariable(fn), list(args), dict(kwargs))
    gen.kind = cls
    gen.remake = (cls, list(args), dict(kwargs))
    gen.remake_watch = ()
    return gen


def _combinatoric(cls, fn, r_required: bool):
    # CPython reads r as an int before the pool where r is required (a TypeError comes first),
    # and checks its sign after reading the pool; permutations reads the pool first.
    def handler(tx, args, kwargs):
        names = ("iterable", "r")
        if len(args) > 2 or set(kwargs) - set(names) or set(kwargs) & set(names[:len(args)]):
            unsupported(f"{cls.__name__}() with other than (iterable, r)")
        bound = dict(zip(names, args), **kwargs)
        if "iterable" not in bound or r_required and "r" not in bound:
            unsupported(f"{cls.__name__}() missing an argument")
        error = _r_error(tx, cls, bound.get("r"))
        if error is not None and r_required and error.value.cls is TypeError:
            raise error
        items = drain(tx, iter_(tx, [bound["iterable"]], {}))
        if error is not None:
            raise error
        r = bound.get("r")
        r = ConstantVariable(len(items)) if r is None or r.value is None else r
        return _made(tx, fn, cls, [TupleVariable(list(items)), r], {})
    return handler


def _zip_longest(tx, args, kwargs):
    if set(kwargs) - {"fillvalue"}:
        unsupported("zip_longest() with keywords other than fillvalue")
    iterators = [iter_(tx, [a], {}) for a in args]
    return _made(tx, polyfills.zip_longest_, itertools.zip_longest, iterators, kwargs)


def _product(tx, args, kwargs):
    # Each input is read whole when the product is made (an error it raises is raised there).
    if set(kwargs) - {"repeat"}:
        unsupported("product() with keywords other than repeat")
    pools = [TupleVariable(list(drain(tx, iter_(tx, [a], {})))) for a in args]
    return _made(tx, polyfills.product_, itertools.product, pools, kwargs)


COMBINATORIC_HANDLERS = {
    itertools.product: _product,
    itertools.combinations: _combinatoric(itertools.combinations, polyfills.combinations_, True),
    itertools.combinations_with_replacement: _combinatoric(itertools.combinations_with_replacement,
                                                           polyfills.combinations_with_replacement_, True),
    itertools.permutations: _combinatoric(itertools.permutations, polyfills.permutations_, False),
    itertools.zip_longest: _zip_longest,
}
