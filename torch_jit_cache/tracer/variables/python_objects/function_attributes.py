"""Attributes users set on functions (`f.calls = 0`, `del f.attr`), kept in the function's __dict__.

Only plain names (not `__x__`, whose stores CPython checks or which functools.wraps copies) are
modelled here:
- on a function made in the trace (NestedFunctionVariable) the trace owns the object: its
  `__dict__` is the tracker's `attrs`, read and changed in the trace, and the function made again
  after the graph gets them (`with_attributes`);
- on a function read from the frame (UserFunctionVariable, with a source) a store or delete is a
  side effect recorded for replay on the very function, and a read after it sees it; a read of a
  name the trace did not store is the function's own, through its source (guarded there).

Special names of a function made in the trace follow CPython's attribute protocol on the function
type: a name the type defines as a data descriptor (`__doc__`, `__module__`, `__name__`,
`__qualname__`, `__annotations__`, `__type_params__`, `__dict__`) is the descriptor's; any other
name, `__wrapped__` included, lives in the function's `__dict__` like a plain one. The descriptors'
values are read from what made the function (its code's docstring, its globals' `__name__`,
MAKE_FUNCTION's annotations), stores of those the tracer models are kept in the tracker's
`special`, and `f.__dict__` is a dict tracker over `attrs` itself (FunctionDictVariable)."""

from __future__ import annotations

import functools
import types

from ....guard.attribute_lookup import MISSING, is_data_descriptor, type_lookup
from ....guard.sources import AttrSource
from ....guard.trace_result import AttrOutput
from ..base import TracedAttributeError, traced, unsupported
from ..constant import ConstantVariable
from ..collections.containers import TupleVariable
from ..collections.dicts import DictVariable


def is_plain_name(name: str) -> bool:
    return not (name.startswith("__") and name.endswith("__"))


def _missing(name: str):
    return traced(TracedAttributeError, f"function has no attribute {name!r}", AttributeError,
                  [ConstantVariable(f"'function' object has no attribute '{name}'")])


def in_dict(name: str) -> bool:
    """Whether `f.name` is stored in and read from a function's `__dict__`: every name the function
    type does not define as a data descriptor (plain names, `__wrapped__`, `__isabstractmethod__`)."""
    return is_plain_name(name) or not is_data_descriptor(type_lookup(types.FunctionType, name))


def only_in_dict(name: str) -> bool:
    """A `__dict__` name the function type does not define at all (not `__call__`, `__get__`)."""
    return in_dict(name) and type_lookup(types.FunctionType, name) is MISSING


# Stores to the function type's descriptors that the trace keeps (what each accepts: a store of
# another kind, which CPython refuses with TypeError, breaks). __code__, __defaults__ and
# __kwdefaults__ change how the function runs and are not modelled.
_STORABLE = {"__doc__": None, "__module__": None, "__name__": str, "__qualname__": str,
             "__annotations__": dict, "__type_params__": tuple}


def nested_get(var, name: str):
    """`f.name` on a function made in the trace (a name of its `__dict__`)."""
    if name not in var.attrs:
        raise _missing(name)
    return var.attrs[name]


def nested_special(tx, var, name: str):
    """`f.name` for a descriptor of the function type the tracer models, or None: what the trace
    stored, else what the function was made with."""
    if name in var.special:
        return var.special[name]
    if name == "__doc__":
        return ConstantVariable(_made_from_code(var.code).__doc__)
    if name == "__module__":
        module = var.f_globals.get("__name__")
        if not isinstance(module, str):
            return None
        return tx.wrap(module, var.global_source(tx, "__name__"))   # guarded by value
    if name == "__annotations__":
        # One dict per function, made on first read and kept (CPython caches it likewise).
        var.special[name] = annotations = _annotations_dict(var)
        return annotations
    if name == "__type_params__" and name in vars(types.FunctionType):   # 3.12+
        return ConstantVariable(())
    if name == "__dict__":
        if var.dict_view is None:
            var.dict_view = FunctionDictVariable(var)
        return var.dict_view
    return None


def _made_from_code(code):
    """A function of `code` made now, to read what a function of it is made with (its docstring)."""
    return types.FunctionType(code, {}, None, None, tuple(types.CellType() for _ in code.co_freevars))


def _annotations_dict(var):
    annotations = var.annotations
    if annotations is None:
        return DictVariable({})
    if isinstance(annotations, DictVariable):
        return DictVariable(annotations.items)
    items = getattr(annotations, "items", None)
    if not isinstance(annotations, TupleVariable) or len(items) % 2 or \
            not all(k.is_python_constant() for k in items[::2]):
        unsupported(f"__annotations__ of {var}, made with annotations the trace cannot read")
    return DictVariable({k.as_python_constant(): v for k, v in zip(items[::2], items[1::2])})


class FunctionDictVariable(DictVariable):
    """`f.__dict__` of a function made in the trace: its items are the function's `attrs` (the
    very dict), so a change through either shows in the other; made again as the rebuilt
    function's own `__dict__`."""

    def __init__(self, function):
        super().__init__({})
        self.items = function.attrs
        self.function = function

    def reconstruct(self, outputs):
        return outputs.once(self, lambda: AttrOutput(outputs.rebuild(self.function), "__dict__"))


def nested_has(var, name: str) -> bool:
    """hasattr(f, name) on a function made in the trace."""
    if name in var.attrs or name in ("__class__", "__code__", "__name__", "__qualname__"):
        return True
    if var.wrapped_by is not None and (name == "__wrapped__" or name in var.wrapped_names):
        return True
    if only_in_dict(name):
        return False
    if name not in ("__defaults__", "__kwdefaults__"):
        return True   # the function type's own names: its getsets and members all answer
    unsupported(f"hasattr on {var} for {name!r}")


def nested_set(var, name: str, value) -> None:
    if in_dict(name):
        var.attrs[name] = value
        return
    kind = _STORABLE.get(name, MISSING)
    if kind is MISSING or kind is not None and _kind_of(value) is not kind:
        unsupported(f"STORE_ATTR {name} on {var} (a special attribute of a function)")
    var.special[name] = value
    if var.wrapped_by is not None and name in var.wrapped_names:   # now its own, not the wrapped's
        var.wrapped_names = tuple(n for n in var.wrapped_names if n != name)


def _kind_of(value):
    """The exact type of what `value` tracks, where the trace knows it as a str, a tuple or a dict."""
    if value.is_python_constant():
        return type(value.as_python_constant())
    if type(value) is TupleVariable and not value.fields and getattr(value, "cls", None) in (None, tuple):
        return tuple
    if isinstance(value, DictVariable) and value.python_type() is dict:
        return dict
    return None


def nested_del(var, name: str) -> None:
    if not in_dict(name):
        unsupported(f"DELETE_ATTR {name} on {var} (a special attribute of a function)")
    if name not in var.attrs:
        raise _missing(name)
    del var.attrs[name]


def with_attributes(fn, attrs: dict, special: dict = None):
    """The function made again after the graph, given the attributes the trace left on it: its
    `__dict__`'s names and the descriptors it stored (`special`)."""
    fn.__dict__.update(attrs)
    for name, value in (special or {}).items():
        setattr(fn, name, value)
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

