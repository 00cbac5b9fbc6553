"""numpy arrays traced as tensors (tracer/variables/torch_objects/numpy_tensors.py): an array the frame holds,
or one `t.numpy()` made, is a tensor of the graph, and numpy functions, methods and operators on it
run through torch._numpy in the graph. Each result is eager's in type (ndarray, numpy scalar,
tensor), dtype, shape and values; where torch._numpy would differ from numpy the call breaks."""
import gc
import weakref

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")   # the torch-free environment (hunt-leaks) has neither

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import explain_counts  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def _same(got, expected):
    assert type(got) is type(expected), (got, expected)
    if isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert got.dtype == expected.dtype and np.shape(got) == np.shape(expected)
        assert np.allclose(got, expected, equal_nan=True)
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
    else:
        assert got == expected


def check(fn, *args, whole=True):
    expected = fn(*args)
    if whole:
        assert explain_counts(fn, *args) == (1, 0, [])
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        _same(compiled(*args), expected)


def scaled_sum(a, b):
    return (a * 3 - b) / 2 + np.float32(1.0), a >= b


def mean_over_rows(a):
    return a.sum() / len(a), np.sqrt(np.abs(a)).mean(axis=0)


def through_tensor(t):
    arr = t.numpy()
    return np.add(arr, 1.5), np.exp(arr).astype(np.float64)


def casts(a):
    return (a * 4).astype(bool).astype(float).astype(int) - 1


def gather_columns(a, idx):
    return np.take_along_axis(a, idx, 1), np.stack([a, a], axis=0).shape


def rows_of(a):
    return [row * 2 for row in a]


def size_plus(a):
    return a.size + a.T


def array_to_tensor(a, t):
    return torch.from_numpy(a) * t, torch.tensor(a, dtype=torch.float32) + 1


def array_and_tensor(a, t):
    return t + a, t * a, t - a


@pytest.mark.parametrize("fn,args", [
    (scaled_sum, (np.linspace(0, 1, 6).reshape(2, 3), np.full((2, 3), 0.5))),
    (mean_over_rows, (np.arange(12, dtype=np.float32).reshape(3, 4) - 6,)),
    (through_tensor, (torch.randn(3, 2),)),
    (casts, (np.random.default_rng(0).random(5),)),
    (gather_columns, (np.arange(12.0).reshape(3, 4), np.array([[3], [0], [1]]))),
    (rows_of, (np.arange(6).reshape(3, 2),)),
    (size_plus, (np.arange(6).reshape(2, 3),)),
    (array_to_tensor, (np.arange(4.0), torch.ones(4, dtype=torch.float64))),
    (array_and_tensor, (np.arange(3, dtype=np.float32), torch.randn(3))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_numpy_on_arrays_is_one_graph(fn, args):
    check(fn, *args)


def test_a_reduction_gives_a_numpy_scalar_as_numpy_does():
    def total(a):
        return a.sum(), a.max() * 2, a[1]
    got = tjc.compile(total, backend="eager")(np.arange(4.0))
    assert [type(v) for v in got] == [np.float64, np.float64, np.float64]
    check(total, np.arange(4.0))


def test_a_frame_array_returned_is_the_frames_own():
    def same(a, t):
        return a, t + 1
    a = np.arange(3.0)
    got, _ = tjc.compile(same, backend="eager")(a, torch.zeros(3))
    assert got is a


def test_numpy_from_a_tensor_shares_its_memory():
    def view(t):
        return t.numpy(), t.numpy(force=True)
    t = torch.zeros(3)
    arr, forced = tjc.compile(view, backend="eager")(t)
    t[0] = 7.0
    assert arr[0] == 7.0 and forced[0] == 7.0


def test_a_changed_dtype_shape_or_layout_recompiles():
    def f(a):
        return a * 2 + 1
    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    inputs = [np.arange(4.0), np.arange(4.0) + 1, np.arange(4, dtype=np.int32), np.arange(6.0),
              np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2).T]
    for a in inputs:
        _same(compiled(a), f(a))
    assert cnt.frame_count == 5   # the second array only differs in its values


def test_where_torch_numpy_differs_from_numpy_the_call_breaks():
    def f(a):
        return a.astype(np.uint16) + 1   # no torch dtype for uint16 results of numpy
    a = np.arange(4)
    graphs, breaks, fallbacks = explain_counts(f, a)
    assert breaks >= 1 or fallbacks
    check(f, a, whole=False)


def bump(a, b):
    a += b
    a[0:1] *= 2          # a view of a, updated in place: a changes too
    return a


def bump_through_tensor(t):
    arr = t.numpy()
    arr -= 1             # t's memory: t changes, as in eager
    return t * 2


def bump_int_by_float(a):
    a += 0.5             # numpy refuses the cast (same_kind): eager raises, and so does the compiled call
    return a


def test_in_place_operators_change_the_very_array():
    a, b = np.arange(3.0), np.ones(3)
    expected = bump(a.copy(), b)
    mine = a.copy()
    assert explain_counts(bump, a.copy(), b)[1:] == (0, [])
    got = tjc.compile(bump, backend="eager")(mine, b)
    assert got is mine and np.array_equal(mine, expected)
    t_eager, t_mine = torch.arange(3.0), torch.arange(3.0)
    expected = bump_through_tensor(t_eager)
    _same(tjc.compile(bump_through_tensor, backend="eager")(t_mine), expected)
    assert torch.equal(t_mine, t_eager)


def test_an_in_place_cast_numpy_refuses_raises_as_in_eager():
    with pytest.raises(Exception) as eager:
        bump_int_by_float(np.arange(3))
    with pytest.raises(type(eager.value)):
        tjc.compile(bump_int_by_float, backend="eager")(np.arange(3))


def test_read_only_and_unsupported_dtypes_stay_as_eager():
    def f(a):
        return a
    ro = np.broadcast_to(np.arange(3), (2, 3))
    assert tjc.compile(f, backend="eager")(ro) is ro
    u = np.arange(3, dtype=np.uint16)
    assert tjc.compile(f, backend="eager")(u) is u


def test_the_cache_does_not_keep_the_array_alive():
    def f(a):
        return np.sin(a) + 1
    compiled = tjc.compile(f, backend="eager")
    gc.disable()
    try:
        a = np.arange(5.0)
        compiled(a)
        ref = weakref.ref(a)
        del a
        assert ref() is None
    finally:
        gc.enable()


def assign_items(a, b):
    a[0] = 7             # a number into a row: broadcast, as numpy does
    a[1, 1:] = b[0, :2]  # an array into a view
    a[-1, 0] = 2.9       # a float into an int array: cast, as numpy's assignment casts
    return a.sum(axis=1)


def test_item_assignment_with_basic_keys_changes_the_very_array():
    a, b = np.arange(9).reshape(3, 3), np.full((2, 3), -1)
    expected_a = a.copy()
    expected = assign_items(expected_a, b)
    assert explain_counts(assign_items, a.copy(), b)[1:] == (0, [])
    mine = a.copy()
    _same(tjc.compile(assign_items, backend="eager")(mine, b), expected)
    assert np.array_equal(mine, expected_a)


def test_item_assignment_with_a_mask_runs_as_eager():
    def masked(a):
        a[a > 2] = 0
        return a
    a = np.arange(5.0)
    graphs, breaks, fallbacks = explain_counts(masked, a.copy())
    assert breaks >= 1 or fallbacks
    mine = a.copy()
    tjc.compile(masked, backend="eager")(mine)
    assert np.array_equal(mine, masked(a.copy()))
