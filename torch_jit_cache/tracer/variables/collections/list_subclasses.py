"""Objects of plain subclasses of list built in the trace (`class Row(list): pass`, then `Row(xs)`):
list trackers of their class.

Which classes: a class-statement subclass of list whose classes up to list define nothing but
what every class statement writes, Python functions of names that are no special method (methods,
traced as Python with the object as self) and `__getitem__` (`r[k]` runs it; list's own iteration,
unpacking, `in`, sort and the rest never do, in CPython as in the model) (`plain_list_subclass`).
Every other method, operator and comparison of its objects is list's own, which the list model
(containers.ListVariable) runs; what list's own code makes from one (`r + r`, `r * 2`, a slice,
`r.copy()`) is a plain list, as there.
The class is that of the call: made in the trace (class_statements.TracedClassVariable, whose
objects never leave it) or read through a source, guarded by identity.

What differs from a list: its class (`type(r)`, `r.__class__`, isinstance), which is the class's
own tracker; it is never a constant (a constant list would forget the class); and after the graph
it is made again as `cls.__new__(cls)` extended by its final items (trace_result.rebuilt_list_object:
list's __init__ with them is what `cls(items)` runs), where its class has a source. Attribute stores
to its instance __dict__ are refused (the list model keeps none).
"""
from __future__ import annotations

import types

from ....guard.attribute_lookup import type_lookup
from ....guard.trace_result import CallOutput, ConstantOutput, ListOutput, rebuilt_list_object
from ..base import unsupported
from ..python_objects.functions import UserMethodVariable
from .containers import ListVariable

# What a class statement puts in every class's __dict__, and copyreg's cache of slot names.
_BOOKKEEPING = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                          "__firstlineno__", "__static_attributes__", "__slotnames__"})
_HEAPTYPE = 1 << 9


# The special methods a class may write: each is run where Python runs it (`ListSubclassVariable.getitem`).
_ROUTED = frozenset({"__getitem__"})


def plain_list_subclass(cls) -> bool:
    """Whether `cls` is a class-statement subclass of list whose own members are all listed above."""
    if type(cls) is not type or cls is list or not issubclass(cls, list) or not cls.__flags__ & _HEAPTYPE:
        return False
    for klass in cls.__mro__:
        if klass is list or klass is object:
            continue
        if not klass.__flags__ & _HEAPTYPE or vars(klass).get("__slotnames__") not in (None, []):
            return False
        for name, value in vars(klass).items():
            if name in _BOOKKEEPING:
                continue
            dunder = name.startswith("__") and name.endswith("__")
            if not isinstance(value, types.FunctionType) or dunder and name not in _ROUTED:
                return False
    return True


class ListSubclassVariable(ListVariable):
    """A list of a plain subclass (see above); `cls_var` is its class's tracker."""

    def __init__(self, items, cls_var):
        super().__init__(items, cls=cls_var.value)
        self.cls_var = cls_var

    @property
    def truth_is_length(self) -> bool:
        return True   # list's own __len__, no __bool__ (plain_list_subclass)

    def made_by_base(self, items):
        return ListVariable(items)   # list's own slice, + and * make a plain list

    def as_python_constant(self):
        unsupported(f"a {self.cls.__name__} as a constant (a plain list would forget its class)")

    def _own(self, tx, name: str):
        """type(self).name bound to self where the class writes it in Python, else None."""
        if not isinstance(type_lookup(self.cls, name), types.FunctionType):
            return None
        return UserMethodVariable(self.cls_var.class_member(tx, name), self)

    def getitem(self, tx, key):
        own = self._own(tx, "__getitem__")
        return tx.call(own, [key], {}) if own is not None else super().getitem(tx, key)

    def call_method(self, tx, name, args, kwargs):
        # list's own method (`list.__getitem__(self, i)`, a bound method of list's): the model's,
        # never the class's override of it, which var_getattr finds.
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return ListVariable.getitem(self, tx, args[0])
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if name == "__class__":
            return self.cls_var
        own = self._own(tx, name)
        return own if own is not None else super().var_getattr(tx, name)

    def var_setattr(self, tx, name, value):
        unsupported(f"store to {self.cls.__name__}.{name} on an object built in the trace")

    def reconstruct(self, outputs):
        return outputs.once(self, lambda: CallOutput(
            ConstantOutput(rebuilt_list_object), ("cls", "items"),
            (outputs.rebuild(self.cls_var), ListOutput(tuple(outputs.rebuild(item) for item in self.items)))))

    def __repr__(self):
        return f"ListSubclassVariable({self.cls.__name__}, {self.items!r})"


def construct(tx, cls_var, args, kwargs):
    """`cls(iterable)` for a plain list subclass: list's __init__ takes one iterable, no keywords."""
    if kwargs or len(args) > 1:
        unsupported(f"{cls_var.value.__name__}() with keyword or more than one argument")
    return ListSubclassVariable(args[0].unpack(tx) if args else [], cls_var)
