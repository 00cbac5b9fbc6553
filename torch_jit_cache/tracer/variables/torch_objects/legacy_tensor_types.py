"""torch's legacy tensor types called on data: `torch.LongTensor([1, 2])`, `torch.FloatTensor(rows)`.

Each CPU legacy type (`torch.LongTensor`, one of torch's `tensortype` classes, found under its name
in torch) called with one list or tuple of numbers makes a new tensor of the type's dtype from
those numbers, as `torch.tensor(data, dtype=T.dtype)` does (the same values, shapes and errors for
nested lists, bools, floats truncated to ints and numpy numbers). The trace makes that node, with
numpy numbers read as the Python numbers they hold. Anything else (a size, `torch.LongTensor(3)`,
which makes an uninitialized tensor; a tensor, which it would share; a CUDA type) is not handled
here (None) and breaks as before.
"""
from __future__ import annotations

import torch

from ..constant import is_numpy_scalar
from .tensor import call_torch


def is_legacy_tensor_type(cls) -> bool:
    return type(cls).__name__ == "tensortype" and type(cls).__module__ == "torch" and \
        getattr(torch, getattr(cls, "__name__", ""), None) is cls and not cls.is_cuda


def _numbers(data):
    """`data` with numpy numbers as Python numbers; None where it holds anything but lists,
    tuples and numbers."""
    if isinstance(data, (list, tuple)):
        items = [_numbers(d) for d in data]
        return None if any(i is None for i in items) else items
    if is_numpy_scalar(data):
        data = data.item()
    return data if type(data) in (bool, int, float) else None


def call_legacy_tensor_type(tx, cls, args, kwargs):
    """`cls(data)` for a legacy type and one constant list or tuple of numbers; else None."""
    if kwargs or len(args) != 1 or not is_legacy_tensor_type(cls) or not args[0].is_python_constant():
        return None
    data = args[0].as_python_constant()
    if not isinstance(data, (list, tuple)):
        return None
    numbers = _numbers(data)
    if numbers is None:
        return None
    return call_torch(tx, torch.tensor, tx.wrap_constant(numbers), dtype=cls.dtype)
