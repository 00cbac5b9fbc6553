"""backends/ and testing.CompileCounter: each backend against eager on small fx graphs, the error
and fallback paths, and the registry."""
import gc
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from torch_jit_cache import backends  # noqa: E402
from torch_jit_cache.backends import BackendCompilerFailed, compile_graph  # noqa: E402
from torch_jit_cache.testing import CompileCounter, CompileCounterWithBackend  # noqa: E402


def two_outputs(x, y):
    return (torch.sin(x) * y + 1, x.relu().sum())


def one_output(x):
    return x.cos() * 2


def list_output(x, y):
    return [x + y, x - y]


def gm_of(fn):
    return torch.fx.symbolic_trace(fn)


def inputs(n, requires_grad=False):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(4, 3, generator=gen, requires_grad=requires_grad) for _ in range(n)]


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


@pytest.fixture(autouse=True)
def fresh_warnings():
    backends._WARNED_FALLBACK.clear()
    yield
    backends._WARNED_FALLBACK.clear()


# --- results equal eager --------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn,nargs", [(two_outputs, 2), (one_output, 1), (list_output, 2)])
def test_backend_matches_eager_and_returns_a_sequence(backend, fn, nargs):
    args = inputs(nargs)
    expected = as_tuple(fn(*args))
    compiled = compile_graph(backend, gm_of(fn), args)
    out = compiled(*args)
    assert isinstance(out, (tuple, list))   # codegen indexes it
    assert len(out) == len(expected)
    for got, want in zip(out, expected):
        torch.testing.assert_close(got, want)


def test_inductor_matches_eager():
    args = inputs(2)
    compiled = compile_graph("inductor", gm_of(two_outputs), args)
    out = compiled(*args)
    assert isinstance(out, (tuple, list))
    for got, want in zip(out, two_outputs(*args)):
        torch.testing.assert_close(got, want)


def test_aot_eager_gradients_equal_eager():
    args = inputs(2, requires_grad=True)
    ref = [a.detach().clone().requires_grad_() for a in args]
    # Example inputs require grad like the real ones (tensor guards make it so): AOTAutograd
    # traces a joint forward/backward graph only then.
    compiled = compile_graph("aot_eager", gm_of(two_outputs), args)
    out = compiled(*args)
    (out[0].sum() * out[1]).backward()
    want = two_outputs(*ref)
    (want[0].sum() * want[1]).backward()
    for a, r in zip(args, ref):
        torch.testing.assert_close(a.grad, r.grad)


def test_a_single_output_graph_is_made_to_return_a_tuple():
    gm = gm_of(one_output)
    backends.ensure_tuple_output(gm)
    (x,) = inputs(1)
    out = gm(x)
    assert type(out) is tuple and len(out) == 1
    torch.testing.assert_close(out[0], one_output(x))
    backends.ensure_tuple_output(gm)   # idempotent
    assert type(gm(x)) is tuple and len(gm(x)) == 1


def test_any_callable_is_a_backend():
    seen = []

    def mine(gm, example_inputs):
        seen.append(len(example_inputs))
        return gm.forward

    args = inputs(2)
    out = compile_graph(mine, gm_of(two_outputs), args)(*args)
    assert seen == [2]
    torch.testing.assert_close(out[0], two_outputs(*args)[0])


# --- failures ---------------------------------------------------------------------------------

def broken(gm, example_inputs):
    raise NotImplementedError("no kernels for this op")


def test_a_raising_backend_gives_backend_compiler_failed():
    message = r"backend 'broken' failed: NotImplementedError: no kernels"
    with pytest.raises(BackendCompilerFailed, match=message) as info:
        compile_graph(broken, gm_of(one_output), inputs(1))
    assert info.value.backend == "broken"
    assert isinstance(info.value.__cause__, NotImplementedError)


def test_a_registered_raising_backend_is_named_by_its_registered_name():
    backends.register("test_broken", broken)
    try:
        with pytest.raises(BackendCompilerFailed, match="backend 'test_broken' failed"):
            compile_graph("test_broken", gm_of(one_output), inputs(1))
    finally:
        backends._REGISTRY.pop("test_broken")


def test_a_non_callable_result_is_an_error():
    with pytest.raises(BackendCompilerFailed, match="returned int, not a callable"):
        compile_graph(lambda gm, ex: 42, gm_of(one_output), inputs(1))


@pytest.mark.parametrize("backend", [broken, lambda gm, ex: None])
def test_fallback_to_eager_warns_once_and_runs_the_graph(backend):
    args = inputs(1)
    with pytest.warns(RuntimeWarning, match="running the graph eagerly"):
        compiled = compile_graph(backend, gm_of(one_output), args, fallback_to_eager=True)
    torch.testing.assert_close(compiled(*args)[0], one_output(*args))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the second failure of the same backend is silent
        compile_graph(backend, gm_of(one_output), args, fallback_to_eager=True)


