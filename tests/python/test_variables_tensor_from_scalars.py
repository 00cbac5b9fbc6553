"""tracer/variables/torch_objects/tensor_from_scalars.py: torch.tensor / torch.as_tensor / x.new_tensor of data
holding symbolic scalars is built by the graph (one 0-d tensor per number, stacked, cast), so a
dynamic size is not specialized and a data-dependent count (`.item()`, `nonzero().numel()` under
the capture switches) is not a graph break. Each call is compared with eager: values, dtype and
device; the number of graphs shows that no value was guarded."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import config  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402


@pytest.fixture
def capture(monkeypatch):
    monkeypatch.setattr(config, "capture_scalar_outputs", True)
    monkeypatch.setattr(config, "capture_dynamic_output_shape_ops", True)


def _same(got, want):
    assert got.dtype == want.dtype and got.device == want.device and got.shape == want.shape, (got, want)
    assert torch.equal(got, want), (got, want)


def _check(fn, inputs, graphs=1, **options):
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt, **options)
    for x in inputs:
        _same(compiled(x), fn(x))
    assert cnt.frame_count == graphs, cnt.frame_count
    assert tjc.explain(fn)(inputs[0]).graph_break_count == 0


def _count(a):
    return a.nonzero().squeeze(-1).numel()


COUNTED = [torch.tensor([1, 0, 0, 5]), torch.tensor([3, 2, 1, 1]), torch.tensor([0, 0, 0, 0])]   # one shape


@pytest.mark.parametrize("fn", [
    lambda a: a.new_tensor([_count(a)]),
    lambda a: a.new_tensor([[_count(a), 1], [_count(a) * 2, _count(a) - 1]]),
    lambda a: a.new_tensor((_count(a) * a.shape[0], a.shape[0] - _count(a))),
    lambda a: torch.tensor([_count(a), 2]),
    lambda a: torch.as_tensor([_count(a), 0.5]),
    lambda a: torch.tensor(_count(a)),
    lambda a: a.float().new_tensor([a.sum().item(), 1]),        # new_tensor: the tensor's dtype
    lambda a: torch.tensor([a.sum().item() > 2, True]),          # bools stay bool
    lambda a: torch.tensor([a.float().sum().item() / 3, -1.5], dtype=torch.int32),   # truncated
], ids=["new_tensor", "nested", "tuple_with_sizes", "tensor", "as_tensor_promoted", "zero_dim",
        "new_tensor_dtype", "bool", "cast"])
def test_data_dependent_numbers_make_one_graph(capture, fn):
    _check(fn, COUNTED)


def test_a_dynamic_size_is_not_specialized():
    # Before, each size was a guard (one graph per size); built by the graph, one serves all.
    def fn(x):
        return torch.tensor([[x.shape[0], 2.5]]), x.new_tensor([x.shape[0] - 1]) * 2

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt, dynamic=True)
    for n in [3, 5, 8]:
        x = torch.ones(n, dtype=torch.float64)
        for got, want in zip(compiled(x), fn(x)):
            _same(got, want)
    assert cnt.frame_count == 1


def test_ragged_data_still_raises_as_eager(capture):
    def fn(a):
        return torch.tensor([[a.sum().item()], [1, 2]])

    with pytest.raises(ValueError):
        fn(COUNTED[0])
    with pytest.raises(ValueError):
        tjc.compile(fn)(COUNTED[0])


def test_requires_grad_keeps_eagers_result(capture):
    def fn(a):
        return torch.tensor([float(_count(a))], requires_grad=True)

    got, want = tjc.compile(fn)(COUNTED[0]), fn(COUNTED[0])
    assert got.requires_grad and want.requires_grad
    torch.testing.assert_close(got, want)


def _zero_dim_rows(t):
    return (torch.tensor([t], dtype=torch.float32), torch.tensor([[t, 1.5], [t * 2, True]]),
            torch.as_tensor((t, t + 1)), t.new_tensor([t, 3]))


@pytest.mark.parametrize("dtype", [torch.int32, torch.float64])
def test_zero_dim_tensors_in_a_list_are_stacked_with_their_own_dtype(dtype):
    # torch reads each 0-d tensor as a number of its dtype; the graph stacks them: no break, the
    # values are not guarded (one graph for every value)
    cnt = CompileCounter()
    compiled = tjc.compile(_zero_dim_rows, backend=cnt)
    for v in (20, 7, -3):
        t = torch.tensor(v, dtype=dtype)
        for got, want in zip(compiled(t), _zero_dim_rows(t)):
            _same(got, want)
    assert cnt.frame_count == 1
    assert tjc.explain(_zero_dim_rows)(torch.tensor(1, dtype=dtype)).graph_break_count == 0


def test_the_result_is_detached_from_a_tensor_that_requires_grad():
    def rows(w):
        return torch.tensor([w * 3, 1.0])

    w = torch.tensor(0.5, requires_grad=True)
    got = tjc.compile(rows, backend=CompileCounter())(w)
    with pytest.warns(UserWarning):
        want = rows(w)
    _same(got, want)
    assert not got.requires_grad and got.grad_fn is None


@pytest.mark.parametrize("fn", [lambda t: torch.tensor(t + 1), lambda t: torch.tensor([t.reshape(1)]),
                                lambda t: torch.tensor([t * 2], dtype=torch.int64),
                                lambda t: torch.tensor([1, 2]).new_tensor([t])])
def test_a_tensor_that_is_no_number_of_a_list_is_left_to_torch(fn):
    t = torch.tensor(4.0)
    try:
        want = fn(t)
    except Exception as e:  # noqa: BLE001 - then the compiled call raises the same
        with pytest.raises(type(e)):
            tjc.compile(fn, backend=CompileCounter())(t)
        return
    _same(tjc.compile(fn, backend=CompileCounter())(t), want)
