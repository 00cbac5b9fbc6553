"""numpy arrays as tensors: an array the frame holds, or one `t.numpy()` made, traced through
torch's numpy layer (`torch._numpy`), as torch.compile traces them.

A NumpyNdarrayVariable is a tensor of the graph (`tensor`) that stands for an array. An array
read from the frame is the graph input `torch.as_tensor(arr)` (a ComputedSource: the tensor shares
the array's memory), guarded by its exact type, `dtype.str`, shape, strides and `flags.writeable`;
`t.numpy()` is the tensor `t` itself (eager's array shares its memory too). A numpy function,
ndarray method, attribute or operator on such arrays is one graph node, NumpyCall, that runs the
`torch._numpy` counterpart on `torch._numpy.ndarray`s made from its tensor arguments and returns
tensors. An array leaving the graph (returned, live at a break) is made again by `t.numpy()`
(a numpy scalar, where numpy's own result is one, by `t.numpy()[()]`); one read from the frame and
only read is the frame's own object.

What keeps the result eager's: every such call is also run, while tracing, by numpy itself on
stand-ins (the frame array's own values, copied; ones of the tensor's shape and dtype for arrays
made from tensors): where numpy's result differs from the traced one in kind (array, numpy scalar,
tensor), dtype or shape, or numpy raises, the call is a graph break, and runs as written. So
`torch._numpy`'s own divergences from numpy (type promotion, a missing function, an unsupported
argument) are breaks, never different values. Calls that change an array (in-place operators,
item assignment, `out=`, methods outside _READ_METHODS) break; so does anything whose answer
depends on values (`tolist`, `item`, `bool(a)`: the fake tensors of the trace have none) and
numpy's random module.
"""
from __future__ import annotations

import operator
import re
import sys
import warnings

import torch
import torch.utils._pytree as pytree

from ....guard.sources import AttrSource, ComputedSource
from ....guard.trace_result import CallOutput, ConstantOutput, GuardKind, SourceOutput
from ..base import MethodVariable, VariableTracker, provides, unsupported
from ..constant import ConstantVariable
from ..collections.containers import BaseListVariable, ListVariable, TupleVariable
from .tensor import TensorVariable, call_op

# dtypes an array may have to be traced (native byte order: `dtype.str` is guarded).
_TORCH_DTYPES = {
    "|b1": torch.bool, "|u1": torch.uint8, "|i1": torch.int8, "<i2": torch.int16, "<i4": torch.int32,
    "<i8": torch.int64, "<f2": torch.float16, "<f4": torch.float32, "<f8": torch.float64,
    "<c8": torch.complex64, "<c16": torch.complex128,
}
# ndarray methods that return new values and change nothing (views included: a view shares
# memory in both eager and the graph).
_READ_METHODS = frozenset({
    "astype", "copy", "sum", "mean", "prod", "max", "min", "std", "var", "cumsum", "cumprod", "reshape",
    "flatten", "ravel", "transpose", "squeeze", "swapaxes", "clip", "round", "argmax", "argmin", "all",
    "any", "dot", "repeat", "conj", "conjugate", "diagonal", "trace", "take", "__getitem__",
})
_ATTRS = frozenset({"T", "real", "imag"})
_CONSTANT_ATTRS = frozenset({"shape", "ndim", "size", "dtype", "itemsize", "nbytes"})


def _np():
    return sys.modules.get("numpy")


def _tnp():
    import torch._numpy as tnp
    return tnp


class _Slot:
    """Where the i-th tensor argument of a NumpyCall goes in its template."""
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class NumpyCall:
    """A graph node's target: `fn` on the (args, kwargs) `template`, whose _Slots the node's
    tensor arguments fill as torch._numpy arrays; its torch._numpy results given back as tensors.
    The constants stay in the template (dtypes, slices, numpy scalars have no FX spelling)."""

    def __init__(self, fn, name: str, template):
        self.fn, self.template = fn, template
        self.__name__ = "numpy_" + re.sub(r"\W", "_", name)

    def __call__(self, *tensors):
        tnp = _tnp()
        args, kwargs = pytree.tree_map_only(_Slot, lambda s: tnp.ndarray(tensors[s.index]), self.template)
        return pytree.tree_map_only(tnp.ndarray, lambda a: a.tensor, self.fn(*args, **kwargs))

    def __repr__(self):
        return self.__name__


def _method(name):
    return lambda a, *args, **kwargs: getattr(a, name)(*args, **kwargs)


