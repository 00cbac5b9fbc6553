"""Issue 13: cases where a compiled call gave a different result than eager, with no fallback.

Each test compares with eager and asserts the compiled call really ran compiled code (a graph was
made), so a fix cannot pass by falling back."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_caches():
    tjc.reset()
    yield
    tjc.reset()


# --- 1. *args with keyword-only parameters --------------------------------------------------------

def shift(*ts, by=(1.0,)):
    return ts[0] - by[0]


def cat_all(*ts, dim=-1):
    return torch.cat(ts, dim=dim)


def scale_all(first, *rest, factor, bias=0.0, **extra):
    return [first * factor + bias] + [t * factor + extra.get("offset", 0.0) for t in rest]


def call_shift(x):
    return shift(x, by=(3.0,))


def call_cat_all(x):
    return cat_all(x, x * 2, dim=0)


def call_cat_all_default(x):
    return cat_all(x, x + 1)


def call_scale_all(x):
    return scale_all(x, x + 1, x + 2, factor=2.0, offset=0.5)


@pytest.mark.parametrize("fn", [call_shift, call_cat_all, call_cat_all_default, call_scale_all],
                         ids=lambda f: f.__name__)
def test_star_args_with_keyword_only_parameters_bind_by_name(fn):
    x = torch.arange(6.0).reshape(2, 3)
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    expected, got = fn(x), compiled(x)
    if isinstance(expected, list):
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e)
    else:
        torch.testing.assert_close(got, expected)
    assert cnt.frame_count == 1, "the helper must be inlined into one graph, not fall back"
    assert tjc.stats()["fallbacks"] == 0
