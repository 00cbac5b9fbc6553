"""numpy in traced code: calls whose arguments are all constants, evaluated while tracing.

A numpy callable read from the frame (guarded by identity at its source, `np.arange` through the
module: imports.py) is followed where it is in PURE_NUMPY (array creation, reductions and shape
functions that return new arrays), a ufunc without `out=`/`where=`, or a numpy scalar type
(`np.float32(2.0)`); it runs while tracing on the constants it is given, and the trace keeps the
result: a numpy scalar as a ConstantVariable (immutable), an array as a NumpyArrayVariable that
owns it. What the trace relies on:

- arrays are mutable: the trace never changes one (item assignment, in-place operators, `out=`,
  any method outside NUMPY_ARRAY_METHODS break), and a call whose result may share memory with an
  argument (a view: `reshape`, `np.asarray` of an array) breaks, so each array the trace made is
  its own memory. One that escapes (returned, live at a break) is made again as a copy of the
  trace's array after the graph (`np.array(trace's)`): a new object per call, as in eager.
- an array reaches the graph only through `torch.from_numpy` / `torch.tensor` / `torch.as_tensor`
  / `torch.asarray` (`tensor_from_array`): the graph makes the tensor from the array's items
  (`torch.tensor(items, dtype=...)`) each call, with the dtype eager's call gives. from_numpy,
  as_tensor and asarray share memory with the array in eager, so that array can no longer be
  made again apart from the tensor: rebuilding it (it escapes or is live at a break) is refused.
- a numpy number meets a tensor only in a binary operator (`t * np.float32(2.0)`), where torch
  takes it as the Python number it holds (the dtype rules are a Python scalar's: checked in
  test_numpy_values.py); np.bool_ and any other use as a torch argument break.

numpy on arrays the frame holds and on `t.numpy()` is traced through torch._numpy instead
(numpy_tensors.py): a numpy call with such an array among its arguments goes there.
"""
from __future__ import annotations

import sys

import torch

from ....guard.sources import MethodCallSource
from ....guard.trace_result import CallOutput, ConstantOutput, GuardKind
from ..base import MethodVariable, VariableTracker, unsupported
from ..constant import ConstantVariable, is_numpy_scalar

# numpy functions known to return new values and to change none of their arguments.
PURE_NUMPY = (
    "arange", "linspace", "logspace", "geomspace", "zeros", "ones", "full", "eye", "identity",
    "array", "zeros_like", "ones_like", "full_like", "concatenate", "stack", "vstack", "hstack",
    "sum", "mean", "prod", "amax", "amin", "max", "min", "cumsum", "cumprod", "std", "var", "dot",
    "matmul", "outer", "tile", "repeat", "clip", "where", "round", "sort", "argsort", "argmax", "argmin",
    "float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "bool_", "dtype",
    "isclose", "allclose", "array_equal",
)
# ndarray methods followed on an array the trace made (the same rules: new values, no change).
NUMPY_ARRAY_METHODS = frozenset({"copy", "astype", "sum", "mean", "prod", "max", "min", "tolist", "item",
                                 "reshape", "flatten", "transpose", "cumsum", "std", "var", "round", "clip"})
NUMPY_ARRAY_ATTRIBUTES = frozenset({"shape", "ndim", "size", "itemsize", "nbytes", "dtype"})
# The torch functions that make a tensor from an array, and whether eager's result shares its memory.
TENSOR_FROM_ARRAY = {torch.from_numpy: True, torch.as_tensor: True, torch.asarray: True, torch.tensor: False}
_MAX_ITEMS = 10_000   # the graph holds the items as a constant list


# (numpy module, ids of its PURE_NUMPY callables): made at the first look, numpy imported by then.
_PURE_IDS: list = [None, frozenset()]


def _numpy():
    return sys.modules.get("numpy")


def is_numpy_callable(value) -> bool:
    """Whether `value` is a numpy callable this module follows (PURE_NUMPY or a ufunc)."""
    np = _numpy()
    if np is None or not callable(value):
        return False
    if isinstance(value, np.ufunc):
        return True
    if _PURE_IDS[0] is not np:
        _PURE_IDS[:] = [np, frozenset(id(getattr(np, n)) for n in PURE_NUMPY if hasattr(np, n))]
    return id(value) in _PURE_IDS[1] and any(getattr(np, n, None) is value for n in PURE_NUMPY)