def to_numpy(t):
    """An array leaving the graph: the ndarray sharing the tensor's memory."""
    return t.detach().numpy()


def to_numpy_scalar(t):
    """A numpy scalar leaving the graph (numpy's own result is one where the graph has a 0-d tensor)."""
    return t.detach().numpy()[()]


class NumpyNdarrayVariable(VariableTracker):
    """An ndarray (or numpy scalar, `scalar`) whose values are the graph tensor `tensor`;
    `standin` a real numpy value of its type, dtype and shape (see the module doc)."""

    def __init__(self, tensor: TensorVariable, standin, source=None):
        super().__init__(source)
        self.tensor, self.standin = tensor, standin
        self.scalar = not isinstance(standin, _np().ndarray)

    def python_type(self):
        return type(self.standin)

    def as_python_constant(self):
        unsupported("a numpy array as a constant (its values are the graph's)")

    def truthy(self, tx):
        unsupported("truth value of a numpy array (its values are the graph's)")

    def length(self, tx):
        if self.scalar or not self.standin.ndim:
            unsupported("len() of a 0-d numpy array")
        return self.standin.shape[0]

    def unpack(self, tx):
        return [self.getitem(tx, ConstantVariable(i)) for i in range(self.length(tx))]

    def var_getattr(self, tx, name):
        if name in _CONSTANT_ATTRS:
            value = getattr(self.standin, name)
            return ConstantVariable(value) if name != "shape" else tx.wrap_constant(tuple(value))
        if name in _ATTRS:
            return numpy_call(tx, lambda a: getattr(a, name), f"ndarray.{name}", [self], {})
        if name in _READ_METHODS:
            return MethodVariable(self, name)
        unsupported(f"attribute {name!r} of a numpy array traced as a tensor")

    def call_method(self, tx, name, args, kwargs):
        if name not in _READ_METHODS:
            unsupported(f"ndarray.{name} (it changes the array or reads its values)")
        return numpy_call(tx, _method(name), f"ndarray.{name}", [self, *args], kwargs)

    def getitem(self, tx, key):
        return numpy_call(tx, operator.getitem, "getitem", [self, key], {})

    def setitem(self, tx, key, value):
        """`a[key] = value` with a basic key (ints, slices, None, Ellipsis): numpy's assignment on
        the stand-ins decides whether it is allowed; the graph copies `value` into the view
        `a[key]` (copy_ broadcasts and casts as numpy's assignment does)."""
        if self.scalar or not key.is_python_constant() or not _basic_key(key.as_python_constant()):
            unsupported("item assignment on a numpy array with an index that is not basic (ints, slices)")
        if not isinstance(value, NumpyNdarrayVariable) and not (
                value.is_python_constant() and type(value.as_python_constant()) in (bool, int, float)):
            unsupported(f"item assignment of {value} into a numpy array")
        _run_numpy(operator.setitem, "item assignment", [self.standin, _standin(key), _standin(value)], {})
        view = self.getitem(tx, key)
        if view.scalar:   # a[i] of a 1-d array: numpy's getitem gives a number; the graph wants a view
            view = numpy_call(tx, lambda a, k: a[k][...], "getitem", [self, key], {})
        if isinstance(value, NumpyNdarrayVariable):
            call_op(tx, "copy_", [view.tensor, value.tensor], {}, method=True)
        else:
            call_op(tx, "fill_", [view.tensor, value], {}, method=True)

    def reconstruct(self, outputs):
        if self.source is not None:   # the frame's own array, only read
            return SourceOutput(self.source)
        fn = to_numpy_scalar if self.scalar else to_numpy
        return outputs.once(self, lambda: CallOutput(ConstantOutput(fn), ("t",),
                                                     (outputs.graph_output(self.tensor.as_node()),)))

    def __repr__(self):
        return f"NumpyNdarrayVariable({self.standin.dtype}{list(getattr(self.standin, 'shape', ()))})"


def _basic_key(key) -> bool:
    if type(key) is tuple:
        return all(_basic_key(k) for k in key)
    return key is None or key is Ellipsis or type(key) in (int, slice)   # a bool is a mask


# -- the call: traced through torch._numpy, checked against numpy on stand-ins --------------------
def _standin(v):
    """The real value numpy runs on for tracker `v` (see the module doc)."""
    if isinstance(v, NumpyNdarrayVariable):
        return v.standin
    if isinstance(v, BaseListVariable):
        return v.python_type()(_standin(i) for i in v.items)
    if isinstance(v, TensorVariable):
        unsupported("a numpy call given a tensor")
    if v.is_python_constant():
        return v.as_python_constant()
    unsupported(f"a numpy call on {v}")


