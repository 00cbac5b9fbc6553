"""Dynamic shapes (frontend/dynamic.py, tracer/fake_shapes.py): automatic dynamic after a size-caused
recompile, compile(dynamic=True/False), mark_dynamic / maybe_mark_dynamic / mark_static, int
arguments that change per call, symbolic sizes through the trace, and what the traces leave alive.

Every compiled result is compared with eager's; compile counts come from CompileCounter.
"""
import weakref

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.frontend.dynamic import DynamicMarkError  # noqa: E402
from torch_jit_cache.testing import CompileCounter, CompileCounterWithBackend  # noqa: E402
from torch_jit_cache.testing import models as zoo  # noqa: E402

pytestmark = pytest.mark.usefixtures("seeded_fresh_caches")


def _run_sizes(fn, make, sizes, **options):
    """Compile `fn`, call it on make(n) for each n, check each result against eager; the counter."""
    counter = CompileCounter()
    compiled = tjc.compile(fn, backend=counter, **options)
    for n in sizes:
        args = make(n)
        got, want = compiled(*args), fn(*args)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    return counter, compiled


def _attention(x, w):
    B, T, C = x.shape
    q = (x @ w).view(B, T, 2, C // 2).transpose(1, 2)
    att = (q @ q.transpose(-2, -1)) * (1.0 / (C // 2) ** 0.5)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = att.masked_fill(~mask, float("-inf")).softmax(-1)
    return (att @ q).transpose(1, 2).reshape(B, T, C)


W = torch.randn(8, 8)


# -- automatic dynamic ---------------------------------------------------------------------------

def test_a_sequence_length_that_changes_compiles_twice_then_hits():
    counter, _ = _run_sizes(_attention, lambda t: (torch.randn(2, t, 8), W), range(3, 12))
    assert counter.frame_count == 2, "static first, then one dynamic entry for every later length"
    assert tjc.stats()["hits"] >= 7


def test_a_batch_size_that_changes_compiles_twice_then_hits():
    counter, _ = _run_sizes(_attention, lambda b: (torch.randn(b, 5, 8), W), [2, 3, 4, 7, 9, 16])
    assert counter.frame_count == 2


def test_dynamic_false_compiles_every_size():
    counter, _ = _run_sizes(_attention, lambda t: (torch.randn(2, t, 8), W), [3, 4, 5, 6], dynamic=False)
    assert counter.frame_count == 4


def test_dynamic_true_compiles_once_for_every_size():
    counter, _ = _run_sizes(_attention, lambda t: (torch.randn(t, t + 1, 8), W), [3, 4, 5, 6], dynamic=True)
    assert counter.frame_count == 1


def test_the_dynamic_entry_serves_every_size_after_it():
    # The newest entry is checked first: the first size is served by the dynamic one too.
    counter, compiled = _run_sizes(_attention, lambda t: (torch.randn(2, t, 8), W), [3, 4, 5, 3, 3])
    assert counter.frame_count == 2
    entries = tjc.cache_entries(compiled)
    assert sorted(e.hits for e in entries) == [0, 3]


def test_size_one_is_specialized_and_does_not_break_the_dynamic_entry():
    # A symbol never stands for 0 or 1 (torch's 0/1 specialization): size 1 gets its own entry.
    counter, _ = _run_sizes(lambda x: x.sum(0) * x.shape[0], lambda n: (torch.randn(n, 3),), [2, 3, 1, 4, 1, 5])
    assert counter.frame_count == 3


def test_a_rank_change_is_a_new_static_entry():
    counter, _ = _run_sizes(lambda x: x * 2, lambda n: (torch.randn(*([2] * n)),), [1, 2, 3])
    assert counter.frame_count == 3


# -- symbolic sizes through the trace --------------------------------------------------------------

def _sizes_as_values(x):
    T = x.size(1)
    n = len(x)
    k = min(T, 4)
    return x[:, :k] * T + n, T * 2, x.shape[-1] // 2


def test_sizes_read_and_computed_stay_symbolic():
    counter, _ = _run_sizes(_sizes_as_values, lambda t: (torch.randn(3, t, 6),), [2, 5, 6, 9])
    assert counter.frame_count == 2


def test_a_branch_on_a_size_is_guarded():
    def f(x):
        if x.size(0) > 4:
            return x * 2
        return x - 1
    counter, _ = _run_sizes(f, lambda n: (torch.randn(n),), [2, 3, 4, 5, 6, 7, 3])
    # static 2, dynamic for n <= 4 (guard s0 <= 4), dynamic for n > 4
    assert counter.frame_count == 3


def test_a_view_that_needs_divisibility_recompiles_when_it_does_not_hold():
    def f(x):
        return x.view(-1, 4).sum(1)
    counter, compiled = _run_sizes(f, lambda n: (torch.randn(n),), [8, 12, 16, 20])
    assert counter.frame_count == 2
    with pytest.raises(RuntimeError):
        compiled(torch.randn(10))   # eager raises too: never a silently wrong result


def test_int_arguments_that_change_become_symbols():
    def f(x, pos):
        return x[:, pos:pos + 2] * 2 + pos
    counter = CompileCounter()
    compiled = tjc.compile(f, backend=counter)
    x = torch.randn(2, 16)
    for pos in range(1, 10):
        torch.testing.assert_close(compiled(x, pos), f(x, pos), rtol=0, atol=0)
    assert counter.frame_count == 2
    # A position past what the slice guard allows compiles again, with eager's result.
    torch.testing.assert_close(compiled(x, 15), f(x, 15), rtol=0, atol=0)


def test_ints_that_are_attributes_stay_constants():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2

        def forward(self, x):
            return x * self.k
    m = M()
    counter = CompileCounter()
    compiled = tjc.compile(m, backend=counter)
    for k in (2, 3, 4):
        m.k = k
        torch.testing.assert_close(compiled(torch.ones(3)), torch.ones(3) * k)
    assert counter.frame_count == 3, "an attribute int keeps its EQUALS_MATCH guard"


class _Cache:
    """As HF's sliding-window cache layer: a plain object whose int position grows every step."""

    def __init__(self):
        self.cumulative_length = 0
        self.window = 4              # read every call, never changes: stays a constant
        self.keys = torch.zeros(1, 4, 8)


def _decode_step(x, cache):
    cache.cumulative_length += x.shape[1]
    pos = cache.cumulative_length
    return x * pos + cache.keys[:, : min(pos, cache.window)].sum()


def test_an_int_attribute_that_grows_becomes_a_symbol():
    graphs = []
    counter = CompileCounter()

    def backend(gm, example_inputs):
        graphs.append(list(example_inputs))
        return counter(gm, example_inputs)
    compiled = tjc.compile(_decode_step, backend=backend)
    ours, theirs = _Cache(), _Cache()
    for step in range(20):
        x = torch.randn(1, 1, 8)
        torch.testing.assert_close(compiled(x, ours), _decode_step(x, theirs), rtol=0, atol=0)
        assert ours.cumulative_length == theirs.cumulative_length == step + 1
    # 0 and 1 are specialized (as torch.compile's), then one entry serves every later position:
    # without the symbol each step recompiled until the cache limit and then ran uncompiled.
    assert counter.frame_count <= 3
    assert tjc.stats()["fallbacks"] == 0
    assert any(isinstance(v, (int, torch.SymInt)) for v in graphs[-1]), graphs[-1]   # the position, an input


def test_a_changing_int_attribute_of_a_module_stays_a_constant():
    # As torch.compile (allow_unspec_int_on_nn_module=False): a module's ints are its structure.
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2

        def forward(self, x):
            return x.reshape(self.k, -1) * self.k
    m = M()
    inputs = []

    def backend(gm, example_inputs):
        inputs.extend(example_inputs)
        return gm.forward
    compiled = tjc.compile(m, backend=backend)
    for k in (2, 3, 4, 6):
        m.k = k
        torch.testing.assert_close(compiled(torch.ones(12)), torch.ones(12).reshape(k, -1) * k)
    assert tjc.stats()["compiles"] == 4
    assert not any(isinstance(v, (int, torch.SymInt)) for v in inputs), inputs


def test_int_attributes_stay_constants_under_dynamic_false():
    counter = CompileCounter()
    compiled = tjc.compile(_decode_step, backend=counter, dynamic=False, cache_limit=32)
    ours, theirs = _Cache(), _Cache()
    for _ in range(5):
        x = torch.randn(1, 1, 8)
        torch.testing.assert_close(compiled(x, ours), _decode_step(x, theirs), rtol=0, atol=0)
    assert counter.frame_count == 5


def test_a_symbolic_size_live_at_a_graph_break():
    def f(x):
        T = x.size(1)
        y = x * T
        print("", end="")
        return y[:, :T - 1] + T
    counter, _ = _run_sizes(f, lambda t: (torch.randn(2, t),), [3, 4, 5, 6, 7])
    assert counter.frame_count <= 4, "two graphs, each compiled static then dynamic"


# -- marks -----------------------------------------------------------------------------------------

def test_mark_dynamic_is_symbolic_from_the_first_compile():
    counter = CompileCounter()
    compiled = tjc.compile(_attention, backend=counter)
    for t in (3, 5, 7):
        x = torch.randn(2, t, 8)
        tjc.mark_dynamic(x, 1)
        torch.testing.assert_close(compiled(x, W), _attention(x, W), rtol=0, atol=0)
    assert counter.frame_count == 1


def test_mark_dynamic_bounds_are_guarded():
    counter = CompileCounter()
    compiled = tjc.compile(lambda x: x.cumsum(0), backend=counter)
    for n in (3, 5, 8):
        x = torch.randn(n)
        tjc.mark_dynamic(x, 0, min=2, max=8)
        compiled(x)
    assert counter.frame_count == 1
    big = torch.randn(9)                # no mark: the entry's max of 8 fails, a new entry
    torch.testing.assert_close(compiled(big), big.cumsum(0))
    assert counter.frame_count == 2


def test_a_shape_guard_miss_is_explained_in_words(caplog, monkeypatch):
    monkeypatch.setattr(tjc.config, "log", frozenset({"recompiles"}))
    compiled = tjc.compile(lambda x, y: x[: y.size(0)] + y)
    x, y = torch.randn(8), torch.randn(6)
    tjc.mark_dynamic(x, 0, max=8)
    tjc.mark_dynamic(y, 0)
    compiled(x, y)
    with caplog.at_level("INFO", logger="torch_jit_cache"):
        big = torch.randn(9)
        torch.testing.assert_close(compiled(big, y), big[:6] + y)
    assert "L['x'].size()[0]: 9 > max 8" in caplog.text


def test_explain_shows_the_symbolic_guards():
    x, y = torch.randn(3, 4), torch.randn(4, 5)
    tjc.mark_dynamic(x, 0)
    tjc.mark_dynamic(y, 1)
    report = tjc.explain(lambda a, b: (a @ b).relu())(x, y)
    text = str(report)
    assert "SYMBOLIC_SHAPES: L['a'].size()[0] >= 2" in text
    assert "SYMBOLIC_SHAPES: L['b'].stride()[0] == L['b'].size()[1]" in text
    assert "size=[?, 4], stride=[4, 1]" in text and "size=[4, ?], stride=[?, 1]" in text


def test_mark_dynamic_refuses_bad_input_clearly():
    x = torch.randn(4, 5)
    with pytest.raises(IndexError, match="dimension 2 is out of range"):
        tjc.mark_dynamic(x, 2)
    with pytest.raises(ValueError, match="size 5, outside the range"):
        tjc.mark_dynamic(x, 1, min=6, max=10)
    with pytest.raises(ValueError, match="max=1 is below"):
        tjc.mark_dynamic(x, 1, max=1)
    with pytest.raises(TypeError, match="expected a tensor"):
        tjc.mark_dynamic([1, 2], 0)


def test_mark_dynamic_on_a_dimension_the_code_needs_static_raises():
    def f(x):
        if x.size(0) == 4:
            return x + 1
        return x - 1
    x = torch.randn(4)
    tjc.mark_dynamic(x, 0)
    with pytest.raises(DynamicMarkError, match=r"L\['x'\].size\(\)\[0\] is marked dynamic"):
        tjc.compile(f)(x)


def test_maybe_mark_dynamic_gives_way_without_an_error():
    def f(x):
        if x.size(0) == 4:
            return x + 1
        return x - 1
    counter = CompileCounter()
    compiled = tjc.compile(f, backend=counter)
    for n in (4, 4, 5):
        x = torch.randn(n)
        tjc.maybe_mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x), f(x))
    assert counter.frame_count == 2


def test_mark_static_wins_over_dynamic_true():
    counter = CompileCounter()
    compiled = tjc.compile(lambda x: x * 2, backend=counter, dynamic=True)
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        tjc.mark_static(x, 0)
        compiled(x)
    assert counter.frame_count == 3


def test_compile_refuses_an_unknown_dynamic_value():
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        tjc.compile(lambda x: x, dynamic="yes")


# -- models ------------------------------------------------------------------------------------------

def _generate(model, idx, steps, block_size):
    with torch.no_grad():
        for _ in range(steps):
            idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
            logits = model(idx_cond)[0][:, -1, :]
            idx = torch.cat((idx, logits.argmax(-1, keepdim=True)), dim=1)
    return idx


def test_nanogpt_generation_compiles_at_most_twice_per_frame():
    model, inputs = zoo.build("nanogpt")
    model.eval()
    prompt = inputs.args[0][:, :4]
    counter = CompileCounter()
    compiled = tjc.compile(model, backend=counter)
    block = model.config.block_size
    got = _generate(compiled, prompt, 20, block)
    assert torch.equal(got, _generate(model, prompt, 20, block))
    assert counter.frame_count <= 2
    assert all(len(tjc.cache_entries(c)) <= 2 for c in (type(model).forward,))
    before = tjc.stats()["compiles"]
    _generate(compiled, prompt, 20, block)
    assert tjc.stats()["compiles"] == before, "every later step hits"


def _generate_with_cache(model, ids, steps):
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        tokens = [ids]
        for _ in range(steps):
            nxt = out.logits[:, -1:].argmax(-1)
            tokens.append(nxt)
            out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
    return torch.cat(tokens, 1)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_huggingface_generation_with_a_kv_cache_stops_compiling(name):
    if not zoo.available(name):
        pytest.skip(f"{name} needs transformers")
    model, inputs = zoo.build(name)
    model.eval()
    ids = inputs.kwargs["input_ids"][:, :4]
    counter = CompileCounter()
    compiled = tjc.compile(model, backend=counter)
    assert torch.equal(_generate_with_cache(compiled, ids, 12), _generate_with_cache(model, ids, 12))
    # The prompt, the first step with a cache (static), then one entry for every cache length.
    assert counter.frame_count == 3
    _generate_with_cache(compiled, ids, 12)
    assert counter.frame_count == 3, "every later step hits"


def test_a_frame_whose_symbolic_trace_breaks_keeps_static_shapes():
    # TransformerEncoder compares its mask with a causal one to pick a kernel: fake tensors cannot
    # answer, and the stand-in run on zeros (opaque_calls.py) needs concrete sizes, so the symbolic
    # trace would break at it. The frame is traced static again and keeps one entry per length,
    # without a break.
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1,
                                enable_nested_tensor=False).eval()

    def f(x, mask):
        return enc(x.tanh(), mask)
    counter = CompileCounter()
    compiled = tjc.compile(f, backend=counter)
    with torch.no_grad():
        for t in (3, 4, 5):
            x, mask = torch.randn(t, 2, 8), nn.Transformer.generate_square_subsequent_mask(t)
            torch.testing.assert_close(compiled(x, mask), f(x, mask))
    assert counter.frame_count == 3
    assert tjc.stats()["graph_breaks"] == 0


