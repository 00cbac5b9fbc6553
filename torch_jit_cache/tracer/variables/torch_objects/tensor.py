"""TensorVariable and graph ops: tensor methods, torch functions and operators become fx nodes.

Every op runs once on example tensors (the trace's fake tensors, fake_shapes.py: sizes, strides,
dtype and device of the real inputs, no data, so tracing never reads, mutates or allocates the
user's tensors) to learn its result: a tensor result becomes a node, a result without tensors
(x.size(), x.dim(), x.dtype) becomes a constant, legal because guards pin every input's shape and
dtype. Ops whose non-tensor result depends on tensor data (.item(), .tolist(), torch.equal) are
refused, except under config.capture_scalar_outputs / capture_dynamic_output_shape_ops, where
.item(), .tolist() and the ops with value-dependent sizes give unbacked symbols (value_sizes.py,
fake_shapes.py: the graph computes them, nothing guards them).
"""
from __future__ import annotations

import functools
import inspect
import sys
import types

import torch

from ....backends import static_inputs
from ....guard.attribute_lookup import Where, lookup
from ....guard.shape_guards import SymbolBinding
from ....guard.sources import AttrSource
from ....guard.trace_result import GuardKind, Unsupported
from ....frontend.trace_rules import functorch_transform, torch_callable_effect
from ...output_graph import mark_call_side_effect, mark_side_effect, side_effectful_function
from ..base import CallableVariable, MethodVariable, VariableTracker, provided, unsupported
from ..constant import ConstantVariable
from .op_writes import NONE_IS_A_VALUE, out_tensors, schema_effect, written
from ..collections.containers import ListVariable, TupleVariable
from . import tensor_attributes, traced_backward
from .numpy_values import TENSOR_FROM_ARRAY, NumpyArrayVariable, tensor_from_array
from .symbolic import SymNodeVariable, as_int, is_symbolic, wrap_symbolic
from .value_sizes import Capture, judge_subscript, refusing_value_sizes, subscript_example

# Methods/functions whose result depends on tensor *values* in a way a static graph cannot keep
# (Python scalars, data-dependent shapes) or that change autograd/global state.
DATA_DEPENDENT = frozenset({
    "item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "__len__",
    "equal", "allclose", "is_nonzero", "data_ptr", "nonzero", "masked_select", "unique",
    "unique_consecutive", "argwhere", "bincount", "backward", "register_hook", "retain_grad",
    "requires_grad_", "storage", "untyped_storage", "__array__", "set_", "resize_",
    "record_stream", "manual_seed", "seed", "set_grad_enabled", "set_default_dtype",
    "use_deterministic_algorithms", "set_printoptions", "save", "load", "compile",
})
# Of those, what config.capture_scalar_outputs (a tensor read as Python numbers) and
# capture_dynamic_output_shape_ops (a result whose size is data) let into a graph on fake tensors.
_SCALAR_OUTPUTS = frozenset({"item", "tolist"})
# Calls whose only effect is process-wide and idempotent: torch's API-usage logging records a key
# the first time it is seen. The trace runs them (call_op calls every target on its examples), so
# the compiled code need not: they leave no node and no graph break (torchvision calls it in
# stochastic_depth and in every model's constructor; it broke each block's graph in two).
ONCE_PER_PROCESS = frozenset({torch._C._log_api_usage_once})
_DYNAMIC_OUTPUT_SHAPES = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive",
                                    "argwhere", "bincount"})
_CONSTANT_ATTRS = frozenset({"dtype", "device", "layout", "ndim", "is_cuda", "is_sparse",
                             "is_quantized", "is_meta", "is_complex", "is_nested"})
# Tensor methods whose answer no guard checks (TENSOR_MATCH pins the type, dtype, device, sizes,
# strides, requires_grad and the dispatch keys, which carry conj, neg, inference, sparse, quantized
# and nested), and which the example cannot answer as the input would: a graph break.
_UNGUARDED_READS = frozenset({"is_shared", "is_pinned", "is_set_to", "_is_view"})
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag"})
# Tensor getsets whose read never raises AttributeError on a dense tensor (hasattr is True).
_SAFE_GETSETS = _CONSTANT_ATTRS | {"shape", "requires_grad", "grad", "data", "grad_fn", "_version",
                                   "is_leaf", "names"}


