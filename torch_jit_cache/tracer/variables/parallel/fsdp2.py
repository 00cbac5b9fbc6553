"""FSDP2 (`fully_shard`) blocks inside a traced model: their parameters all-gathered in the graph.

`tjc.compile(model)` over a model whose blocks were sharded with `fully_shard`: each block's call
in eager runs FSDP2's pre-forward hook (all-gather the block's parameters, swap them into the
block), the block's forward, then its post-forward hook (free them again); in the backward FSDP2
reduce-scatters the gradients to each rank's shard. The hooks are torch's own code, which the
tracer never follows: called as they are, each block call would be a graph break (3 graphs and 2
breaks for two blocks). Here the block's call is traced as what the hooks amount to, in the graph:

    local  = sharded_param.to_local()             # each rank's rows (dim 0), outside the graph,
                                                  # its gradient averaged over the ranks (FSDP2's
                                                  # default reduce op, AVG)
    padded = pad(local, rows to ceil(rows / world))   # FSDP2's padding of an uneven last shard
    flat   = cat([padded.reshape(-1) for each parameter of the block])
    full   = wait_tensor(all_gather_into_tensor(flat, world, group)).view(world, -1)
    param  = full[:, its columns].reshape(world * padded rows, ...)[:rows]

and the block's forward reads `param` wherever it reads the parameter: one all-gather per block,
as FSDP2's (one per parameter cost twice eager's step time on gloo, 2 ranks). The all-gather's autograd
formula is a reduce-scatter (sum), so the backward hands each rank the sum of the ranks'
gradients for its rows, divided by the world size: FSDP2's reduce-scatter with AVG, and with two
ranks the same floats bit for bit. Gradients land on the sharded DTensor parameters, where FSDP2
puts them, and accumulate as autograd accumulates. One graph, no break, and no FSDP2 hook runs
for such a block (its state stays idle; the root's hooks, outside the compiled forward, still
run, and its end-of-backward callback finds nothing of the blocks' to reduce).

Lowered only when the block's sharding is what this reproduces exactly, else the block's call is a
graph break as before (run by FSDP2 itself): FSDP2's own two hooks and no others; one parameter
group, idle, its parameters sharded (not swapped in by an earlier eager forward); sharded on dim 0
of plain (not DTensor/TP) parameters over a 1-D mesh (not HSDP); no mixed-precision casts, no CPU
offload; gradients reduced (`set_requires_gradient_sync(True)`) with the default divide factor and
reduce op. What could change between calls is guarded: the hooks, the group's flags and state,
the parameters' identity and their local shards' metadata.

Memory: with `reshard_after_forward=True` (FSDP2's default) and the inductor backend, the nodes
that gather a block's parameters are tagged for AOTAutograd's min-cut partitioner to recompute in
the backward (the all-gather issued again there, as FSDP2 gathers again before a block's
backward), so the gathered parameters are not saved across the forward. With False, and under
aot_eager (whose default partitioner refuses to recompute a collective: "Trying to apply AC on a
graph with impure op") or the eager backend, they are saved for the backward where it needs them,
as FSDP2 keeps them with `reshard_after_forward=False`.
"""
from __future__ import annotations

import itertools

import torch

from .... import backends
from ....guard.sources import AttrSource, ComputedSource, ItemSource
from ....guard.trace_result import GuardKind
from ..base import unsupported
from ..constant import ConstantVariable
from ..collections.containers import ListVariable
from .distributed import issue_collective, wait_collective
from ..torch_objects.tensor import TensorVariable, call_op

# FSDP2 lives in torch.distributed.fsdp._fully_shard from torch 2.6; older names are not lowered.
_FSDP_MODULES = ("torch.distributed.fsdp._fully_shard._fsdp_state",)
# The parameter group's gradient reduction that the all-gather's reduce-scatter reproduces, FSDP2's
# default (set_requires_gradient_sync, set_all_reduce_hook's flags, set_gradient_divide_factor,
# set_reduce_scatter_reduce_op change it): attribute -> value. Read by _refusal, guarded by
# _guard_flags; an attribute this torch's group lacks is not set.
_DEFAULT_REDUCTION = {"reduce_grads": True, "all_reduce_grads": True, "gradient_divide_factor": None,
                      "reduce_scatter_reduce_op": None, "force_sum_reduction_for_comms": False}
