"""`d.__get__(obj)` of descriptors written in C (tracer/variables/python_objects/c_descriptors.py): a getset
descriptor, a slot member, a C method, called on the descriptor or through the bound `d.__get__`
the frame holds. Where `type(obj)` finds `d` under its name, the call is that attribute read, in
the graph; elsewhere a break, and the call runs as written (raising where eager raises). Every
result is compared with eager's; a changed descriptor recompiles."""
import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.guard import process_lived  # noqa: E402

from context_helpers import CompiledCalls, same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def get_on(d, x):
    return x * 2, d.__get__(x)


def call_bound_get(g, x):
    return x + len(str(g(x)))


def test_a_getset_descriptor_get_is_the_attribute_read():
    calls = CompiledCalls(get_on)
    for x in (torch.ones(2, 3), torch.ones(4, 1)):
        assert same(calls(torch.Tensor.shape, x), get_on(torch.Tensor.shape, x))
    calls.check(graphs=2, breaks=0)


def test_another_descriptor_recompiles_to_eager_answer():
    calls = CompiledCalls(get_on)
    x = torch.ones(2, 3)
    for d in (torch.Tensor.shape, torch.Tensor.dtype, torch.Tensor.shape):
        assert same(calls(d, x), get_on(d, x))
    calls.check(graphs=2, breaks=0)


def test_the_bound_get_held_by_the_frame_is_the_attribute_read():
    calls = CompiledCalls(call_bound_get)
    for x in (torch.ones(3), torch.ones(5)):
        # a new method-wrapper each time, as `d.__get__` makes one per read
        assert same(calls(torch.Tensor.shape.__get__, x), call_bound_get(torch.Tensor.shape.__get__, x))
    calls.check(graphs=2, breaks=0)
    other = torch.Tensor.ndim.__get__   # bound to another descriptor: recompiles
    x = torch.ones(3)
    assert same(calls(other, x), call_bound_get(other, x))


def test_a_descriptor_of_another_class_raises_as_in_eager():
    compiled = tjc.compile(get_on, backend="eager")
    with pytest.raises(TypeError):
        get_on(str.upper, torch.ones(2))
    with pytest.raises(TypeError):
        compiled(str.upper, torch.ones(2))


class Slotted:
    __slots__ = ("scale",)

    def __init__(self, scale):
        self.scale = scale


def test_a_slot_member_of_a_user_class_breaks_with_eager_result():
    def fn(d, o, x):
        return x * d.__get__(o)
    compiled = tjc.compile(fn, backend="eager")
    o = Slotted(3.0)
    assert same(compiled(Slotted.scale, o, torch.ones(2)), fn(Slotted.scale, o, torch.ones(2)))


def test_c_descriptors_of_static_types_live_for_the_process():
    for d in (torch.Tensor.shape, torch.Tensor.add_, str.upper, object.__repr__, dict.fromkeys.__self__.__dict__["fromkeys"]):
        assert process_lived.lives_for_the_process(d), d
    assert not process_lived.lives_for_the_process(Slotted.scale)   # its class may die