class TensorVariable(VariableTracker):
    identity_family = "tensor"
    protocol_slots = frozenset({"__iter__", "__len__"})   # torch.Tensor's own (TENSOR_MATCH pins the type)
    """A tensor in the graph: an fx node and the example tensor it evaluated to.

    A tensor read from the frame starts without a node; its placeholder is added the first time
    an op uses it, so tensors that are only inspected (x.shape) do not become graph inputs."""

    def __init__(self, output, example, node=None, source=None, real=None):
        super().__init__(source)
        self.output = output
        self.example = example
        self._node = node
        self.real = real
        self.module_state = False   # read as an attribute of an nn.Module (mark_module_state)

    def as_node(self):
        if self._node is None:
            # The backend is handed the fake inputs, as torch.compile's are: their sizes (and
            # symbols) are what the graph is compiled for.
            self._node = self.output.add_placeholder(self.source, self.example, self._static_kind())
        return self._node

    def mark_module_state(self):
        """This tensor is an attribute of an nn.Module (a parameter, a buffer, a plain tensor
        attribute): a static input for CUDA graphs (backends/static_inputs.py), whenever it
        became a graph input."""
        self.module_state = True
        if self._node is not None and self._node.op == "placeholder":
            self._node.meta[static_inputs.STATIC_INPUT] = self._static_kind()

    def _static_kind(self):
        return None if self.real is None else static_inputs.static_kind(self.real, self.module_state)

    def as_fx_arg(self):
        return self.as_node()

    def reconstruct(self, outputs):
        return outputs.graph_output(self.as_node())

    def as_example(self):
        return self.example

    def as_python_constant(self):
        unsupported("a tensor used where a Python constant is needed")

    def python_type(self):
        return type(self.real) if self.real is not None else torch.Tensor

    def truthy(self, tx):
        unsupported("data-dependent branch on a tensor value (bool(tensor))")

    def unpack(self, tx):
        # A symbolic length is specialized here (int() guards it): iteration unrolls.
        if not self.example.dim():
            unsupported("iteration over a 0-d tensor")
        n = as_int(self.example.shape[0], "iteration over a tensor")
        return [call_op(tx, "__getitem__", [self, ConstantVariable(i)], {}, method=True)
                for i in range(n)]

    def has_symbolic_shape(self) -> bool:
        return is_symbolic(tuple(self.example.shape))

    def var_getattr(self, tx, name):
        name = "grad" if name == "_grad" else name   # one getset under two names
        found = tensor_attributes.load(tx, self, name)
        if found is not None:
            return found
        if name == "shape":
            if self.has_symbolic_shape():
                return call_op(tx, "size", [self], {}, method=True)
            return ConstantVariable(self.example.shape)
        if name == "requires_grad":
            ref = self.real if self.real is not None else self.example
            return ConstantVariable(ref.requires_grad)
        if name in _CONSTANT_ATTRS:
            return ConstantVariable(getattr(self.example, name))
        if name in _TENSOR_ATTRS:
            return call_op(tx, getattr, [self, ConstantVariable(name)], {})
        if name in ("grad", "is_leaf", "grad_fn"):   # autograd's view of the tensor
            return traced_backward.grad_attr(tx, self, name, call_op, self._grad)
        if name == "data":   # torch's own accessor: no autograd, a version counter of its own
            return call_op(tx, torch._C._autograd._get_data_attr, [self], {})
        if name == "_version":
            unsupported(f"tensor attribute .{name}")
        if callable(getattr(torch.Tensor, name, None)):
            return MethodVariable(self, name)
        unsupported(f"tensor attribute .{name}")

    def var_setattr(self, tx, name, value):
        tensor_attributes.store(tx, self, "grad" if name == "_grad" else name, value)

    def _grad(self, tx):
        """x.grad before any backward() in the graph (after one: traced_backward.grad). Of a frame
        tensor: the value at its source `x.grad`, a tensor (a graph input, TENSOR_MATCH) or None
        (guarded as None). Of a tensor the graph made: None, a new tensor has no gradient; unless
        it is the very object of a frame tensor (`x.to(x.dtype)`), whose gradient it cannot see."""
        if self.source is not None:
            if self.real is None:
                unsupported("tensor attribute .grad of a tensor whose value the trace does not hold")
            return tx.wrap(self.real.grad, AttrSource(self.source, "grad"))
        if any(isinstance(v, TensorVariable) and v.source is not None and v.example is self.example
               for v in list(tx.output.by_source.values())):
            unsupported("tensor attribute .grad of a graph tensor that is a frame tensor itself")
        return ConstantVariable(None)

    def has_attribute(self, tx, name: str) -> bool:
        """hasattr(x, name), answered where Python looks: the tensor's type, pinned by TENSOR_MATCH
        (the exact type), and its instance __dict__ (a tensor may carry Python attributes), whose
        keys are guarded for a tensor read from the frame and empty for one the graph makes (the
        trace stores no attribute on a tensor). transformers asks `hasattr(x, "jax")`."""
        if tensor_attributes.stored(tx, self, name):
            return True
        ref = self.real if self.real is not None else self.example
        found = lookup(ref, name)
        if found.where is Where.CLASS:
            return True   # a method or plain class attribute: binding it cannot raise
        if found.where is Where.DATA_DESCRIPTOR:
            if name in _SAFE_GETSETS:
                return True
            unsupported(f"hasattr({type(ref).__name__}, {name!r}): a descriptor that may raise")
        if found.where not in (Where.INSTANCE_DICT, Where.MISSING):
            unsupported(f"hasattr({type(ref).__name__}, {name!r}): its lookup is customised")
        if self.source is not None:
            keys = tuple(vars(ref))
            if not all(type(k) is str for k in keys):
                unsupported(f"hasattr on {self}: its __dict__ has keys other than str")
            tx.output.add_guard(AttrSource(self.source, "__dict__"), GuardKind.DICT_KEYS, keys)
        return found.where is Where.INSTANCE_DICT

    def call_method(self, tx, name, args, kwargs):
        if name in _UNGUARDED_READS:
            unsupported(f"tensor.{name}(): a property no guard checks")
        if name == "storage_offset" and not args and not kwargs:
            return self._storage_offset(tx)
        if name == "new_tensor" and len(args) == 1:
            from .tensor_from_scalars import from_symbolic_scalars   # it builds on call_op, below
            made = from_symbolic_scalars(tx, call_op, args[0], kwargs, like=self)
            if made is not None:
                return made
        if name == "numpy" and not args and set(kwargs) <= {"force"} and \
                all(v.is_python_constant() for v in kwargs.values()):
            return provided("from_tensor")(tx, self, bool(kwargs["force"].as_python_constant()) if kwargs else False)
        if name in traced_backward.METHODS:
            return traced_backward.call_method(tx, self, name, args, kwargs, call_op)
        return call_op(tx, name, [self, *args], kwargs, method=True)

    def _storage_offset(self, tx):
        """x.storage_offset(). TENSOR_MATCH does not check offsets (slices of one batch share an
        entry), so an offset read is guarded by value; one that is a symbol (dynamic shapes) is
        guarded as a symbol (fake_shapes.py). A tensor the trace made has an offset that follows
        its inputs' unchecked ones: a graph break."""
        if self.source is None or self.real is None:
            unsupported("storage_offset() of a tensor the trace made")
        result = call_op(tx, "storage_offset", [self], {}, method=True)
        if not result.is_python_constant():
            return result
        value = result.as_python_constant()
        tx.output.exact_reads.append((SymbolBinding(self.source, "storage_offset"), value))
        return ConstantVariable(value)

    def __repr__(self):
        return f"TensorVariable({tuple(self.example.shape)}, {self.example.dtype})"

    def require_guardable(self, what, name):
        pass   # TENSOR_MATCH

    def bound_method_type(self, name):
        return type(getattr(self.example, name))  # builtin_function_or_method

    def identity_object(self):
        return self.example


