"""compile(..., mode=, options=) (backends/modes.py): what inductor is given, what never shares a
compiled graph, and the errors bad settings give when compile() is called."""
import copy
import weakref

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.pipeline import disk_cache  # noqa: E402
from torch_jit_cache.pipeline.convert_frame import FrameCompiler  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


@pytest.fixture
def inductor_calls(monkeypatch):
    """compile_fx replaced by a spy that records its config_patches and runs the graph as traced."""
    import torch._inductor.compile_fx as compile_fx_module

    calls = []

    def spy(gm, example_inputs, config_patches=None, **kwargs):
        calls.append(config_patches)
        return gm.forward
    monkeypatch.setattr(compile_fx_module, "compile_fx", spy)
    return calls


def f(x):
    return torch.sin(x) * 2 + 1


@pytest.mark.parametrize("mode, patches", [
    ("reduce-overhead", {"triton.cudagraphs": True}),
    ("max-autotune-no-cudagraphs", {"max_autotune": True, "coordinate_descent_tuning": True}),
    ("max-autotune", {"max_autotune": True, "coordinate_descent_tuning": True, "triton.cudagraphs": True}),
])
def test_a_mode_is_the_inductor_config_torch_compile_gives_it(inductor_calls, mode, patches):
    x = torch.randn(5)
    torch.testing.assert_close(tjc.compile(f, backend="inductor", mode=mode)(x), f(x))
    assert inductor_calls == [patches]
    assert patches == torch._inductor.list_mode_options(mode)


def test_options_reach_inductor_with_dashes_read_as_underscores(inductor_calls):
    x = torch.randn(5)
    tjc.compile(f, backend="inductor", options={"epilogue-fusion": False, "max_autotune": True})(x)
    assert inductor_calls == [{"epilogue_fusion": False, "max_autotune": True}]


def test_no_mode_and_the_default_mode_patch_nothing(inductor_calls):
    x = torch.randn(5)
    tjc.compile(f, backend="inductor")(x)
    tjc.compile(lambda x: torch.cos(x), backend="inductor", mode="default")(x)
    assert inductor_calls == [None, None]


def test_compiles_with_other_settings_never_share_a_compiled_graph(inductor_calls):
    x = torch.randn(5)
    a = tjc.compile(f, backend="inductor", options={"max_autotune": True})
    b = tjc.compile(f, backend="inductor", options={"max_autotune": False})
    c = tjc.compile(f, backend="inductor", options={"max_autotune": True})
    for g in (a, b, c):
        g(x)
    # a and c: one compile, shared (backends/sharing.py); b its own.
    assert inductor_calls == [{"max_autotune": True}, {"max_autotune": False}]
    assert tjc.stats()["shared_backend_compiles"] == 1


def test_a_callable_option_is_not_shared_and_is_freed_with_its_compile(inductor_calls):
    def post_pass(graph):
        return None
    x = torch.randn(5)
    a = tjc.compile(f, backend="inductor", options={"post_grad_custom_post_pass": post_pass})
    b = tjc.compile(f, backend="inductor", options={"post_grad_custom_post_pass": post_pass})
    a(x), b(x)
    assert len(inductor_calls) == 2 and tjc.stats()["shared_backend_compiles"] == 0
    ref = weakref.ref(post_pass)
    inductor_calls.clear()   # the spy's record of it
    del a, b, post_pass
    assert ref() is None


def test_the_disk_cache_keys_on_the_settings():
    code = f.__code__
    keys = {disk_cache.keys.key(FrameCompiler(backend="inductor", backend_patches=p), code)
            for p in ((), (("max_autotune", True),), (("max_autotune", False),))}
    assert len(keys) == 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_a_compiled_module_keeps_its_settings_through_a_copy(inductor_calls):
    compiled = tjc.compile(Net(), backend="inductor", mode="max-autotune-no-cudagraphs")
    assert compiled.compile_options["mode"] == "max-autotune-no-cudagraphs"
    copied = copy.deepcopy(compiled)
    assert copied.compile_options["mode"] == "max-autotune-no-cudagraphs"
    x = torch.randn(2, 4)
    torch.testing.assert_close(copied(x), copied.original_module(x))
    assert inductor_calls == [{"max_autotune": True, "coordinate_descent_tuning": True}]


def test_compile_in_place_takes_the_settings(inductor_calls):
    net = Net()
    tjc.compile_(net, backend="inductor", options={"max_autotune": True})
    x = torch.randn(2, 4)
    net(x)
    assert inductor_calls == [{"max_autotune": True}]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(mode="fast"), ValueError, "mode must be one of"),
    (dict(mode=3), ValueError, "mode must be one of"),
    (dict(mode="default", options={}), ValueError, "not both"),
    (dict(options={"max_autotun": True}), ValueError, "did you mean max_autotune"),
    (dict(options={"no_such_thing_at_all": 1}), ValueError, "list_options"),
    (dict(options={"max_autotune": "yes"}), TypeError, "'max_autotune' must be bool"),
    (dict(options={1: True}), TypeError, "keys must be inductor config names"),
    (dict(options=[("max_autotune", True)]), TypeError, "options must be a dict"),
    (dict(backend="eager", mode="reduce-overhead"), ValueError, "backend 'eager' takes none"),
    (dict(backend="aot_eager", options={"max_autotune": True}), ValueError, "backend 'aot_eager' takes none"),
])
def test_bad_settings_fail_when_compile_is_called(kwargs, error, match):
    kwargs = {"backend": "inductor", **kwargs}
    with pytest.raises(error, match=match):
        tjc.compile(f, **kwargs)
    with pytest.raises(error, match=match):   # the decorator form: before any function is given
        tjc.compile(**kwargs)
    with pytest.raises(error, match=match):
        tjc.compile_(Net(), **kwargs)


def test_reduce_overhead_on_a_cpu_model_runs_as_inductor_does():
    """CUDA graphs are for CUDA graphs: a CPU graph under "reduce-overhead" is inductor's code,
    correct and compiled."""
    net = Net().eval()
    x = torch.randn(3, 4)
    compiled = tjc.compile(net, backend="inductor", mode="reduce-overhead")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), net(x))
        torch.testing.assert_close(compiled(x + 1), net(x + 1))
    assert tjc.stats()["graphs"] == 1