def test_a_failed_compile_does_not_keep_example_inputs_alive():
    # The backend's frames (which hold the example tensors) live only as long as the error.
    x = torch.randn(3)
    probe = weakref.ref(x)
    gc.disable()
    try:
        with pytest.warns(RuntimeWarning):
            compile_graph(broken, gm_of(one_output), [x], fallback_to_eager=True)
        try:
            compile_graph(broken, gm_of(one_output), [x])
        except BackendCompilerFailed:
            pass
        del x
        assert probe() is None
    finally:
        gc.enable()


# --- registry ---------------------------------------------------------------------------------

def test_registry_builtins_register_and_lookup():
    assert {"eager", "aot_eager", "inductor"} <= set(backends.list_backends())

    @backends.register("test_mine")
    def mine(gm, example_inputs):
        return gm.forward

    try:
        assert backends.lookup("test_mine") is mine
        assert "test_mine" in backends.list_backends()
        assert backends.lookup(mine) is mine   # a callable is its own backend
    finally:
        backends._REGISTRY.pop("test_mine")


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'nope'; known backends: .*aot_eager.*eager.*inductor"):
        backends.lookup("nope")
    with pytest.raises(ValueError, match="unknown backend"):
        compile_graph("nope", gm_of(one_output), inputs(1), fallback_to_eager=True)
    with pytest.raises(TypeError):
        backends.lookup(3)
    with pytest.raises(TypeError):
        backends.register("bad", 3)


# --- CompileCounter ---------------------------------------------------------------------------

def test_compile_counter_counts_frames_and_ops():
    cnt = CompileCounter()
    args = inputs(2)
    out = compile_graph(cnt, gm_of(two_outputs), args)(*args)
    torch.testing.assert_close(out[1], two_outputs(*args)[1])
    compile_graph(cnt, gm_of(one_output), args[:1])
    # two_outputs: sin, mul, add, relu, sum; one_output: cos, mul
    assert (cnt.frame_count, cnt.op_count) == (2, 7)
    cnt.clear()
    assert (cnt.frame_count, cnt.op_count) == (0, 0)


def test_compile_counter_with_backend_compiles_with_it():
    cnt = CompileCounterWithBackend("aot_eager")
    args = inputs(2)
    out = compile_graph(cnt, gm_of(two_outputs), args)(*args)
    assert cnt.frame_count == 1 and cnt.op_count == 5
    for got, want in zip(out, two_outputs(*args)):
        torch.testing.assert_close(got, want)


# --- the pipeline without a tracer: fx graph -> backend -> transformed code -> runtime ------------

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_graph_runs_from_transformed_code(backend):
    from torch_jit_cache.pipeline import codegen
    from torch_jit_cache import runtime
    from torch_jit_cache.guard.sources import AttrSource, LocalSource
    from torch_jit_cache.guard.trace_result import GraphOutput, SourceOutput, TupleOutput

    lin = torch.nn.Linear(3, 2)

    def f(x, mod):
        return mod(x).relu(), mod

    def graph(x, weight, bias):
        return torch.nn.functional.linear(x, weight, bias).relu()

    (x,) = inputs(1)
    params = [lin.weight, lin.bias]
    cnt = CompileCounterWithBackend(backend)
    compiled = compile_graph(cnt, gm_of(graph), [x, *params])
    code = codegen.build_transformed_code(
        f.__code__, compiled,
        [LocalSource("x"), AttrSource(LocalSource("mod"), "weight"), AttrSource(LocalSource("mod"), "bias")],
        TupleOutput((GraphOutput(0), SourceOutput(LocalSource("mod")))))

    def jit(frame, entries):
        if frame.f_code is f.__code__:
            return runtime.GuardedCode(code, runtime.GuardManager())
        return runtime.RUN_ORIGINAL

    runtime.reset()
    try:
        with runtime.eval_frame(jit):
            out, mod = f(x, lin)
            with torch.no_grad():
                lin.bias.add_(1.0)   # parameters are graph inputs, read from the frame per call
            out2, _ = f(x, lin)
        assert mod is lin and cnt.frame_count == 1
        torch.testing.assert_close(out, (x @ lin.weight.T + lin.bias - 1.0).relu())
        torch.testing.assert_close(out2, (x @ lin.weight.T + lin.bias).relu())
        assert runtime.cache_entries(f)[0].hits == 1
    finally:
        runtime.reset()


def test_inductor_graphs_with_tensor_methods_reach_aotautograds_cache(tmp_path, monkeypatch, fresh_caches):
    # AOTAutograd's cache takes a graph only where the tensors methods are called on carry their
    # example values: without backends._note_example_values every tjc graph with a method call
    # bypassed it ('Unsupported call_method target'), and a warm process traced the joint graph
    # again (autograd_cache_bypass 1, saved 0 before).
    import torch_jit_cache as tjc
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    counters.clear()

    def f(x):
        return x.view(-1).sin().sum(0)

    x = torch.randn(3, 4)
    torch.testing.assert_close(tjc.compile(f, backend="inductor")(x), f(x))
    seen = dict(counters["aot_autograd"])
    assert seen.get("autograd_cache_bypass", 0) == 0 and seen.get("autograd_cache_saved", 0) == 1, seen
