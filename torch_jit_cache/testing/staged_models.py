"""A model built of stages of identical blocks, each stage at its own width: ConvNeXt's layout
(torchvision.models.convnext, the architecture, written here since torchvision is not a
dependency), tiny. `models.build("convnext_stages")` gives it with an input (the zoo, trained and compared
with eager there); `convnext_stages()` below in eval() mode.

What it exercises: one block class whose instances see four different shapes in one call (16, 32,
64 and 128 channels at 16, 8, 4 and 2 pixels), each instance holding its own stochastic-depth rate
(growing linearly over the 12 blocks, as torchvision's), read by a helper function on every call.
Needs torch.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .stochastic_depth import StochasticDepth

WIDTHS = (16, 32, 64, 128)
BLOCKS_PER_STAGE = 3


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Permute(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.dims = list(dims)

    def forward(self, x):
        return torch.permute(x, self.dims)


class Block(nn.Module):
    """ConvNeXt's block: depthwise 7x7 conv, LayerNorm and an MLP over channels, layer scale and
    stochastic depth on the residual branch."""

    def __init__(self, dim: int, sd_prob: float, layer_scale: float = 1e-6):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim),
            Permute([0, 2, 3, 1]),
            nn.LayerNorm(dim, eps=1e-6),
            nn.Linear(dim, 4 * dim),
            nn.GELU(),
            nn.Linear(4 * dim, dim),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(sd_prob, "row")

    def forward(self, x):
        return x + self.stochastic_depth(self.layer_scale * self.block(x))


class ConvNeXtStages(nn.Module):
    """Stem, four stages of `blocks` identical blocks (widths `widths`) with a downsampling layer
    between stages, pooling and a classifier."""

    def __init__(self, widths=WIDTHS, blocks: int = BLOCKS_PER_STAGE, classes: int = 10,
                 stochastic_depth_prob: float = 0.1):
        super().__init__()
        total, index = len(widths) * blocks, 0
        layers = [nn.Sequential(nn.Conv2d(3, widths[0], kernel_size=4, stride=4), LayerNorm2d(widths[0], eps=1e-6))]
        for i, width in enumerate(widths):
            stage = []
            for _ in range(blocks):
                stage.append(Block(width, stochastic_depth_prob * index / (total - 1.0)))
                index += 1
            layers.append(nn.Sequential(*stage))
            if i + 1 < len(widths):
                layers.append(nn.Sequential(LayerNorm2d(width, eps=1e-6),
                                            nn.Conv2d(width, widths[i + 1], kernel_size=2, stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(LayerNorm2d(widths[-1], eps=1e-6), nn.Flatten(1),
                                        nn.Linear(widths[-1], classes))

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)))


def convnext_stages(batch: int = 2, size: int = 64):
    """(model, input): the model in eval() mode, seeded by the caller."""
    model = ConvNeXtStages().eval()
    return model, torch.randn(batch, 3, size, size)
