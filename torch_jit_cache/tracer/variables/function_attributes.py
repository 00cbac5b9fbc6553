"""Attributes users set on functions (`f.calls = 0`, `del f.attr`), kept in the function's __dict__.

Only plain names (not `__x__`, whose stores CPython checks or which functools.wraps copies) are
modelled here:
- on a function made in the trace (NestedFunctionVariable) the trace owns the object: its
  `__dict__` is the tracker's `attrs`, read and changed in the trace, and the function made again
  after the graph gets them (`with_attributes`);
- on a function read from the frame (UserFunctionVariable, with a source) a store or delete is a
  side effect recorded for replay on the very function, and a read after it sees it; a read of a
  name the trace did not store is the function's own, through its source (guarded there)."""

from __future__ import annotations

import functools

from ...guard.sources import AttrSource
from .base import TracedAttributeError, traced, unsupported
from .constant import ConstantVariable


def is_plain_name(name: str) -> bool:
    return not (name.startswith("__") and name.endswith("__"))


def _missing(name: str):
    return traced(TracedAttributeError, f"function has no attribute {name!r}", AttributeError,
                  [ConstantVariable(f"'function' object has no attribute '{name}'")])


def nested_get(var, name: str):
    """`f.name` on a function made in the trace (a plain name)."""
    if name not in var.attrs:
        raise _missing(name)
    return var.attrs[name]


def nested_has(var, name: str) -> bool:
    """hasattr(f, name) on a function made in the trace."""
    if name in var.attrs or name in ("__class__", "__code__", "__name__", "__qualname__"):
        return True
    if var.wrapped_by is not None and (name == "__wrapped__" or name in var.wrapped_names):
        return True
    if is_plain_name(name):
        return False
    unsupported(f"hasattr on {var} for {name!r}")


def nested_set(var, name: str, value) -> None:
    if not is_plain_name(name):
        unsupported(f"STORE_ATTR {name} on {var} (a special attribute of a function)")
    var.attrs[name] = value


def nested_del(var, name: str) -> None:
    if not is_plain_name(name):
        unsupported(f"DELETE_ATTR {name} on {var} (a special attribute of a function)")
    if name not in var.attrs:
        raise _missing(name)
    del var.attrs[name]


def with_attributes(fn, attrs: dict):
    """The function made again after the graph, given the attributes the trace left on it."""
    fn.__dict__.update(attrs)
    return fn


def rewrap(fn, wrapped, assigned, updated):
    """functools.wraps as applied in the trace, on the function made again after the graph."""
    return functools.update_wrapper(fn, wrapped, assigned=assigned, updated=updated)


def _check_frame(var, name: str, what: str) -> None:
    if var.source is None or not is_plain_name(name):
        unsupported(f"{what} {name} on {var} (a side effect that cannot be replayed)")


def _by_identity(var) -> bool:
    return not var.by_contents


def frame_stored(tx, var, name: str):
    """What the trace stored to `f.name` on a frame function, or None (raises once deleted)."""
    if var.source is None or not is_plain_name(name):
        return None
    effects = tx.output.side_effects
    if not effects.has_attr_effect(var, var.fn, name):
        return None
    if effects.attr_deleted(var.fn, name):
        raise _missing(name)
    return effects.attr(var, var.fn, name)


def frame_missing(tx, var, name: str):
    """A plain name the frame function lacks (and the trace did not store): the AttributeError
    eager raises, its absence guarded by the function's __dict__ keys."""
    if var.source is None or not is_plain_name(name) or name in vars(var.fn):
        return None
    tx.wrap(var.fn.__dict__, AttrSource(var.source, "__dict__"))
    return _missing(name)


def frame_has(tx, var, name: str):
    """hasattr(f, name) for a plain name of a frame function, or None where not answered here."""
    if var.source is None or not is_plain_name(name):
        return None
    effects = tx.output.side_effects
    if effects.has_attr_effect(var, var.fn, name):
        return not effects.attr_deleted(var.fn, name)
    if name in vars(var.fn):
        tx.wrap(getattr(var.fn, name), AttrSource(var.source, name))   # guarded there: it exists
        return True
    return frame_missing(tx, var, name) is None


def frame_set(tx, var, name: str, value) -> None:
    _check_frame(var, name, "STORE_ATTR")
    tx.output.side_effects.store_attr(var, var.fn, name, value, by_identity=_by_identity(var))


def frame_del(tx, var, name: str) -> None:
    _check_frame(var, name, "DELETE_ATTR")
    effects = tx.output.side_effects
    if effects.has_attr_effect(var, var.fn, name):
        if effects.attr_deleted(var.fn, name):
            raise _missing(name)
    elif name in vars(var.fn):
        tx.wrap(getattr(var.fn, name), AttrSource(var.source, name))   # guarded there: it exists
    else:
        unsupported(f"DELETE_ATTR {name} on {var}, which the function does not have")
    effects.delete_attr(var, var.fn, name, by_identity=_by_identity(var))

