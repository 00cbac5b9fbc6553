"""SetVariable: a set the trace built (a set literal, a set comprehension, set(...), a set
operation's result) or read from the frame, of Python constants.

A set built here is private to the trace: mutating it needs no replay, and rebuilt after the graph
(`reconstruct`) it becomes a fresh set per call (codegen's build_constant), one set however often
the frame reaches it. Iterating one unrolls in the set's own order, which for the same constants
added by the same code is the order Python's set has at call time.

A set read from the frame (`wrap_set`) whose items are key constants (what a guard may hold:
value_rules.h) is guarded by its type and its items in iteration order (SET_ITEMS, checked in C++
with set's own iterator): a set's order depends on its history, which no other guard describes,
so equal sets that iterate differently are different entries. While the trace has not changed it,
iterating it unrolls in that order. Its pure methods and operators fold; its mutations (add,
discard, remove, clear, the update family, the in-place operators) change the tracker's items and
are recorded (side_effects.py, SET_METHOD) and replayed on the very set after the graph, in program
order, by set's own method, so the frame's set ends in the state eager leaves it in. After such a
change its iteration order is no longer known (it depends on the table's layout, which the trace
does not model): iterating it, pop() and anything that needs its order break the graph there, after
the replay. Returned or held at a break it is the frame's own object (its source).

Its items may be key constants or objects that live as long as the process and hash by identity
(a library's functions: is_key_constant), whose hashes, so whose places, are fixed for the process.
A set of other objects (user objects, tensors, a user's functions) stays opaque: identity guards
on each item would not fix its iteration order, which follows their hashes, and would keep them.

A frame set the trace changed, and a set an operation makes from one, know their items but not
their order (`ordered()` refuses where the order matters; `order_known`): counts, membership and
comparisons answer, what needs the order breaks. Python's errors of set operations (an operand a
set refuses by its type, an unhashable item, a wrong number of arguments) are raised in the trace.

A frozenset of key constants read from the frame is a constant guarded the same way (type and
items in order); a frozenset built here is a constant.

Derived sets (`s | t`, `s.copy()`) are computed from the tracker's items: their order is the one a
set built from those items in that order has, which equals eager's unless the frame's set carries
a table larger than its items need (made bigger, then emptied); the items themselves are exact.
"""
from __future__ import annotations

import operator
import types

from ....guard.tree import has_leaf
from ....guard.trace_result import CallOutput, ConstantOutput, DictOutput, GuardKind, SourceOutput, TupleOutput, call_with
from ..base import (refuse_outer_change, MethodVariable, TracedKeyError, TracedRaise, Unsupported, VariableTracker, traced,
                    unsupported)
from ..constant import ConstantVariable, is_constant_value, raise_of_message
from .containers import is_key_constant

# Whether this build of the guard tree has the SET_ITEMS leaf (an older _C lacks it: the set stays
# opaque there, as before).
HAS_SET_ITEMS = has_leaf("set_items")


def constants_of(items, what: str, tx=None) -> list:
    """The values of trackers that may be a set tracker's items (is_set_item), else a break. With
    `tx`, also objects read from the frame that are key constants (pinned_key)."""
    values = [i.as_python_constant() if i.is_python_constant() else pinned_key(tx, i, what) for i in items]
    if not all(is_set_item(v) for v in values):
        unsupported(f"{what} of values that are not hashable constants")
    return values


_UNKNOWN = object()


def pinned_key(tx, item, what: str):
    """The object a tracker read from the frame stands for, where it is a key constant other than
    a tuple (a typing form such as `typing.Union`, a static type such as `types.UnionType`: they
    live for the process and hash by identity), guarded by identity at its source; else a break."""
    value = getattr(item, "value", _UNKNOWN)
    if tx is None or item.source is None or value is _UNKNOWN or type(value) is tuple or \
            not is_key_constant(value):
        unsupported(f"{what} of values that are not Python constants")
    tx.output.add_guard(item.source, GuardKind.ID_MATCH, value)
    return value


