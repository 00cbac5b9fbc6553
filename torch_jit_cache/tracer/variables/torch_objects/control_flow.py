"""torch's higher-order control flow traced as one node: torch.cond and control_flow.map.

`torch.cond(pred, true_fn, false_fn, operands)` runs one of two functions on tensors, chosen by a
value the trace does not know (a tensor, a symbolic bool). Each function is traced into a graph of
its own (a *body*, `OutputGraph.subgraph`) with the operands as placeholders; the outer graph gets
one `torch.ops.higher_order.cond(pred, true_body, false_body, operands)` node over the two bodies,
registered as submodules, as torch.compile records it. `map(f, xs, *args)` is traced the same way
over one slice of `xs` (`map_impl(body, xs, args)`).

A body may use tensors of the outer trace (a closure's, a module's parameter): each such node is
*lifted*, an extra placeholder of the body and an extra operand of the op, in the same order for
both branches. Guards are those of any traced read: the bodies are traced by the same tracer.

A body runs at run time only on the branch taken, while both are traced here, so a body that does
anything the graph cannot keep is refused and the call runs as written (torch's own cond, which
compiles its branches itself):
- a change to Python state made before it (side_effects.SPECULATION: a container, a cell, an
  attribute; anything the side-effect log records),
- an impure node (an in-place op, a grad-mode or autocast switch, a random op),
- an output that is not a tensor, or that aliases an input (eager's cond refuses those too),
- branches whose outputs differ in structure or in tensor metadata (torch would merge their sizes
  into new symbols: not modelled),
- any value of a body used outside it (OutputGraph.refuse_escaped).
A constant predicate runs the branch it picks, inlined, as torch.cond does in eager.
"""
from __future__ import annotations

import sys

import torch
import torch.fx

from ....guard.trace_result import GuardKind, Unsupported
from ...output_graph import impure_node
from ...side_effects import SPECULATION
from ..base import CallableVariable, unsupported
from ..constant import ConstantVariable
from ..collections.containers import ListVariable, TupleVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable, _storage_id, wrap_op_result


def _entry(module_name: str, name: str):
    module = sys.modules.get(module_name)
    return getattr(module, name, None) if module is not None else None


def _entries() -> dict:
    """The entry points of the higher-order ops traced here -> their handler: the Python functions
    users call and the operators themselves (what those functions call, with Python callables)."""
    import torch._higher_order_ops.cond   # noqa: F401 - torch.cond's module
    import torch._higher_order_ops.map    # noqa: F401
    found = {}
    for module_name, name, handler in (("torch._higher_order_ops.cond", "cond", _call_cond),
                                       ("torch._higher_order_ops.map", "map", _call_map)):
        fn = _entry(module_name, name)
        if fn is not None:
            found[fn] = handler
    for name, handler in (("cond", _call_cond_op), ("map_impl", _call_map_impl)):
        op = getattr(torch.ops.higher_order, name, None)
        if op is not None:
            found[op] = handler
    return found


_ENTRIES = None


def is_higher_order_entry(value) -> bool:
    global _ENTRIES
    if _ENTRIES is None:
        _ENTRIES = _entries()
    # by identity: `value in _ENTRIES` would run a user object's own __hash__ and __eq__
    return any(value is entry for entry in _ENTRIES)