def test_an_lstm_runs_on_symbolic_sizes():
    # Before every trace ran on fake tensors with the Python dispatcher, the LSTM broke the
    # symbolic trace and the frame fell back to one entry per length.
    lstm = nn.LSTM(4, 6)
    head = nn.Linear(6, 3)

    def f(x):
        out, _ = lstm(x.tanh())
        return head(out)
    counter = CompileCounter()
    compiled = tjc.compile(f, backend=counter)
    with torch.no_grad():
        for t in (3, 4, 5, 6):
            x = torch.randn(t, 2, 4)
            torch.testing.assert_close(compiled(x), f(x))
    assert counter.frame_count == 2   # static for 3, then one symbolic entry for 4, 5, 6
    assert tjc.stats()["graph_breaks"] == 0


def test_dynamic_shapes_under_aot_eager_match_eager_gradients():
    model = nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.LayerNorm(6))
    counter = CompileCounterWithBackend("aot_eager")
    compiled = tjc.compile(model, backend=counter)
    for n in (2, 3, 5):
        x = torch.randn(n, 6)
        model.zero_grad()
        want = model(x)
        want.sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        got = compiled(x)
        got.sum().backward()
        torch.testing.assert_close(got, want)
        for p, g in zip(model.parameters(), grads):
            torch.testing.assert_close(p.grad, g)
    assert counter.frame_count == 2