def is_set_item(value) -> bool:
    """What a set tracker may hold: hashable constants, and objects that live as long as the
    process and hash by identity (is_key_constant), whose hash is the same for the whole process."""
    return is_constant_value(value) or is_key_constant(value)


def item_tracker(tx, value):
    """The tracker of a set's item: a constant, or a library object (is_key_constant) as the
    builder wraps it with no source (it lives for the process: nothing to guard)."""
    return ConstantVariable(value) if is_constant_value(value) else tx.wrap(value, None)


def _operand(v, what: str, order_matters: bool = True):
    """The other side of a set operation: a set tracker, or any constant (an iterable of
    unhashable items makes the operation raise, which is raised in the trace where it is called),
    or a _Refused stand-in for an object the operation refuses by its type alone."""
    if isinstance(v, SetVariable):
        return v.ordered(order_matters)
    if v.is_python_constant():
        return v.as_python_constant()
    if v.yields_lazily and v.source is None:
        return _drained(v, what)
    refused = _refused_type(v)
    if refused is None:
        unsupported(f"{what} with {v}")
    return _Refused(refused)


def _drained(lazy, what: str) -> tuple:
    """The items of an iterator or generator the trace made (`map(int, xs)`), drained as the set
    operation consumes it whole; each must be a constant a set may hold, so that the operation
    cannot raise part way (eager would stop consuming there)."""
    items = []
    for item in iter(lazy.next_item, None):
        value = item.as_python_constant() if item.is_python_constant() else None
        if not item.is_python_constant() or not is_key_constant(value):
            unsupported(f"{what} with an iterator yielding {item}")
        items.append(value)
        if len(items) > 100_000:
            unsupported(f"{what} with an iterator of more than 100,000 items")
    return tuple(items)


# Types whose instances no set operator takes and whose own reflected operator (`__ror__`, ...)
# refuses a set, and which are not iterable where marked False: a set operation with one of them
# raises TypeError from the operand's type alone, whatever its value (a function, a generator the
# operator never starts, a dict or list that holds trackers).
_REFUSING_TYPES = {types.FunctionType: False, types.BuiltinFunctionType: False, types.MethodType: False,
                   types.GeneratorType: True, list: True, dict: True, tuple: True}


def _refused_type(v):
    try:
        cls = v.python_type()
    except Unsupported:
        return None
    return cls if cls in _REFUSING_TYPES else None


class _Refused:
    """An operand known by its type only (_REFUSING_TYPES): what Python's error names."""

    def __init__(self, cls):
        self.cls = cls


def _python_error(error: Exception, what: str):
    """Raise in the trace the TypeError Python raised on the trace's own values (the frame's code
    may catch it); another error is a break."""
    if type(error) is TypeError:
        raise raise_of_message(TracedRaise, TypeError, error) from None
    unsupported(f"{what} raised {error!r}")


def _refusal(symbol: str, left: type, right: _Refused):
    """The TypeError of `left-instance symbol right` for a refused operand, or None where it is
    iterable and `symbol` names a method, which then iterates it (not modelled here)."""
    if symbol.isidentifier():   # a method: it iterates its argument
        if _REFUSING_TYPES[right.cls]:
            return None
        return TypeError(f"'{right.cls.__name__}' object is not iterable")
    return TypeError(f"unsupported operand type(s) for {symbol}: '{left.__name__}' and '{right.cls.__name__}'")


# In-place operators and methods that change the set, by the out-of-place operation they apply,
# and the set method that replays them on a frame set.
_INPLACE = {"|=": (operator.or_, "__ior__"), "&=": (operator.and_, "__iand__"),
            "-=": (operator.sub, "__isub__"), "^=": (operator.xor, "__ixor__")}
_UPDATES = {"update": set.update, "intersection_update": set.intersection_update,
            "difference_update": set.difference_update,
            "symmetric_difference_update": set.symmetric_difference_update}
_ONE_ITEM = ("add", "discard", "remove")

_PURE = ("union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
         "isdisjoint", "copy", "__contains__", "__len__", "__eq__", "__ne__", "__le__", "__lt__",
         "__ge__", "__gt__", "__or__", "__and__", "__sub__", "__xor__")


