"""torch.distributed in the trace: collectives become functional-collective nodes; nothing runs.

Contract. While tracing, no collective is ever issued: a collective runs only when the
compiled graph (or the eager code around a graph break) runs, exactly as often as eager issues it,
so ranks that compile at different times (one rank's batch size changes) stay in step.

- Captured, as torch.compile does: `dist.all_reduce`, `all_gather_into_tensor`,
  `reduce_scatter_tensor` and `broadcast` become `torch.ops._c10d_functional.<op>` + `wait_tensor`
  and a `copy_` into the tensor the eager call writes, so the graph is functional up to that
  `copy_` (an input mutation aot_eager and inductor handle). The functional Python API
  (`_functional_collectives.all_reduce`, `all_gather_tensor`, `reduce_scatter_tensor`, `broadcast`,
  `wait_tensor`) becomes op + wait; `torch.ops._c10d_functional.<op>` is recorded as called (the
  user's own `wait_tensor` is its wait).
- `async_op=True` gives a work handle; its `.wait()` is the wait node and the `copy_`. A handle that
  outlives the trace (returned, or live at a graph break) cannot be rebuilt: the frame runs eagerly.
  A handle never waited still issues its collective (collective nodes are side-effectful for DCE).
- Autograd: eager's c10d ops bypass it, so the in-place API's nodes run with grad off where a
  tensor requires grad (its gradient is not reduced; a leaf parameter may be written). The
  functional API keeps torch's autograd formulas, as in eager.
- The group is passed to each node as its name, a constant. A group object read from the frame is
  guarded by identity (held weakly); group=None is the default group, guarded by identity through
  the called function's globals (`fn.__globals__['_world'].default_pg`), so a destroyed and
  re-created default group recompiles. `get_rank`, `get_world_size`, `ProcessGroup.rank()/size()`
  and `is_initialized()` are constants under those guards (a group's rank and size never change).
- Everything else from torch.distributed (barrier, send/recv, new_group, a group given as a list of
  ranks or a DeviceMesh, premul_sum, an unknown function or `torch.ops.c10d.*`) raises Unsupported
  *before* anything runs: the graph breaks there and the call runs once, at run time.

Example results are made, never computed: a fake tensor of the result's shape and dtype, so
tracing costs no communication.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import sys

import torch

from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import GuardKind, SourceOutput
from ...output_graph import mark_side_effect
from ..base import CallableVariable, VariableTracker, unsupported
from ..constant import ConstantVariable
from ..torch_objects.tensor import TensorVariable, call_op

_C10D = "torch.distributed.distributed_c10d"
# torch.ops namespaces of collectives: their ops are known here or refused, never run while tracing.
_OP_NAMESPACES = frozenset({"_c10d_functional", "_c10d_functional_autograd", "c10d", "_dtensor"})


def _loaded() -> bool:
    # Nothing to capture unless the user's program imported torch.distributed (cheap check first).
    return _C10D in sys.modules


def _op_namespace(op) -> str | None:
    """The torch.ops namespace of an op or op packet, else None."""
    if not isinstance(op, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return None
    return op._schema.name.split("::")[0] if isinstance(op, torch._ops.OpOverload) \
        else op._qualified_op_name.split("::")[0]


def _is_collective_op(value) -> bool:
    return _op_namespace(value) in _OP_NAMESPACES


def wrap_distributed(tx, value, source, guard: bool):
    """The tracker for a value of torch.distributed read from `source`, or None when `value` is
    not one (builder.py asks before its torch-callable rule)."""
    if not _loaded():
        return DistributedFunctionVariable(value, source) if _is_collective_op(value) else None
    dist = torch.distributed
    if isinstance(value, dist.ProcessGroup):
        if source is None:
            unsupported("a process group that is not reachable from the frame")
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
        return ProcessGroupVariable(value, source)
    if isinstance(value, dist.ReduceOp.RedOpType):
        if guard:   # an enum member: guarded by its type and value, not by identity
            tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
            tx.output.add_guard(AttrSource(source, "value"), GuardKind.EQUALS_MATCH, int(value.value))
        return ConstantVariable(value, source)
    if value is dist.group or value is dist.GroupMember or value is dist.ReduceOp:
        if guard:
            tx.output.add_guard(source, GuardKind.ID_MATCH, value)
        return DistributedClassVariable(value, source)
    if _is_collective_op(value):
        return DistributedFunctionVariable(value, source)
    if callable(value) and not isinstance(value, type) and \
            (getattr(value, "__module__", None) or "").startswith("torch.distributed"):
        if guard:
            tx.output.add_guard(source, GuardKind.ID_MATCH, value)
        return DistributedFunctionVariable(value, source)
    return None


# -- groups ----------------------------------------------------------------------------------------

class ProcessGroupVariable(VariableTracker):
    """A ProcessGroup guarded by identity: its name, rank and size are constants."""

    def __init__(self, group, source):
        super().__init__(source)
        self.group = group

    def python_type(self):
        return type(self.group)

    def reconstruct(self, outputs):
        return SourceOutput(self.source)

    @property
    def name(self) -> str:
        return str(self.group.group_name)

    def var_getattr(self, tx, name):
        if name in ("group_name", "group_desc"):
            return ConstantVariable(str(getattr(self.group, name)))
        if name in ("rank", "size"):
            return _BoundGroupMethod(self, name)
        unsupported(f"ProcessGroup.{name}")

    def __repr__(self):
        return f"ProcessGroupVariable({self.name})"


class _BoundGroupMethod(VariableTracker):
    def __init__(self, group: ProcessGroupVariable, name: str):
        super().__init__(None)
        self.group, self.name = group, name

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported(f"ProcessGroup.{self.name} with arguments")
        return ConstantVariable(getattr(self.group.group, self.name)())


class DistributedClassVariable(VariableTracker):
    """`dist.group` / `dist.GroupMember`, whose `.WORLD` is the default group (a metaclass
    property), and `dist.ReduceOp`, whose members (SUM, MAX, ...) are constants."""

    def __init__(self, cls, source):
        super().__init__(source)
        self.cls = cls

    def python_type(self):
        return type(self.cls)

    def reconstruct(self, outputs):
        if self.source is None:
            unsupported("dist.group without a source")
        return SourceOutput(self.source)

    def var_getattr(self, tx, name):
        dist = torch.distributed
        if self.cls is dist.ReduceOp:
            member = getattr(dist.ReduceOp.RedOpType, name, None)
            if not isinstance(member, dist.ReduceOp.RedOpType):
                unsupported(f"dist.ReduceOp.{name}")
            return ConstantVariable(member)   # the class is trusted or guarded by identity
        if name != "WORLD" or self.source is None:
            unsupported(f"dist.{self.cls.__name__}.{name}")
        group = self.cls.WORLD
        if group is None:
            unsupported("dist.group.WORLD before the default process group is initialized")
        return tx.wrap(group, AttrSource(self.source, "WORLD"))


def _default_group_source(fn, source):
    """Where the default group is read from, through `fn`'s globals (distributed_c10d's, behind
    the decorators' __wrapped__ chain); refused where `fn` has no source to hang a guard from."""
    c10d = sys.modules[_C10D]
    f, src = fn, source
    while getattr(f, "__globals__", None) is not vars(c10d):
        f = getattr(f, "__wrapped__", None)
        if f is None or src is None:
            unsupported(f"{_name(fn)} with the default group: no way to guard it")
        src = AttrSource(src, "__wrapped__")
    return AttrSource(ItemSource(AttrSource(src, "__globals__"), "_world"), "default_pg")