def _template(v, tensors: list):
    """The value of tracker `v` in a NumpyCall's template; its arrays' tensors appended to `tensors`."""
    if isinstance(v, NumpyNdarrayVariable):
        tensors.append(v.tensor)
        return _Slot(len(tensors) - 1)
    if isinstance(v, BaseListVariable):
        return v.python_type()(_template(i, tensors) for i in v.items)
    return _tnp_constant(v.as_python_constant())


def _tnp_constant(value):
    """A constant as torch._numpy takes it: numpy's scalar types and dtypes by their names."""
    np = _np()
    if isinstance(value, type) and issubclass(value, np.generic):
        found = getattr(_tnp(), value.__name__, None)
        if found is None:
            unsupported(f"numpy.{value.__name__} has no torch._numpy counterpart")
        return found
    if isinstance(value, np.dtype):
        return value.name
    return value


def _run_numpy(fn, name, values, named):
    np = _np()
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*values, **named)
    except Exception as e:  # noqa: BLE001 - eager raises too: it runs there, as written
        unsupported(f"{name} raised {type(e).__name__} in numpy: {e}")


def _match(tx, traced, real, name):
    """The tracker of a traced result whose numpy counterpart is `real`, or a break."""
    np = _np()
    if isinstance(real, (np.ndarray, np.generic)) and isinstance(traced, TensorVariable):
        dtype = _TORCH_DTYPES.get(real.dtype.str)
        ex = traced.example
        if dtype is not None and ex.dtype == dtype and tuple(ex.shape) == np.shape(real):
            return NumpyNdarrayVariable(traced, real)
        unsupported(f"{name}: torch._numpy gives {ex.dtype}{list(ex.shape)}, numpy {real.dtype}{list(np.shape(real))}")
    if type(real) in (tuple, list) and isinstance(traced, BaseListVariable) and len(real) == len(traced.items):
        items = [_match(tx, t, r, name) for t, r in zip(traced.items, real)]
        return TupleVariable(items) if type(real) is tuple else ListVariable(items)
    unsupported(f"{name}: numpy gives a {type(real).__name__}, torch._numpy {traced}")


def numpy_call(tx, fn, name: str, args: list, kwargs: dict) -> VariableTracker:
    """`fn(*args, **kwargs)` (fn works on numpy and torch._numpy arrays alike) as one graph node."""
    if "out" in kwargs or "where" in kwargs:
        unsupported(f"{name} with out= or where= (writes into an array)")
    real = _run_numpy(fn, name, [_standin(a) for a in args], {k: _standin(v) for k, v in kwargs.items()})
    tensors = []
    template = ([_template(a, tensors) for a in args], {k: _template(v, tensors) for k, v in kwargs.items()})
    traced = call_op(tx, NumpyCall(fn, name, template), tensors, {})
    return _match(tx, traced, real, name)


def has_numpy_tensor(args, kwargs) -> bool:
    return any(isinstance(v, NumpyNdarrayVariable) or isinstance(v, BaseListVariable) and
               any(isinstance(i, NumpyNdarrayVariable) for i in v.items) for v in [*args, *kwargs.values()])


def _numpy_space(fn):
    """The name of the torch._numpy namespace ("" the top) that mirrors numpy's for `fn`, or None
    where fn is no function of numpy, numpy.linalg or numpy.fft."""
    np = _np()
    name = getattr(fn, "__name__", None)
    if np is None or not isinstance(name, str) or isinstance(fn, type):
        return None
    for space, mod in (("", np), ("linalg", getattr(np, "linalg", None)), ("fft", getattr(np, "fft", None))):
        if mod is not None and getattr(mod, name, None) is fn:
            return space
    return None


def numpy_function_of(tx, fn_tracker):
    """The numpy function tracker `fn_tracker` stands for, pinned by identity at its source, or None."""
    value = getattr(fn_tracker, "fn", None)
    if value is None:
        value = getattr(fn_tracker, "value", None)
    if value is None or _numpy_space(value) is None:
        return None
    if fn_tracker.source is not None:
        tx.output.add_guard(fn_tracker.source, GuardKind.ID_MATCH, value)
    return value