class SetVariable(VariableTracker):
    guarded_by_type = True   # read from the frame: side_effects.py checks its aliasing
    methods_of_static_base = True   # set, frozenset or a plain subclass (plain_subclass)

    def __init__(self, items=(), source=None, order=None, cls=set, cls_var=None, order_known=True):
        super().__init__(source)
        self.items = set(items)
        # False for a set computed from a frame set whose order the trace no longer knows: its
        # items are exact, its iteration order is not.
        self.order_known = order_known
        # The frame's set's iteration order while the trace has not changed it; None otherwise.
        self.order = order
        # set, or a plain subclass of set or frozenset (plain_subclass): read from the frame, or
        # built here by calling the class `cls_var` (its tracker, whose source rebuilds it).
        self.cls, self.cls_var = cls, cls_var
        self.frozen = issubclass(cls, frozenset)

    def python_type(self):
        return self.cls

    def as_python_constant(self):
        # A copy (folding an operation never changes this set), of the tracker's own class: an
        # operator or method folded on it answers as on eager's object (a subclass instance's
        # repr names the subclass; its operators and copy() make a set or frozenset).
        return self.real()

    def ordered(self, order_matters: bool = True) -> set:
        """A copy of the items; built in the frame's order where that is known. A frame set the
        trace changed has no known order: what depends on it (its text, a set made from it,
        iterating one) breaks, unless `order_matters` is False (a count, a membership, a
        comparison)."""
        if self.order is not None:
            return set(self.order)
        if order_matters and not self.knows_order():
            unsupported(f"the order of {self} (made or changed from a set whose order depends on "
                        "its table, which the trace does not model)")
        return set(self.items)

    def knows_order(self) -> bool:
        return self.order is not None or (self.source is None and self.order_known)

    def text(self) -> str:
        """repr() and str() of the set, written from its items in the order iterating it gives (as
        set's repr does), not from a copy, whose table may order colliding items otherwise."""
        if not self.knows_order():
            self.ordered()   # refused: its order is not known
        items = list(self.order) if self.order is not None else list(self.items)
        inner = ", ".join(repr(v) for v in items)
        if self.cls is set:
            return "{" + inner + "}" if items else "set()"
        return f"{self.cls.__name__}({{{inner}}})" if items else f"{self.cls.__name__}()"

    def length(self, tx) -> int:
        return len(self.items)

    def contains(self, tx, item) -> bool:
        """`item in s`, which needs no order. A set item is looked up as the frozenset of its
        items, as set.__contains__ does; an unhashable one raises TypeError in the trace."""
        value = item.as_python_constant() if item.is_python_constant() else \
            pinned_key(tx, item, f"membership test in {self}")
        if type(value) is set:
            value = frozenset(value)
        try:
            return value in self.items
        except TypeError as e:
            _python_error(e, "in")

    def reconstruct(self, outputs):
        if self.source is not None:   # the frame's own set, changed by the replay where changed
            return SourceOutput(self.source)
        if not self.order_known:   # a new set's order is that of its additions, which eager's is not
            unsupported(f"{self}, whose order the trace does not know, held past the graph")
        if self.cls_var is not None:   # cls(items), the class loaded from its own source
            if self.cls_var.source is None:
                unsupported(f"{self} of a class with no source, held past the graph")
            return outputs.once(self, lambda: CallOutput(ConstantOutput(call_with), ("fn", "args", "kwargs"), (
                outputs.rebuild(self.cls_var), TupleOutput((ConstantOutput(tuple(self.items)),)), DictOutput(()))))
        # Reached twice (a local and a method's self), it is one set: one spec, built once.
        return outputs.once(self, lambda: ConstantOutput(set(self.items)))

    def unpack(self, tx):
        if not self.order_known:
            self.ordered()   # refused: its order is not known
        if self.source is not None:
            if self.order is None:
                unsupported(f"iteration over {self.source} after the trace changed it (its order "
                            "depends on the set's table, which the trace does not model)")
            return [item_tracker(tx, v) for v in self.order]
        return [item_tracker(tx, v) for v in self.items]

    def truthy(self, tx):
        return bool(self.items)

    def var_getattr(self, tx, name):
        base = frozenset if self.frozen else set
        if name != "__init__" and \
                not isinstance(vars(base).get(name), (types.MethodDescriptorType, types.WrapperDescriptorType)):
            unsupported(f"attribute {name!r} of {self}")
        return MethodVariable(self, name)

    version = 0   # counts changes: a loop over the set refuses to go on after one (iterators.py)

    def _mutating(self, tx, name: str, values: list) -> None:
        """Before a change: a frame set records it for replay (`set.<name>(s, *values)`)."""
        refuse_outer_change(self, "a set mutation")
        self.version += 1
        if self.source is None:
            return
        # Items (add, remove, discard) as they are; sets as sets (an in-place operator takes only
        # those; the update family iterates them as CPython does a set); other iterables as the
        # tuple of what they yield now.
        snapshot = tuple(values) if name in _ONE_ITEM else \
            tuple(v if isinstance(v, (set, frozenset)) else tuple(v) for v in values)
        tx.output.side_effects.call_set_method(self, name, tx.wrap_constant(snapshot))
        self.order = None

    def operate(self, tx, symbol: str, other, reflected: bool):
        """`self symbol other` (or `other symbol self`) for a binary set operator, where the other
        side is a set tracker or a constant: computed on the items, a set of unknown order where
        a side's order is unknown. None where the other side is neither."""
        if not (isinstance(other, SetVariable) or other.is_python_constant()):
            return None
        mine, theirs = self.real(order_matters=False), _operand(other, f"operator {symbol}", False)
        try:
            result = OPERATORS[symbol](theirs, mine) if reflected else OPERATORS[symbol](mine, theirs)
        except TypeError as e:
            _python_error(e, f"operator {symbol}")
        return _result(tx, result, [self, other])

    def real(self, order_matters: bool = True):
        """A real set of the tracker's class and items, on which Python computes an operation and
        its error: a plain subclass (plain_subclass) behaves as its base, and Python's messages
        name the subclass."""
        return self.cls(self.ordered(order_matters))

    def inplace(self, tx, symbol, other):
        """`s |= t` and friends change s itself (every name bound to it sees the change)."""
        value = _operand(other, f"set {symbol}")
        fn, method = _INPLACE[symbol]
        if isinstance(value, _Refused):
            _python_error(_refusal(symbol, self.cls, value), f"set {symbol}")
        if self.frozen:   # frozenset has no in-place operator: `a op b`, rebound
            try:
                return tx.wrap_constant(fn(self.as_python_constant(), value))
            except TypeError:
                pass
        else:
            try:
                fn(self.items, value)   # out of place: raises where Python refuses, changes nothing
            except TypeError:
                pass
            else:
                self._mutating(tx, method, [value])
                getattr(self.items, method)(value)   # in place: the table changes as eager's does
                return self
        try:   # Python's own error, with the in-place operator's message
            getattr(operator, method)(self.real(), value)
        except TypeError as e:
            _python_error(e, f"set {symbol}")
        unsupported(f"set {symbol} with {other}")

    def _init(self, tx, values):
        """`s.__init__(iterable)`: set's __init__ empties the set and fills it again (frozenset's,
        object's, does nothing). Run on a real copy, so that its errors are Python's: a wrong
        number of arguments changes nothing, an item it cannot take leaves what was done so far."""
        real = self.real(order_matters=False)   # emptied first: its order does not matter
        try:
            real.__init__(*values)
        except TypeError as e:
            error = e
        else:
            error = None
        if set(real) != self.items:
            if error is not None and real:
                unsupported(f"{self}.__init__ raised {error!r} part-way")
            self._mutating(tx, "clear" if error is not None else "__init__", [] if error is not None else values)
            if error is None:
                set.__init__(self.items, *values)   # in place: the table changes as eager's does
            else:
                self.items.clear()
        if error is not None:
            _python_error(error, "set.__init__")
        return ConstantVariable(None)

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            unsupported(f"set.{name} with keyword arguments")
        if name == "isdisjoint" and len(args) == 1 and args[0].yields_lazily:
            # Over an iterator or generator Python takes one item at a time and stops at the first
            # the set holds: the rest are never made.
            while (item := args[0].next_item()) is not None:
                if constants_of([item], "set.isdisjoint")[0] in self.items:
                    return ConstantVariable(False)
            return ConstantVariable(True)
        # A pure method's result is computed on the items (_result says whether its order is
        # known); `s.__init__(a, b)` refuses its arguments before it reads them.
        order_free = name in _PURE or name == "__init__" and len(args) != 1
        values = constants_of(args, f"set.{name}") if name in _ONE_ITEM \
            else [_operand(a, f"set.{name}", not order_free) for a in args]
        refused = next((v for v in values if isinstance(v, _Refused)), None)
        if refused is not None:
            error = _refusal(name, self.cls, refused) if name in _UPDATES or name in _PURE else None
            if error is None:
                unsupported(f"set.{name} with {refused.cls.__name__}")
            _python_error(error, f"set.{name}")
        if name == "__init__":
            return self._init(tx, values)
        if name == "pop" and not values and len(self.items) <= 1 and not self.frozen:
            # Which item pop() takes depends on the table's layout and the set's own search finger,
            # which the trace does not model, unless there is at most one to take.
            if not self.items:
                raise traced(TracedKeyError, "KeyError: pop from an empty set", KeyError,
                             [ConstantVariable("pop from an empty set")])
            self._mutating(tx, name, values)
            return item_tracker(tx, self.items.pop())
        try:
            if name in _ONE_ITEM and len(values) == 1:
                if name == "remove" and values[0] not in self.items:
                    raise traced(TracedKeyError, f"KeyError {values[0]!r}", KeyError, [args[0]])
                self._mutating(tx, name, values)
                getattr(self.items, name)(values[0])
                return ConstantVariable(None)
            if name == "clear" and not values:
                self._mutating(tx, name, values)
                self.items.clear()
                return ConstantVariable(None)
            if name in _UPDATES:
                new = set(self.items)
                try:
                    _UPDATES[name](new, *values)
                except TypeError as e:
                    if new != self.items:   # it raised part-way: eager's set keeps what it did so far
                        unsupported(f"set.{name} raised {e!r} after changing the set")
                    raise
                self._mutating(tx, name, values)
                _UPDATES[name](self.items, *values)   # in place: the table changes as eager's does
                return ConstantVariable(None)
            if name in _PURE:
                result = getattr(self.real(order_matters=False), name)(*values)
                if result is NotImplemented:
                    unsupported(f"set.{name} of {args}")
                return _result(tx, result, [self, *args])
        except TypeError as e:
            _python_error(e, f"set.{name}")
        unsupported(f"set.{name}")   # pop() of one of several items, and anything else

    def __repr__(self):
        where = f" from {self.source}" if self.source is not None else ""
        kind = "" if self.cls is set else f"{self.cls.__name__}, "
        return f"SetVariable({kind}{self.items!r}{where})"


