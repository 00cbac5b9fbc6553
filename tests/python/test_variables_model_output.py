"""tracer/variables/python_objects/model_output.py through the public API: a HuggingFace ModelOutput built in the
trace.

The contract: a ModelOutput the trace constructs reads as eager's (fields by attribute, present keys
by item, positions through to_tuple(), keys()/items(), iteration over the keys), stores follow
ModelOutput's rules, and after the graph the object is made again by calling the class with every
field, so the caller gets eager's object: same class, same keys in the same order, same values.
Each case compares with eager and counts graphs and breaks.
"""
import dataclasses
from typing import Optional

import pytest

torch = pytest.importorskip("torch")
generic = pytest.importorskip("transformers.utils.generic")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from context_helpers import assert_same, compiled_like_eager  # noqa: E402


@dataclasses.dataclass
class Out(generic.ModelOutput):
    last: Optional[torch.Tensor] = None
    pooled: Optional[torch.Tensor] = None
    extra: Optional[torch.Tensor] = None


def _builds_and_reads(x):
    out = Out(last=x * 2, pooled=x.sum(0))
    first = out[0] + out["pooled"] + out.last
    return first, list(out.keys()), len(out.to_tuple()), [k for k in out], out.extra is None


def _returns_the_output(x):
    return Out(last=x + 1, pooled=x.mean(0))


def _stores_a_field(x):
    out = Out(last=x)
    out.extra = x * 3
    return out


@pytest.mark.parametrize("fn", [_builds_and_reads, _returns_the_output, _stores_a_field],
                         ids=["reads", "returned", "stored-field"])
def test_a_model_output_built_in_the_trace_is_eagers(fn):
    x = torch.randn(2, 3)
    got = compiled_like_eager(fn, x)
    if isinstance(got, Out):
        assert list(got.keys()) == list(fn(x).keys())


def test_the_returned_output_is_a_new_object_per_call():
    compiled = tjc.compile(_returns_the_output, backend="eager")
    x = torch.randn(2, 3)
    a, b = compiled(x), compiled(x)
    assert a is not b and type(a) is Out
    assert_same(dict(a), dict(_returns_the_output(x)))


@dataclasses.dataclass
class Pair(generic.ModelOutput):
    """CLIPOutput's shape: a nested ModelOutput field and its own to_tuple (and a helper)."""
    loss: Optional[torch.Tensor] = None
    inner: Optional[Out] = None

    def to_tuple(self):
        return tuple(v.to_tuple() if isinstance(v, generic.ModelOutput) else v for v in self.values())

    def scaled_loss(self, k):
        return self.loss * k


def _builds_an_overriding_output(x):
    return Pair(loss=x.sum(), inner=Out(last=x * 2, pooled=x.mean(0)))


def _reads_through_the_override(x):
    out = Pair(loss=x.sum(), inner=Out(last=x * 2))
    t = out.to_tuple()
    return t[0], t[1][0], out[1][0] + 1, out.scaled_loss(3)


@pytest.mark.parametrize("fn", [_builds_an_overriding_output, _reads_through_the_override],
                         ids=["returned", "reads"])
def test_a_subclass_overriding_to_tuple_is_traced_as_python(fn):
    x = torch.randn(2, 3, requires_grad=True)
    got = compiled_like_eager(fn, x)
    expected = fn(x)
    if isinstance(got, Pair):
        assert list(got.keys()) == list(expected.keys()) and type(got.inner) is Out
        assert got.to_tuple()[1][0].grad_fn is not None
    loss = sum(t.sum() for t in (got.to_tuple() if isinstance(got, Pair) else got)
               if isinstance(t, torch.Tensor))
    (grad,) = torch.autograd.grad(loss, x)
    eager_loss = sum(t.sum() for t in (expected.to_tuple() if isinstance(expected, Pair) else expected)
                     if isinstance(t, torch.Tensor))
    torch.testing.assert_close(grad, torch.autograd.grad(eager_loss, x)[0])


def test_a_replaced_override_recompiles():
    # The override is read from the class through its source and guarded by identity.
    compiled = tjc.compile(_reads_through_the_override, backend="eager")
    x = torch.randn(2, 3)
    compiled(x)
    original = Pair.to_tuple
    try:
        Pair.to_tuple = lambda self: (self.loss * 10, self.inner.to_tuple())
        assert_same(compiled(x), _reads_through_the_override(x))
    finally:
        Pair.to_tuple = original
    assert_same(compiled(x), _reads_through_the_override(x))


# -- diffusers' BaseOutput: the same model (MODEL_OUTPUT_BASES) -------------------------------------

def _denoiser_output_class():
    from diffusers.utils.outputs import BaseOutput   # requirements-dev.txt installs diffusers

    @dataclasses.dataclass
    class DenoiserOut(BaseOutput):
        sample: Optional[torch.Tensor] = None
        residual: Optional[torch.Tensor] = None

    return DenoiserOut


def test_a_diffusers_base_output_built_in_the_trace_is_eagers():
    # Failed before: "construction of DenoiserOut in the trace: it derives from the builtin
    # OrderedDict" (a graph break, the frame's rest run as written).
    DenoiserOut = _denoiser_output_class()

    def builds(x):
        out = DenoiserOut(sample=x * 2)
        return out, out[0] + out["sample"] + out.sample, list(out.keys())

    got = compiled_like_eager(builds, torch.randn(2, 3))
    assert type(got[0]) is DenoiserOut and list(got[0].keys()) == ["sample"]
