"""ConvNeXt-style stages of identical blocks (torch_jit_cache/testing/staged_models.py: 4 stages x 3
blocks at widths 16-128, each block its own stochastic-depth rate), every block compiled on its own
with one shared compiler, as `nn.Module.compile()` per block: outputs equal eager's, each width's
blocks compile static (no symbolic entry in the first call), and every round after tjc.reset()
compiles the same. About 10 s on 2 cores.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import runtime  # noqa: E402
from torch_jit_cache.testing.staged_models import Block, convnext_stages  # noqa: E402


def _round(train: bool) -> dict:
    tjc.reset()
    torch.manual_seed(0)
    model, x = convnext_stages()
    model.train(train)
    torch.manual_seed(1)
    expected = model(x)
    for stage in model.features[1::2]:
        for i, block in enumerate(stage):
            stage[i] = tjc.compile(block)
    torch.manual_seed(1)
    torch.testing.assert_close(model(x), expected)
    entries = runtime.cache_entries(Block.forward)
    stats = tjc.stats()
    return dict(compiles=stats["compiles"], graphs=stats["graphs"], fallbacks=stats["fallbacks"],
                cache_limit_hits=stats["cache_limit_hits"], entries=len(entries),
                symbolic=sum("SYMBOLIC_SHAPES" in str(e.guards) for e in entries))


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_staged_identical_blocks_compile_static_and_the_same_after_reset(train):
    first = _round(train)
    # One entry per block: each holds its own rate, read by the helper (guarded by value). Before
    # sizes were remembered per instance shape, the second width's blocks traced symbolic (9 of 12).
    assert first == dict(compiles=12, graphs=12, fallbacks=0, cache_limit_hits=0, entries=12, symbolic=0), first
    assert _round(train) == first
    tjc.reset()