def compare(symbol: str, a, b):
    """`a symbol b` between two sets (trackers, or a set or frozenset constant): the answer needs
    no iteration order, so a frame set the trace changed compares too. None where a side is not
    a set."""
    sides = []
    for v in (a, b):
        if isinstance(v, SetVariable):
            sides.append(v.real(order_matters=False))
        elif v.is_python_constant() and isinstance(v.as_python_constant(), (set, frozenset)):
            sides.append(v.as_python_constant())
        else:
            return None
    return ConstantVariable(COMPARISONS[symbol](*sides))


COMPARISONS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
               ">=": operator.ge}


def refused_operator(symbol: str, a, b):
    """`a symbol b` (a binary operator or a comparison) where one side is a set tracker and the
    other an operand the set refuses by its type (_REFUSING_TYPES): Python's TypeError, raised in
    the trace, or for == and != the answer of identity (neither side's __eq__ takes the other).
    None where this is not such a case."""
    sides = []
    for v in (a, b):
        if isinstance(v, SetVariable):
            sides.append(v.cls)
        elif v.is_python_constant():
            return None   # folded on the real values by the caller
        else:
            refused = _refused_type(v)
            if refused is None:
                return None
            sides.append(refused)
    if not any(isinstance(v, SetVariable) for v in (a, b)) or all(isinstance(v, SetVariable) for v in (a, b)):
        return None
    if symbol in ("==", "!="):
        return ConstantVariable(symbol == "!=")
    left, right = (t.__name__ for t in sides)
    if symbol in ("<", "<=", ">", ">="):
        message = f"'{symbol}' not supported between instances of '{left}' and '{right}'"
    else:
        message = f"unsupported operand type(s) for {symbol}: '{left}' and '{right}'"
    _python_error(TypeError(message), f"operator {symbol}")


