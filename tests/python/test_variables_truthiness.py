"""bool() of user objects as model code branches on it: `if cache:` / `if not past_key_values:`
over a class with __len__ (HF's DynamicCache), a class with __bool__, and a plain object (always
True). Each is compared with eager and counted; what __len__ / __bool__ read is guarded, so a
changed length or flag recompiles rather than reusing a stale branch. All failed before with
"truth value of a ... (it defines __bool__ or __len__)": one graph break per branch."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

from context_helpers import CompiledCalls  # noqa: E402


class Cache:
    """The shape of transformers' DynamicCache: a list of layers, truthy by its length."""

    def __init__(self, n):
        self.layers = [torch.ones(2) for _ in range(n)]

    def __len__(self):
        return len(self.layers)


class Flag:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


class Both:
    """__bool__ wins over __len__, as in Python."""

    def __bool__(self):
        return False

    def __len__(self):
        return 5


class Plain:
    pass


class NegativeLength:
    def __len__(self):
        return -1


class NotABool:
    def __bool__(self):
        return 1


def if_cache(x, cache):
    if cache:
        return x + len(cache)
    return x - 1


def if_not_cache(x, past_key_values):
    if not past_key_values:
        return x * 2
    return x + past_key_values.layers[0]


@pytest.mark.parametrize("fn", [if_cache, if_not_cache])
def test_len_truthiness_is_traced_and_a_changed_length_recompiles(fn):
    x = torch.randn(2)
    compiled = CompiledCalls(fn)
    empty, full = Cache(0), Cache(2)
    torch.testing.assert_close(compiled(x, empty), fn(x, empty))
    torch.testing.assert_close(compiled(x, full), fn(x, full))
    empty.layers.append(torch.full((2,), 3.0))       # the same object, now truthy
    torch.testing.assert_close(compiled(x, empty), fn(x, empty))
    full.layers.clear()                               # and the other, now falsy
    torch.testing.assert_close(compiled(x, full), fn(x, full))
    compiled.check(graphs=3, breaks=0)   # the length is guarded: lengths 0, 2, 1 (0 again hits)


def test_bool_truthiness_is_traced_and_a_changed_flag_recompiles():
    x = torch.randn(2)
    compiled = CompiledCalls(_flag_branch)
    flag = Flag(True)
    torch.testing.assert_close(compiled(x, flag), _flag_branch(x, flag))
    flag.on = False
    torch.testing.assert_close(compiled(x, flag), _flag_branch(x, flag))
    flag.on = True
    torch.testing.assert_close(compiled(x, flag), _flag_branch(x, flag))
    compiled.check(graphs=2, breaks=0)


def _flag_branch(x, flag):
    return x + 1 if flag else x - 1


@pytest.mark.parametrize("obj, expected", [(Both(), False), (Plain(), True)])
def test_bool_before_len_and_plain_objects_are_true(obj, expected):
    x = torch.randn(2)
    compiled = CompiledCalls(_flag_branch)
    torch.testing.assert_close(compiled(x, obj), x + 1 if expected else x - 1)
    compiled.check(graphs=1, breaks=0)


@pytest.mark.parametrize("obj, error", [(NegativeLength(), ValueError), (NotABool(), TypeError)])
def test_a_result_python_rejects_raises_as_in_eager(obj, error):
    # Not a constant Python accepts: the branch runs as written, and raises what eager raises.
    x = torch.randn(2)
    with pytest.raises(error) as eager:
        _flag_branch(x, obj)
    with pytest.raises(error) as compiled:
        CompiledCalls(_flag_branch)(x, obj)
    assert str(compiled.value) == str(eager.value)


def test_objects_the_trace_builds_answer_too():
    # A cache made inside the frame (NewObjectVariable): `if not cache` with its length known.
    def fn(x, n):
        cache = Cache(n)
        if not cache:
            return x - 1
        return x + len(cache)

    x = torch.randn(2)
    compiled = CompiledCalls(fn)
    for n in (0, 3, 0):
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    compiled.check(graphs=2, breaks=0)


def _validator(x):
    return x * 2


class Holder:
    def method(self, x):
        return x - 3


TABLE = {"f": _validator}


def test_functions_and_bound_methods_are_true():
    # huggingface_hub's `elif validator := table.get(origin):` branches on a function.
    def fn(x, key, obj):
        if validator := TABLE.get(key):
            x = validator(x)
        m = obj.method
        if m:
            x = m(x)
        return x + (1 if not fn else 0) + (1 if (lambda: 0) else 0)

    x = torch.randn(2)
    compiled = CompiledCalls(fn)
    for key in ("f", "g"):
        torch.testing.assert_close(compiled(x, key, Holder()), fn(x, key, Holder()))
    compiled.check(graphs=2, breaks=0)


class BoolIsNone:
    __bool__ = None

    def __len__(self):
        return 3


class ReturnsSelf:
    def __bool__(self):
        return self


class ReturnsInt:
    def __bool__(self):
        return 1


class LengthIsText:
    def __len__(self):
        return "3"


class HugeLength:
    def __len__(self):
        return 2 ** 70


def _truth_error(obj):
    try:
        bool(obj)
    except (TypeError, ValueError, OverflowError) as e:
        return type(e).__name__, str(e)
    return None


def test_refused_truth_raises_in_the_trace_where_a_try_catches_it():
    # Python's check of __bool__/__len__ (and a __bool__ set to None) raises in the trace, with
    # eager's message, and the frame's own `except` catches it: no break, no fallback.
    def fn(x):
        errors = [_truth_error(o) for o in (BoolIsNone(), ReturnsSelf(), ReturnsInt(), LengthIsText(),
                                            HugeLength(), NegativeLength(), NotABool())]
        return x + 1, errors

    x = torch.randn(2)
    compiled = CompiledCalls(fn)
    for _ in range(2):
        got, expected = compiled(x), fn(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    compiled.check(graphs=1, breaks=0)
