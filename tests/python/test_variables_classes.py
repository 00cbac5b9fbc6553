"""tracer/variables/classes.py through the public API: attributes read from a class.

The contract: a functools.cached_property read from its class is the descriptor itself (its
__get__ with no instance returns it), also from a fresh import of functools; compared with eager.
"""
import functools

import pytest
from test.support import import_helper

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import compiled_like_eager  # noqa: E402

# functools as its Python source alone, as CPython's own tests import it: another cached_property class.
_fresh_functools = import_helper.import_fresh_module("functools", blocked=["_functools"])


class _Priced:
    @functools.cached_property
    def cost(self):
        """What it costs."""
        return 4


class _FreshFunctoolsPriced:
    cost = _fresh_functools.cached_property(lambda self: 5)


def _reads_the_descriptor(x):
    a, b = _Priced.cost, _FreshFunctoolsPriced.cost
    return (isinstance(a, functools.cached_property), a.__doc__, a.attrname,
            isinstance(b, _fresh_functools.cached_property), x + 1)


def test_a_cached_property_read_from_its_class_is_the_descriptor_itself():
    compiled_like_eager(_reads_the_descriptor, torch.randn(2))


# -- super().name of a plain class value ------------------------------------------------------------

class _Base:
    scale = 4
    tag = "ab"


class _Child(_Base):
    scale = 100   # shadowed: super() skips it

    def forward(self, x):
        return super().scale * x + len(super().tag)

    @classmethod
    def of_class(cls, x):
        return super().scale * x


def test_super_reads_a_plain_class_value_guarded_by_value():
    # super().scale is the base's own number (no descriptor), read through the MRO and guarded
    # there: changing it on the base recompiles.
    cnt = CompileCounter()
    method = _Child().forward
    compiled = tjc.compile(method, backend=cnt)
    x = torch.ones(2)
    try:
        for value in (4, 4, 7):
            _Base.scale = value
            torch.testing.assert_close(compiled(x), method(x))
            torch.testing.assert_close(tjc.compile(_Child.of_class)(x), _Child.of_class(x))
    finally:
        _Base.scale = 4
    assert cnt.frame_count == 2
    assert tjc.explain(method)(x).graph_break_count == 0
