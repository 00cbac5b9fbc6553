"""state_readers.py: C functions that read the interpreter's settings, called in the trace, read
and guarded through their source (sys.get_int_max_str_digits(), sys.getrecursionlimit())."""
import functools
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402


@pytest.fixture
def digits_limit():
    saved = sys.get_int_max_str_digits()
    yield
    sys.set_int_max_str_digits(saved)


def _limit_then_parse(x):
    n = sys.get_int_max_str_digits()
    try:
        int("7" * (n + 1))   # longer than the limit: ValueError
    except ValueError:
        return x + n
    return x - n


def test_the_digit_limit_is_a_guarded_constant_of_the_graph(digits_limit):
    # Before: a break at the call (a C function the tracer does not model), and again at the int().
    compiled = tjc.compile(_limit_then_parse)
    x = torch.ones(2)
    for limit in (5000, 5000, 6000, 0):
        sys.set_int_max_str_digits(limit)
        assert torch.equal(compiled(x), _limit_then_parse(x))
    stats = tjc.stats()
    assert stats["graph_breaks"] == 0 and stats["fallbacks"] == 0
    assert stats["recompiles"] == 2   # 6000, then 0 (no limit: int() parses it)


def _recursion_budget(x):
    return x * sys.getrecursionlimit()


def test_the_recursion_limit_changes_recompile():
    compiled = tjc.compile(_recursion_budget)
    x = torch.ones(2)
    saved = sys.getrecursionlimit()
    try:
        for limit in (saved, saved + 100):
            sys.setrecursionlimit(limit)
            assert torch.equal(compiled(x), _recursion_budget(x))
    finally:
        sys.setrecursionlimit(saved)
    assert tjc.stats()["recompiles"] == 1 and tjc.stats()["graph_breaks"] == 0


def _set_then_read(x, n):
    sys.set_int_max_str_digits(n)   # a setter: no pure function, a break; the read after it is fresh
    return x + sys.get_int_max_str_digits()


def test_a_read_after_the_setter_in_the_same_frame_sees_the_new_value(digits_limit):
    compiled = tjc.compile(_set_then_read)
    x = torch.ones(2)
    for n in (5000, 7000):
        expected = _set_then_read(x, n)
        sys.set_int_max_str_digits(4300)
        assert torch.equal(compiled(x, n), expected)
        assert sys.get_int_max_str_digits() == n


def _reader_with_an_argument(x):
    try:
        sys.getrecursionlimit(1)
    except TypeError as e:
        return x + len(str(e))
    return x


def test_a_reader_called_with_arguments_gives_eagers_error():
    compiled = tjc.compile(_reader_with_an_argument)
    x = torch.ones(2)
    assert torch.equal(compiled(x), _reader_with_an_argument(x))


def test_only_the_modules_own_functions_are_readers():
    from torch_jit_cache.tracer.variables.builtin_functions.state_readers import is_state_reader

    def get_int_max_str_digits():
        return 1

    get_int_max_str_digits.__module__ = "sys"
    assert is_state_reader(sys.get_int_max_str_digits) and is_state_reader(sys.getrecursionlimit)
    assert not is_state_reader(get_int_max_str_digits)
    assert not is_state_reader(sys.setrecursionlimit) and not is_state_reader(len)


# -- functions wrapped by functools.lru_cache, called without arguments --------------------------

_flag_reads = []


@functools.lru_cache(maxsize=None)
def _feature_available():
    _flag_reads.append(1)   # the body runs once per cache fill, as eager's calls run it
    return _FEATURE["on"]


_FEATURE = {"on": True}


def _gated(x):
    if _feature_available():
        return x * 2
    return x - 1


def test_a_cached_no_argument_function_is_a_guarded_constant_of_the_graph():
    # Failed before: a graph break at the call ("its __call__ is not a Python function").
    _feature_available.cache_clear()
    _flag_reads.clear()
    compiled = tjc.compile(_gated)
    x = torch.ones(2)
    for _ in range(3):
        assert torch.equal(compiled(x), _gated(x))
    stats = tjc.stats()
    assert (stats["graph_breaks"], stats["fallbacks"], stats["recompiles"]) == (0, 0, 0)
    assert len(_flag_reads) == 1   # the cache filled once, while tracing; never by the guards since
    _FEATURE["on"] = False         # the cache still answers True: eager and compiled both
    assert torch.equal(compiled(x), x * 2) and torch.equal(_gated(x), x * 2)
    _feature_available.cache_clear()   # now the next call reads False: the guard sees it
    try:
        assert torch.equal(compiled(x), x - 1)
        assert torch.equal(_gated(x), x - 1)
        assert tjc.stats()["recompiles"] == 1
    finally:
        _FEATURE["on"] = True
        _feature_available.cache_clear()


@functools.lru_cache(maxsize=None)
def _failing():
    raise RuntimeError("no backend")


def _calls_failing(x):
    try:
        _failing()
    except RuntimeError:
        return x + 1
    return x


def test_a_cached_function_that_raises_runs_as_written():
    compiled = tjc.compile(_calls_failing)
    x = torch.ones(2)
    assert torch.equal(compiled(x), _calls_failing(x))
