"""Calls of functools.lru_cache / functools.cache wrappers (tracer/variables/builtin_functions/lru_cache_calls.py):
a user's wrapper called without arguments, or with immutable constant arguments, is a read of its
cache: a guarded constant (the body runs as often as eager runs it; hits count guard checks); with
other arguments, or returning a mutable object, it is a graph break at the call, which runs it as
written (its statistics, cache and side effects as eager's); typing's cached subscriptions run
while tracing and give eager's alias. Every result, and what the functions did, is compared with
eager's."""
import functools
import gc
import typing
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


@functools.lru_cache
def feature_available():
    return True


@functools.cache
def width(n, name="ab"):
    return n * 2 + len(name)


def uses_cached_config(x):
    if feature_available():
        x = x + width(3, name="xyz")
    return x * width(1)


def test_a_users_cached_calls_with_constants_are_reads_with_eagers_statistics():
    stats = []
    for run in (uses_cached_config, CompiledCalls(uses_cached_config)):
        width.cache_clear()
        feature_available.cache_clear()
        results = [run(torch.ones(2)) for _ in range(2)]
        stats.append((width.cache_info()[:2], feature_available.cache_info().misses, results))
    assert stats[0][:2] == stats[1][:2]   # with arguments: hits and misses; without: its body's runs
    assert all(same(a, b) for a, b in zip(stats[0][2], stats[1][2]))
    run.check(graphs=1, breaks=0)


LEVELS = {"x": 1}


@functools.lru_cache(maxsize=None)
def level(name, scale=1):
    return LEVELS[name] * scale


def test_a_cached_value_is_guarded_and_read_again_after_cache_clear():
    def fn(x):
        return x * level("x", scale=3)

    calls = CompiledCalls(fn)
    level.cache_clear()
    LEVELS["x"] = 1
    assert same(calls(torch.ones(2)), torch.ones(2) * 3)
    LEVELS["x"] = 5                              # the cache still holds 3, as eager's call would see
    assert same(calls(torch.ones(2)), fn(torch.ones(2)))
    level.cache_clear()                          # eager's next call runs the body: 15
    assert same(calls(torch.ones(2)), torch.ones(2) * 15)
    calls.check(graphs=2, breaks=0, recompiles=1)


@functools.lru_cache(maxsize=None)
def other_level(name, scale=1):
    return 100


def test_another_wrapper_in_the_same_place_is_not_called_by_the_guards():
    def fn(x, f):
        return x * f("x", scale=2)

    calls = CompiledCalls(fn)
    level.cache_clear()
    other_level.cache_clear()
    LEVELS["x"] = 1
    assert same(calls(torch.ones(2), level), torch.ones(2) * 2)
    assert same(calls(torch.ones(2), other_level), torch.ones(2) * 100)
    assert other_level.cache_info().misses == 1 and level.cache_info().misses == 1
    calls.check(graphs=2, breaks=0, recompiles=1)


def test_arguments_that_are_not_constants_break():
    def fn(x):
        return x * width(x.shape[0] + len([x]))   # an int: constant under static shapes

    def gn(x, names):
        return x * level(names[0])                # a str read from a list argument: still constant

    def hn(x):
        return x * by_tensor(x)                   # a tensor: each new one is a miss in eager

    for f, args in ((fn, (torch.ones(2),)), (gn, (torch.ones(2), ["x"]))):
        calls = CompiledCalls(f)
        assert same(calls(*args), f(*args))
        calls.check(graphs=1, breaks=0)
    infos = []
    for run in (hn, CompiledCalls(hn)):
        by_tensor.cache_clear()
        x = torch.ones(2)
        assert same(run(x), x * 2) and same(run(torch.ones(2)), x * 2) and same(run(x), x * 2)
        infos.append(by_tensor.cache_info()[:2])
    assert infos[0] == infos[1] == (1, 2)
    assert run.delta("graph_breaks") >= 1


@functools.lru_cache(maxsize=None)
def by_tensor(t):
    return 2


EVENTS = []


@functools.lru_cache(maxsize=None)
def logged(n):
    EVENTS.append(n)   # a side effect eager makes on a miss only
    return n


@functools.lru_cache
def fresh_list(n):
    return [n]         # eager returns the one cached list


def test_side_effects_and_mutable_results_break_and_run_as_eager():
    def fn(x):
        out = fresh_list(2)
        out.append(len(out))   # mutates the cached list, as eager does
        return x * logged(3), fresh_list(2)

    EVENTS.clear()
    logged.cache_clear()
    fresh_list.cache_clear()
    calls = CompiledCalls(fn)
    got = [calls(torch.ones(2)) for _ in range(2)]
    assert EVENTS == [3]                      # once, on the first miss
    assert got[1][1] is fresh_list(2) and fresh_list(2) == [2, 1, 2]   # as two eager calls leave it
    assert tjc.stats()["graph_breaks"] > calls.before["graph_breaks"]


def test_an_unhashable_argument_raises_as_in_eager():
    def fn(x):
        return x * width([1])
    with pytest.raises(TypeError):
        fn(torch.ones(2))
    with pytest.raises(TypeError):
        tjc.compile(fn, backend="eager")(torch.ones(2))


class Item:
    pass


def test_typing_subscriptions_run_while_tracing_and_are_eagers_objects():
    def fn(x):
        hint = typing.Dict[str, typing.Optional[Item]]
        return x + 1, hint, typing.List[Item], typing.Union[int, None]

    calls = CompiledCalls(fn)
    for _ in range(2):
        got, want = calls(torch.ones(2)), fn(torch.ones(2))
        assert same(got[0], want[0])
        assert all(a is b for a, b in zip(got[1:], want[1:]))   # typing's cache gives one object
    if TYPING_CACHE_IN_CLOSURE:
        calls.check(graphs=1, breaks=0)


# Where typing's _tp_cache keeps each function's lru_cache wrapper: in the closure of its `inner`
# (3.11), which the trace reads as the wrapper it calls, or in the module dict `_caches` keyed by
# function (3.12, 3.13), a dict whose keys no guard holds: there the subscription is a graph break
# (docs/graph_breaks.md), with eager's results.
TYPING_CACHE_IN_CLOSURE = not hasattr(typing, "_caches")


def test_a_cached_function_passed_in_is_not_kept_alive():
    def fn(f, x):
        return x * f(2)
    compiled = tjc.compile(fn, backend="eager")
    f = functools.lru_cache(lambda n: n + 1)
    assert same(compiled(f, torch.ones(2)), fn(f, torch.ones(2)))
    ref = weakref.ref(f)
    del f
    gc.collect()   # a function's closure and its wrapper make a cycle; only the collector frees it
    assert ref() is None