# torch's "am I being compiled / traced?" questions, answered as under torch.compile: True while
# tracing, so library code (HuggingFace's is_torchdynamo_compiling) takes its compile-friendly
# path in the graph; the frame run uncompiled asks torch itself and gets False. By (module, name),
# looked up when asked: torch._dynamo is imported only by code that uses it.
_ANSWERS_WHILE_TRACING = {
    ("torch.compiler", "is_compiling"): True,
    ("torch.compiler", "is_dynamo_compiling"): True,
    ("torch.compiler", "is_exporting"): False,
    ("torch._dynamo", "is_compiling"): True,
    ("torch._dynamo.external_utils", "is_compiling"): True,
    ("torch._utils", "is_compiling"): True,
    ("torch.jit", "is_tracing"): False,
    ("torch.jit", "is_scripting"): False,
}


def answer_while_tracing(fn):
    """(True, the constant answer) when `fn` is one of torch's compiling/tracing queries."""
    name = getattr(fn, "__name__", None)
    for (module_name, attr), answer in _ANSWERS_WHILE_TRACING.items():
        if attr == name and getattr(sys.modules.get(module_name), attr, None) is fn:
            return True, answer
    return False, None


class TorchFunctionVariable(CallableVariable):
    """A function from torch, torch.nn.functional, torch.linalg, ... called as a graph op."""

    def call_function(self, tx, args, kwargs):
        effect = torch_callable_effect(self.fn) or functorch_transform(self.fn)
        if effect is not None:   # decided before it runs: the call then runs once, at run time
            unsupported(effect)
        known, answer = answer_while_tracing(self.fn)
        if known and not args and not kwargs:
            return ConstantVariable(answer)
        if self.fn is torch.is_tensor:
            return ConstantVariable(isinstance(args[0], TensorVariable))
        if self.fn in (torch.is_grad_enabled,):
            return ConstantVariable(self.fn())  # grad mode is guarded by the caller
        if self.fn is torch.jit.annotate and len(args) == 2 and not kwargs:
            return args[1]  # a type hint for TorchScript; in Python it returns its value as is
        if self.fn in _CHECKS and args:
            return _symbolic_check(tx, self.fn, args[0])
        if self.fn in TENSOR_FROM_ARRAY and args and type(args[0]).__name__ == "NumpyNdarrayVariable":
            return provided("tensor_of")(tx, self.fn, args, kwargs)
        if self.fn in TENSOR_FROM_ARRAY and args and isinstance(args[0], NumpyArrayVariable):
            return call_op(tx, torch.tensor, *tensor_from_array(tx, self.fn, args, kwargs))
        if self.fn in (torch.tensor, torch.as_tensor) and len(args) == 1:
            from .tensor_from_scalars import from_symbolic_scalars   # it builds on call_op, below
            made = from_symbolic_scalars(tx, call_op, args[0], kwargs)
            if made is not None:
                return made
        if is_tensor_method(self.fn) and args and isinstance(args[0], TensorVariable):
            # torch.Tensor.add_(x, y) is x.add_(y): the method, with what the tracer knows of
            # methods (in-place updates, size reads, properties no guard checks).
            return args[0].call_method(tx, self.fn.__name__, args[1:], kwargs)
        python = next((a for a in [*args, *kwargs.values()] if _is_python_callable(a)), None)
        if python is not None:
            # torch.autograd.functional.jacobian(f, x), checkpoint(f, x): run on the examples, f's
            # Python would run while tracing (its effects once, at trace time) and the node would
            # hold f. The call runs as written; f is compiled as its own frame when it is called.
            unsupported(f"{getattr(self.fn, '__name__', self.fn)}() is given the Python callable {python} "
                        "(it would run while tracing)")
        return call_op(tx, self.fn, args, kwargs)

    def var_getattr(self, tx, name):
        # torch.ops.aten.mul.Tensor: an overload of an op packet, itself a torch op (held by the packet).
        if type(self.fn) is _OP_PACKET and self.source is not None and name in self.fn.overloads():
            return TorchFunctionVariable(getattr(self.fn, name), AttrSource(self.source, name))
        return super().var_getattr(tx, name)

    def __repr__(self):
        return f"TorchFunctionVariable({getattr(self.fn, '__name__', self.fn)})"

    def require_guardable(self, what, name):
        pass   # by identity


