"""tjc.set_stance (frontend/stance.py): force_eager, eager_on_recompile, fail_on_recompile, as a call, a
context manager and a decorator; bad stances; what a stance keeps alive."""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.frontend import stance  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


@pytest.fixture(autouse=True)
def default_stance():
    assert stance.current() == "default"
    yield
    tjc.set_stance("default")


def _f(x):
    return torch.relu(x) * 2 + 1


def _warm():
    counter = CompileCounter()
    compiled = tjc.compile(_f, backend=counter, dynamic=False)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), _f(x))
    assert counter.frame_count == 1
    return counter, compiled


def test_fail_on_recompile_raises_naming_the_guard_and_hits_still_run():
    counter, compiled = _warm()
    tjc.set_stance("fail_on_recompile")
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), _f(x))      # a hit: fine
    with pytest.raises(tjc.RecompileError, match=r"_f.*would compile again.*failed"):
        compiled(torch.randn(5))
    assert counter.frame_count == 1
    tjc.set_stance("default")
    y = torch.randn(5)
    torch.testing.assert_close(compiled(y), _f(y))
    assert counter.frame_count == 2


def test_fail_on_recompile_lets_a_first_compile_happen():
    with tjc.set_stance("fail_on_recompile"):
        counter = CompileCounter()
        compiled = tjc.compile(_f, backend=counter)
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), _f(x))
    assert counter.frame_count == 1


def test_eager_on_recompile_runs_the_original_and_keeps_hitting():
    counter, compiled = _warm()
    with tjc.set_stance("eager_on_recompile"):
        for n in (5, 6, 4):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), _f(x))
    assert counter.frame_count == 1, "no recompile under eager_on_recompile"
    assert len(tjc.cache_entries(compiled)) == 1
    hits = tjc.stats()["hits"]
    compiled(torch.randn(4))
    assert tjc.stats()["hits"] == hits + 1


def test_force_eager_runs_uncompiled_and_keeps_the_cache():
    counter, compiled = _warm()
    hits, misses = tjc.stats()["hits"], tjc.stats()["misses"]
    with tjc.set_stance("force_eager"):
        for n in (4, 7):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), _f(x))
        fresh_counter = CompileCounter()
        fresh = tjc.compile(_f, backend=fresh_counter)
        fresh(torch.randn(2))
    assert (tjc.stats()["hits"], tjc.stats()["misses"]) == (hits, misses), "no frame was intercepted"
    assert counter.frame_count == 1 and fresh_counter.frame_count == 0
    compiled(torch.randn(4))
    assert tjc.stats()["hits"] == hits + 1, "the cached entry serves again after the block"


def test_force_eager_covers_compiled_modules():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    counter = CompileCounter()
    compiled = tjc.compile(model, backend=counter)
    x = torch.randn(2, 4)
    with tjc.set_stance("force_eager"):
        torch.testing.assert_close(compiled(x), model(x))
    assert counter.frame_count == 0
    torch.testing.assert_close(compiled(x), model(x))
    assert counter.frame_count == 1


def test_the_decorator_applies_the_stance_only_while_the_function_runs():
    seen = []

    @tjc.set_stance("force_eager")
    def serve():
        seen.append(stance.current())
        raise KeyError("boom")
    assert stance.current() == "default", "decorating changes nothing"
    with pytest.raises(KeyError):
        serve()
    assert seen == ["force_eager"] and stance.current() == "default"
    assert serve.__name__ == "serve"


def test_the_context_manager_restores_the_previous_stance_on_error():
    tjc.set_stance("eager_on_recompile")
    with pytest.raises(ValueError):
        with tjc.set_stance("fail_on_recompile"):
            assert stance.current() == "fail_on_recompile"
            raise ValueError
    assert stance.current() == "eager_on_recompile"


@pytest.mark.parametrize("bad, error", [("nope", ValueError), ("", ValueError), (3, TypeError), (None, TypeError)])
def test_a_bad_stance_is_refused_and_changes_nothing(bad, error):
    with pytest.raises(error, match="set_stance"):
        tjc.set_stance(bad)
    assert stance.current() == "default"
    assert not tjc._C._force_eager()


def test_a_compiled_module_run_under_force_eager_is_freed(no_gc):
    model = torch.nn.Linear(3, 3)
    compiled = tjc.compile(model, backend=CompileCounter())
    with tjc.set_stance("force_eager"):
        compiled(torch.randn(1, 3))
    compiled(torch.randn(1, 3))
    refs = weakref.ref(model), weakref.ref(compiled)
    del model, compiled
    assert [r() for r in refs] == [None, None]


def _double(x):
    return x * 2


@tjc.disable
def _eager_block(x):
    with tjc.set_stance("force_eager"):
        return _double(x)


def _outer(x):
    return _eager_block(x + 1) - 1


def test_force_eager_entered_inside_a_running_compiled_call_runs_misses_eagerly():
    # The outer call was intercepted before the stance changed: frames below it still reach the
    # miss callback, which must run them as written, not compile them or treat them as recompiles.
    counter = CompileCounter()
    compiled = tjc.compile(_outer, backend=counter, dynamic=False)
    for n in (3, 4):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), _outer(x))
    assert stance.current() == "default"
    assert tjc.cache_entries(_double) == [], "nothing compiled under force_eager"
