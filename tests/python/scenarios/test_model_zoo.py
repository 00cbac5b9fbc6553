"""Real models compiled whole: the zoo (torch_jit_cache/testing/models.py: nanoGPT, a
torchvision-style ResNet, pytorch/examples' LSTM and Transformer language models, tiny HuggingFace
Bert/GPT2/Llama/T5/BART from configs with random weights) compiled with tjc.compile and compared with
eager on a training step: outputs, the gradient of every parameter, the buffers the forward updates
(batch-norm running statistics), the parameters after an SGD step, and the outputs of the next
call. Each model is also compared with torch.compile on graph breaks (tjc has no more), and
dropped compiled models are freed."""
import copy
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import models as zoo  # noqa: E402

NAMES = [pytest.param(n, marks=pytest.mark.skipif(not zoo.available(n), reason="needs transformers"))
         for n in zoo.MODELS]


def _assert_same(got, expected, what):
    if isinstance(expected, dict):
        assert got.keys() == expected.keys(), what
        for key in expected:
            torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-5, msg=f"{what} {key}")
    else:
        assert len(got) == len(expected), what
        for i, (g, e) in enumerate(zip(got, expected)):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5, msg=f"{what} {i}")


@pytest.mark.parametrize("name", NAMES)
def test_training_steps_match_eager(name):
    model, inputs = zoo.build(name)
    model.train()
    twin = copy.deepcopy(model)
    compiled = tjc.compile(twin)
    for step in range(2):   # the second step runs on the updated weights (cache hits)
        expected = zoo.train_step(model, inputs)
        got = zoo.train_step(compiled, inputs)
        for what, g, e in zip(("outputs", "gradients", "buffers", "parameters"), got, expected):
            _assert_same(g, e, f"{name} step {step}: {what}")
    assert tjc.stats()["graphs"] > 0


@pytest.mark.parametrize("name", NAMES)
def test_inference_matches_eager_and_compiles_once(name):
    model, inputs = zoo.build(name)
    model.eval()
    compiled = tjc.compile(model)
    with torch.no_grad():
        expected = zoo.tensors(model(*inputs.args, **inputs.kwargs))
        first = zoo.tensors(compiled(*inputs.args, **inputs.kwargs))
        compiles = tjc.stats()["compiles"]
        again = zoo.tensors(compiled(*inputs.args, **inputs.kwargs))
    _assert_same(first, expected, f"{name} first call")
    _assert_same(again, expected, f"{name} second call")
    assert tjc.stats()["compiles"] == compiles, "the second call compiled again"


# Where tjc still breaks more often than torch.compile, by how much at most, and why: a ratchet
# (the test fails if a model gets worse, and the entry goes when the gap closes). None today: T5's
# last gap (its cache deep-copies a legacy encoder-decoder config whose class writes its own
# __getattribute__ and __setattr__) closed when such objects were run step by step in the trace.
KNOWN_GAPS: dict = {}


@pytest.mark.parametrize("name", NAMES)
def test_no_more_graph_breaks_than_torch_compile(name):
    import torch._dynamo

    model, inputs = zoo.build(name)
    ours = tjc.explain(model)(*inputs.args, **inputs.kwargs)
    torch._dynamo.reset()
    try:
        theirs = torch._dynamo.explain(model)(*inputs.args, **inputs.kwargs)
    finally:
        torch._dynamo.reset()
    gap = KNOWN_GAPS.get(name, dict(breaks=0, uncompiled=0))
    assert ours.graph_break_count <= theirs.graph_break_count + gap["breaks"], str(ours)
    assert len(ours.fallbacks) <= gap["uncompiled"], str(ours)


def _freed_without_gc(make_and_run) -> bool:
    probe = make_and_run()
    return probe() is None


@pytest.mark.parametrize("name", NAMES)
def test_a_dropped_compiled_model_is_freed(name):
    # Compiling must not keep a model alive, nor make a model that eager frees by reference
    # counting wait for the cycle collector (some HuggingFace models hold cycles of their own:
    # there, both must be freed by gc.collect()).
    import gc

    def eager():
        model, inputs = zoo.build(name)
        model(*inputs.args, **inputs.kwargs)
        return weakref.ref(model)

    def compiled():
        model, inputs = zoo.build(name)
        wrapper = tjc.compile(model)
        wrapper(*inputs.args, **inputs.kwargs)
        entries = [e for code in _forward_codes(model) for e in tjc.cache_entries(code)]
        assert entries, "nothing was compiled"
        compiled.entries = entries
        return weakref.ref(model)

    by_refcount = _freed_without_gc(eager)
    gc.collect()
    probe = compiled()
    if by_refcount:
        assert probe() is None, "the compiled model outlived its last reference"
    else:
        gc.collect()
        assert probe() is None, "the compiled model survived gc.collect()"
    assert all(e.evicted for e in compiled.entries)


def _forward_codes(model):
    """The code of every module's forward, and of the functions its decorators wrap."""
    codes = set()
    for m in model.modules():
        fn = type(m).forward
        while fn is not None:
            if hasattr(fn, "__code__"):
                codes.add(fn.__code__)
            fn = getattr(fn, "__wrapped__", None)
    return codes


def test_dropout_draws_the_same_numbers_as_eager():
    # nanoGPT with dropout on, in training: the compiled graph draws from the global generator in
    # eager's order, so the same seed gives the same masks (and tracing itself draws nothing).
    model = zoo.GPT(zoo.GPTConfig(dropout=0.2)).train()
    _, inputs = zoo.build("nanogpt")
    compiled = tjc.compile(model)
    for seed in (1, 2):
        torch.manual_seed(seed)
        expected = zoo.tensors(model(*inputs.args))
        torch.manual_seed(seed)
        got = zoo.tensors(compiled(*inputs.args))
        _assert_same(got, expected, f"seed {seed}")
    torch.manual_seed(3)
    other = zoo.tensors(compiled(*inputs.args))
    assert not torch.allclose(other[0], expected[0]), "dropout drew the same mask for another seed"


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_kv_cache_decode_matches_eager_in_one_graph(backend):
    # DecodeGPT (benchmarks/gpu.py's decode row) writes every layer's KV-cache buffers in place
    # (index_copy_ and an index assignment) at a position given as a tensor: one graph for every
    # step, no recompile per position, and the logits and the caches equal eager's step by step.
    model, steps = zoo.decode_steps(steps=6)
    with torch.no_grad():
        expected = [model(*step).clone() for step in steps]
        expected_caches = [b.clone() for b in model.buffers()]
        model.reset_cache()
        report = tjc.explain(model, backend=backend)(*steps[0])
        model.reset_cache()
        compiled = tjc.compile(model, backend=backend)
        got = [compiled(*step).clone() for step in steps]
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])
    _assert_same(got, expected, "logits")
    _assert_same(list(model.buffers()), expected_caches, "caches")
    assert len(tjc.cache_entries(compiled)) == 1, "a step at a new position compiled again"
    model.reset_cache()
    assert not any(b.any() for name, b in model.named_buffers() if name.endswith((".k", ".v")))