def _default_group(tx, fn, source) -> ProcessGroupVariable:
    """The default group, guarded by identity."""
    group_source = _default_group_source(fn, source)
    group = sys.modules[_C10D]._world.default_pg
    if group is None:
        unsupported(f"{_name(fn)} before the default process group is initialized")
    tx.output.add_guard(group_source, GuardKind.ID_MATCH, group)
    return ProcessGroupVariable(group, group_source)


def _group(tx, fn, source, group) -> ProcessGroupVariable:
    if group is None or isinstance(group, ConstantVariable) and group.value is None:
        return _default_group(tx, fn, source)
    if isinstance(group, ProcessGroupVariable):
        return group
    unsupported(f"{_name(fn)} on a group the trace cannot name ({group})")


def _group_name(tx, fn, source, group) -> tuple[str, int]:
    """(name, size) of the group a functional collective gets: a group object or its name."""
    if isinstance(group, ConstantVariable) and isinstance(group.value, str):
        # A name is resolved by torch when the op runs; its size is read now and fixed for the
        # name's life (names are not reused while the group lives).
        try:
            size = torch.distributed.distributed_c10d._resolve_process_group(group.value).size()
        except Exception as e:  # noqa: BLE001 - eager raises too
            unsupported(f"{_name(fn)} on group {group.value!r}: {e}")
        return group.value, size
    pg = _group(tx, fn, source, group)
    return pg.name, pg.group.size()


# -- building the nodes ----------------------------------------------------------------------------

