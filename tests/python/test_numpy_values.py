"""numpy in traced code (tracer/variables/torch_objects/numpy_values.py): numpy calls on constants run while
tracing, arrays the trace made reach the graph through torch.from_numpy / torch.tensor as constant
tensors, numpy numbers meet tensors in binary operators. Arrays stay right (each call makes its
own; a mutation or a view breaks). numpy on tensors: test_numpy_tensors.py."""
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
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        assert got.dtype == expected.dtype and got.requires_grad == expected.requires_grad
    elif isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
    else:
        assert got == expected


def check(fn, *args, counts=(1, 0, [])):
    expected = fn(*args)
    if counts is not None:
        assert explain_counts(fn, *args) == counts
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        _same(compiled(*args), expected)


def local_import(x):
    import numpy as np
    a = np.arange(4, dtype=np.float32)
    return x + torch.from_numpy(a) * np.float32(2.0)


def creation_and_ufuncs(x):
    grid = np.linspace(0.0, 1.0, 4)
    scale = np.sqrt(np.ones(4) * 2) + (grid * 3 - 1) / 2
    t = torch.tensor(scale, dtype=torch.float32) + torch.as_tensor(np.zeros((4,), dtype=np.float32))
    return x * t + torch.from_numpy(grid).float(), grid.shape, int(grid.size)


def table_to_tensor(x):
    table = np.array([[1, 2], [3, 4]], dtype=np.int64)
    total = table.sum()
    return torch.tensor(table) + x.long(), x * total, x + np.float64(0.5), np.int64(3) * x


def returns_the_array(x):
    a = np.full((2, 2), 7.0)
    return x + 1, a, a


@pytest.mark.parametrize("fn", [local_import, creation_and_ufuncs, table_to_tensor, returns_the_array],
                         ids=lambda f: f.__name__)
def test_numpy_on_constants_is_traced(fn):
    check(fn, torch.randn(4) if fn is not table_to_tensor else torch.ones(2, 2))


def test_an_array_that_escapes_is_a_new_array_per_call():
    compiled = tjc.compile(returns_the_array, backend="eager")
    _, a, b = compiled(torch.zeros(1))
    assert a is b                      # one object, as in eager
    a[0, 0] = -1.0                     # the caller's change does not reach the next call's array
    _, c, _ = compiled(torch.zeros(1))
    assert c is not a and c[0, 0] == 7.0


def shares_memory(x):
    a = np.arange(3.0)
    t = torch.from_numpy(a)
    return x + t, t, a                 # t and a share memory in eager


def mutated(x):
    a = np.zeros(3)
    a[1] = 5.0                         # item assignment: a break, the rest stays right
    return x + torch.from_numpy(a)


def updated_in_place(x):
    a = np.ones(3)
    a += 2                             # an in-place operator on the array: a break
    return x + torch.tensor(a)


def view_of_an_array(x):
    a = np.arange(6.0)
    b = a.reshape(2, 3)                # a view of a: a break
    return x + torch.from_numpy(b), a


def numpy_scalar_as_torch_argument(x):
    return x + torch.full((2,), np.float64(1.5)), torch.tensor(np.float64(2.0))


def numpy_bool_with_tensor(x):
    return x * np.bool_(True)


@pytest.mark.parametrize("fn", [shares_memory, mutated, updated_in_place, view_of_an_array,
                                numpy_scalar_as_torch_argument, numpy_bool_with_tensor],
                         ids=lambda f: f.__name__)
def test_what_the_trace_cannot_keep_runs_as_eager(fn):
    x = torch.randn(3) if fn is not numpy_scalar_as_torch_argument else torch.randn(2)
    if fn is view_of_an_array:
        x = torch.randn(2, 3)
    graphs, breaks, fallbacks = explain_counts(fn, x)
    assert breaks >= 1 or fallbacks
    check(fn, x, counts=None)


def test_from_numpy_memory_stays_shared():
    _, t, a = tjc.compile(shares_memory, backend="eager")(torch.zeros(3))
    a[0] = 9.0
    assert t[0].item() == 9.0