OPERATORS = {"|": operator.or_, "&": operator.and_, "-": operator.sub, "^": operator.xor}


def _result(tx, result, operands):
    """The tracker of what a set operation returned: a set computed from a set whose order is not
    known has items the trace knows and an order it does not."""
    if isinstance(result, (set, frozenset)) and \
            not all(v.knows_order() for v in operands if isinstance(v, SetVariable)):
        if not all(is_set_item(v) for v in result):
            unsupported("a set operation made a set of items the trace does not hold")
        return SetVariable(result, cls=type(result), order_known=False)
    if type(result) is set and all(is_set_item(v) for v in result):
        made = SetVariable()
        made.items = result   # the very set the operation made: its table, so its order, is eager's
        return made
    return tx.wrap_constant(result)


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def _items_in_order(value):
    """The items of a set or frozenset in iteration order, where all are key constants, else None."""
    if not HAS_SET_ITEMS:
        return None
    items = tuple(value)
    return items if all(is_key_constant(v) for v in items) else None


# What a class statement puts in a class's __dict__ on its own: a subclass of set with no more
# than these behaves as set does.
# `__slotnames__` is copyreg's cache of the class's slot names, written into the class by the
# first copy or pickle of an instance: an empty list for a class without __slots__.
_BOOKKEEPING = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                          "__firstlineno__", "__static_attributes__", "__slotnames__"})


