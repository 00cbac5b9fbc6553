"""trace_rules: which frames are traced, decided by module name (one test per rule), and what that
means for installed packages, FX code, dataclasses and exec'd strings."""
import dataclasses
import importlib
import functools
import json
import sys
import textwrap
import types

import pytest

from torch_jit_cache.frontend import trace_rules
from torch_jit_cache.frontend.trace_rules import Action

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402



@pytest.mark.parametrize("module, rule", [
    ("torch", "torch"),
    ("torch.nn.modules.linear", "torch"),
    ("torch._functorch.aot_autograd", "torch"),
    ("functorch.compile", "torch"),
    ("torchgen.model", "torch"),
    ("torch_jit_cache.guard.tree", "torch_jit_cache"),
    ("numpy.linalg", "numpy"),
    ("triton.runtime.jit", "triton"),
    ("typing_extensions", "typing_extensions"),
    ("collections", "stdlib"),
    ("importlib._bootstrap", "stdlib"),   # frozen modules are judged by name too
    ("dataclasses", "stdlib"),
    ("logging.handlers", "stdlib"),
    ("torch_jit_cache.testing", "torch_jit_cache"),            # CompileCounter: a backend, not a model
    ("torch_jit_cache.testing.refleaks", "torch_jit_cache"),   # the leak checker
    ("torch_jit_cache.testing.pytest_plugin", "torch_jit_cache"),
    ("torch_jit_cache.testing.models_helpers", "torch_jit_cache"),   # only the zoo's own module is traced
])
def test_skipped_modules(module, rule):
    got = trace_rules.rule_for_module(module)
    assert (got.action, got.name) == (Action.SKIP, rule)


@pytest.mark.parametrize("module", [
    "transformers.models.bert.modeling_bert",   # third-party, installed in site-packages
    "torchvision_like_user_lib",                # starts with "torch" but is not the torch package
    "__main__",
    "test_trace_rules",
    None,                                       # exec'd code whose globals have no __name__
    "",
])
def test_traced_modules(module):
    assert trace_rules.rule_for_module(module).action is Action.TRACE


def test_the_model_zoo_is_traced_like_a_users_models():
    rule = trace_rules.rule_for_module("torch_jit_cache.testing.models")
    assert (rule.action, rule.name) == (Action.TRACE, "model_zoo")
    from torch_jit_cache.testing import models

    assert trace_rules.lookup(models.GPT.forward.__code__, models.GPT.forward.__globals__) is rule


def test_a_zoo_model_under_a_wrappers_forward_is_compiled(no_gc):
    """tjc.compile(DataParallel(zoo_model)): the wrapper's forward runs as written (on the CPU it
    calls the model), and the model's frame, called from torch's code, compiles. Failed before the
    zoo's rule: the model's frames were tjc's own package, skipped (0 graphs, 0 entries)."""
    import weakref

    from torch_jit_cache.testing import models

    model = models.GPT(models.GPTConfig(n_layer=1, block_size=8, n_embd=16))
    idx = torch.randint(0, 100, (2, 8))
    compiled = tjc.compile(torch.nn.DataParallel(model), backend="eager")
    for _ in range(2):
        torch.testing.assert_close(compiled(idx)[0], model(idx)[0])
    assert tjc.stats()["graphs"] >= 1
    assert len(tjc.cache_entries(models.GPT.forward)) == 1
    freed = weakref.ref(model)
    del model, compiled
    assert freed() is None   # by reference counting: the collector is off


def test_fx_generated_code_is_skipped():
    gm = torch.fx.symbolic_trace(lambda x: x.relu() + 1)
    code = type(gm).forward.__code__
    assert code.co_filename.startswith("<eval_with_key>")
    rule = trace_rules.lookup(code, type(gm).forward.__globals__)
    assert (rule.action, rule.name) == (Action.SKIP, "fx_generated")