def uses_global_numpy(x):
    return x + torch.from_numpy(np.arange(3.0))


def test_a_numpy_function_replaced_later_recompiles():
    counter = CompileCounter()
    compiled = tjc.compile(uses_global_numpy, backend=counter)
    x = torch.zeros(3)
    torch.testing.assert_close(compiled(x), torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64))
    original = np.arange
    np.arange = lambda n: original(n) * 10.0
    try:
        torch.testing.assert_close(compiled(x), torch.tensor([0.0, 10.0, 20.0], dtype=torch.float64))
    finally:
        np.arange = original
    assert counter.frame_count == 2


def test_numpy_numbers_in_tensor_operators_follow_python_numbers():
    # What numpy_number_as_python relies on: a numpy number in a tensor operator gives the dtype
    # and values a Python number does (np.bool_ does not: refused there).
    for dtype in (torch.float16, torch.float32, torch.int64, torch.int32, torch.uint8):
        t = torch.arange(3).to(dtype)
        for value in (np.float32(2.5), np.float64(0.1), np.int64(3), np.int8(-2), np.float16(1.5)):
            for op in (lambda a, b: a * b, lambda a, b: b + a, lambda a, b: a / b, lambda a, b: b - a):
                got, want = op(t, value), op(t, value.item())
                assert got.dtype == want.dtype and torch.equal(got, want), (dtype, value)


def out_by_position(x):
    a = np.ones(3)
    b = np.zeros(3)
    np.add(a, 1.0, b)                  # writes into b: the result is b itself, refused
    np.cumsum(a, 0, None, b)
    return x + torch.from_numpy(b), x * float(a.sum(out=None))


def test_a_numpy_call_that_writes_into_an_array_runs_as_eager():
    x = torch.randn(3)
    assert explain_counts(out_by_position, x)[1] >= 1
    check(out_by_position, x, counts=None)


def add_remainder(x, a, b):
    return x + (a % b), np.stack([np.ones([2, a % 3 + 1])], axis=0).shape


def test_a_numpy_number_from_the_frame_is_a_guarded_constant():
    # np.int64 arguments are constants of the trace (one graph), guarded by type and by item():
    # another value, or another numpy type, compiles again and stays eager's.
    x = torch.randn(3)
    assert explain_counts(add_remainder, x, 4096, np.int64(8)) == (1, 0, [])
    cnt = CompileCounter()
    compiled = tjc.compile(add_remainder, backend=cnt)
    for b in (np.int64(8), np.int64(8), np.int64(9), np.int32(9)):
        _same(compiled(x, 4096, b), add_remainder(x, 4096, b))
    assert cnt.frame_count == 3


def items_into_legacy_types(x):
    # Items of an array the trace made are numpy numbers; torch's legacy types take a list of
    # them (or of Python numbers) as torch.tensor(data, dtype=T.dtype) does.
    a = np.array([1, 2, 3, 4, 5, 6], dtype=np.int64)
    grid = np.array([[0.5, 1.5], [2.5, 3.5]])
    picked = a[[0, 2]]                                # a new array (fancy indexing copies)
    return (torch.LongTensor([a[0], a[2], a[-1]]), x + torch.FloatTensor([grid[1, 0], grid[0, 1]]),
            torch.BoolTensor([[1, 0], [0, 2]]), torch.IntTensor((picked.sum(), 7.9)), picked)


def test_array_items_and_legacy_tensor_types_are_traced():
    check(items_into_legacy_types, torch.ones(2))


def a_slice_is_a_view(x):
    a = np.arange(6.0)
    return x + torch.tensor(a[1:3])


def legacy_type_given_a_size(x):
    return x + torch.FloatTensor(2).zero_()


def test_a_slice_of_an_array_and_a_legacy_type_given_a_size_still_break():
    check(a_slice_is_a_view, torch.ones(2), counts=None)
    assert explain_counts(a_slice_is_a_view, torch.ones(2))[1] == 1
    check(legacy_type_given_a_size, torch.ones(2), counts=None)
    assert explain_counts(legacy_type_given_a_size, torch.ones(2))[1] == 1