# -- logs and lifetimes --------------------------------------------------------------------------------

def test_log_dynamic_names_the_dimension(caplog, monkeypatch):
    monkeypatch.setattr(tjc.config, "log", frozenset({"dynamic"}))
    with caplog.at_level("INFO", logger="torch_jit_cache"):
        _run_sizes(_attention, lambda t: (torch.randn(2, t, 8), W), [3, 4])
    text = caplog.text
    assert "L['x']: dimension(s) [1] changed size since the last compile (now [2, 4, 8])" in text


def test_fake_tensors_and_the_shape_env_die_with_the_trace(no_gc, monkeypatch):
    # Nothing of ours holds them after the compile: not the entry, its guards or the graph. They
    # are freed by the cycle collector, not by reference counting: torch's fake dispatch makes
    # recursive closures (maybe_propagate_real_tensors.<locals>.go) that capture the mode. The
    # ShapeEnv's method caches and the fake dispatch cache, which would keep them for the life of
    # the process, are emptied / off (tracer/fake_shapes.py).
    import gc

    from torch_jit_cache.tracer import fake_shapes

    made = []
    original = fake_shapes.FakeShapes.__init__

    def recording(self):
        original(self)
        made.append((weakref.ref(self.shape_env), weakref.ref(self.mode)))
    monkeypatch.setattr(fake_shapes.FakeShapes, "__init__", recording)
    compiled = tjc.compile(_attention)
    for t in (3, 4, 5):
        compiled(torch.randn(2, t, 8), W)
    assert made, "the second compile traced with symbolic sizes"
    assert len(tjc.cache_entries(compiled)) == 2
    gc.collect()
    assert all(env() is None and mode() is None for env, mode in made), \
        "the ShapeEnv or fake mode is held after the compile"
    torch.testing.assert_close(compiled(torch.randn(2, 6, 8), W).shape, torch.Size([2, 6, 8]))