def wrap_higher_order(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    return HigherOrderOpVariable(value, source)


class HigherOrderOpVariable(CallableVariable):
    """torch.cond or control_flow.map: calls traced into bodies (module docstring)."""

    def call_function(self, tx, args, kwargs):
        return _ENTRIES[self.fn](tx, list(args), dict(kwargs))

    def __repr__(self):
        return f"HigherOrderOpVariable({getattr(self.fn, '__name__', self.fn)})"

    def require_guardable(self, what, name):
        pass   # by identity


# -- bodies ----------------------------------------------------------------------------------------
class Body:
    """One traced body: its graph, the submodules its nodes call, the flat output trackers and
    the structure to rebuild them in (`shape`), and the outer nodes it reads (lifted)."""

    def __init__(self, graph, submodules, outputs, shape, n_inputs):
        self.graph, self.submodules, self.outputs, self.shape = graph, submodules, outputs, shape
        self.n_inputs = n_inputs
        self.outer = _outer_nodes(graph)


def _flatten(v, what: str, leaves: list):
    """The structure of `v` (tensor leaves, tuples and lists of them), its leaves appended."""
    if isinstance(v, TensorVariable):
        leaves.append(v)
        return "t"
    if isinstance(v, (TupleVariable, ListVariable)) and v.cls is None:
        kind = "tuple" if isinstance(v, TupleVariable) else "list"
        return (kind, tuple(_flatten(i, what, leaves) for i in v.items))
    unsupported(f"{what} returns a {type(v).__name__}, not tensors (in tuples or lists)")


def _rebuild(shape, leaves):
    if shape == "t":
        return next(leaves)
    kind, items = shape
    built = [_rebuild(s, leaves) for s in items]
    return TupleVariable(built) if kind == "tuple" else ListVariable(built)


def _outer_nodes(graph) -> list:
    """The nodes of other (enclosing) graphs that `graph`'s nodes use, in order of first use."""
    seen = {}
    for node in graph.nodes:
        for used in node.all_input_nodes:
            if used.graph is not graph and used not in seen:
                seen[used] = None
    return list(seen)


def trace_body(tx, call, inputs: list, what: str) -> Body:
    """`call(trackers)` traced into a body, given one tracker per example tensor of `inputs`
    (the body's placeholders)."""
    out = tx.output
    entries = (dict(out.by_source), dict(out.by_id))
    log = list(out.side_effects._log)
    born = set()
    SPECULATION.append(born)
    try:
        with out.subgraph() as (graph, submodules):
            args = []
            for i, example in enumerate(inputs):
                node = graph.placeholder(f"arg{i}")
                node.meta["example_value"] = example
                args.append(TensorVariable(out, example, node))
            result = call(args)
            leaves = []
            shape = _flatten(result, what, leaves)
            nodes = [leaf.as_node() for leaf in leaves]
            _check_body(graph, nodes, leaves, what)
            graph.output(tuple(nodes))
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - the tracer failed inside the body: run as written
        raise Unsupported(f"{what} could not be traced: {type(e).__name__}: {e}") from None
    finally:
        SPECULATION.pop()
        _forget_body_trackers(out, graph if "graph" in locals() else None, entries)
    if len(out.side_effects._log) != len(log) or any(a is not b for a, b in zip(out.side_effects._log, log)):
        unsupported(f"{what} changes Python state outside it (a side effect)")
    return Body(graph, submodules, leaves, shape, len(inputs))


def _check_body(graph, nodes, leaves, what):
    inputs = [n for n in graph.nodes if n.op == "placeholder"]
    for node in graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if node.op == "call_module" or impure_node(node):
            unsupported(f"{what} has an op the branch-wise graph cannot keep ({node.target}: in place, random, "
                        "a mode switch or a module call)")
    input_storages = {_storage_id(n.meta.get("example_value")) for n in inputs} - {None}
    for node, leaf in zip(nodes, leaves):
        if node.graph is not graph or node.op == "placeholder":
            unsupported(f"{what} returns one of its inputs or an outer tensor (aliasing)")
        if _storage_id(leaf.example) in input_storages:
            unsupported(f"{what} returns a view of one of its inputs (aliasing)")


def _forget_body_trackers(out, graph, entries):
    """Drop the tracker caches' entries made inside the body whose node is the body's."""
    by_source, by_id = entries
    for cache, before in ((out.by_source, by_source), (out.by_id, by_id)):
        for key in [k for k in cache if k not in before]:
            node = getattr(cache[key], "_node", None) or getattr(cache[key], "node", None)
            if graph is None or isinstance(node, torch.fx.Node) and node.graph is graph:
                del cache[key]


def _finish_bodies(tx, bodies: list, name: str) -> tuple:
    """Lift every outer node any body uses into each body (same order), make the GraphModules,
    register them on the current graph; returns (get_attr nodes, lifted outer nodes)."""
    out = tx.output
    lifted = []
    for body in bodies:
        lifted += [n for n in body.outer if n not in lifted]
    attrs = []
    for k, body in enumerate(bodies):
        graph = body.graph
        first = next(n for n in graph.nodes if n.op != "placeholder")
        mapping = {}
        for i, outer in enumerate(lifted):
            with graph.inserting_before(first):
                ph = graph.placeholder(f"lifted{i}")
            ph.meta["example_value"] = outer.meta.get("example_value")
            mapping[outer] = ph
        for node in list(graph.nodes):
            if node.op != "placeholder":
                node.args = torch.fx.node.map_arg(node.args, lambda n: mapping.get(n, n))
                node.kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: mapping.get(n, n))
        root = torch.nn.Module()
        for sub_name, sub in body.submodules.items():
            root.add_module(sub_name, sub)
        gm = torch.fx.GraphModule(root, graph)
        gm.graph.lint()
        index = len(out.submodules)
        attr_name = f"{name}_{k}_{index}"
        out.submodules[attr_name] = gm
        attrs.append(attr_name)
    return attrs, lifted