def call_numpy_function(tx, fn, args, kwargs):
    """A numpy function on arrays traced as tensors: its torch._numpy counterpart, or a break."""
    name = getattr(fn, "__name__", "?")
    space = _numpy_space(fn)
    target = getattr(_tnp(), space, None) if space else _tnp()
    counterpart = getattr(target, name, None) if space is not None and target is not None else None
    if counterpart is None:
        unsupported(f"numpy.{name} on arrays traced as tensors (torch._numpy has no counterpart)")
    real_fn = fn

    def both(*a, **k):   # numpy's own on the stand-ins, torch._numpy's in the graph
        return (counterpart if _any_tnp(a, k) else real_fn)(*a, **k)
    return numpy_call(tx, both, f"numpy.{name}", args, kwargs)


def _any_tnp(a, k) -> bool:
    tnp = _tnp()
    return any(isinstance(x, tnp.ndarray) for x in pytree.tree_leaves((a, k)))


_INPLACE = {"+=", "&=", "//=", "<<=", "*=", "%=", "|=", "**=", ">>=", "-=", "/=", "^=", "@="}
_INPLACE_OPERATORS = {
    "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv, "<<=": operator.ilshift, "*=": operator.imul,
    "%=": operator.imod, "|=": operator.ior, "**=": operator.ipow, ">>=": operator.irshift, "-=": operator.isub,
    "/=": operator.itruediv, "^=": operator.ixor, "@=": operator.imatmul,
}
BINARY_OPERATORS_OUT_OF_PLACE = {
    "+=": operator.add, "&=": operator.and_, "//=": operator.floordiv, "<<=": operator.lshift, "*=": operator.mul,
    "%=": operator.mod, "|=": operator.or_, "**=": operator.pow, ">>=": operator.rshift, "-=": operator.sub,
    "/=": operator.truediv, "^=": operator.xor, "@=": operator.matmul,
}


def binary(tx, symbol: str, fn, a, b) -> VariableTracker:
    """`a symbol b` where an operand is an array traced as a tensor."""
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if symbol in _INPLACE:
            unsupported(f"operator {symbol} between a numpy array and a tensor (it changes an operand)")
        return _with_tensor(tx, symbol, fn, a, b)
    if symbol in _INPLACE:
        return _inplace(tx, symbol, fn, a, b)
    return numpy_call(tx, fn, f"operator {symbol}", [a, b], {})


def _inplace(tx, symbol, fn, a, b) -> VariableTracker:
    """`a op= b` on an array: numpy computes `a op b` and casts it into `a` (same_kind casting); the
    graph does the same, `a op b` then `copy_` into a's tensor, and `a` stays the very array (its
    memory: the frame's array, or the tensor `t.numpy()` shares, changes as in eager). numpy's own
    in-place call on the stand-ins decides whether it is allowed (a cast it refuses raises: a break)."""
    if not isinstance(a, NumpyNdarrayVariable) or a.scalar:
        unsupported(f"operator {symbol} on {a}")   # a number: rebinds the name to a new value
    before = a.standin
    real = _run_numpy(_INPLACE_OPERATORS[symbol], f"operator {symbol}", [before, _standin(b)], {})
    if real is not before:
        unsupported(f"operator {symbol}: numpy did not update the array in place")
    out_of_place = numpy_call(tx, BINARY_OPERATORS_OUT_OF_PLACE[symbol], f"operator {symbol}", [a, b], {})
    if not isinstance(out_of_place, NumpyNdarrayVariable) or \
            tuple(out_of_place.tensor.example.shape) != tuple(a.tensor.example.shape):
        unsupported(f"operator {symbol}: the result does not fit the array")
    a.tensor = call_op(tx, "copy_", [a.tensor, out_of_place.tensor], {}, method=True)
    return a


def _with_tensor(tx, symbol, fn, a, b) -> VariableTracker:
    """`a symbol b` between an array and a tensor: eager's answer is the tensor's operator on the
    array made a tensor, where numpy defers to it (checked on stand-ins, as numpy_call does)."""
    def standin(v):
        if isinstance(v, TensorVariable):
            if any(not isinstance(s, int) for s in v.example.shape):
                unsupported("an operator between a numpy array and a tensor of symbolic size")
            return torch.ones(v.example.shape, dtype=v.example.dtype)
        return v.standin
    real = _run_numpy(fn, f"operator {symbol}", [standin(a), standin(b)], {})
    if not isinstance(real, torch.Tensor):
        unsupported(f"operator {symbol} between a numpy array and a tensor gives a {type(real).__name__}")
    traced = call_op(tx, fn, [v.tensor if isinstance(v, NumpyNdarrayVariable) else v for v in (a, b)], {})
    ex = getattr(traced, "example", None)
    if ex is None or ex.dtype != real.dtype or tuple(ex.shape) != tuple(real.shape):
        unsupported(f"operator {symbol} between a numpy array and a tensor: the graph's result differs from eager's")
    return traced


