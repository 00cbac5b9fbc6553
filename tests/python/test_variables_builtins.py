"""tracer/variables/builtin_functions/builtins.py through the public API: Python's builtins in traced code.

The contract: a builtin on Python constants folds to eager's answer while tracing (no graph op), on
tensors it answers only what is static (len of a tensor is its first dimension, isinstance its
type) or becomes a graph op (abs, sum over tensors); what would need a tensor's value (float(t)),
or has an effect outside the trace (print), is a graph break with a reason naming it, never a
guess. Each case compares the compiled call with eager's and counts graphs and breaks.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import compiled_like_eager  # noqa: E402


def _len_of_things(x, xs, d):
    return x * len(xs) + len(d) + len(x)


def _range_enumerate_zip(x, ws):
    out = x
    for i, w in enumerate(ws, start=1):
        out = out + w * i
    for a, b in zip(range(3), range(10, 13)):
        out = out + a * b
    return out


def _isinstance_answers(x, xs):
    return (x + 1 if isinstance(x, torch.Tensor) else x,
            isinstance(xs, (list, tuple)), isinstance(3, bool), issubclass(bool, int))


def _min_max_abs_sum(x, n):
    m = max(n, 2) - min(n, 1, 0)
    return abs(x) * m, sum([x, x * 2, x * 3]), sum(range(n))


def _getattr_and_hasattr(x, m):
    scale = getattr(m, "scale", 10.0)
    missing = getattr(m, "missing", 5.0)
    return x * scale + missing, hasattr(m, "weight"), hasattr(m, "nope")


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3))
        self.scale = 2.0


def _constructors(x, n):
    return x + int("7") + float(n), tuple([1, 2]), list((3, 4)), dict(a=1, b=n), bool(n)


@pytest.mark.parametrize("fn, args", [
    (_len_of_things, lambda: (torch.randn(4, 2), [1, 2, 3], {"a": 1})),
    (_range_enumerate_zip, lambda: (torch.randn(3), [torch.randn(3), torch.randn(3)])),
    (_isinstance_answers, lambda: (torch.randn(2), [1])),
    (_min_max_abs_sum, lambda: (torch.randn(3), 4)),
    (_getattr_and_hasattr, lambda: (torch.randn(3), _Scaled())),
    (_constructors, lambda: (torch.randn(2), 3)),
], ids=lambda v: getattr(v, "__name__", "")[1:])
def test_builtins_fold_or_become_graph_ops_in_one_graph(fn, args):
    compiled_like_eager(fn, *args())


def test_builtins_on_constants_leave_no_op_in_the_graph():
    def fold(x):
        return x + (len("abcd") + max(3, 9) + abs(-2) + sum([1, 2]) + int(2.7))

    out = tjc.explain(fold)(torch.zeros(2))
    assert out.ops_per_graph == [["add"]], "the builtins folded to one constant"


def test_abs_of_a_tensor_is_a_graph_op():
    out = tjc.explain(lambda x: abs(x))(torch.randn(3))
    assert out.ops_per_graph == [["abs"]]


def _float_of_a_tensor(x):
    return x * float(x.sum())


def _print_in_the_middle(x):
    y = x + 1
    print("between")
    return y * 2


@pytest.mark.parametrize("fn, reason", [(_float_of_a_tensor, "float() of a tensor"),
                                        (_print_in_the_middle, "print()")])
def test_builtins_that_need_a_value_or_have_an_effect_break_with_a_reason(fn, reason, capsys):
    x = torch.randn(3)
    compiled_like_eager(fn, x, graphs=2, breaks=1)
    out = tjc.explain(fn)(x)
    (why,) = out.break_reasons
    assert reason in why


def test_len_of_a_zero_dim_tensor_raises_as_eager_does():
    def zero_dim_len(x):
        return len(x)

    with pytest.raises(TypeError) as eager:
        zero_dim_len(torch.tensor(1.0))
    with pytest.raises(TypeError) as compiled:
        tjc.compile(zero_dim_len, backend="eager")(torch.tensor(1.0))
    assert str(compiled.value) == str(eager.value)


def test_a_constant_builtin_answer_is_guarded_by_what_it_read():
    def by_length(x, xs):
        return x * len(xs)

    x = torch.ones(2)
    compiled = tjc.compile(by_length, backend="eager")
    assert compiled(x, [1, 2]).tolist() == [2.0, 2.0]
    assert compiled(x, [1, 2, 3]).tolist() == [3.0, 3.0], "a longer list is a miss, not the old length"


def _isinstance_with_a_keyword(x):
    y = x.sin()
    if isinstance(y, torch.Tensor, strict=True):
        y = y + 1
    return y


def _len_of_two_things(x):
    return x * len([1], [2])


def _sorted_with_an_unknown_keyword(x):
    return x * sorted([3, 1], reversed=True)[0]


@pytest.mark.parametrize("fn", [_isinstance_with_a_keyword, _len_of_two_things, _sorted_with_an_unknown_keyword])
def test_a_builtin_called_with_arguments_it_does_not_take_raises_as_eager_does(fn):
    # The handler of a builtin reads its arguments as it needs them; a call Python itself refuses
    # (an unknown keyword, one argument too many) must raise eager's TypeError, not be answered.
    x = torch.ones(3)
    with pytest.raises(TypeError) as eager:
        fn(x)
    with pytest.raises(TypeError) as compiled:
        tjc.compile(fn, backend="eager")(x)
    assert str(compiled.value) == str(eager.value)


def test_a_builtin_called_as_its_signature_allows_still_folds():
    def keywords_it_takes(x, xs):
        return x * sorted(xs, key=None, reverse=True)[0] + isinstance(x, torch.Tensor)

    compiled_like_eager(keywords_it_takes, torch.ones(2), [1, 4, 2])


def test_isinstance_with_a_class_that_decides_isinstance_itself_answers_as_eager_does():
    # torch.FloatTensor's metaclass checks the tensor's dtype; a tensor's type alone says nothing.
    def fn(x, tensor_type):
        return x + 1, isinstance(x, tensor_type), isinstance(x, (int, tensor_type)), isinstance(2, tensor_type)

    compiled = tjc.compile(fn, backend="eager")
    for x, tensor_type in [(torch.ones(2), torch.FloatTensor), (torch.ones(2, dtype=torch.float64), torch.FloatTensor),
                           (torch.ones(2, dtype=torch.float64), torch.DoubleTensor), (torch.ones(2), torch.LongTensor)]:
        assert compiled(x, tensor_type)[1:] == fn(x, tensor_type)[1:]


def _evals_literals(x):
    flag = True
    return x + 1, eval(repr(False)), eval(repr(flag)) is flag, eval("(1, -2.5, 'a', None)"), eval("[3, 4]")


def test_eval_of_a_constant_literal_is_its_value():
    # No name of the frame can change a literal's value: folded, one graph, no break.
    compiled_like_eager(_evals_literals, torch.ones(2))


def _evals_a_name(x):
    y = 3
    return x + eval("y")


def test_eval_that_reads_names_runs_as_written():
    torch.testing.assert_close(tjc.compile(_evals_a_name, backend="eager")(torch.ones(2)), _evals_a_name(torch.ones(2)))


def _protocol_slots(x, items):
    r, t, d = range(3), (1, 2), {"a": 1}
    it = iter(items)
    first = it.__next__()
    return (x + next(r.__iter__()) + t.__len__() + r.__len__() + d.__len__() + list(r.__reversed__())[0],
            first, list(it), items.__len__())


def test_protocol_slots_called_by_name_are_their_builtins():
    cnt = CompileCounter()
    compiled = tjc.compile(_protocol_slots, backend=cnt)
    for items in ([5, 6, 7], [1]):
        got, want = compiled(torch.ones(2), items), _protocol_slots(torch.ones(2), items)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert tjc.explain(_protocol_slots)(torch.ones(2), [1, 2]).graph_break_count == 0


def test_protocol_slots_with_arguments_or_exhausted_raise_as_in_eager():
    def with_argument(x):
        return x + iter([1]).__next__(5)

    def exhausted(x):
        it = iter(())
        return x + it.__next__()

    for fn, error in ((with_argument, TypeError), (exhausted, StopIteration)):
        with pytest.raises(error):
            fn(torch.ones(1))
        with pytest.raises(error):
            tjc.compile(fn, backend="eager")(torch.ones(1))