def _node_examples(nodes) -> tuple:
    return tuple(n.meta["example_value"] for n in nodes)


def _same_meta(a: Body, b: Body, what: str):
    if a.shape != b.shape:
        unsupported(f"{what}: the branches return different structures")
    for x, y in zip(a.outputs, b.outputs):
        ex, ey = x.example, y.example
        if (ex.dtype, ex.device, ex.layout) != (ey.dtype, ey.device, ey.layout) \
                or tuple(ex.shape) != tuple(ey.shape) or ex.stride() != ey.stride():
            unsupported(f"{what}: the branches return tensors of different sizes, strides or dtypes")


def _operands(v, what: str) -> list:
    if isinstance(v, (TupleVariable, ListVariable)):
        items = list(v.items)
    else:
        unsupported(f"{what}: operands that are not a tuple or list")
    if not all(isinstance(i, TensorVariable) for i in items):
        unsupported(f"{what}: operands that are not all tensors")
    return items


def _emit(tx, target, args: tuple, example_args: tuple, shape):
    """The op's node in the current graph; its example from running it on the examples (fake)."""
    out = tx.output
    try:
        with out.fake_shapes.running():
            result = target(*example_args)
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - torch refuses the op on these bodies: eager would too
        unsupported(f"{target} raised {type(e).__name__} while traced: {e}")
    if not isinstance(result, (tuple, list)) or not all(isinstance(r, torch.Tensor) for r in result):
        unsupported(f"{target} made a {type(result).__name__} while traced")
    node = out.create_node("call_function", target, args, {})
    out.fake_shapes.record(node, result)
    flat = wrap_op_result(tx, node, tuple(result))
    return _rebuild(shape, iter(flat.items))


# -- torch.cond ------------------------------------------------------------------------------------
def _bind(args, kwargs, names):
    bound = dict(zip(names, args))
    if len(args) > len(names):
        unsupported("too many arguments")
    for k, v in kwargs.items():
        if k not in names or k in bound:
            unsupported(f"argument {k!r}")
        bound[k] = v
    return bound


def _call_cond(tx, args, kwargs):
    """torch.cond(pred, true_fn, false_fn, operands=())."""
    bound = _bind(args, kwargs, ("pred", "true_fn", "false_fn", "operands"))
    if not {"pred", "true_fn", "false_fn"} <= set(bound):
        unsupported("torch.cond() without pred, true_fn and false_fn")
    return _cond(tx, bound["pred"], bound["true_fn"], bound["false_fn"],
                 _operands(bound.get("operands", TupleVariable([])), "torch.cond"))


def _call_cond_op(tx, args, kwargs):
    """torch.ops.higher_order.cond(pred, true_fn, false_fn, operands), as torch.cond calls it."""
    bound = _bind(args, kwargs, ("pred", "true_fn", "false_fn", "operands"))
    if len(bound) != 4:
        unsupported("torch.ops.higher_order.cond() without its four arguments")
    return _cond(tx, bound["pred"], bound["true_fn"], bound["false_fn"], _operands(bound["operands"], "cond"))


