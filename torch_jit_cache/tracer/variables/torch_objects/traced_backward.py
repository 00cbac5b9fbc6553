"""Autograd run inside a graph: `t.requires_grad_()` on a tensor the trace made, `loss.backward()`,
and the `.grad` / `.is_leaf` reads that follow them.

Only for a backend that runs the graph as traced (`backends.tracing_for_eager`: the "eager" backend,
a counting backend); one that compiles through AOTAutograd cannot keep autograd calls in a forward
graph, so there both still break, as before.

- `t.requires_grad_(flag)` on a tensor the graph made that is a leaf (no grad_fn) and not a frame
  tensor itself: an in-place node. The trace's example changes with it, so what follows
  (`t * 3` has a grad_fn, `t.requires_grad` is True) is traced as eager computes it. A frame
  tensor's flag (an argument, a parameter) still breaks: its TENSOR_MATCH pins the flag.
- `loss.backward(gradient, retain_graph, create_graph)`: a node of its own, kept (it returns None),
  that runs torch's backward on the graph's tensors when the graph runs, so every leaf it reaches,
  the frame's included, accumulates its gradient as in eager. The trace runs it on the examples
  too, so the fake leaves it reaches get a gradient of the right shape. `inputs=` breaks, and so
  does a backward after the trace stored some tensor's `.grad` (that store is replayed after the
  graph, after the backward that should see it).
- after a backward in the graph, `t.grad` is a node that reads the gradient where it stands at that
  point of the graph (`tensor_grad`), where the trace's example has one; a tensor the graph made
  whose example has none has none (a new leaf the backward did not reach); a frame tensor whose
  example has none breaks (its gradient may come from outside the trace).
- `t.is_leaf` of a tensor the graph made: its example's, which follows the requires_grad flags the
  trace saw (frame tensors' are guarded); `t.grad_fn` of one that has none is None (one that has
  one breaks: an autograd node is no constant). A frame tensor that does not require grad (its
  TENSOR_MATCH says so) is a leaf without grad_fn; one that requires grad breaks.
- `t._grad` is `t.grad` (one getset under two names), for reads and stores.

tensor.py calls in with its tracker `t` and its `call_op` (this module sits below tensor.py).
"""
from __future__ import annotations

from ....backends import tracing_for_eager
from ..base import unsupported
from ..constant import ConstantVariable

METHODS = frozenset({"requires_grad_", "backward"})
_BACKWARD_KWARGS = ("gradient", "retain_graph", "create_graph")


def tensor_grad(t):
    """The graph node of `t.grad` read after a backward in the graph (kept where it stands: a later
    backward changes what it reads)."""
    return t.grad


def _made_by_graph(tx, t) -> bool:
    """A tensor the graph made that is not a frame tensor's very object (an in-place op's result)."""
    return t.source is None and not any(
        type(v) is type(t) and v.source is not None and v.example is t.example
        for v in list(tx.output.by_source.values()))


def call_method(tx, t, name, args, kwargs, call_op):
    if not tracing_for_eager():
        unsupported(f"data-dependent or side-effecting tensor operation {name}() (a backend that "
                    "compiles through AOTAutograd cannot keep it in the graph)")
    if name == "requires_grad_":
        return _requires_grad(tx, t, args, kwargs, call_op)
    return _backward(tx, t, args, kwargs, call_op)


def _requires_grad(tx, t, args, kwargs, call_op):
    flag = kwargs.get("requires_grad", args[0] if args else ConstantVariable(True))
    if len(args) + len(kwargs) > 1 or set(kwargs) - {"requires_grad"} or not flag.is_python_constant():
        unsupported("requires_grad_() with arguments other than one constant flag")
    if not _made_by_graph(tx, t):
        unsupported("requires_grad_() of a frame tensor (its flag is pinned by its guard)")
    if t.example.grad_fn is not None:
        unsupported("requires_grad_() of a tensor that has a grad_fn (not a leaf)")
    return call_op(tx, "requires_grad_", [t, ConstantVariable(bool(flag.as_python_constant()))], {},
                   method=True, effect=True)


def _backward(tx, t, args, kwargs, call_op):
    if set(kwargs) - set(_BACKWARD_KWARGS) or len(args) > len(_BACKWARD_KWARGS) or \
            any(k in kwargs for k in _BACKWARD_KWARGS[:len(args)]):
        unsupported("backward() with inputs= or arguments it does not take")
    named = dict(zip(_BACKWARD_KWARGS, args), **kwargs)
    for key in ("retain_graph", "create_graph"):
        if key in named and not named[key].is_python_constant():
            unsupported(f"backward() with {key} that is not a constant")
    gradient = named.get("gradient")
    if gradient is not None and not (gradient.is_python_constant() and gradient.as_python_constant() is None) \
            and getattr(gradient, "identity_family", None) != "tensor":
        unsupported("backward() with a gradient that is neither a tensor nor None")
    if tx.output.side_effects.stores_name("grad"):
        unsupported("backward() after the trace stored a tensor's .grad (replayed after the graph)")
    result = call_op(tx, "backward", [t], named, method=True, effect=True)
    tx.output.backward_in_graph = True
    return result


def grad_attr(tx, t, name, call_op, grad_before):
    """`t.is_leaf`, `t.grad_fn` where it is None, `t.grad` (`grad_before(tx)` until a backward ran
    in the graph)."""
    if name in ("is_leaf", "grad_fn"):
        if t.source is not None and t.real is not None and not t.real.requires_grad:
            # TENSOR_MATCH pins the flag: a tensor that does not require grad is a leaf
            return ConstantVariable(True if name == "is_leaf" else None)
        if not _made_by_graph(tx, t):
            unsupported(f"tensor attribute .{name} of a frame tensor that requires grad")
        if name == "is_leaf":
            return ConstantVariable(t.example.is_leaf)
        if t.example.grad_fn is not None:
            unsupported("tensor attribute .grad_fn of a graph tensor that has one (an autograd node)")
        return ConstantVariable(None)
    if not tx.output.backward_in_graph:
        return grad_before(tx)
    if t.example.grad is None:
        if _made_by_graph(tx, t):
            return ConstantVariable(None)
        unsupported("tensor attribute .grad of a frame tensor the graph's backward() did not reach")
    return call_op(tx, tensor_grad, [t], {}, effect=True)