def unary(tx, fn, a) -> VariableTracker:
    return numpy_call(tx, fn, getattr(fn, "__name__", "unary"), [a], {})


@provides
def from_tensor(tx, t: TensorVariable, force: bool) -> VariableTracker:
    """`t.numpy(force=...)`: the array that shares t's memory, traced as t."""
    ex = t.example
    if ex.device.type != "cpu" or ex.is_conj() or ex.is_neg() or ex.layout != torch.strided:
        unsupported("Tensor.numpy() of a tensor that is not a plain CPU tensor")
    if ex.requires_grad and not force:
        unsupported("Tensor.numpy() of a tensor that requires grad (eager raises)")
    if any(not isinstance(s, int) for s in ex.shape):
        unsupported("Tensor.numpy() of a tensor of symbolic size")
    np = _np()
    if t.real is not None and not t.real.requires_grad:
        standin = t.real.detach().numpy().copy()
    else:
        standin = torch.ones(ex.shape, dtype=ex.dtype).numpy()
    if standin.dtype.str not in _TORCH_DTYPES or np is None:
        unsupported(f"Tensor.numpy() of a {ex.dtype} tensor")
    if ex.requires_grad:
        t = call_op(tx, "detach", [t], {}, method=True)
    return NumpyNdarrayVariable(t, standin)


@provides
def tensor_of(tx, fn, args, kwargs) -> VariableTracker:
    """`torch.from_numpy(a)`, `torch.as_tensor(a)`, `torch.asarray(a)`, `torch.tensor(a)` of an array
    traced as a tensor: the tensor itself where eager's shares the array's memory, else a copy."""
    a = args[0]
    if a.scalar or len(args) > 1 or set(kwargs) - {"dtype"}:
        unsupported(f"torch.{fn.__name__} of a numpy array with other arguments")
    dtype = kwargs.get("dtype")
    if dtype is not None and not dtype.is_python_constant():
        unsupported(f"torch.{fn.__name__}: dtype is not a constant")
    dtype = None if dtype is None else dtype.as_python_constant()
    if fn is torch.from_numpy and kwargs:
        unsupported("torch.from_numpy with keywords")
    if fn is not torch.tensor and (dtype is None or dtype == a.tensor.example.dtype):
        return a.tensor
    t = call_op(tx, "clone", [a.tensor], {}, method=True)
    if dtype is not None:
        t = call_op(tx, "to", [t, ConstantVariable(dtype)], {}, method=True)
    return t


# -- what builder.py wraps a frame array with (its WRAP_RULES) -------------------------------------
_MAX_STANDIN_BYTES = 1 << 26   # the trace copies a frame array as its stand-in


def is_frame_array(value) -> bool:
    np = _np()
    return np is not None and type(value) is np.ndarray and value.dtype.str in _TORCH_DTYPES and \
        value.nbytes <= _MAX_STANDIN_BYTES and value.flags.writeable and \
        all(s >= 0 and s % value.itemsize == 0 for s in value.strides)


def wrap_frame_array(tx, value, source, g):
    if source is None or not g.enabled:
        return None
    g(GuardKind.TYPE_MATCH, type(value))
    out = tx.output
    out.add_guard(AttrSource(AttrSource(source, "dtype"), "str"), GuardKind.EQUALS_MATCH, value.dtype.str)
    out.add_guard(AttrSource(source, "shape"), GuardKind.EQUALS_MATCH, value.shape)
    out.add_guard(AttrSource(source, "strides"), GuardKind.EQUALS_MATCH, value.strides)
    out.add_guard(AttrSource(AttrSource(source, "flags"), "writeable"), GuardKind.EQUALS_MATCH, True)
    tensor_source = ComputedSource(source, torch.as_tensor)
    real = torch.as_tensor(value)
    example = out.fake_shapes.fakeify(real, tensor_source, None)
    out.keepalive.append(real)
    tensor = TensorVariable(out, example, source=tensor_source, real=real)
    return NumpyNdarrayVariable(tensor, value.copy(), source=source)