def test_a_dynamic_entry_dies_with_its_module(no_gc):
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    compiled = tjc.compile(model)
    for n in (2, 3, 4):
        compiled(torch.randn(n, 4))
    ref = weakref.ref(model)
    del model, compiled
    assert ref() is None


def test_dynamic_compile_and_drop_leaks_nothing():
    # The refleak checker: each run compiles a module with automatic dynamic (a static entry, a
    # symbolic one), calls it at five lengths and drops it; live tensors, fake tensors, ShapeEnvs
    # and the module must not grow from run to run, and the module of each run must be dead.
    from torch_jit_cache.testing import check_refleaks

    def run():
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        compiled = tjc.compile(model)
        for n in (2, 3, 4, 5, 6):
            compiled(torch.randn(n, 4))
        return model

    check_refleaks(run, warmups=2, runs=3, track=lambda model: [model],
                   track_types=[torch.Tensor, "torch._subclasses.fake_tensor.FakeTensor",
                                "torch.fx.experimental.symbolic_shapes.ShapeEnv",
                                "torch._subclasses.fake_tensor.FakeTensorMode"])


# -- float arguments -----------------------------------------------------------------------------

def _scale_by_item(x):
    s = x.sum().item()          # a Python float: a graph break; the resume function gets it
    return x * s + s * 0.5