_OP_PACKET = type(torch.ops.aten.mul)


def _is_python_callable(v) -> bool:
    """Whether tracker `v` is a function, method, partial or module whose call runs Python code."""
    try:
        t = v.python_type()
    except Unsupported:
        return False
    return issubclass(t, (types.FunctionType, types.MethodType, functools.partial, torch.nn.Module))


# torch's checks on symbolic values, as users write them next to `.item()` (torch._check(n <= T)).
_CHECKS = (torch._check, torch._check_is_size)


def _symbolic_check(tx, fn, cond):
    """torch._check(cond) on a symbolic or constant condition: run on the example, it becomes a
    guard (backed symbols) or a deferred runtime assert the graph checks (unbacked: fake_shapes.py),
    and no node; a condition that is false, or a tensor, is a graph break (eager raises or checks)."""
    if not isinstance(cond, (SymNodeVariable, ConstantVariable)):
        unsupported(f"{fn.__name__}() of a {type(cond).__name__}")
    try:
        with tx.output.fake_shapes.running():
            fn(cond.as_example() if isinstance(cond, SymNodeVariable) else cond.as_python_constant())
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - a check that fails: eager raises there
        unsupported(f"{fn.__name__}() failed while tracing: {type(e).__name__}: {e}")
    return ConstantVariable(None)


