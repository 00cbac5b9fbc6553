"""torchvision's stochastic depth (torchvision.ops.stochastic_depth and its module, the pattern):
the helper logs its API use from the function's and the module's attributes on every call, and
reads the module's rate. Used by the ConvNeXt-style models (hf_models.py, staged_models.py).
Needs torch.
"""
from __future__ import annotations

from types import FunctionType

import torch
from torch import nn


def log_api_usage_once(obj) -> None:
    """torchvision.utils._log_api_usage_once: names the caller from the object's attributes."""
    module = obj.__module__
    if not module.startswith("torchvision"):
        module = f"torchvision.internal_feature.{module}"
    name = obj.__class__.__name__
    if isinstance(obj, FunctionType):
        name = obj.__name__
    torch._C._log_api_usage_once(f"{module}.{name}")


def stochastic_depth(input: torch.Tensor, p: float, mode: str, training: bool = True) -> torch.Tensor:
    log_api_usage_once(stochastic_depth)
    if p < 0.0 or p > 1.0:
        raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
    if mode not in ["batch", "row"]:
        raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
    if not training or p == 0.0:
        return input
    survival_rate = 1.0 - p
    size = [input.shape[0]] + [1] * (input.ndim - 1) if mode == "row" else [1] * input.ndim
    noise = torch.empty(size, dtype=input.dtype, device=input.device).bernoulli_(survival_rate)
    if survival_rate > 0.0:
        noise.div_(survival_rate)
    return input * noise


class StochasticDepth(nn.Module):
    def __init__(self, p: float, mode: str):
        super().__init__()
        log_api_usage_once(self)
        self.p, self.mode = p, mode

    def forward(self, input):
        return stochastic_depth(input, self.p, self.mode, self.training)