def test_inductor_generated_code_is_skipped(tmp_path, monkeypatch):
    # Inductor's compiled modules are named by a hash and live in its cache folder: only the folder
    # tells them apart from user code.
    fake = types.ModuleType("torch._inductor.runtime.cache_dir_utils")
    fake.cache_dir = lambda: str(tmp_path)
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    path = tmp_path / "ab" / "cabcdef.py"
    code = compile("def call(args):\n    return args\n", str(path), "exec")
    rule = trace_rules.lookup(code, {"__name__": "cabcdef"})
    assert (rule.action, rule.name) == (Action.SKIP, "inductor_generated")
    other = compile("x = 1\n", "/elsewhere/cabcdef.py", "exec")
    assert trace_rules.lookup(other, {"__name__": "cabcdef"}).action is Action.TRACE


@dataclasses.dataclass
class _Point:
    x: int
    y: int


def test_dataclass_generated_code_follows_its_module():
    code = _Point.__init__.__code__
    assert code.co_filename == "<string>"
    assert trace_rules.lookup(code, _Point.__init__.__globals__).action is Action.TRACE


def test_exec_string_code_is_traced():
    ns = {}
    exec("def f(x):\n    return x + 1\n", ns)
    assert trace_rules.lookup(ns["f"].__code__, ns["f"].__globals__).action is Action.TRACE


def test_stdlib_function_is_skipped():
    rule = trace_rules.lookup(json.dumps.__code__, json.dumps.__globals__)
    assert (rule.action, rule.name) == (Action.SKIP, "stdlib")


def _through_c(fn, x):
    # An lru_cache wrapper is a C function the tracer does not model (map(), starmap() and
    # groupby() are traced now): the frame that calls it falls back (the tracer cannot follow a C
    # call that calls Python), so `fn`'s own frame is intercepted and judged by the rules.
    return functools.lru_cache(None)(fn)(x)


def test_installed_third_party_package_is_traced():
    # Failed before trace rules: transformers lies in <venv>/lib/python3.11/site-packages, inside
    # sysconfig's platstdlib, and was skipped as library code (0 graphs).
    activations = pytest.importorskip("transformers.activations")
    act = activations.NewGELUActivation()
    compiled = tjc.compile(lambda x: _through_c(act, x))
    x = torch.randn(8)
    assert torch.equal(compiled(x), act(x))
    assert tjc.stats()["graphs"] >= 1
    assert len(tjc.cache_entries(type(act).forward)) == 1


