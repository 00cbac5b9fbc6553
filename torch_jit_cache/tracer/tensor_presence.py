"""Whether a frame holds anything torch-related: the test torch.compile makes before it traces a
frame it reaches (not the function it was asked to compile), and skips the frame where it fails.

A frame is torch-related where its code names a global that is torch or one of its submodules
(or numpy, which the tracer runs as tensors), or one of its locals is a tensor, an nn.Module or
nn.Module class, a numpy array or scalar, or a list, tuple, dict or namedtuple holding one. Other
objects are not looked into (a user object holding tensors does not count), as torch.compile does
not. convert_frame.py asks it only of a frame whose trace failed: such a frame runs as written
either way, and one with nothing torch-related in it is skipped, as torch.compile skips it, rather
than counted as a fallback.
"""
from __future__ import annotations

import types

import torch

try:
    import numpy as _np
except ImportError:   # pragma: no cover - numpy is optional
    _np = None


def _torch_module(obj) -> bool:
    if not isinstance(obj, types.ModuleType):
        return False
    name = obj.__name__
    return name == "torch" or name.startswith("torch.") or _np is not None and (
        name == "numpy" or name.startswith("numpy."))


def has_torch_objects(frame) -> bool:
    """Whether `frame` (the callback's frame: f_code, f_globals, f_locals) is torch-related."""
    code, globals_ = frame.f_code, frame.f_globals
    if any(_torch_module(globals_.get(name)) for name in code.co_names):
        return True
    seen: dict[int, bool] = {}
    return any(_holds_tensor(v, seen) for v in list(frame.f_locals.values()))


def _holds_tensor(obj, seen: dict) -> bool:
    key = id(obj)
    if key in seen:
        return seen[key]
    seen[key] = False   # a container that reaches itself answers from what else it holds
    if isinstance(obj, (torch.Tensor, torch.nn.Module)) or type(obj) is type and issubclass(obj, torch.nn.Module):
        found = True
    elif _np is not None and (type(obj) is _np.ndarray or isinstance(obj, _np.generic)):
        found = True
    elif type(obj) in (list, tuple):
        found = any(_holds_tensor(v, seen) for v in obj)
    elif type(obj) is dict:
        found = any(_holds_tensor(v, seen) for v in list(obj.values()))
    elif isinstance(obj, tuple) and hasattr(type(obj), "_fields"):   # a namedtuple
        found = any(_holds_tensor(v, seen) for v in tuple.__iter__(obj))
    else:
        found = False
    seen[key] = found
    return found
