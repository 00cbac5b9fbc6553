"""Module hooks: forward hooks and pre-hooks inlined around a module call, and the guards on them.

An inlined module call (nn_module.py) runs what nn.Module._call_impl would: the module's forward
pre-hooks in order (a non-None result replaces the arguments), forward, then its forward hooks (a
non-None result replaces the output), each hook traced like any call. The trace is valid only while
the hook dicts hold the hooks it ran: the keys of each non-empty dict are guarded (DICT_KEYS) and
each hook by what it is (tx.wrap), an empty dict by LENGTH 0, so a hook added or removed after
compiling makes a guard fail and the retrace takes the new path. Backward hooks and the global
hooks of torch.nn.modules.module are refused (a graph break): backward hooks live in autograd, and
global hooks would run around every module. An opaque call (opaque_calls.py) refuses any hook.
"""
from __future__ import annotations

import torch.nn as nn

from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import GuardKind
from ..parallel import fsdp2
from ..base import unsupported
from ..constant import ConstantVariable
from ..collections.containers import BaseListVariable, TupleVariable
from ..collections.dicts import DictVariable
from .module_sources import class_source, state_source

# The hook dicts nn.Module.__call__ consults: on the instance, and module-global ones in
# torch.nn.modules.module.
MODULE_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks")
# The instance's hooks the trace inlines, and beside each the dict of the ids that take kwargs
# (register_forward_hook(..., with_kwargs=True)); `always_call` matters only when forward raises,
# which ends the trace anyway.
INLINED_HOOK_DICTS = {"_forward_pre_hooks": "_forward_pre_hooks_with_kwargs",
                      "_forward_hooks": "_forward_hooks_with_kwargs"}
REFUSED_HOOK_DICTS = ("_backward_hooks", "_backward_pre_hooks")


def has_hooks(m: nn.Module) -> bool:
    from torch.nn.modules import module as mm
    return any(getattr(m, name, None) for name in MODULE_HOOK_DICTS) or \
        any(getattr(mm, name, None) for name in GLOBAL_HOOK_DICTS)


def guard_no_hooks(tx, mv) -> None:
    """Guards that the hook dicts `mv.module.__call__` would consult are still empty."""
    for name in MODULE_HOOK_DICTS:
        if name in vars(mv.module):
            tx.output.add_guard(state_source(mv.source, mv.module, name), GuardKind.LENGTH, 0)
    guard_no_global_hooks(tx, class_source(mv.source, mv.module))


def refuse_global_hooks(what: str) -> None:
    """A graph break where torch's global module hooks are registered: they would run around
    every module call."""
    from torch.nn.modules import module as mm
    if any(getattr(mm, name, None) for name in GLOBAL_HOOK_DICTS):
        unsupported(f"{what} while global module hooks are registered")


def guard_no_global_hooks(tx, cls_source) -> None:
    """Guards torch's global module-hook dicts empty, reached from the frame through a module
    class (`cls_source`): nn.Module.__call__'s globals are torch.nn.modules.module's namespace.
    Once per trace is enough."""
    out = tx.output
    if not out.global_hooks_guarded:
        out.global_hooks_guarded = True
        namespace = AttrSource(AttrSource(cls_source, "__call__"), "__globals__")
        for name in GLOBAL_HOOK_DICTS:
            out.add_guard(ItemSource(namespace, name), GuardKind.LENGTH, 0)


def _is_none(v) -> bool:
    return isinstance(v, ConstantVariable) and v.value is None


def call_with_hooks(tx, mv, args: list, kwargs: dict, forward):
    """`mv.module(*args, **kwargs)` as nn.Module._call_impl runs it: forward pre-hooks, then
    `forward(args, kwargs)` (the traced forward), then forward hooks."""
    m = mv.module
    refuse_global_hooks(f"module {type(m).__name__} called")
    guard_no_global_hooks(tx, class_source(mv.source, mv.module))
    state = fsdp2.fsdp_state(m)
    if state is not None:   # sharded by FSDP2: its hooks' all-gather traced into the graph
        return fsdp2.call_fsdp_block(tx, mv, state, args, kwargs, forward)
    if any(vars(m).get(name) for name in REFUSED_HOOK_DICTS):
        unsupported(f"module {type(m).__name__} has backward hooks")
    for name in REFUSED_HOOK_DICTS:
        if name in vars(m):
            tx.output.add_guard(state_source(mv.source, mv.module, name), GuardKind.LENGTH, 0)
    hooks = {}
    for name, kwargs_name in INLINED_HOOK_DICTS.items():
        hooks[name] = _read_hooks(tx, mv, name, kwargs_name)
    if not hooks["_forward_pre_hooks"] and not hooks["_forward_hooks"]:
        return forward(args, kwargs)
    # The very objects _call_impl passes on: the args tuple (or what a pre-hook put in its place)
    # and one kwargs dict, the same for every hook.
    args_box, kwargs_box = TupleVariable(args), DictVariable(kwargs)
    for fn, with_kwargs in hooks["_forward_pre_hooks"]:
        if with_kwargs:
            r = tx.call(fn, [mv, args_box, kwargs_box], {})
            if _is_none(r):
                continue
            if not (isinstance(r, BaseListVariable) and issubclass(r.python_type(), tuple) and len(r.items) == 2
                    and isinstance(r.items[0], BaseListVariable) and isinstance(r.items[1], DictVariable)):
                unsupported(f"forward pre-hook of {type(m).__name__} returned {r}, not (args, kwargs)")
            args_box, kwargs_box = r.items
        else:
            r = tx.call(fn, [mv, args_box], {})
            if _is_none(r):
                continue
            # A tuple (a subclass too) is the new args; any other value stands for a 1-tuple.
            is_tuple = isinstance(r, BaseListVariable) and issubclass(r.python_type(), tuple)
            args_box = r if is_tuple else TupleVariable([r])
    kwargs = dict(kwargs_box.items)
    if not all(isinstance(k, str) for k in kwargs):
        unsupported("keyword arguments with keys that are not strings, from a forward pre-hook")
    result = forward(list(args_box.items), kwargs)
    for fn, with_kwargs in hooks["_forward_hooks"]:
        extra = [kwargs_box] if with_kwargs else []
        r = tx.call(fn, [mv, args_box, *extra, result], {})
        if not _is_none(r):
            result = r
    return result


def _read_hooks(tx, mv, name: str, kwargs_name: str) -> list:
    """The hooks of dict `name` as (tracker, takes kwargs) pairs, guarded: its keys, each hook, and
    the keys of the dict saying which take kwargs."""
    d = vars(mv.module).get(name)
    if d is None:
        return []
    src = state_source(mv.source, mv.module, name)
    if not d:
        tx.output.add_guard(src, GuardKind.LENGTH, 0)
        return []
    tx.output.add_guard(src, GuardKind.DICT_KEYS, tuple(d))
    with_kwargs = vars(mv.module).get(kwargs_name, {})
    if kwargs_name in vars(mv.module):
        tx.output.add_guard(state_source(mv.source, mv.module, kwargs_name), GuardKind.DICT_KEYS, tuple(with_kwargs))
    return [(tx.wrap(hook, ItemSource(src, key)), key in with_kwargs) for key, hook in d.items()]