def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _const(value, what: str):
    if isinstance(value, VariableTracker):
        if not value.is_python_constant():
            unsupported(f"{what} is not a constant")
        return value.as_python_constant()
    return value


def _tensor(value, what: str):
    if not isinstance(value, TensorVariable):
        unsupported(f"{what} is not a tensor of the trace")
    return value


def _reduce_op(op) -> str:
    from torch.distributed._functional_collectives import REDUCE_OP_TO_STR
    op = _const(op, "the reduce op")
    if isinstance(op, str) and op in REDUCE_OP_TO_STR.values():
        return op
    if not isinstance(op, torch.distributed.ReduceOp.RedOpType) or op not in REDUCE_OP_TO_STR:
        unsupported(f"reduce op {op}")   # premul_sum, a ReduceOp object, an unknown name
    return REDUCE_OP_TO_STR[op]


def _functional(name: str):
    return getattr(torch.ops._c10d_functional, name).default


def _example(tx, like, shape):
    """A fake tensor standing for a collective's result (made in the trace's fake mode)."""
    with tx.output.fake_shapes.running():
        return like.new_empty(shape)


def _node(tx, target, args, example):
    # Kept even when nothing reads the result (an unwaited async collective): every rank must
    # issue it, as eager does.
    mark_side_effect(target)
    fx_args = tuple(a.as_node() if isinstance(a, TensorVariable) else a for a in args)
    return TensorVariable(tx.output, example, tx.output.create_node("call_function", target, fx_args, {}))


def issue_collective(tx, name: str, tensor, args, shape):
    """The node issuing functional collective `name` on `tensor` (its result has `shape`); kept
    in the graph even when nothing reads it (fsdp2.py gathers parameters with it too)."""
    return _node(tx, _functional(name), (tensor, *args), _example(tx, tensor.example, shape))


def wait_collective(tx, result):
    """The wait_tensor node of an issued collective."""
    return _node(tx, _functional("wait_tensor"), (result,), _example(tx, result.example, result.example.shape))


@contextlib.contextmanager
def _invisible_to_autograd(tx, *tensors):
    """Eager's in-place collectives (dist.all_reduce(y)) write the tensor without autograd seeing
    it: y keeps its history (its gradient is not reduced) and a leaf parameter may be written.
    Their nodes (issue, wait, copy_) are made with grad off, in the graph and for the examples,
    where one of `tensors` requires grad (otherwise autograd has nothing to see)."""
    if not any(t.example.requires_grad for t in tensors):
        yield
        return
    prev = tx.output.grad_mode
    tx.output.set_grad_mode(False)
    try:
        yield
    finally:
        tx.output.set_grad_mode(prev)


def _copy_into(tx, target, result):
    if tuple(result.example.shape) != tuple(target.example.shape):
        result = call_op(tx, "view", [result, ConstantVariable(tuple(target.example.shape))], {}, method=True)
    call_op(tx, "copy_", [target, result], {}, method=True)


class WorkVariable(VariableTracker):
    """The handle of `async_op=True`: the collective is issued; `.wait()` waits and writes."""

    def __init__(self, result, target):
        super().__init__(None)
        self.result, self.target, self.done = result, target, False

    def python_type(self):
        return torch.distributed.Work

    def reconstruct(self, outputs):
        unsupported("an async collective's work handle outliving the trace")

    def var_getattr(self, tx, name):
        if name == "wait":
            return _WaitMethod(self)
        unsupported(f"Work.{name}")


class _WaitMethod(VariableTracker):
    def __init__(self, work):
        super().__init__(None)
        self.work = work

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported("Work.wait with a timeout")
        if not self.work.done:
            self.work.done = True
            with _invisible_to_autograd(tx, self.work.target, self.work.result):
                _copy_into(tx, self.work.target, wait_collective(tx, self.work.result))
        return ConstantVariable(True)


def _finish(tx, target, issued, async_op):
    """The in-place API's ending: wait and copy now, or hand back a work handle."""
    if _const(async_op, "async_op"):
        return WorkVariable(issued, target)
    with _invisible_to_autograd(tx, target, issued):
        _copy_into(tx, target, wait_collective(tx, issued))
    return ConstantVariable(None)


# -- the functions ---------------------------------------------------------------------------------
# Each handler gets the call bound to the function's signature: trackers for what the call passed,
# defaults as plain values.

def _all_reduce(tx, fn, source, a):
    tensor = _tensor(a["tensor"], "all_reduce's tensor")
    group = _group(tx, fn, source, a["group"])
    with _invisible_to_autograd(tx, tensor):
        issued = issue_collective(tx, "all_reduce", tensor, (_reduce_op(a["op"]), group.name), tensor.example.shape)
    return _finish(tx, tensor, issued, a["async_op"])


