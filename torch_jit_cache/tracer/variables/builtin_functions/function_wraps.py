"""functools.wraps(fn) called in the trace, and the decorator it makes (WrapsVariable), applied to
a function made in the trace: update_wrapper's copies of fn's names, modelled."""
from __future__ import annotations

import functools

from ..base import VariableTracker, unsupported
from ..collections.dicts import DictVariable
from ..python_objects import function_attributes
from ..python_objects.functions import NestedFunctionVariable, UserFunctionVariable


def wraps(tx, args, kwargs):
    """functools.wraps(wrapped, assigned=..., updated=...): the decorator update_wrapper would be."""
    names = {"wrapped": None, "assigned": functools.WRAPPER_ASSIGNMENTS, "updated": functools.WRAPPER_UPDATES}
    if len(args) > 3 or set(kwargs) - set(names) or set(kwargs) & set(list(names)[:len(args)]) or \
            not (args or "wrapped" in kwargs):
        unsupported("functools.wraps() called with other than (wrapped, assigned, updated)")
    bound = dict(zip(names, args), **kwargs)
    assigned, updated = bound.get("assigned"), bound.get("updated")
    assigned = assigned.as_python_constant() if assigned is not None else names["assigned"]
    updated = updated.as_python_constant() if updated is not None else names["updated"]
    return WrapsVariable(bound["wrapped"], tuple(assigned), tuple(updated))


class WrapsVariable(VariableTracker):
    """functools.wraps(fn) made in the trace: applied to a function made in the trace (a nested
    def), it gives that function fn's names as update_wrapper copies them, read from fn when read
    (nothing in the trace can change a function's attributes: stores on functions are refused),
    and `__wrapped__` = fn. Anything else it decorates is a graph break."""

    def __init__(self, wrapped, assigned: tuple, updated: tuple):
        super().__init__(None)
        self.wrapped, self.assigned, self.updated = wrapped, assigned, updated

    def python_type(self):
        return functools.partial   # what functools.wraps returns

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1 or not isinstance(args[0], NestedFunctionVariable):
            unsupported("functools.wraps(...) applied to other than a function made in the trace")
        wrapper = args[0]
        if wrapper.wrapped_by is not None:
            unsupported("functools.wraps(...) applied to a function it already wrapped")
        plain = function_attributes.is_plain_name
        w = self.wrapped
        copies_dict = "__dict__" in self.updated and self._has_attributes(tx)
        if copies_dict and not isinstance(w, NestedFunctionVariable):
            unsupported("functools.wraps(...) updating __dict__ from a function with attributes")
        if any(not plain(n) for n in self.updated if n != "__dict__") or \
                any(plain(n) for n in self.updated + self.assigned) and not hasattr(w, "has_attribute"):
            unsupported("functools.wraps(...) with names it cannot read or update")
        # update_wrapper's order: assigned names copied where the wrapped has them, then
        # updated names (dicts) updated, then __wrapped__; plain names go to the wrapper's own
        # attributes, special ones are read from the wrapped function when read (wrap_names).
        for name in filter(plain, self.assigned):
            if w.has_attribute(tx, name):
                wrapper.attrs[name] = w.var_getattr(tx, name)
        if copies_dict:
            wrapper.attrs.update(w.attrs)
        for name in filter(plain, self.updated):   # getattr(wrapper, name, {}).update(...)
            source = w.var_getattr(tx, name) if w.has_attribute(tx, name) else DictVariable({})
            if name in wrapper.attrs:
                wrapper.attrs[name].call_method(tx, "update", [source], {})
        wrapper.wrap_names(w, tuple(n for n in self.assigned if not plain(n)),
                           tuple(n for n in self.updated if not plain(n)))
        return wrapper

    def _has_attributes(self, tx) -> bool:
        """Whether update_wrapper would copy anything from the wrapped function's __dict__."""
        w = self.wrapped
        if isinstance(w, NestedFunctionVariable):
            return w.wrapped_by is not None or bool(w.attrs)   # its __wrapped__, its plain names
        if isinstance(w, UserFunctionVariable):
            return bool(vars(w.fn)) or tx.output.side_effects.has_any_attr_effect(w.fn)
        return True

    def __repr__(self):
        return f"WrapsVariable({self.wrapped!r})"