def _value(v):
    """The Python (or numpy) value of an argument tracker: a constant, an array the trace made, or a
    list or tuple of those (`np.stack([a, b])`)."""
    if isinstance(v, NumpyArrayVariable):
        return v.value
    if getattr(v, "items", None) is not None and v.python_type() in (list, tuple) and isinstance(v.items, list):
        return v.python_type()(_value(i) for i in v.items)
    if v.is_python_constant():
        return v.as_python_constant()
    unsupported(f"a numpy call on {v} (numpy is traced on constants and arrays the trace made only)")


def wrap_numpy_result(result, inputs: list) -> VariableTracker:
    """The tracker of a numpy call's `result`; `inputs` the array arguments it must not alias."""
    np = _numpy()
    if isinstance(result, np.ndarray):
        if any(result is a or np.may_share_memory(result, a) for a in inputs):
            unsupported("a numpy result that shares memory with an argument (a view)")
        return NumpyArrayVariable(result)
    if is_numpy_scalar(result) or isinstance(result, (np.dtype, type)) or result is None or \
            isinstance(result, (bool, int, float, str)):
        return ConstantVariable(result)
    if type(result) is tuple and all(type(i) in (int, float, bool) for i in result):
        return ConstantVariable(result)   # a shape
    unsupported(f"a numpy result of type {type(result).__name__}")


def call_numpy(fn, name: str, args: list, kwargs: dict, owner=None) -> VariableTracker:
    """`fn(*args, **kwargs)` run now; `owner`: the array a method `fn` is bound to."""
    np = _numpy()
    if {"out", "where"} & set(kwargs):
        unsupported(f"numpy.{name} with out= or where= (writes into an array)")
    values = [_value(a) for a in args]
    named = {k: _value(v) for k, v in kwargs.items()}
    # An `out` passed by position is caught after the call: the result is that argument (the
    # array it changed is the trace's own, and a refused trace is traced again from the start).
    inputs = [v for v in (owner, *values, *named.values()) if isinstance(v, np.ndarray)]
    try:
        result = fn(*values, **named)
    except Exception as e:  # noqa: BLE001 - eager raises too: it runs there, as written
        unsupported(f"numpy.{name} raised {type(e).__name__}: {e}")
    return wrap_numpy_result(result, inputs)


class NumpyFunctionVariable(VariableTracker):
    """A numpy callable that is_numpy_callable accepts: called on constants while tracing."""

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def as_python_constant(self):
        return self.fn   # a dtype argument (`dtype=np.float32`), a key of a table

    def python_type(self):
        return type(self.fn)

    def call_function(self, tx, args, kwargs):
        return call_numpy(self.fn, getattr(self.fn, "__name__", "?"), args, kwargs)

    def __repr__(self):
        return f"NumpyFunctionVariable({getattr(self.fn, '__name__', self.fn)})"


class NumpyArrayVariable(VariableTracker):
    """A numpy array the trace made and owns (never changed in the trace; see the module doc).
    `shared`: a tensor the graph made shares its memory in eager (from_numpy), so it cannot be
    made again apart from that tensor."""

    def __init__(self, value):
        super().__init__(None)
        self.value = value
        self.shared = False

    def python_type(self):
        return _numpy().ndarray

    def as_python_constant(self):
        unsupported("a numpy array as a constant (arrays are mutable)")

    def var_getattr(self, tx, name):
        if name in NUMPY_ARRAY_ATTRIBUTES:
            return wrap_numpy_result(getattr(self.value, name), [self.value])
        if name in NUMPY_ARRAY_METHODS:
            return MethodVariable(self, name)
        unsupported(f"attribute {name!r} of a numpy array")

    def getitem(self, tx, key):
        """`a[i]`, `a[i, j]`, `a[[0, 2]]` with constant indices: a numpy number, or a new array;
        an index that makes a view of the array (a slice) breaks, as any view does."""
        if not key.is_python_constant():
            unsupported(f"a numpy array indexed by {key}")
        index = key.as_python_constant()
        try:
            result = self.value[index]
        except Exception as e:  # noqa: BLE001 - eager raises too: it runs there, as written
            unsupported(f"a numpy array's subscript raised {type(e).__name__}: {e}")
        return wrap_numpy_result(result, [self.value])

    def call_method(self, tx, name, args, kwargs):
        if name not in NUMPY_ARRAY_METHODS:
            unsupported(f"ndarray.{name}")
        if name == "tolist" and not args and not kwargs:
            return tx.wrap_constant(self.value.tolist())
        return call_numpy(getattr(self.value, name), f"ndarray.{name}", args, kwargs, owner=self.value)

    def reconstruct(self, outputs):
        if self.shared:
            unsupported("a numpy array whose memory a tensor of the graph shares in eager (torch.from_numpy), "
                        "needed after the graph")
        np = _numpy()
        return outputs.once(self, lambda: CallOutput(ConstantOutput(np.array), ("object",),
                                                     (ConstantOutput(self.value),)))

    def __repr__(self):
        return f"NumpyArrayVariable({self.value.dtype}{list(self.value.shape)})"