def _all_gather_into_tensor(tx, fn, source, a):
    out, inp = _tensor(a["output_tensor"], "the output"), _tensor(a["input_tensor"], "the input")
    group = _group(tx, fn, source, a["group"])
    size = group.group.size()
    shape = (inp.example.shape[0] * size, *inp.example.shape[1:])
    if out.example.dtype != inp.example.dtype or \
            tuple(out.example.shape) not in (shape, (size, *inp.example.shape)):
        unsupported("all_gather_into_tensor with an output of another dtype or shape")
    with _invisible_to_autograd(tx, inp):
        issued = issue_collective(tx, "all_gather_into_tensor", inp, (size, group.name), shape)
    return _finish(tx, out, issued, a["async_op"])


def _reduce_scatter_tensor(tx, fn, source, a):
    out, inp = _tensor(a["output"], "the output"), _tensor(a["input"], "the input")
    group = _group(tx, fn, source, a["group"])
    size = group.group.size()
    o = tuple(out.example.shape)
    if out.example.dtype != inp.example.dtype or not o:
        unsupported("reduce_scatter_tensor with an output of another dtype or no dims")
    if tuple(inp.example.shape) not in ((size, *o), (size * o[0], *o[1:])):
        unsupported("reduce_scatter_tensor with an input of another shape")
    with _invisible_to_autograd(tx, inp):
        if tuple(inp.example.shape) == (size, *o):   # stacked input: the concatenated layout
            inp = call_op(tx, "reshape", [inp, ConstantVariable((size * o[0], *o[1:]))], {}, method=True)
        issued = issue_collective(tx, "reduce_scatter_tensor", inp, (_reduce_op(a["op"]), size, group.name), o)
    return _finish(tx, out, issued, a["async_op"])


def _broadcast(tx, fn, source, a):
    tensor = _tensor(a["tensor"], "broadcast's tensor")
    group = _group(tx, fn, source, a["group"])
    src, group_src = _const(a["src"], "src"), _const(a.get("group_src"), "group_src")
    if group_src is None:
        if src is None:
            unsupported("broadcast without src")
        # src is a global rank; the functional op takes the rank within the group.
        group_src = src if group.group is torch.distributed.distributed_c10d._world.default_pg \
            else torch.distributed.get_group_rank(group.group, src)
    with _invisible_to_autograd(tx, tensor):
        issued = issue_collective(tx, "broadcast", tensor, (group_src, group.name), tensor.example.shape)
    return _finish(tx, tensor, issued, a["async_op"])


def _get_rank(tx, fn, source, a):
    return ConstantVariable(_group(tx, fn, source, a["group"]).group.rank())


def _get_world_size(tx, fn, source, a):
    return ConstantVariable(_group(tx, fn, source, a["group"]).group.size())


def _is_initialized(tx, fn, source, a):
    initialized = sys.modules[_C10D]._world.default_pg is not None
    tx.output.add_guard(_default_group_source(fn, source),
                        GuardKind.NOT_NONE if initialized else GuardKind.NONE_MATCH)
    return ConstantVariable(initialized)


def _is_available(tx, fn, source, a):
    return ConstantVariable(fn())   # a property of the build


# The functional API: op + wait, as under torch.compile (AsyncCollectiveTensor waits on first use).
def _fc_all_reduce(tx, fn, source, a):
    tensor = _tensor(a["self"], "the input")
    name, _ = _group_name(tx, fn, source, a["group"])
    return wait_collective(tx, issue_collective(tx, "all_reduce", tensor, (_reduce_op(a["reduceOp"]), name), tensor.example.shape))


def _fc_all_gather_tensor(tx, fn, source, a):
    tensor = _tensor(a["self"], "the input")
    name, size = _group_name(tx, fn, source, a["group"])
    dim = _const(a["gather_dim"], "gather_dim")
    shape = (tensor.example.shape[0] * size, *tensor.example.shape[1:])
    result = wait_collective(tx, issue_collective(tx, "all_gather_into_tensor", tensor, (size, name), shape))
    if dim != 0:   # gathered along dim 0, then laid out along `dim` (as the functional API does)
        chunks = call_op(tx, torch.chunk, [result, ConstantVariable(size)], {"dim": ConstantVariable(0)})
        result = call_op(tx, torch.cat, [chunks], {"dim": ConstantVariable(dim)})
    return result