_MISSING = object()


class _AverageGrad(torch.autograd.Function):
    """The identity forward (a view), the gradient divided by the ranks' count backward: the
    all-gather's reduce-scatter sums, FSDP2 averages."""

    @staticmethod
    def forward(ctx, x, world):
        ctx.world = world
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad / ctx.world, None


def local_shard(param, world: int):
    """What the compiled code passes the graph for a sharded parameter: its local rows, with the
    gradient they get averaged over `world` ranks and handed to the DTensor parameter."""
    return _AverageGrad.apply(param.to_local(), world)


def fsdp_state(module):
    """The module's FSDPState when its forward hooks are exactly FSDP2's pre- and post-forward
    hooks (one module per state), else None."""
    pre = getattr(module, "_forward_pre_hooks", None)
    post = getattr(module, "_forward_hooks", None)
    if not pre or not post or len(pre) != 1 or len(post) != 1:
        return None
    (pre_hook,), (post_hook,) = pre.values(), post.values()
    state = getattr(pre_hook, "__self__", None)
    if state is None or getattr(post_hook, "__self__", None) is not state:
        return None
    cls = type(state)
    if cls.__name__ != "FSDPState" or cls.__module__ not in _FSDP_MODULES:
        return None
    if getattr(pre_hook, "__func__", None) is not cls._pre_forward or \
            getattr(post_hook, "__func__", None) is not cls._post_forward:
        return None
    return state


