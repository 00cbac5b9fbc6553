"""Module hooks: whether a module's call would run hooks, and the guards that it still would not.

An inlined module call (nn_module.py) or an opaque one (opaque_calls.py) runs `forward` alone, so
the trace is valid only while every hook dict nn.Module.__call__ consults is empty: the module's own
and torch.nn.modules.module's global ones. Each is guarded (LENGTH 0), so a hook registered after
compiling makes a guard fail and the retrace takes the hooks' path. Depends on no tracker module.
"""
from __future__ import annotations

import torch.nn as nn

from ...sources import AttrSource, ItemSource
from ...trace_result import GuardKind

# The hook dicts nn.Module.__call__ consults: on the instance, and module-global ones in
# torch.nn.modules.module.
MODULE_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks")


def has_hooks(m: nn.Module) -> bool:
    from torch.nn.modules import module as mm
    return any(getattr(m, name, None) for name in MODULE_HOOK_DICTS) or \
        any(getattr(mm, name, None) for name in GLOBAL_HOOK_DICTS)


def guard_no_hooks(tx, mv) -> None:
    """Guards that the hook dicts `mv.module.__call__` would consult are still empty."""
    out = tx.output
    for name in MODULE_HOOK_DICTS:
        if name in vars(mv.module):
            out.add_guard(AttrSource(mv.source, name), GuardKind.LENGTH, 0)
    # The global dicts are reached from the frame through the module's class: nn.Module.__call__'s
    # globals are torch.nn.modules.module's namespace. Once per trace is enough.
    if not out.global_hooks_guarded:
        out.global_hooks_guarded = True
        namespace = AttrSource(AttrSource(AttrSource(mv.source, "__class__"), "__call__"), "__globals__")
        for name in GLOBAL_HOOK_DICTS:
            out.add_guard(ItemSource(namespace, name), GuardKind.LENGTH, 0)