def _has_tensor(value) -> bool:
    if isinstance(value, dict):
        value = tuple(value.values())
    if isinstance(value, (tuple, list)):
        return any(_has_tensor(v) for v in value)
    return isinstance(value, torch.Tensor)


def call_torch(tx, fn, *args, **kwargs) -> VariableTracker:
    """call_op of `fn` with Python values among the arguments wrapped as constants."""
    wrap = lambda v: v if isinstance(v, VariableTracker) else ConstantVariable(v)  # noqa: E731
    return call_op(tx, fn, [wrap(a) for a in args], {k: wrap(v) for k, v in kwargs.items()})


def call_op(tx, target, args: list, kwargs: dict, *, method: bool = False, effect: bool = False) -> VariableTracker:
    """Run `target` (a callable, or a method name on args[0] when `method`) on the examples and
    record it as a node when its result holds tensors, or always when `effect` (traced_backward.py)."""
    name = target if method else getattr(target, "__name__", repr(target))
    shapes = tx.output.fake_shapes
    capture = Capture.current()
    if name in DATA_DEPENDENT and not effect and not (name in _SCALAR_OUTPUTS and capture.scalars
                                       or name in _DYNAMIC_OUTPUT_SHAPES and capture.shapes):
        hint = capture.hint("capture_scalar_outputs") if name in _SCALAR_OUTPUTS else \
            capture.hint("capture_dynamic_output_shape_ops") if name in _DYNAMIC_OUTPUT_SHAPES else ""
        unsupported(f"data-dependent or side-effecting tensor operation {name}(){hint}")
    fx_args = tuple(_fx_dtype(a.as_fx_arg()) for a in args)
    fx_kwargs = {k: _fx_dtype(v.as_fx_arg()) for k, v in kwargs.items()}
    ex_args = [a.as_example() for a in args]
    ex_kwargs = {k: v.as_example() for k, v in kwargs.items()}
    subscript = name in ("getitem", "__getitem__", "setitem", "__setitem__")
    if subscript and len(ex_args) > 1:
        judge_subscript(ex_args[1], capture)
        ex_args[1] = subscript_example(ex_args[1])
    mark = shapes.guess_mark()
    try:
        with shapes.running(), refusing_value_sizes(name, allow_scalar_reads=subscript, capture=capture):
            if method:
                result = getattr(ex_args[0], target)(*ex_args[1:], **ex_kwargs)
            else:
                result = target(*ex_args, **ex_kwargs)
    except Unsupported:
        raise
    except Exception as e:  # the original code raises too: let it run eagerly and raise there
        unsupported(f"{name} raised {type(e).__name__}: {e}")
    inplace = name.endswith("_") and not name.endswith("__") or kwargs.get("inplace") is not None \
        and kwargs["inplace"].is_python_constant() and kwargs["inplace"].as_python_constant()
    if not method and side_effectful_function(target):
        inplace = True  # operator.setitem, operator.iadd, ...: keep the node even if unused
    if effect or not method and (out_tensors(kwargs.get("out")) or schema_effect(target)):
        inplace = True   # it writes its out= tensors or what its schema marks, whatever it returns (op_writes.py)
    if not inplace and not _has_tensor(result) and not is_symbolic(result):
        if shapes.unbound_unbacked():
            unsupported(f"{name}() made a data-dependent value the trace cannot keep")
        shapes.refuse_guesses_since(mark, name)
        if result is None and not method and (target in ONCE_PER_PROCESS or target in NONE_IS_A_VALUE):
            return tx.wrap_constant(None)
        if result is None:
            unsupported(f"{name}() returns None (a side effect the graph cannot keep)")
        return tx.wrap_constant(result)
    out = tx.output
    mutated = written(target, args, kwargs, inplace)
    if _mutates_attribute_tensor(out, mutated):
        # A graph input read through an object (a module's buffer) mutated in place, directly or
        # through a view: pinned by identity, so another instance whose names alias otherwise does
        # not share the graph.
        out.pin_modules_by_identity()
    if method and inplace:
        fn = getattr(torch.Tensor, target)
        mark_side_effect(fn)
        node = out.create_node("call_function", fn, fx_args, fx_kwargs)
    elif method:
        node = out.create_node("call_method", target, fx_args, fx_kwargs)
    else:
        node = out.create_node("call_function", target, fx_args, fx_kwargs)
        if inplace:
            mark_call_side_effect(node)
    shapes.record(node, result)   # the unbacked symbols it made are read from this node
    if result is None:
        return ConstantVariable(None)
    return wrap_op_result(tx, node, result)


