"""Opaque calls: a module or function called as one node of the graph instead of being traced.

Who: the built-in modules of proxies.OPAQUE_BUILTIN_MODULES (LSTM, MultiheadAttention, the
Transformer family) and what the user marked with tjc.allow_in_graph. The node calls a proxy
(frontend/proxies.py), never the user's object: a module becomes a `call_module` of a submodule of the
GraphModule (so AOTAutograd sees its parameters as the graph's own and differentiates them), a
function a `call_function` of a function proxy.

The node's example result comes from running the call on the example inputs (fake tensors); a
module runs with fake copies of its parameters and buffers (torch.func.functional_call), so state
it updates in forward (BatchNorm's running statistics) is not updated an extra time by tracing and
its weights cost no memory. An allow_in_graph function runs on the fake examples too, under the
trace's fake mode (as torch.compile runs it): its Python code runs while tracing, its tensor ops
touch no data.

Guards: the module and every submodule by identity and training flag (builder.py), their
parameters and buffers by identity and tensor properties, every other attribute in their instance
dicts by value (or identity, for functions), their dicts' keys, and that none of them has hooks
(a module with hooks is refused: its hooks would run once more while tracing). The backend may
compile through the call (aot_eager, inductor), so nothing the call reads may change unguarded.
Every module node carries DICT_TAGS (builder.py): while none of the tree's dicts changed, only the
tensors' guards run on a call (csrc/guards/dict_tags.h).
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch.utils._pytree import tree_map_only

from ....backends import tracing_for_eager
from ....frontend.proxies import DERIVED_ATTRIBUTES, builtin_opaque_reason, function_proxy, module_proxy, preserving_derived_state
from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import GuardKind
from ..base import unsupported
from ..constant import ConstantVariable
from ..collections.containers import ListVariable, TupleVariable
from ..collections.dicts import DictVariable
from .module_hooks import guard_no_hooks, has_hooks
from ..torch_objects.tensor import TensorVariable

# Constants that may appear as arguments of an opaque node: values fx prints, never user objects
# (the graph must not hold those).
_CONSTANT_ARGS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis), slice,
                  torch.dtype, torch.device, torch.layout, torch.memory_format)
# nn.Module's own instance state: read by __call__ and __getattr__, guarded on its own terms below
# (the hook dicts, the parameter/buffer/submodule stores) or irrelevant to forward (state_dict
# hooks, non-persistent buffer names).
_MODULE_OWN_STATE = frozenset(vars(nn.Module()))


def call_opaque_module(tx, mv, args: list, kwargs: dict, why: str):
    """`mv.module(*args, **kwargs)` as one call_module node (mv: the NNModuleVariable)."""
    module = mv.module
    for name, sub in module.named_modules(remove_duplicate=False):
        if has_hooks(sub):
            unsupported(f"opaque module {type(module).__name__} ({why}): "
                        f"{name or 'the module'} has hooks, which would run while tracing")
    _guard_module_tree(tx, mv, guard_no_hooks)
    fx_args, fx_kwargs, ex_args, ex_kwargs = _arguments(type(module).__name__, args, kwargs)
    _refuse_lstm_aot(module, ex_args)
    shapes = tx.output.fake_shapes
    copies, state = {}, {}   # a tensor under two names (tied weights) gets one copy
    for name, t in [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]:
        if id(t) not in copies:
            copies[id(t)] = shapes.fake_copy(t)
        state[name] = copies[id(t)]
    try:
        with preserving_derived_state(module.modules()), shapes.running():
            result = torch.func.functional_call(module, state, tuple(ex_args), ex_kwargs)
    except _DATA_DEPENDENT as e:
        shapes.unbound_unbacked()   # what the failed question made is nobody's
        result = _result_from_placeholder_data(shapes, module, ex_args, ex_kwargs, e)
    except Exception as e:  # the original call raises too: let it run eagerly and raise there
        unsupported(f"opaque module {type(module).__name__} raised {type(e).__name__}: {e}")
    if shapes.unbound_unbacked():
        unsupported(f"opaque module {type(module).__name__} made a data-dependent size (an unbacked "
                    "symbol) the graph would not bind: it runs eagerly")
    out = tx.output
    target = out.add_submodule(module, module_proxy)
    node = out.create_node("call_module", target, fx_args, fx_kwargs)
    return _wrap_result(out, node, result, type(module).__name__)


def _data_dependent_errors() -> tuple:
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode


_DATA_DEPENDENT = _data_dependent_errors()


def _result_from_placeholder_data(shapes, module, ex_args, ex_kwargs, error):
    """The example result of a built-in opaque module whose forward asks a question of its inputs'
    values, which fake tensors cannot answer (TransformerEncoder compares its mask with a causal
    one to pick a kernel; MultiheadAttention picks its fast path). For torch's own modules of
    proxies.OPAQUE_BUILTIN_MODULES, whose output sizes, dtypes and strides follow from their
    inputs' and never from values, the call runs once on zero-filled tensors of the inputs'
    sizes with the module's own parameters, without autograd, and its result's properties
    become the example (a fake tensor again). It costs the activations' memory, never a copy of
    the weights, and runs nothing of the user's. A user's allow_in_graph module or function gets
    no such pass: it is a graph break, as under torch.compile."""
    if builtin_opaque_reason(type(module)) is None:
        unsupported(f"opaque module {type(module).__name__} reads tensor values, which tracing on "
                    f"fake tensors cannot answer ({type(error).__name__}): it runs eagerly")

    def zeros_like_example(t):
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).zero_()

    try:
        with torch.no_grad(), preserving_derived_state(module.modules()):
            real = module(*tree_map_only(torch.Tensor, zeros_like_example, list(ex_args)),
                          **tree_map_only(torch.Tensor, zeros_like_example, ex_kwargs))
    except Exception as e:  # noqa: BLE001
        unsupported(f"opaque module {type(module).__name__} raised {type(e).__name__}: {e}")
    needs_grad = torch.is_grad_enabled() and (
        any(p.requires_grad for p in module.parameters()) or
        any(isinstance(a, torch.Tensor) and a.requires_grad for a in [*ex_args, *ex_kwargs.values()]))

    def fake(t):
        t = shapes.fake_copy(t)
        return t.requires_grad_(True) if needs_grad and (t.is_floating_point() or t.is_complex()) else t
    return tree_map_only(torch.Tensor, fake, real)


def _refuse_lstm_aot(module, ex_args) -> None:
    """An LSTM whose parameters need gradients and whose input does not, under a backend that
    compiles through AOTAutograd (aot_eager, inductor): torch 2.13 compiles it, then fails at the
    first call (aot_eager saves a None for backward; inductor rejects mkldnn_rnn_layer's
    arguments), where eager runs. It stays a graph break there: the LSTM runs eagerly between two
    graphs. (The input's requires_grad is pinned by its TENSOR_MATCH guard; the grad mode by
    GLOBAL_STATE.)"""
    if type(module) is not nn.LSTM or tracing_for_eager() or not torch.is_grad_enabled():
        return
    first = ex_args[0] if ex_args else None
    if isinstance(first, torch.Tensor) and not first.requires_grad and \
            any(p.requires_grad for p in module.parameters()):
        unsupported("an LSTM whose input needs no gradient, under a backend that compiles through "
                    "AOTAutograd (it fails at run time there in torch 2.13): it runs eagerly")


def call_opaque_function(tx, fv, args: list, kwargs: dict):
    """`fv.fn(*args, **kwargs)` for a function marked with allow_in_graph, as one call_function node."""
    fn = fv.fn
    if fv.source is None:
        unsupported(f"allow_in_graph function {fn.__qualname__} made while tracing (no source to guard)")
    fv.as_python_constant()   # guards the function by identity (a closure made per call too)
    for name in ("__defaults__", "__kwdefaults__"):   # the proxy copies them: guarded by value
        tx.wrap(getattr(fn, name), AttrSource(fv.source, name)).require_guardable(fn.__qualname__, name)
    fx_args, fx_kwargs, ex_args, ex_kwargs = _arguments(fn.__qualname__, args, kwargs)
    try:
        with tx.output.fake_shapes.running():
            result = fn(*ex_args, **ex_kwargs)
    except _DATA_DEPENDENT as e:
        unsupported(f"allow_in_graph function {fn.__qualname__} reads tensor values, which tracing "
                    f"on fake tensors cannot answer ({type(e).__name__}): it runs eagerly")
    except Exception as e:
        unsupported(f"allow_in_graph function {fn.__qualname__} raised {type(e).__name__}: {e}")
    if tx.output.fake_shapes.unbound_unbacked():
        unsupported(f"allow_in_graph function {fn.__qualname__} made a data-dependent size (an "
                    "unbacked symbol) the graph would not bind: it runs eagerly")
    out = tx.output
    node = out.create_node("call_function", function_proxy(fn), fx_args, fx_kwargs)
    return _wrap_result(out, node, result, fn.__qualname__)


def _arguments(what: str, args, kwargs):
    for a in [*args, *kwargs.values()]:
        _check_argument(what, a)
    return (tuple(a.as_fx_arg() for a in args), {k: v.as_fx_arg() for k, v in kwargs.items()},
            [a.as_example() for a in args], {k: v.as_example() for k, v in kwargs.items()})


def _check_argument(what: str, vt) -> None:
    """Only tensors, printable constants and containers of them become arguments of the node."""
    if isinstance(vt, TensorVariable):
        return
    if isinstance(vt, (TupleVariable, ListVariable)):
        for item in vt.items:
            _check_argument(what, item)
        return
    if isinstance(vt, DictVariable):
        for item in vt.items.values():
            _check_argument(what, item)
        return
    if isinstance(vt, ConstantVariable) and isinstance(vt.value, _CONSTANT_ARGS):
        return
    unsupported(f"opaque call of {what} with argument {vt} (only tensors and constants are passed)")


def _wrap_result(out, node, value, what: str):
    """Trackers for the call's result: tensors (getitem nodes into tuples), None, nested tuples."""
    import operator

    if isinstance(value, torch.Tensor):
        return TensorVariable(out, value, node)
    if value is None:
        return ConstantVariable(None)
    if type(value) in (tuple, list):
        items = [_wrap_result(out, out.create_node("call_function", operator.getitem, (node, i), {}), v, what)
                 for i, v in enumerate(value)]
        return ListVariable(items) if type(value) is list else TupleVariable(items)
    unsupported(f"opaque call of {what} returned a {type(value).__name__} (only tensors, None, "
                "tuples and lists of them)")


