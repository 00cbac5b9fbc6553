"""Guard collectives: the ranks of an SPMD program agree on every cache lookup, so they recompile
together (torch.compiler.set_enable_guard_collectives, the same idea).

Why: a rank that misses its cache compiles (seconds) while the others run on into their next
collective and wait for it; with NCCL that is a timeout or a hang, and a compile that runs
collectives of its own would pair them with the wrong ones. With guard collectives on, every call of
a compiled frame that has cache entries votes: each rank says whether its guards passed, and when
any rank missed, every rank takes the miss path and compiles again, at the same call.

How: the runtime's guard-complete hook (runtime.set_guard_complete_hook) asks `_vote(hit)` after
the lookup of a code that has entries (never on a frame's first call, never for skipped code). The
vote is one all-reduce (MIN of a one-element int tensor; the same answer as all-gathering the flags
and taking all(), in one collective instead of all_gather_object's two) over a gloo group of every
rank, made on first use and made again when the default group is destroyed or replaced: a CPU group,
so an NCCL job's votes need no device tensor or stream. Without an initialized default group the
vote is the local lookup's result.

Cost: one small collective per call of a compiled frame (measured in docs/distributed.md), and only
SPMD programs may use it: every rank must call the same compiled frames in the same order, or the
votes pair wrongly and wait until the group's timeout.
"""
from __future__ import annotations

import weakref

from .. import runtime

# (the default group, the vote group made for it), both held weakly (torch.distributed holds every
# group until destroy_process_group), or None until a vote runs with a default group. Nothing here
# keeps a destroyed group alive, and a re-created default group is told from the old one.
_groups = None


def _vote_group():
    """The gloo group the votes run on, or None when torch.distributed is not initialized."""
    global _groups
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        _groups = None
        return None
    world = dist.group.WORLD
    group = _groups[1]() if _groups is not None and _groups[0]() is world else None
    if group is None:
        # A collective call itself: every rank makes it at the same vote (its group's first).
        group = dist.new_group(backend="gloo")
        _groups = (weakref.ref(world), weakref.ref(group))
    return group


def _vote(hit: bool) -> bool:
    """The guard-complete hook: True when every rank's lookup hit."""
    group = _vote_group()
    if group is None:
        return hit
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1 if hit else 0], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    return bool(flag.item())


def set_enable_guard_collectives(enabled: bool) -> bool:
    """Turn guard collectives on or off for every compiled function of this process; returns the
    previous setting. On: each call of a compiled frame that has cache entries issues one small
    collective on every rank, and a miss on any rank makes every rank compile again. SPMD programs
    only. tjc.reset() turns it off (it clears the runtime's guard-complete hook)."""
    previous = runtime.set_guard_complete_hook(_vote if enabled else None)
    return previous is _vote
