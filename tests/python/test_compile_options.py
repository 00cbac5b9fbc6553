"""compile()'s arguments and the switches around it: bad arguments and options of the wrong type or
range, tjc.config settings, fullgraph and fallbacks, a raising backend, disable(), the TJC log
channels and stats()."""
import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import rand, same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


def f_arith(x, y):
    return x * y + x - y / 2


# --- fallbacks ---

def test_unsupported_code_runs_correctly_and_is_counted(caplog):
    def data_dependent(x):
        try:   # no graph break is made inside a try block: the frame falls back
            if x.sum() > 0:
                return x + 1
            return x - 1
        finally:
            pass

    opt = tjc.compile(data_dependent, backend=CompileCounter())
    x = torch.ones(3)
    assert same(opt(x), x + 1)
    assert same(opt(-x), -x - 1)
    assert tjc.stats()["fallbacks"] >= 1


def test_fullgraph_raises_naming_the_line():
    def with_print(x):
        print("hello")
        return x + 1

    opt = tjc.compile(with_print, fullgraph=True)
    with pytest.raises(Exception, match="fullgraph"):
        opt(rand(2))


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="function, method or nn.Module"):
        tjc.compile(42)
    with pytest.raises(ValueError):
        tjc.compile(f_arith, backend="no-such-backend")
    with pytest.warns(RuntimeWarning, match="not a Python function"):
        assert tjc.compile(len) is len


def test_disable_keeps_a_function_uncompiled():
    def inner(x):
        return x + 1

    def outer(x):
        return inner(x) * 2

    tjc.disable(inner)
    cnt = CompileCounter()
    opt = tjc.compile(inner, backend=cnt)
    x = rand(3)
    assert same(opt(x), x + 1)
    assert cnt.frame_count == 0, "a disabled function is never compiled"
    tjc.reset()
    assert same(opt(x), x + 1) and cnt.frame_count == 0, "disable() survives reset()"


def test_tjc_log_prints_graph_guards_bytecode_and_recompiles(capsys):
    from torch_jit_cache.runtime import log

    def f(x):
        return x.sin() + 1

    old = tjc.config.log
    tjc.config.log = frozenset({"graph", "guards", "bytecode", "recompiles"})
    log.logger.handlers.clear()
    try:
        opt = tjc.compile(f)
        opt(rand(3))
        opt(rand(4))
    finally:
        tjc.config.log = old
        log.logger.handlers.clear()
    err = capsys.readouterr().err
    assert "graph:" in err and "sin" in err
    assert "guards:" in err and "TENSOR_MATCH" in err
    assert "bytecode:" in err
    assert "recompiles:" in err and "L['x'].size()[0]: expected 3, got 4" in err


def test_tjc_log_fallbacks_prints_every_fallback_with_its_reason(capsys):
    from torch_jit_cache.runtime import log

    # Inside try blocks, where no graph break is made: both fall back.
    def first(x):
        try:
            print("", end="")
        finally:
            pass
        return x + 1

    def second(x):
        try:
            print("", end="")
        finally:
            pass
        return x + 2

    old = tjc.config.log
    tjc.config.log = frozenset({"fallbacks"})
    log.logger.handlers.clear()
    tjc.reset()   # pytest --refleaks repeats the body: the skip marks of the last run go
    try:
        tjc.compile(first)(rand(2))
        tjc.compile(second)(rand(2))
    finally:
        tjc.config.log = old
        log.logger.handlers.clear()
    err = capsys.readouterr().err
    assert "fallbacks: 'test_tjc_log_fallbacks_prints_every_fallback_with_its_reason.<locals>.first'" in err
    assert "fallbacks: 'test_tjc_log_fallbacks_prints_every_fallback_with_its_reason.<locals>.second'" in err
    assert err.count("print() (a side effect)") >= 2


def test_stats_count_graphs_and_recompiles():
    def f(x):
        return x * 2

    opt = tjc.compile(f)
    opt(rand(2))
    opt(rand(2))
    opt(rand(3))
    s = tjc.stats()
    assert s["graphs"] == 2 and s["recompiles"] == 1 and s["hits"] >= 1 and s["compiles"] == 2
    assert len(tjc.cache_entries(opt)) == 2


def test_a_raising_backend_runs_eagerly_and_raises_only_under_fullgraph():
    def bad_backend(gm, example_inputs):
        raise RuntimeError("backend exploded")

    x = rand(2)
    opt = tjc.compile(lambda x: x + 1, backend=bad_backend)
    assert same(opt(x), x + 1)
    opt = tjc.compile(lambda x: x + 2, backend=bad_backend, fullgraph=True)
    with pytest.raises(tjc.pipeline.convert_frame.FullGraphError, match="backend exploded"):
        opt(x)


