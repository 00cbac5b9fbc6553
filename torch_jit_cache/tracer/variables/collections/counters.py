"""collections.Counter built in the trace: a dict of its class (dict_subclasses.py) whose keys and
counts are constants, so that what Counter computes is computed by Counter itself.

Counter is written in Python over dict, and overrides much of what dict means: `c[k]` of a missing
key is 0 and stores nothing (__missing__), `del c[k]` of a missing key does nothing, == treats a
missing key as a zero count, and it adds arithmetic (+ - | & and their in-place forms, unary + and
-), total, most_common, elements, update and subtract that add counts. Rather than model each, a
tracker whose counts are all constants is a constant: `as_python_constant()` is a real Counter of
the same items in the same order, on which the folding paths (operators, repr, sorted, ...) run
Counter's own code, and whose result comes back as a tracker (builder.wrap_constant makes a
Counter result a CounterVariable again). The reads dict itself answers (len, in, get, keys,
values, items, iteration, pop, setdefault, clear) stay the dict model's, as Counter keeps dict's
for them. Changes in place (update, subtract, `c += d`, ...) run on a real copy and take its
items back, so a counter reached through two names changes for both. A count that is no constant
(a tensor) makes every such computation a graph break. After the graph it is made again as
`Counter(items)`, items in order.
"""
from __future__ import annotations

import collections
import itertools

from ..base import unsupported
from ..constant import ConstantVariable
from .containers import constant_index, is_key_constant
from .dict_subclasses import BuiltDictSubclassVariable
from .dicts import DictVariable
from .iterators import IteratorVariable

# Counter's own methods computed on a real Counter: those that only read, and those that change
# it in place (their result is None; the items are taken back).
_READS = frozenset({"total", "most_common", "elements", "__repr__", "__str__"})
_CHANGES = frozenset({"update", "subtract"})


class CounterVariable(BuiltDictSubclassVariable):
    """A collections.Counter built in the trace (source None)."""

    # What operators.py asks (it sits below this module): the in-place operators Counter defines
    # (the rest of `op=` is Python's `a = a op b`), and comparisons run on the real values.
    own_inplace = frozenset({"+=", "-=", "|=", "&="})
    compares_as_constant = True

    def __init__(self, items: dict):
        super().__init__(collections.Counter, items)

    def as_python_constant(self):
        if not all(v.is_python_constant() for v in self.items.values()):
            unsupported("a Counter with counts that are not constants")
        real = collections.Counter()
        dict.update(real, {k: v.as_python_constant() for k, v in self.items.items()})
        return real

    def take(self, tx, real) -> None:
        """Its items become those of `real`, a Counter it was copied into and changed."""
        self.mutating(tx)
        self.items = {k: tx.wrap_constant(v) for k, v in real.items()}

    def model_getitem(self, tx, key):
        k = constant_index(key)
        if k not in self.items:   # Counter.__missing__: a zero count, nothing stored
            return ConstantVariable(0)
        return super().model_getitem(tx, key)

    def delitem(self, tx, key):
        if constant_index(key) in self.items:   # Counter.__delitem__ ignores a missing key
            super().delitem(tx, key)

    def call_method(self, tx, name, args, kwargs):
        if name in _READS or name in _CHANGES:
            values = [a.as_python_constant() for a in args]
            keywords = {k: v.as_python_constant() for k, v in kwargs.items()}
            real = self.as_python_constant()
            try:
                result = getattr(real, name)(*values, **keywords)
            except (TypeError, ValueError) as e:
                unsupported(f"Counter.{name} raised {e!r}")
            if name in _CHANGES:
                self.take(tx, real)
                return ConstantVariable(None)
            if name == "elements":   # an itertools.chain over the counts' repeats
                return IteratorVariable([tx.wrap_constant(v) for v in result], kind=itertools.chain)
            return tx.wrap_constant(result)
        if name == "copy" and not args and not kwargs:
            return CounterVariable(dict(self.items))
        if name == "fromkeys":
            unsupported("Counter.fromkeys (it raises NotImplementedError)")
        return super().call_method(tx, name, args, kwargs)

    def inplace(self, tx, symbol: str, other):
        """`c op= other` for Counter's own in-place operators: computed on a real copy, whose items
        it takes; the counter itself is the result."""
        real = self.as_python_constant()
        operand = other.as_python_constant()
        try:
            result = _INPLACE_FN[symbol](real, operand)
        except TypeError as e:
            unsupported(f"Counter {symbol} raised {e!r}")
        if result is not real:   # NotImplemented from Counter's: Python's `a = a op b` then
            unsupported(f"Counter {symbol} of {other}")
        self.take(tx, real)
        return self

    def __repr__(self):
        return f"CounterVariable({self.items!r})"


_INPLACE_FN = {"+=": lambda a, b: a.__iadd__(b), "-=": lambda a, b: a.__isub__(b),
               "|=": lambda a, b: a.__ior__(b), "&=": lambda a, b: a.__iand__(b)}


def build_counter(tx, args, kwargs):
    """`Counter(iterable_or_mapping, **counts)`: its items are what Counter itself makes of the
    arguments' constant values (counted elements in first-seen order, a mapping's items, the
    keywords); arguments that are not constants, or keys the guards could not hold, break."""
    if len(args) > 1:
        unsupported("Counter() with more than one positional argument")
    values = []
    for a in args:
        if isinstance(a, DictVariable) and not isinstance(a, CounterVariable):
            values.append({k: v.as_python_constant() for k, v in a.items.items()})
        else:
            values.append(a.as_python_constant() if a.is_python_constant() else
                          [i.as_python_constant() for i in a.unpack(tx)])
    real = collections.Counter(*values, **{k: v.as_python_constant() for k, v in kwargs.items()})
    if not all(is_key_constant(k) for k in real):
        unsupported("a Counter of keys other than constants")
    return CounterVariable({k: tx.wrap_constant(v) for k, v in real.items()})