def tensor_from_array(tx, fn, args: list, kwargs: dict) -> tuple:
    """`torch.from_numpy(a)` and friends on an array the trace made: the (args, kwargs) of the
    `torch.tensor(items, ...)` node that stands for it (TorchFunctionVariable makes it), with the
    dtype, device and requires_grad eager's call gives (run on a copy while tracing)."""
    array = args[0]
    if not all(a.is_python_constant() for a in (*args[1:], *kwargs.values())):
        unsupported(f"torch.{fn.__name__} of a numpy array with non-constant arguments")
    value = array.value
    if value.size == 0 or value.size > _MAX_ITEMS or value.dtype.kind not in "biuf":
        unsupported(f"torch.{fn.__name__} of a numpy array of {value.size} {value.dtype} items "
                    f"(1 to {_MAX_ITEMS} bool, int or float items are traced)")
    try:
        real = fn(value.copy(), *[a.as_python_constant() for a in args[1:]],
                  **{k: v.as_python_constant() for k, v in kwargs.items()})
    except Exception as e:  # noqa: BLE001 - eager raises too: it runs there, as written
        unsupported(f"torch.{fn.__name__} of a numpy array raised {type(e).__name__}: {e}")
    if not isinstance(real, torch.Tensor) or not real.is_contiguous() or tuple(real.shape) != value.shape or \
            not value.flags.c_contiguous:
        unsupported(f"torch.{fn.__name__} of a numpy array that is not a C-contiguous copy")
    if TENSOR_FROM_ARRAY[fn]:
        array.shared = True
    return [tx.wrap_constant(value.tolist())], {"dtype": ConstantVariable(real.dtype),
                                                 "device": ConstantVariable(real.device),
                                                 "requires_grad": ConstantVariable(real.requires_grad)}


def numpy_number_as_python(v: VariableTracker) -> VariableTracker:
    """A numpy number meeting a tensor in a binary operator, as the Python number torch takes it
    for; anything else unchanged. np.bool_ is not taken as a bool by torch: refused."""
    if isinstance(v, ConstantVariable) and is_numpy_scalar(v.value):
        np = _numpy()
        if isinstance(v.value, np.bool_) or isinstance(v.value, np.complexfloating):
            unsupported(f"a numpy {type(v.value).__name__} in a tensor operator")
        return ConstantVariable(v.value.item())
    return v


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def is_frame_numpy_number(value) -> bool:
    """A numpy number or np.bool_ whose `item()` is a Python bool, int or float (what EQUALS_MATCH
    holds)."""
    return is_numpy_scalar(value) and type(value.item()) in (bool, int, float)


def wrap_numpy_number(tx, value, source, g):
    """A numpy number read from the frame: a constant (it is immutable), guarded by its exact type
    and by its value as `item()` gives it."""
    g(GuardKind.TYPE_MATCH, type(value))
    g(GuardKind.EQUALS_MATCH, value.item(), MethodCallSource(source, "item"))
    return ConstantVariable(value, source)


def wrap_numpy_callable(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    return NumpyFunctionVariable(value, source)