# A Python number type where torch takes a dtype (`x.to(float)`): the dtype torch's argument parser
# makes of it, which FX can write in a graph's code (a bare `bool` it cannot).
_TYPE_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def _fx_dtype(arg):
    return _TYPE_DTYPES[arg] if type(arg) is type and arg in _TYPE_DTYPES else arg


def _mutates_attribute_tensor(out, mutated) -> bool:
    """Whether a tensor in `mutated` is, or is a view of, a tensor the trace read through an
    attribute (its example shares that tensor's storage)."""
    mutated = [a for a in mutated if isinstance(a, TensorVariable)]
    if not mutated or out.modules_by_identity:
        return False
    if any(isinstance(a.source, AttrSource) for a in mutated):
        return True
    storages = {_storage_id(a.example) for a in mutated} - {None}
    return any(isinstance(v, TensorVariable) and isinstance(v.source, AttrSource)
               and _storage_id(v.example) in storages for v in list(out.by_source.values()))


def _storage_id(t):
    try:
        return t.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 - no storage (a sparse or nested tensor): not compared
        return None


def wrap_op_result(tx, node, value) -> VariableTracker:
    import operator
    out = tx.output
    if isinstance(value, torch.Tensor):
        return TensorVariable(out, value, node)
    if is_symbolic(value) and not isinstance(value, (tuple, list)):
        return wrap_symbolic(out, node, value)
    if isinstance(value, (tuple, list)):
        items = []
        for i, v in enumerate(value):
            if isinstance(v, torch.Tensor):
                items.append(TensorVariable(
                    out, v, out.create_node("call_function", operator.getitem, (node, i), {})))
            elif is_symbolic(v) and not isinstance(v, (tuple, list)):
                items.append(wrap_symbolic(out, out.create_node("call_function", operator.getitem, (node, i), {}), v))
            elif _has_tensor(v):
                unsupported("nested tensor containers in an op result")
            else:
                items.append(tx.wrap_constant(v))
        if isinstance(value, list):
            return ListVariable(items)
        fields = getattr(type(value), "__match_args__", None)
        return TupleVariable(items, fields=list(fields) if fields else None, cls=type(value))
    unsupported(f"an op returned a {type(value).__name__}")


def _torch_callable_ids() -> frozenset:
    # torch's own callables in its public namespaces; not what those modules import from others
    # (`torch.get_origin` is typing's, `torch.nn.functional.Optional` typing's special form).
    spaces = [torch, torch.nn.functional, torch.linalg, torch.fft, torch.special, torch.nn.init]
    return frozenset(id(v) for ns in spaces for v in vars(ns).values()
                     if callable(v) and not isinstance(v, type) and _is_torch_module(getattr(v, "__module__", None)))


def _is_torch_module(mod) -> bool:
    return mod is None or mod == "torch" or mod.startswith("torch.")


_TORCH_IDS = _torch_callable_ids()


def is_torch_callable(value) -> bool:
    if isinstance(value, type):
        return False
    if id(value) in _TORCH_IDS:
        return True
    if isinstance(value, types.MethodType):
        # A Python function bound to an object (a module's `forward`, a distribution's `rsample`):
        # the object is state the graph would not see (its parameters would get no gradient).
        # Wrapped as a method: its function and its object, each through its own source.
        return False
    objclass = getattr(value, "__objclass__", None)
    if isinstance(objclass, type) and issubclass(objclass, torch._C.TensorBase):
        return callable(value)   # a C method; a getset descriptor (`torch.Tensor.shape`) is no function
    mod = getattr(value, "__module__", None) or ""
    return callable(value) and (mod == "torch" or mod.startswith("torch.")) and _reachable_by_name(value, mod)