def _cond(tx, pred, true_fn, false_fn, operands):
    if isinstance(pred, ConstantVariable):
        # As torch.cond does in eager: the branch the constant picks, called.
        if not isinstance(pred.as_python_constant(), (bool, int, float)):
            unsupported("torch.cond() with a predicate that is not a bool, a tensor or a symbolic bool")
        return tx.call(true_fn if pred.as_python_constant() else false_fn, operands, {})
    if isinstance(pred, TensorVariable):
        if pred.example.numel() != 1:
            unsupported("torch.cond() with a predicate tensor of more than one element (eager raises)")
    elif not isinstance(pred, SymNodeVariable) or not isinstance(pred.example, torch.SymBool):
        unsupported(f"torch.cond() with a {type(pred).__name__} predicate")
    examples = [o.example for o in operands]
    true_body = trace_body(tx, lambda args: tx.call(true_fn, args, {}), examples, "torch.cond's true branch")
    false_body = trace_body(tx, lambda args: tx.call(false_fn, args, {}), examples, "torch.cond's false branch")
    _same_meta(true_body, false_body, "torch.cond")
    attrs, lifted = _finish_bodies(tx, [true_body, false_body], "cond_branch")
    out = tx.output
    gets = [out.create_node("get_attr", a, (), {}) for a in attrs]
    inputs = tuple([o.as_node() for o in operands] + lifted)
    gms = [out.submodules[a] for a in attrs]
    return _emit(tx, torch.ops.higher_order.cond, (pred.as_fx_arg(), gets[0], gets[1], inputs),
                 (pred.as_example(), gms[0], gms[1], _node_examples(inputs)), true_body.shape)


# -- control_flow.map ------------------------------------------------------------------------------
def _call_map(tx, args, kwargs):
    """control_flow.map(f, xs, *args): f(x, *args) for each x along xs's first dimension, stacked."""
    if kwargs or len(args) < 2:
        unsupported("map() with keyword arguments or without xs")
    fn, xs, extra = args[0], args[1], list(args[2:])
    if not isinstance(xs, TensorVariable):
        unsupported("map() over something other than one tensor")
    return _map(tx, lambda slices, pos: tx.call(fn, [*slices, *pos], {}), [xs], extra)


def _call_map_impl(tx, args, kwargs):
    """torch.ops.higher_order.map_impl(f, xs, pos_args): f(*slices, *pos_args), as map calls it."""
    bound = _bind(args, kwargs, ("f", "xs", "pos_args"))
    if len(bound) != 3:
        unsupported("map_impl() without its three arguments")
    fn = bound["f"]
    return _map(tx, lambda slices, pos: tx.call(fn, [*slices, *pos], {}),
                _operands(bound["xs"], "map_impl"), _operands(bound["pos_args"], "map_impl"))


def _map(tx, call, xs: list, extra: list):
    if not all(isinstance(a, TensorVariable) for a in [*xs, *extra]):
        unsupported("map() with arguments that are not tensors")
    sizes = {x.example.shape[0] if x.example.dim() else None for x in xs}
    if len(sizes) != 1 or not isinstance(next(iter(sizes)), int) or next(iter(sizes)) == 0:
        unsupported("map() over tensors without one static, non-empty first dimension")
    with tx.output.fake_shapes.running():
        steps = [x.example[0].clone() for x in xs]
    n = len(xs)
    body = trace_body(tx, lambda args: call(args[:n], args[n:]), steps + [a.example for a in extra], "map's body")
    attrs, lifted = _finish_bodies(tx, [body], "map_body")
    out = tx.output
    get = out.create_node("get_attr", attrs[0], (), {})
    xs_nodes = tuple(x.as_node() for x in xs)
    pos = tuple([a.as_node() for a in extra] + lifted)
    return _emit(tx, torch.ops.higher_order.map_impl, (get, xs_nodes, pos),
                 (out.submodules[attrs[0]], _node_examples(xs_nodes), _node_examples(pos)), body.shape)
