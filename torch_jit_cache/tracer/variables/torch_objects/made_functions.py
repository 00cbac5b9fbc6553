"""A Python function that a torch function, run while tracing on constants, returned.

`torch.nn.modules.utils._ntuple(3)` makes `parse`, a closure over the constant 3; the trace runs
torch's own Python on its examples, so the call that made it was folded, and the function it made
is one more piece of torch's code over constants. Called on constants it runs while tracing too and
its result is a constant of the graph (`_ntuple(3)(3)` is `(3, 3, 3)`); Python's error on those
constants is refused as a break, so the call runs as written and raises there.

Only a plain function of a torch module whose closure holds constants alone (what it can read is
fixed by the guards on the constants it was made from). Called with anything that is not a
constant it is a break: a graph node names its function by `module.name`, which a function made at
run time does not have. Returned or held at a break it is refused (it has no source to read it
again from).
"""
from __future__ import annotations

import types

from ..base import unsupported
from ..constant import is_constant_value
from .tensor import TorchFunctionVariable


def is_made_torch_function(value) -> bool:
    """A plain Python function whose code is torch's, closing over constants alone."""
    if not isinstance(value, types.FunctionType):
        return False
    module = value.__globals__.get("__name__") or ""
    if module != "torch" and not module.startswith("torch."):
        return False
    try:
        cells = [c.cell_contents for c in value.__closure__ or ()]
    except ValueError:   # an empty cell
        return False
    defaults = [*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values()]
    return all(is_constant_value(v) for v in [*cells, *defaults])


class MadeTorchFunctionVariable(TorchFunctionVariable):
    """A function is_made_torch_function accepts (module docstring)."""

    def call_function(self, tx, args, kwargs):
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported(f"{self.fn.__qualname__}, a function torch made while tracing, called with a value "
                        "that is not a constant")
        return super().call_function(tx, args, kwargs)

    def reconstruct(self, outputs):
        unsupported(f"{self.fn.__qualname__}, a function torch made while tracing, leaves the trace")

    def __repr__(self):
        return f"MadeTorchFunctionVariable({self.fn.__qualname__})"