def plain_subclass(cls, base=set) -> bool:
    """Whether `cls` is `base` (set or frozenset), or a class-statement subclass of it that defines
    nothing of its own (its instances answer every method and operator as `base`'s do; the class
    is pinned by the object's type guard or identity, a class changed in place later is not seen,
    as for other objects)."""
    if cls is base:
        return True
    if type(cls) is not type or not issubclass(cls, base):
        return False
    return all(klass is base or klass is object or
               set(vars(klass)) <= _BOOKKEEPING and vars(klass).get("__slotnames__") in (None, [])
               for klass in cls.__mro__)


def construct(tx, cls_var, args, kwargs):
    """`cls(iterable)` for a plain subclass of set or frozenset (plain_subclass): a new set tracker
    of that class, always a new object, as CPython makes for a subclass (`frozenset(fs) is fs`
    holds for an exact frozenset only)."""
    cls = cls_var.value
    if kwargs or len(args) > 1:
        unsupported(f"{cls.__name__}() with keyword or more than one argument")
    items = constants_of(args[0].unpack(tx), f"{cls.__name__}()") if args else ()
    return SetVariable(items, cls=cls, cls_var=cls_var)


def wrap_set(tx, value, source, g):
    """A set (or a plain subclass of it) of key constants, guarded by type and items in order;
    else None (opaque). A subclass instance's own attributes are not modelled: reading one breaks."""
    items = _items_in_order(value)
    if items is None:
        return None
    g(GuardKind.TYPE_MATCH, type(value))
    g(GuardKind.SET_ITEMS, items)
    return SetVariable(items, source, order=list(items), cls=type(value))


def wrap_frozenset(tx, value, source, g):
    """A frozenset of constants, else None (left to the rules after this one)."""
    if not is_constant_value(value):
        return None
    g(GuardKind.TYPE_MATCH, frozenset)
    items = _items_in_order(value)
    if items is not None:
        g(GuardKind.SET_ITEMS, items)
    elif value:
        g(GuardKind.ID_MATCH, value)
    else:
        g(GuardKind.LENGTH, 0)
    return ConstantVariable(value, source)