def _scale_and_return_item(x):
    s = x.sum().item()
    return x * s, s * 2         # a float computed from it leaves the graph


@pytest.mark.parametrize("backend, fn", [("eager", _scale_by_item), ("aot_eager", _scale_by_item),
                                         ("eager", _scale_and_return_item)])
def test_a_float_that_changes_every_call_becomes_a_symbol(backend, fn):
    """Before, the resume function was specialized on each value (EQUALS_MATCH on the float):
    a compile per call until the cache limit, then uncompiled (107 compiles for 10 calls of 18
    blocks); torch.compile traces it unspecialized."""
    compiled = tjc.compile(fn, backend=backend)
    compiles = []
    for _ in range(10):
        x = torch.randn(4)
        torch.testing.assert_close(compiled(x), fn(x), rtol=0, atol=0)
        compiles.append(tjc.stats()["compiles"])
    # at most: the frame, the resume function on its first value, then once more with the float
    # a symbol; none after
    assert compiles[-1] <= 3 and compiles[2] == compiles[-1], compiles
    assert tjc.stats()["fallbacks"] == tjc.stats()["cache_limit_hits"] == 0


def test_a_float_output_aot_specialises_is_compiled_again_with_floats_constant():
    """AOTAutograd guards a float graph output on its value (Eq(2.0*zf0, v)), which the shape
    guard cannot check: the resume function is compiled again with its floats as constants (one
    entry per value, as before) instead of running uncompiled."""
    compiled = tjc.compile(_scale_and_return_item, backend="aot_eager", cache_limit=16)
    for _ in range(5):
        x = torch.randn(4)
        got, want = compiled(x), _scale_and_return_item(x)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert type(got[1]) is float
    assert tjc.stats()["fallbacks"] == 0