def test_package_in_a_site_packages_folder_is_traced(tmp_path, monkeypatch):
    site = tmp_path / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    pkg = site / "tjc_tiny_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        def scale(x):
            return x * 2 + 1
    """))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "tjc_tiny_pkg", raising=False)
    import tjc_tiny_pkg

    compiled = tjc.compile(lambda x: _through_c(tjc_tiny_pkg.scale, x))
    x = torch.randn(4)
    assert torch.equal(compiled(x), x * 2 + 1)
    assert len(tjc.cache_entries(tjc_tiny_pkg.scale)) == 1


# -- torch callables the tracer never runs (torch_callable_effect) ----------------------------------
@pytest.mark.parametrize("fn", [
    torch.manual_seed, torch.seed, torch.set_num_threads, torch.set_flush_denormal, torch.set_default_dtype,
    torch.set_autocast_enabled, torch.initial_seed, torch.get_rng_state, torch.set_rng_state,
    torch.get_num_threads, torch.use_deterministic_algorithms, torch.random.fork_rng,
    torch.cuda.manual_seed_all, torch.cuda.synchronize, torch.cuda.empty_cache,
    torch.cuda.reset_peak_memory_stats, torch._C._set_grad_enabled, torch.cuda.nvtx.range_push,
])
def test_torch_callables_with_global_effects_are_named(fn):
    assert trace_rules.torch_callable_effect(fn) is not None


@pytest.mark.parametrize("fn", [
    torch.add, torch.rand, torch.randn, torch.nn.functional.dropout, torch.nn.init.normal_,
    torch.Tensor.set_, torch.Tensor.add_, torch.is_grad_enabled, torch.get_default_dtype,
])
def test_tensor_ops_are_not(fn):
    assert trace_rules.torch_callable_effect(fn) is None


def test_no_aten_op_matches_the_name_rule():
    """The name rule's premise: no op of torch's op namespaces is named like a setter or a seed."""
    spaces = [torch._C._VariableFunctions, torch._C._nn, torch._C._linalg, torch._C._fft, torch._C._special,
              torch.nn.functional, torch.linalg, torch.fft, torch.special, torch.nn.init]
    named = sorted(f"{getattr(ns, '__name__', ns)}.{name}" for ns in spaces for name in dir(ns)
                   if callable(getattr(ns, name, None)) and not isinstance(getattr(ns, name), type)
                   and trace_rules.torch_callable_effect(getattr(ns, name)) is not None)
    assert named == []


def test_a_gc_callback_running_inside_a_compiled_call_is_not_traced():
    """A collection inside a compiled call runs gc.callbacks on the hook's thread (hypothesis
    registers one): before, such a callback was traced, fell back and warned as if it were the
    user's code (it made test_cache_owners' eighteen-block test count a fallback)."""
    import gc
    import warnings

    seen = []

    def on_gc(phase, info):
        try:
            seen.append(phase)   # a try block: the tracer would run this frame uncompiled
        except Exception:  # noqa: BLE001
            pass

    assert trace_rules.lookup(on_gc.__code__, globals()).action is Action.TRACE
    gc.callbacks.append(on_gc)
    try:
        assert trace_rules.lookup(on_gc.__code__, globals()).name == "gc_callback"

        def f(x):
            gc.collect()
            return x + 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert torch.equal(tjc.compile(f)(torch.ones(2)), torch.full((2,), 2.0))
        assert seen, "the callback ran"
        assert not [w for w in caught if "on_gc" in str(w.message)], [str(w.message) for w in caught]
        assert tjc.stats()["fallbacks"] == 0
    finally:
        gc.callbacks.remove(on_gc)


def test_the_forwards_of_torchs_module_wrappers_run_as_written():
    """compile(DDP(model)) compiles the model's frames, not DDP's forward (its reducer state)."""
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    assert trace_rules.is_wrapper_forward(DistributedDataParallel.forward)
    assert trace_rules.is_wrapper_forward(DataParallel.forward)
    assert not trace_rules.is_wrapper_forward(torch.nn.Linear.forward)
    assert not trace_rules.is_wrapper_forward(lambda x: x)
    for module, qualname in trace_rules.WRAPPER_FORWARDS:   # each row names a real forward
        if module.startswith("torch.distributed") and not torch.distributed.is_available():
            continue
        owner = importlib.import_module(module)
        cls_name, attr = qualname.split(".")
        assert getattr(getattr(owner, cls_name), attr).__qualname__ == qualname


def _dynamo_entry_code(module, qualname):
    if qualname.endswith("<locals>.compile_wrapper"):   # made per torch.compile call
        return torch.compile(lambda t: t, backend="eager").__code__
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj.__code__


@pytest.mark.parametrize("module, qualname", sorted(trace_rules.DYNAMO_ENTRY_POINTS))
def test_torchdynamo_entry_points_run_as_a_tree_uncompiled(module, qualname):
    # Each names a function the installed torch has (a rename would quietly fall back to SKIP).
    code = _dynamo_entry_code(module, qualname)
    rule = trace_rules.lookup(code, {"__name__": module})
    assert (rule.action, rule.name) == (Action.SKIP_TREE, "dynamo_entry")


def test_frames_torch_compile_runs_inside_a_compiled_call_are_not_intercepted():
    # torch.compile called inside a compiled call (as torch.cond run as written does): torch.compile
    # and its wrapper are skip-tree, so neither TorchDynamo's compiler nor the code it compiled reaches
    # our hook. Before, the callback was asked about some 2,700 of TorchDynamo's frames.
    inners = []

    def outer(t):
        inner = torch.compile(lambda u: torch.cos(u) + 2, backend="eager")
        inners.append(inner)
        return inner(t * 3) - 1

    x = torch.randn(4)
    compiled = tjc.compile(outer, backend="eager")
    before = tjc.stats()["misses"]
    torch.testing.assert_close(compiled(x), outer(x))
    assert tjc.stats()["misses"] - before < 20
    assert tjc.runtime.frame_action(inners[0].__code__, owner=compiled) == "skip-tree"
