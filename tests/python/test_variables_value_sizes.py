"""An op whose output size depends on tensor values is a graph break, never a constant.

tracer/variables/torch_objects/value_sizes.py: `torch.arange(0, b.max())`, nonzero, unique, masked_select, a
boolean mask, repeat_interleave with tensor repeats, a tensor slice bound are refused before they
run in the trace, so they run at call time. Before, what the trace read of such a result (its
shape, its length, a loop over it) was baked into the graph: the second call with another value
gave the first call's size. Each case runs the compiled function on two values and compares with
eager; the eager backend is the one that kept the wrong constant (aot_eager and inductor fail on
the graph and fall back).
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
import torch_jit_cache as tjc  # noqa: E402

x2 = torch.zeros(2)
CASES = {
    "arange_end_shape": (lambda x, b: x + torch.arange(0, b.max()).shape[0],
                         [(x2, torch.tensor([3])), (x2, torch.tensor([5]))]),
    "arange_len": (lambda x, b: x + len(torch.arange(0, b.max())), [(x2, torch.tensor([3])), (x2, torch.tensor([5]))]),
    "arange_zeros_like_shape": (lambda x, b: torch.zeros(torch.arange(0, b.max()).shape) + 1,
                                [(x2, torch.tensor([3])), (x2, torch.tensor([5]))]),
    "arange_numel": (lambda x, b: x + torch.arange(0, b.max()).numel(), [(x2, torch.tensor([3])), (x2, torch.tensor([5]))]),
    "arange_loop": (lambda x, b: [x * v for v in torch.arange(0, b.max())][-1],
                    [(x2 + 1, torch.tensor([3])), (x2 + 1, torch.tensor([5]))]),
    "arange_split": (lambda x, b: len(torch.arange(0, b.max()).split(1)) + x,
                     [(x2, torch.tensor([3])), (x2, torch.tensor([5]))]),
    "ones_of_max": (lambda x, b: x.sum() + torch.ones(b.max()).shape[0], [(x2, torch.tensor([3])), (x2, torch.tensor([5]))]),
    "slice_bound": (lambda x, b: x[:b.max()].shape[0] + x.sum(),
                    [(torch.ones(8), torch.tensor([3])), (torch.ones(8), torch.tensor([5]))]),
    "where_one_arg": (lambda x: x + torch.where(x > 0)[0].shape[0], [torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])]),
    "nonzero_size": (lambda x: x + x.nonzero().size(0), [torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])]),
    "masked_select": (lambda x: x.masked_select(x > 0).shape[0] + x, [torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])]),
    "bool_mask": (lambda x: x[x > 0].shape[0] + x, [torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])]),
    "unique": (lambda x: torch.unique(x).shape[0] + x, [torch.tensor([1, 1, 2]), torch.tensor([1, 2, 3])]),
    "repeat_interleave": (lambda x: torch.repeat_interleave(torch.ones(3), x).shape[0] + x,
                          [torch.tensor([1, 1, 2]), torch.tensor([1, 2, 3])]),
}


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_value_dependent_size_is_not_a_constant(case, dynamic):
    fn, inputs = CASES[case]
    compiled = tjc.compile(fn, dynamic=dynamic)
    for args in inputs:
        args = args if isinstance(args, tuple) else (args,)
        want, got = fn(*args), compiled(*args)
        assert got.shape == want.shape and torch.equal(got, want), (args, got, want)


def test_the_break_comes_before_the_op():
    # The graph before the op is kept, and what follows is compiled in the resume function with
    # the op's real result.
    def fn(x, b):
        y = x * 2
        n = torch.arange(0, b.max())
        return y + n.shape[0]
    explanation = tjc.explain(fn)(torch.ones(2), torch.tensor([3]))
    assert explanation.graph_break_count == 1
    assert "arange" in explanation.break_reasons[0]
    compiled = tjc.compile(fn)
    for b in (3, 5, 4):
        args = (torch.ones(2), torch.tensor([b]))
        assert torch.equal(compiled(*args), fn(*args))


def test_value_independent_sizes_stay_in_the_graph():
    # Integer tensor indices, a 0-d index and int repeats have sizes that do not depend on values.
    def fn(x, idx, i):
        return x[idx] + x[i] + torch.repeat_interleave(x, 2)[:3].sum() + torch.linalg.inv(torch.eye(2)).sum()
    explanation = tjc.explain(fn)(torch.arange(4.0), torch.tensor([0, 2]), torch.tensor(1))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = tjc.compile(fn)
    for i in (1, 3):
        args = (torch.arange(4.0), torch.tensor([0, 2]), torch.tensor(i))
        assert torch.equal(compiled(*args), fn(*args))


def _chunks(x, w):
    # Longformer's sliding-window arithmetic: an int division done as a tensor op, then a size.
    n = torch.div(x.size(1), w, rounding_mode="trunc")
    return x.view(x.size(0), n, w).sum(-1) + n


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_tensor_made_from_constants_is_read_as_its_value(backend):
    # The fake tensors carry the value of `torch.div(8, 4)`: the trace reads it as a size, and the
    # graph recomputes it at call time from the same constants.
    explanation = tjc.explain(_chunks)(torch.ones(2, 8), 4)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons
    compiled = tjc.compile(_chunks, backend=backend)
    for x, w in ((torch.randn(2, 8), 4), (torch.randn(3, 12), 4), (torch.randn(2, 8), 2)):
        assert torch.equal(compiled(x, w), _chunks(x, w))


def test_a_tensor_made_from_an_input_is_still_refused_as_a_size():
    # The same arithmetic on an input tensor's value: nothing the trace holds fixes it.
    def fn(x, w):
        return x.view(x.size(0), torch.div(x.size(1), w, rounding_mode="trunc"), -1).sum(-1)
    explanation = tjc.explain(fn)(torch.ones(2, 8), torch.tensor(4))
    assert explanation.graph_break_count == 1
    assert "used as a number" in explanation.break_reasons[0]
    compiled = tjc.compile(fn)
    for w in (4, 2):
        args = (torch.randn(2, 8), torch.tensor(w))
        assert torch.equal(compiled(*args), fn(*args))