def _guard_module_tree(tx, mv, guard_no_hooks) -> None:
    """Guards everything a call of `mv.module` reads from its instance dicts (see the docstring)."""
    out = tx.output
    module, source = mv.module, mv.source
    mv.require_identity()   # the graph holds this module's proxy: its entry is for this object
    guard_no_hooks(tx, mv)
    d = vars(module)
    out.add_guard(AttrSource(source, "__dict__"), GuardKind.DICT_KEYS, tuple(d))
    for store in ("_parameters", "_buffers"):
        store_source = ItemSource(AttrSource(source, "__dict__"), store)
        out.add_guard(store_source, GuardKind.DICT_KEYS, tuple(d[store]))
        for name, t in d[store].items():
            child = AttrSource(source, name)
            tx.wrap(t, child)   # TENSOR_MATCH (None: its value)
            if t is not None:
                out.add_guard(child, GuardKind.ID_MATCH, t)
    out.add_guard(ItemSource(AttrSource(source, "__dict__"), "_modules"), GuardKind.DICT_KEYS,
                  tuple(d["_modules"]))
    for name, sub in d["_modules"].items():
        sv = tx.wrap(sub, AttrSource(source, name))   # TYPE_MATCH, training; ID_MATCH below
        if sub is not None:
            _guard_module_tree(tx, sv, guard_no_hooks)
    for name, value in d.items():
        if name in _MODULE_OWN_STATE or name in DERIVED_ATTRIBUTES:
            continue
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
            # Neither parameter nor buffer: AOTAutograd would bake its data into the graph.
            unsupported(f"opaque module {type(module).__name__} holds a tensor attribute {name!r} "
                        "that is neither a parameter nor a buffer")
        tx.wrap(value, AttrSource(source, name)).require_guardable(f"module {type(module).__name__}", name)