def _fc_reduce_scatter_tensor(tx, fn, source, a):
    tensor = _tensor(a["self"], "the input")
    name, size = _group_name(tx, fn, source, a["group"])
    dim = _const(a["scatter_dim"], "scatter_dim")
    if dim != 0:
        chunks = call_op(tx, torch.chunk, [tensor, ConstantVariable(size)], {"dim": ConstantVariable(dim)})
        tensor = call_op(tx, torch.cat, [chunks], {})
    shape = tensor.example.shape
    if shape[0] % size:
        unsupported("reduce_scatter_tensor of a size the group does not divide")
    return wait_collective(tx, issue_collective(tx, "reduce_scatter_tensor", tensor, (_reduce_op(a["reduceOp"]), size, name),
                            (shape[0] // size, *shape[1:])))


def _fc_broadcast(tx, fn, source, a):
    tensor = _tensor(a["self"], "the input")
    name, _ = _group_name(tx, fn, source, a["group"])
    return wait_collective(tx, issue_collective(tx, "broadcast", tensor, (_const(a["src"], "src"), name), tensor.example.shape))


def _fc_wait_tensor(tx, fn, source, a):
    return wait_collective(tx, _tensor(a["tensor"], "wait_tensor's input"))


@functools.cache
def _handlers() -> dict:
    """Function -> handler, built on first use (torch.distributed is imported by then)."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc
    return {
        dist.all_reduce: _all_reduce, dist.all_gather_into_tensor: _all_gather_into_tensor,
        dist.reduce_scatter_tensor: _reduce_scatter_tensor, dist.broadcast: _broadcast,
        dist.get_rank: _get_rank, dist.get_world_size: _get_world_size,
        dist.is_initialized: _is_initialized, dist.is_available: _is_available,
        fc.all_reduce: _fc_all_reduce, fc.all_gather_tensor: _fc_all_gather_tensor,
        fc.reduce_scatter_tensor: _fc_reduce_scatter_tensor, fc.broadcast: _fc_broadcast,
        fc.wait_tensor: _fc_wait_tensor,
    }


# torch.ops._c10d_functional ops recorded as called, by name: the node is the op itself.
_RAW_OPS = {
    "all_reduce": lambda ex, args: ex.shape,
    "all_gather_into_tensor": lambda ex, args: (ex.shape[0] * args[0], *ex.shape[1:]),
    "reduce_scatter_tensor": lambda ex, args: (ex.shape[0] // args[1], *ex.shape[1:]),
    "broadcast": lambda ex, args: ex.shape,
    "wait_tensor": lambda ex, args: ex.shape,
}


def _call_raw_op(tx, op, args, kwargs):
    packet = op if isinstance(op, torch._ops.OpOverloadPacket) else op.overloadpacket
    name = packet.__name__
    namespace = _op_namespace(op)
    if namespace != "_c10d_functional" or name not in _RAW_OPS or kwargs or \
            (isinstance(op, torch._ops.OpOverload) and op._overloadname != "default") or \
            len(args) != len(packet.default._schema.arguments):
        unsupported(f"torch.ops.{namespace}.{name}: a collective op the trace does not model")
    tensor = _tensor(args[0] if args else None, f"{name}'s input")
    rest = [_const(a, f"an argument of {name}") for a in args[1:]]
    if name != "wait_tensor" and not isinstance(rest[-1], str):   # the group's name comes last
        unsupported(f"torch.ops._c10d_functional.{name} on a group given other than by name")
    example = _example(tx, tensor.example, _RAW_OPS[name](tensor.example, rest))
    return _node(tx, packet.default, (tensor, *rest), example)


class DistributedFunctionVariable(CallableVariable):
    """A function of torch.distributed (or a collective op): captured by its rule above, or a
    graph break before it runs."""

    def call_function(self, tx, args, kwargs):
        fn = self.fn
        if _is_collective_op(fn):
            return _call_raw_op(tx, fn, args, kwargs)
        handler = _handlers().get(fn)
        if handler is None:
            unsupported(f"{_name(fn)} from torch.distributed: not captured; it runs at run time")
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as e:
            unsupported(f"{_name(fn)}: {e}")
        params = inspect.signature(fn).parameters
        a = {name: bound.arguments.get(name, p.default) for name, p in params.items()}
        return handler(tx, fn, self.source, a)

    def __repr__(self):
        return f"DistributedFunctionVariable({_name(self.fn)})"


__all__ = ["DistributedFunctionVariable", "DistributedClassVariable", "ProcessGroupVariable", "WorkVariable",
           "wrap_distributed"]