# Modules whose wrappers around torch's own functions call them unchanged, so that the wrapped
# function, named in the graph, does what the wrapper does: torch._disable_dynamo (torch._compile),
# which importing torch._dynamo puts around torch.manual_seed and friends.
TRANSPARENT_WRAPPER_MODULES = frozenset({"torch._compile"})


def _reachable_by_name(value, module_name: str) -> bool:
    """Whether `value` is what the graph's code names it by. FX emits a torch function as
    `<__module__>.<__name__>` (a Tensor method as `torch.Tensor.<name>`, `torch._ops.<ns>` as
    `torch.ops.<ns>`), and `functools.wraps` copies `__module__` and `__name__` from the wrapped
    function: a wrapper made at run time (torch.vmap's, a decorator's) that calls itself
    `torch.sum` is not torch.sum, and a node calling it by that name called the unbatched op, or a
    name that does not exist. Only Python functions are judged so: torch's C functions and op
    objects (torch.ops.aten.add) name themselves."""
    if not isinstance(value, types.FunctionType) or module_name.startswith("torch._ops"):
        return True
    while True:
        name = value.__name__
        if module_name == "torch._tensor" and value.__qualname__ == f"Tensor.{name}":
            if inspect.getattr_static(torch.Tensor, name, None) is value:
                return True
        elif getattr(sys.modules.get(module_name), name, None) is value:
            return True
        wrapped = getattr(value, "__wrapped__", None)
        if value.__globals__.get("__name__") not in TRANSPARENT_WRAPPER_MODULES or \
                not isinstance(wrapped, types.FunctionType):
            return False
        value = wrapped   # the node calls the function it wraps, which does the same


def is_tensor_method(value) -> bool:
    """A C method of torch's tensor base type read from the class (`torch.Tensor.add_`,
    `torch.Tensor.view`): called with a tensor first, it is that tensor's method."""
    return isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        value.__objclass__ is torch._C.TensorBase


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
# The tensor types a graph input may have. A subclass of torch.Tensor (DTensor, the
# AsyncCollectiveTensor torch.distributed's functional collectives return, a user's
# __torch_function__ or __torch_dispatch__ subclass, a quantized weight) carries behaviour its fake
# example does not: traced as a plain tensor, its graph returned plain tensors where eager returned
# the subclass, dropped autograd history under AOTAutograd, or raised in the backend. It is not
# read into a graph: where it is read, the graph breaks, and it is used at run time as written.
GRAPH_INPUT_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


def wrap_tensor(tx, value, source, g):
    if source is None:
        unsupported("a tensor that is not reachable from the frame (cannot be a graph input)")
    substitute = tx.output.param_substitutes.get(id(value))
    if substitute is not None:   # an FSDP2 block's sharded parameter: its gathered whole (fsdp2.py)
        return substitute
    if type(value) not in GRAPH_INPUT_TENSOR_TYPES:
        unsupported(f"a tensor of subclass {type(value).__module__}.{type(value).__qualname__} (tensor "
                    "subclasses are not traced: the graph would treat it as a plain tensor)")
    out = tx.output
    out.add_guard(source, GuardKind.TENSOR_MATCH, value)
    known = out.by_id.get(id(value))
    if known is not None:
        out.add_guard(source, GuardKind.SAME_AS, known.source)
        return known
    plan = out.frame_plan
    is_argument = not isinstance(value, torch.nn.Parameter) and source.is_frame_input()
    choices = plan.choose(source, value, is_argument=is_argument) if plan is not None else None
    # A fake tensor, with symbolic sizes where the plan says (frontend/dynamic.py, fake_shapes.py). A
    # static plan still records the sizes seen (automatic dynamic shapes) but makes no symbol.
    symbolic = plan is not None and plan.symbolic
    example = out.fake_shapes.fakeify(value, source, choices if symbolic else None)
    vt = TensorVariable(out, example, source=source, real=value)
    out.by_id[id(value)] = vt
    out.keepalive.append(value)
    return vt


def wrap_torch_function(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    return TorchFunctionVariable(value, source)