def _refusal(state, group) -> str | None:
    """Why this block's sharding is not lowered, or None."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, OffloadPolicy
    from torch.distributed.fsdp._fully_shard._fsdp_common import FSDPMeshInfo, HSDPMeshInfo, TrainingState
    from torch.distributed.tensor import Shard

    if state._training_state != TrainingState.IDLE or group._training_state != TrainingState.IDLE:
        return "its FSDP state is not idle"
    if type(group.mesh_info) is not FSDPMeshInfo or isinstance(group.mesh_info, HSDPMeshInfo):
        return "it is not sharded over a 1-D mesh (HSDP or replicate)"
    if group.mp_policy != MixedPrecisionPolicy():
        return "it has a mixed-precision policy"
    if type(group.offload_policy) is not OffloadPolicy:
        return "its parameters are offloaded to the CPU"
    if any(getattr(group, name, value) != value for name, value in _DEFAULT_REDUCTION.items()):
        return "its gradient reduction is not the default (gradient sync off, a divide factor or reduce op)"
    if group.post_forward_mesh_info is not None and group.post_forward_mesh_info is not group.mesh_info:
        return "it reshards after forward to a smaller group"
    if len({p.sharded_param.dtype for p in group.fsdp_params}) != 1:
        return "its parameters have several dtypes"
    for p in group.fsdp_params:
        info = p._module_info
        if p.is_dtensor or p.fsdp_placement != Shard(0) or info.shared_modules:
            return "a parameter is a DTensor, sharded on another dim or shared between modules"
        if p.sharded_state.name != "SHARDED" or info.module._parameters.get(info.param_name) is not p.sharded_param:
            return "its parameters are not the sharded ones (an unshard() or an eager forward left them gathered)"
        if p.sharded_param.dtype not in (torch.float32, torch.bfloat16, torch.float64):
            return f"a parameter of dtype {p.sharded_param.dtype}"
    return None


def call_fsdp_block(tx, mv, state, args: list, kwargs: dict, forward):
    """`mv.module(*args, **kwargs)` for a block sharded by FSDP2 (`state`): its forward traced with
    its parameters all-gathered in the graph, or a graph break saying why not."""
    m = mv.module
    groups = state._fsdp_param_groups
    if len(groups) != 1:
        unsupported(f"FSDP2 block {type(m).__name__} with {len(groups)} parameter groups")
    group = groups[0]
    why = _refusal(state, group)
    if why is not None:
        unsupported(f"FSDP2 block {type(m).__name__} is run by FSDP2's hooks: {why}")
    out = tx.output
    state_source = _guard_hooks(tx, mv)
    group_source = ItemSource(AttrSource(state_source, "_fsdp_param_groups"), 0)
    _guard_flags(out, state_source, group_source, state, group)
    pg = group.mesh_info.shard_process_group
    out.add_guard(AttrSource(AttrSource(group_source, "mesh_info"), "shard_process_group"), GuardKind.ID_MATCH, pg)
    world, name = pg.size(), pg.group_name
    paths = {id(sub): path for path, sub in m.named_modules()}
    shards = []
    for p in group.fsdp_params:
        info = p._module_info
        path = paths.get(id(info.module))
        if path is None:
            unsupported(f"FSDP2 block {type(m).__name__}: a parameter's module is not one of its submodules")
        source = mv.source
        for part in filter(None, path.split(".")):
            source = AttrSource(source, part)
        source = AttrSource(source, info.param_name)
        shards.append((_padded_local(tx, source, p, world), p.sharded_param))
    reshard = group.post_forward_mesh_info   # reshard_after_forward: the group's mesh, or None
    out.add_guard(AttrSource(group_source, "post_forward_mesh_info"),
                  GuardKind.NONE_MATCH if reshard is None else GuardKind.ID_MATCH, reshard)
    whole, made = _gather(tx, shards, world, name)
    if reshard is not None and backends.tracing_for_min_cut():
        _recompute_in_backward(made)
    gathered = {id(param): full for (_, param), full in zip(shards, whole)}
    saved = out.param_substitutes
    out.param_substitutes = {**saved, **gathered}
    try:
        return forward(args, kwargs)
    finally:
        out.param_substitutes = saved


def _guard_hooks(tx, mv):
    """Guards the block's hook dicts to hold these two hooks (and no backward hooks); returns the
    source of the FSDPState (the pre-forward hook's `__self__`)."""
    out = tx.output
    m = mv.module
    for name in ("_forward_pre_hooks", "_forward_hooks"):
        hooks = vars(m)[name]
        src = AttrSource(mv.source, name)
        out.add_guard(src, GuardKind.DICT_KEYS, tuple(hooks))
        (key,) = hooks
        out.add_guard(ItemSource(src, key), GuardKind.ID_MATCH, hooks[key])
    for name in ("_backward_hooks", "_backward_pre_hooks"):
        if getattr(m, name, None):
            unsupported(f"FSDP2 block {type(m).__name__} has backward hooks")
        if name in vars(m):
            out.add_guard(AttrSource(mv.source, name), GuardKind.LENGTH, 0)
    (key,) = vars(m)["_forward_pre_hooks"]
    return AttrSource(ItemSource(AttrSource(mv.source, "_forward_pre_hooks"), key), "__self__")


def _guard_flags(out, state_source, group_source, state, group) -> None:
    """What _refusal read that a user's call may change between calls: training states, the
    reduction flags (set_requires_gradient_sync, set_gradient_divide_factor, ...)."""
    out.add_guard(AttrSource(state_source, "_training_state"), GuardKind.ID_MATCH, state._training_state)
    out.add_guard(AttrSource(group_source, "_training_state"), GuardKind.ID_MATCH, group._training_state)
    for name, value in _DEFAULT_REDUCTION.items():
        if getattr(group, name, _MISSING) is not _MISSING:
            kind = GuardKind.NONE_MATCH if value is None else GuardKind.BOOL_MATCH
            out.add_guard(AttrSource(group_source, name), kind, value)
    out.add_guard(AttrSource(group_source, "mp_policy"), GuardKind.ID_MATCH, group.mp_policy)
    out.add_guard(AttrSource(group_source, "offload_policy"), GuardKind.ID_MATCH, group.offload_policy)
    out.add_guard(AttrSource(group_source, "fsdp_params"), GuardKind.LENGTH, len(group.fsdp_params))


def _padded_local(tx, param_source, p, world: int) -> TensorVariable:
    """This rank's shard of the parameter as a graph input, padded (as FSDP2 pads) to
    ceil(rows / world) rows."""
    out = tx.output
    param = p.sharded_param
    # The parameter object itself (the module's attribute), and its shard's metadata.
    out.add_guard(param_source, GuardKind.ID_MATCH, param)
    out.add_guard(AttrSource(param_source, "_local_tensor"), GuardKind.TENSOR_MATCH, param._local_tensor)
    source = ComputedSource(param_source, local_shard, (world,))
    value = local_shard(param, world)
    example = out.fake_shapes.fakeify(value, source, None)
    out.keepalive.append(value)
    local = TensorVariable(out, example, source=source, real=value)
    padded_rows = -(-param.shape[0] // world)
    if local.example.shape[0] != padded_rows:
        pad = [0, 0] * (local.example.dim() - 1) + [0, padded_rows - local.example.shape[0]]
        local = call_op(tx, torch.nn.functional.pad, [local, ConstantVariable(tuple(pad))], {})
    return local


def _gather(tx, params: list, world: int, group_name: str) -> tuple:
    """The block's parameters, whole, from this rank's padded shards [(shard, parameter)]: one
    all-gather of the shards laid end to end (as FSDP2 gathers a block's parameters in one
    collective; its backward, one reduce-scatter), then each parameter's columns of the
    (world, total) result, its rows in rank order, the padding cut. Returns them and the nodes
    made for them."""
    const = ConstantVariable
    made = [call_op(tx, "reshape", [shard, const((-1,))], {}, method=True) for shard, _ in params]
    flat = made[0]
    if len(made) > 1:
        flat = call_op(tx, torch.cat, [ListVariable(list(made))], {})
        made.append(flat)
    total = flat.example.shape[0]
    issued = issue_collective(tx, "all_gather_into_tensor", flat, (world, group_name), (world * total,))
    gathered = wait_collective(tx, issued)
    made += [issued, gathered]
    # A functional collective's example is made, not computed: it requires grad where the
    # all-gather's autograd formula gives the parameters their gradient (what the block's code
    # reads of `param.requires_grad`).
    with tx.output.fake_shapes.running():
        gathered.example.requires_grad_(flat.example.requires_grad and torch.is_grad_enabled())
    gathered = call_op(tx, "view", [gathered, const((world, total))], {}, method=True)
    made.append(gathered)
    whole, offset = [], 0
    for shard, param in params:
        n = shard.example.numel()
        piece = call_op(tx, torch.narrow, [gathered, const(1), const(offset), const(n)], {})
        offset += n
        rows = world * shard.example.shape[0]
        made.append(piece)
        piece = call_op(tx, "reshape", [piece, const((rows, *shard.example.shape[1:]))], {}, method=True)
        made.append(piece)
        if rows != param.shape[0]:
            piece = call_op(tx, torch.narrow, [piece, const(0), const(0), const(param.shape[0])], {})
            made.append(piece)
        whole.append(piece)
    return whole, [tv.as_node() for tv in made]


# Each block's gathering nodes are an activation-checkpoint region of their own.
_ac_regions = itertools.count()


def forget_regions() -> None:
    """Number regions from 0 again, as a fresh process does (tjc.reset())."""
    global _ac_regions
    _ac_regions = itertools.count()


def _recompute_in_backward(nodes) -> None:
    """Tags the nodes that gather a block's parameters for AOTAutograd's partitioner to compute
    them again in the backward instead of saving them (`reshard_after_forward=True`, FSDP2's
    default: the gathered parameters are freed after the block and all-gathered again for its
    backward). The tags reach the joint graph's aten nodes (torch.fx copies "recompute" and
    "ac_graph_id" from the node being traced); collectives tagged so may be recomputed."""
    from torch.utils.checkpoint import CheckpointPolicy

    region = next(_ac_regions)
    for node in nodes:
        node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
        node.meta["ac_graph_id"] = region