@pytest.mark.parametrize("option, value", [
    ("fullgraph", "yes"), ("fullgraph", 1), ("fullgraph", None), ("dynamic", "yes"), ("dynamic", 0),
    ("cache_limit", "8"), ("cache_limit", 2.0), ("cache_limit", True), ("backend", 42),
])
def test_options_of_the_wrong_type_raise_type_error_naming_them(option, value):
    # Checked at the call, decorator form included: `fullgraph="yes"` used to compile silently.
    with pytest.raises(TypeError, match=option):
        tjc.compile(f_arith, **{option: value})
    with pytest.raises(TypeError, match=option):
        tjc.compile(**{option: value})
    with pytest.raises(TypeError, match=option):   # in place too
        tjc.compile_(torch.nn.Linear(2, 2), **{option: value})
    if option == "backend":
        with pytest.raises(TypeError, match=option):
            tjc.explain(f_arith, backend=value)


def test_an_option_of_the_right_type_out_of_range_is_a_value_error():
    with pytest.raises(ValueError, match="cache_limit"):
        tjc.compile(f_arith, cache_limit=0)


@pytest.mark.parametrize("name, value, error", [
    ("cache_limit", "8", TypeError), ("cache_limit", 0, ValueError), ("max_resume_depth", 2.5, TypeError),
    ("fallback_to_eager", "no", TypeError), ("log", "recompiles", TypeError), ("cache_limt", 3, AttributeError),
    ("default_backend", 42, TypeError),
])
def test_config_settings_are_checked(name, value, error):
    before = dict(vars(tjc.config))
    with pytest.raises(error, match=name):
        setattr(tjc.config, name, value)
    assert dict(vars(tjc.config)) == before


# --- the default backend ---

@pytest.mark.parametrize("function", ["compile", "compile_"])
def test_the_default_backend_is_torch_compiles(function):
    # As torch.compile's: a user switching from it gets inductor without naming it.
    import inspect

    assert inspect.signature(getattr(tjc, function)).parameters["backend"].default == "inductor"


def test_config_default_backend_is_inductor_without_the_environment_variable(monkeypatch):
    # The suite sets TJC_DEFAULT_BACKEND=eager (conftest.py); a user's process has none.
    from torch_jit_cache.config import Config

    monkeypatch.delenv("TJC_DEFAULT_BACKEND", raising=False)
    assert Config().default_backend == "inductor"
    monkeypatch.setenv("TJC_DEFAULT_BACKEND", "aot_eager")
    assert Config().default_backend == "aot_eager"


def test_a_compile_without_backend_uses_config_default_backend(monkeypatch):
    # Read when compile() is called, in every form; a backend given by name, "inductor" included,
    # is used as given.
    counter = CompileCounter()
    monkeypatch.setattr(tjc.config, "default_backend", counter)
    x, y = rand(3, 4), rand(3, 4)
    module = torch.nn.Linear(4, 3)   # not the shape of the compiled one: no entry of its cache serves it
    compiled = [tjc.compile(f_arith), tjc.compile()(f_arith), tjc.compile(torch.nn.Linear(4, 4)),
                tjc.compile_(module)]
    assert same(compiled[0](x, y), f_arith(x, y)) and same(compiled[1](x, y), f_arith(x, y))
    compiled[2](x), compiled[3](x)
    assert counter.frame_count == 4
    named = tjc.compile(f_arith, backend="inductor")
    assert named._torch_jit_cache_callback.backend == "inductor"
    assert compiled[0]._torch_jit_cache_callback.backend is counter
    monkeypatch.setattr(tjc.config, "default_backend", "nonexistent")
    with pytest.raises(Exception, match="nonexistent"):   # an unknown name fails at compile(), as a named one
        tjc.compile(f_arith)


def test_explain_compiles_nothing_by_default(monkeypatch):
    # explain() runs its graphs as traced whatever config.default_backend says, as
    # torch._dynamo.explain does (its backend collects the graphs and returns gm.forward).
    import inspect

    assert inspect.signature(tjc.explain).parameters["backend"].default == "eager"
    counter = CompileCounter()
    monkeypatch.setattr(tjc.config, "default_backend", counter)
    report = tjc.explain(f_arith)(rand(3, 4), rand(3, 4))
    assert report.graph_count == 1 and counter.frame_count == 0