def _branch_on_float(x, s):
    y = x * s
    if s > 0:
        y = y + s / 2
    return y, float(s) + 1


def test_a_float_the_code_branches_on_stays_guarded_by_value():
    """The C++ shape guard computes on int64: a guard on a float symbol (s > 0, float(s)) cannot
    be built, so such a frame traces static and each value is guarded by EQUALS_MATCH. Before
    that check, the entry made for s=2.5 served s=-3.0 and skipped the branch's condition."""
    compiled = tjc.compile(_branch_on_float, cache_limit=16)
    for s in (1.5, 2.5, -3.0, 4.0, -0.5):
        x = torch.randn(3)
        (got, gf), (want, wf) = compiled(x, s), _branch_on_float(x, s)
        torch.testing.assert_close(got, want)
        assert gf == wf


def test_float_arguments_stay_constants_under_dynamic_false():
    def f(x, s):
        return x * s
    counter = CompileCounter()
    compiled = tjc.compile(f, backend=counter, dynamic=False, cache_limit=32)
    for s in (0.5, 1.5, 2.5):
        torch.testing.assert_close(compiled(torch.ones(2), s), torch.ones(2) * s)
    assert counter.frame_count == 3


class _WidthBlock(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)

    def forward(self, x):
        return x + torch.relu(self.lin(x))


def test_identical_blocks_at_other_widths_compile_static_and_a_batch_change_is_dynamic():
    # ConvNeXt's stages: one block class at two widths, each block compiled on its own (one shared
    # compiler). The second width is another instance, not a size that changed: its first compile
    # is static, as in a process that only had that width. Before sizes were remembered per
    # instance shape, it was traced symbolic (every dimension of its input and parameters).
    torch.manual_seed(0)
    blocks = [_WidthBlock(4), _WidthBlock(4), _WidthBlock(8), _WidthBlock(8)]
    compiled = [tjc.compile(b) for b in blocks]
    for b, c in zip(blocks, compiled):
        x = torch.randn(2, b.lin.in_features)
        torch.testing.assert_close(c(x), b(x))
    entries = tjc.cache_entries(_WidthBlock.forward)
    assert len(entries) == 2, [str(e.guards) for e in entries]
    assert not any("SYMBOLIC_SHAPES" in str(e.guards) for e in entries), "both widths static"
    # A batch that changes for one width is automatic dynamic, as before.
    x = torch.randn(5, 8)
    torch.testing.assert_close(compiled[2](x), blocks[2](x))
    symbolic = [e for e in tjc.cache_entries(_WidthBlock.forward) if "SYMBOLIC_SHAPES" in str(e.guards)]
    assert len(symbolic) == 1 and "size=[?, 8]" in str(symbolic[0].guards), str(symbolic[0].guards)
    x = torch.randn(7, 8)
    torch.testing.assert_close(compiled[3](x), blocks[3](x))
    assert len(tjc.cache_entries(_WidthBlock.forward)) == 3, "the symbolic entry serves the next batch"
