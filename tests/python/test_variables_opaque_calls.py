"""Opaque calls (frontend/proxies.py, tracer/variables/modules/opaque_calls.py): built-in modules the tracer does not
trace (LSTM, GRU, MultiheadAttention, the Transformer family) and what tjc.allow_in_graph marks are
called as one node of the graph, through a proxy that shares the module's __dict__.

Checked against eager: outputs and gradients (parameters and inputs), train and eval, graph and
break counts; the proxy's type and shared state; guards (training, a replaced parameter, a hook
added after compiling); lifetimes (the module dies without gc.collect() and its entry is
evicted); DICT_TAGS on the opaque module tree (a change after the tags were recorded is seen).
Needs torch. tjc.allow_in_graph itself: test_allow_in_graph.py.
"""
import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.frontend import proxies
from torch_jit_cache import runtime  # noqa: E402
from torch_jit_cache.testing import CompileCounterWithBackend  # noqa: E402
from torch_jit_cache.testing import models as zoo  # noqa: E402

from context_helpers import Recording  # noqa: E402
from jit_helpers import watch  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


# --- models with an opaque module inside ---------------------------------------------------------

class WithLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(6, 8)
        self.rnn = nn.LSTM(8, 8, 2, dropout=0.25)
        self.out = nn.Linear(8, 3)

    def forward(self, x, h, c):
        y, (h2, c2) = self.rnn(torch.tanh(self.inp(x)), (h, c))
        return self.out(y), h2 * 2, c2

    @staticmethod
    def inputs():
        return [torch.randn(5, 2, 6, requires_grad=True), torch.randn(2, 2, 8), torch.randn(2, 2, 8)]


class WithGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(6, 8, batch_first=True, bidirectional=True)

    def forward(self, x):
        y, h = self.rnn(x * 2)
        return y.relu(), h

    @staticmethod
    def inputs():
        return [torch.randn(2, 5, 6, requires_grad=True)]


class WithMHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, dropout=0.2)
        self.norm = nn.LayerNorm(8)

    def forward(self, x, mask):
        a, w = self.attn(x, x, x, attn_mask=mask)
        return self.norm(a + x), w

    @staticmethod
    def inputs():
        return [torch.randn(5, 2, 8, requires_grad=True), torch.triu(torch.full((5, 5), float("-inf")), 1)]


class WithEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # enable_nested_tensor without batch_first
            self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(8, 4)

    def forward(self, x, padding):
        return self.head(self.encoder(x * 3, src_key_padding_mask=padding))

    @staticmethod
    def inputs():
        padding = torch.zeros(2, 5, dtype=torch.bool)
        padding[1, 3:] = True
        return [torch.randn(5, 2, 8, requires_grad=True), padding]


MODELS = {"LSTM": WithLSTM, "GRU": WithGRU, "MultiheadAttention": WithMHA, "TransformerEncoder": WithEncoder}


def _flat(out):
    out = out if isinstance(out, tuple) else (out,)
    return [t for o in out for t in (_flat(o) if isinstance(o, tuple) else [o])]


def _run(fn, model, inputs, seed, grad):
    torch.manual_seed(seed)
    args = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    with torch.set_grad_enabled(grad):
        out = _flat(fn(*args))
    grads = {}
    if grad:
        sum(o.float().sum() for o in out if o.requires_grad).backward()
        grads = {n: p.grad for n, p in model.named_parameters()}
        grads.update({i: a.grad for i, a in enumerate(args) if a.requires_grad})
        model.zero_grad(set_to_none=True)
    return [o.detach() for o in out], grads


def _no_dropout(model):
    for m in model.modules():
        if hasattr(m, "dropout") and isinstance(m.dropout, float):
            m.dropout = 0.0
    return model


def _compare_with_eager(cls, *, train, grad=True, backend="eager", calls=3, prepare=lambda m: m):
    """The model compiled and a copy run eagerly, `calls` times on the same seeds: outputs and
    gradients equal. Returns (graphs compiled, graph breaks)."""
    torch.manual_seed(1)
    model = prepare(cls().train(train))
    eager = copy.deepcopy(model)
    inputs = cls.inputs()
    counter = CompileCounterWithBackend(backend)
    compiled = tjc.compile(model, backend=counter)
    breaks = tjc.stats()["graph_breaks"]
    for seed in range(calls):
        expected, expected_grads = _run(eager, eager, inputs, seed, grad)
        got, got_grads = _run(compiled, model, inputs, seed, grad)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)
        assert got_grads.keys() == expected_grads.keys()
        for k in expected_grads:
            torch.testing.assert_close(got_grads[k], expected_grads[k], msg=lambda m: f"grad of {k}: {m}")
    return counter.frame_count, tjc.stats()["graph_breaks"] - breaks


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", list(MODELS))
def test_opaque_module_equals_eager_on_outputs_and_gradients(name, train):
    assert _compare_with_eager(MODELS[name], train=train) == (1, 0)


@pytest.mark.parametrize("name", list(MODELS))
def test_opaque_module_in_eval_without_grad_keeps_eagers_fast_path(name):
    """eval + no_grad: TransformerEncoderLayer and MultiheadAttention take torch's fused fast path;
    the opaque call runs the module itself, so it takes it too and the values are eager's."""
    assert _compare_with_eager(MODELS[name], train=False, grad=False) == (1, 0)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "MultiheadAttention"])
def test_opaque_module_under_aot_eager_differentiates_its_parameters(name):
    """AOTAutograd sees the proxy as a submodule of the graph and its parameters as the graph's.
    Without dropout: AOTAutograd decomposes the fused ops, whose random streams differ from eager's."""
    assert _compare_with_eager(MODELS[name], train=True, backend="aot_eager", prepare=_no_dropout) == (1, 0)


def test_zoo_lstm_lm_and_transformer_lm_are_one_graph():
    """torch.compile: lstm_lm 1 graph / 0 breaks, transformer_lm 2 / 1. Before opaque calls both
    broke at the built-in module (2 graphs / 1 break each)."""
    for name in ("lstm_lm", "transformer_lm"):
        model, inp = zoo.build(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = tjc.explain(model)(*inp.args, **inp.kwargs)
        assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, []), (name, str(report))
        torch.manual_seed(0)              # transformer_lm's layers have dropout 0.1
        expected = model(*inp.args, **inp.kwargs)
        compiled = tjc.compile(model)
        torch.manual_seed(0)
        got = compiled(*inp.args, **inp.kwargs)
        for g, e in zip(_flat(got), _flat(expected)):
            torch.testing.assert_close(g, e)


def test_the_graph_calls_a_proxy_of_the_same_type_sharing_the_modules_dict():
    model = WithLSTM()
    report = tjc.explain(model)(*WithLSTM.inputs())
    (gm,) = report.graphs
    (name,) = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    proxy = gm.get_submodule(name)
    assert type(proxy) is nn.LSTM and proxy is not model.rnn
    assert vars(proxy) is vars(model.rnn)
    assert proxy.weight_hh_l0 is model.rnn.weight_hh_l0
    assert proxies.builtin_opaque_reason(nn.LSTM) and proxies.builtin_opaque_reason(WithLSTM) is None


# --- guards: what the call reads is guarded, later changes to the module show through ---------

def _lstm_step():
    rnn = nn.LSTM(4, 4)

    def step(x):
        y, (h, c) = rnn(x)
        return y.sum(0) + h[0]
    return rnn, step


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_parameter_replaced_on_the_original_is_used_by_the_next_compiled_call(backend):
    rnn, step = _lstm_step()
    counter = CompileCounterWithBackend(backend)
    compiled = tjc.compile(step, backend=counter)
    # requires_grad: under aot_eager an LSTM whose input needs no grad is left to eager (a graph
    # break, the test below); this test wants it in the graph.
    x = torch.randn(3, 2, 4, requires_grad=backend == "aot_eager")
    torch.testing.assert_close(compiled(x), step(x))
    assert (counter.frame_count, tjc.stats()["graph_breaks"]) == (1, 0)
    rnn.weight_hh_l0 = nn.Parameter(torch.randn(16, 4))
    with torch.no_grad():
        rnn.bias_ih_l0.add_(1.0)          # in place: same object, new values
    torch.testing.assert_close(compiled(x), step(x))
    # The parameter's identity is guarded: AOTAutograd took the old one as the graph's own.
    assert (counter.frame_count, tjc.stats()["graph_breaks"]) == (2, 0)


def test_an_lstm_whose_input_needs_no_grad_runs_eagerly_under_aot_eager():
    # torch 2.13's AOTAutograd compiles this LSTM call and then fails at its first run ("expected
    # all tensors_saved_with_vc_check to be Tensors", a None saved for backward); inductor fails
    # the same way on mkldnn_rnn_layer. Before, the compiled call raised where eager runs.
    rnn, step = _lstm_step()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = tjc.compile(step, backend=counter)
    x = torch.randn(3, 2, 4)
    got = compiled(x)
    got.sum().backward()
    grads = [p.grad.clone() for p in rnn.parameters()]
    rnn.zero_grad()
    expected = step(x)
    expected.sum().backward()
    torch.testing.assert_close(got, expected)
    for g, p in zip(grads, rnn.parameters()):
        torch.testing.assert_close(g, p.grad)
    assert tjc.stats()["graph_breaks"] == 1   # the LSTM, between the graphs before and after it
    with torch.no_grad():                     # no backward to save for: the LSTM joins the graph
        torch.testing.assert_close(compiled(x), step(x))


def test_a_hook_registered_on_the_original_after_compiling_runs():
    rnn, step = _lstm_step()
    backend = Recording()
    compiled = tjc.compile(step, backend=backend)
    x = torch.randn(3, 2, 4)
    torch.testing.assert_close(compiled(x), step(x))
    assert [type(m) for m in backend.opaque_calls()] == [nn.LSTM]
    seen = []

    def hook(module, args, output):
        seen.append(module)
        return output[0] * 10, output[1]
    handle = rnn.register_forward_hook(hook)
    expected = step(x)
    assert seen == [rnn]
    torch.testing.assert_close(compiled(x), expected)
    assert seen == [rnn, rnn], "the hook ran once for the compiled call, never for tracing"
    assert tjc.stats()["graph_breaks"] == 1, "a module with hooks is called where the frame breaks"
    handle.remove()
    torch.testing.assert_close(compiled(x), step(x))
    assert len(seen) == 2


def test_switching_training_and_an_attribute_recompiles():
    rnn = nn.LSTM(4, 4, 2, dropout=0.5)

    def step(x):
        return rnn(x)[0] + 1
    counter = CompileCounterWithBackend("eager")
    compiled = tjc.compile(step, backend=counter)
    x = torch.randn(3, 2, 4)
    for mode in (True, False, True):
        rnn.train(mode)
        torch.manual_seed(3)
        expected = step(x)
        torch.manual_seed(3)
        torch.testing.assert_close(compiled(x), expected)
    assert counter.frame_count == 2
    rnn.dropout = 0.0                     # read by LSTM.forward: guarded by value
    torch.testing.assert_close(compiled(x), step(x))
    assert counter.frame_count == 3


# --- lifetimes --------------------------------------------------------------------------------

class _Holder(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


@pytest.mark.parametrize("how", ["directly", "in a module", "by a closure"])
def test_an_opaque_module_compiled_and_dropped_is_freed_and_its_entry_evicted(how, no_gc):
    """A known torch.compile leak: a built-in module compiled without inlining stayed alive through
    the GraphModule that called it. Here the graph holds a proxy, so dropping the module frees it
    and its parameters by reference counting, and evicts its cache entry. (`directly`: the frame
    compiled is LSTM.forward itself, traced; the others call the LSTM opaquely.)"""
    mod = nn.LSTM(4, 4)
    backend = Recording()
    if how == "directly":
        compiled = tjc.compile(mod, backend=backend)
    elif how == "in a module":
        compiled = tjc.compile(_Holder(mod), backend=backend)
    else:
        def compiled_fn(x):
            return mod(x)
        compiled = tjc.compile(compiled_fn, backend=backend)
    x = torch.randn(3, 2, 4)
    with torch.no_grad():                 # an autograd graph would keep the weights alive
        expected = mod(x)
        got = compiled(x)
    torch.testing.assert_close(got, expected)
    (entry,) = tjc.cache_entries(compiled)
    # Called opaquely, the graph holds its proxy: pinned by identity. Traced itself (its forward
    # is the frame), it is guarded by type and values like any module an entry reads.
    assert ("ID_MATCH: <LSTM object> (weak)" in entry.guards) == (how != "directly")
    proxies_called = backend.opaque_calls()
    assert [type(p) for p in proxies_called] == ([] if how == "directly" else [nn.LSTM])
    assert all(p is not mod and vars(p) is vars(mod) for p in proxies_called)
    freed = [watch(mod), watch(mod.weight_ih_l0)]
    del mod, compiled, got, expected, proxies_called
    if how == "by a closure":
        del compiled_fn
    assert freed == [[True], [True]], "module and parameter freed without gc.collect()"
    assert entry.evicted   # with its compiled object (its owner), or with the module it pins
    assert [ref() for ref in backend.graphs] == [None], "the graph freed with its entry"


def test_a_model_holding_an_opaque_module_is_freed_with_its_proxy(no_gc):
    model = WithEncoder().eval()
    backend = Recording()
    compiled = tjc.compile(model, backend=backend)
    with torch.no_grad():
        compiled(*WithEncoder.inputs())
    (entry,) = tjc.cache_entries(compiled)
    assert [type(m) for m in backend.opaque_calls()] == [nn.TransformerEncoder]
    freed = [watch(model), watch(model.encoder), watch(model.encoder.layers[0].self_attn.in_proj_weight)]
    del model, compiled
    assert freed == [[True]] * 3
    assert entry.evicted


# --- DICT_TAGS: the module tree's guards skipped while its dicts are unchanged ----------------------
#
# Every module node carries DICT_TAGS (csrc/guards/dict_tags.h): after a passing check it records
# the version tags of the dicts its subtree read and skips those guards while the tags match;
# tensors' TENSOR_MATCH runs every time. Each change below, made after the tags were recorded,
# must give eager's result on the next compiled call (a recompile, or the live module through
# the proxy).

def _layer(model, i=0):
    return model.encoder.layers[i]


def _bigger_feedforward(model):
    layer = _layer(model)
    layer.linear1, layer.linear2 = nn.Linear(8, 32), nn.Linear(32, 8)


def _feedforward_resized_in_place(model):   # same Parameter objects: no dict changes
    layer = _layer(model)
    layer.linear1.weight.data = torch.randn(32, 8)
    layer.linear1.bias.data = torch.randn(32)
    layer.linear2.weight.data = torch.randn(8, 32)


def _forward_hook(model):
    _layer(model, 1).register_forward_hook(lambda m, args, out: out * 2)


CHANGES = {
    "a parameter replaced": lambda m: setattr(_layer(m, 1).norm2, "weight", nn.Parameter(torch.randn(8))),
    "a parameter set in _parameters": lambda m: _layer(m).self_attn._parameters.__setitem__(
        "in_proj_bias", nn.Parameter(torch.randn(24))),
    "submodules of another shape": _bigger_feedforward,
    "parameters resized in place (.data)": _feedforward_resized_in_place,
    "requires_grad_ on a parameter": lambda m: _layer(m).linear1.weight.requires_grad_(False),
    "training switched on a sub-layer": lambda m: _layer(m).train(),
    "a forward hook on a sub-layer": _forward_hook,
    "norm_first set": lambda m: setattr(_layer(m), "norm_first", True),
    "norm_first set through vars()": lambda m: vars(_layer(m)).update(norm_first=True),
    "activation replaced": lambda m: setattr(_layer(m), "activation", torch.nn.functional.gelu),
    "a sub-layer's class replaced": lambda m: setattr(_layer(m), "__class__", _PostScaled),
    "a layer removed": lambda m: m.encoder.layers.__delitem__(1) or setattr(m.encoder, "num_layers", 1),
}


class _PostScaled(nn.TransformerEncoderLayer):
    def forward(self, *args, **kwargs):
        return super().forward(*args, **kwargs) * 3


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_in_the_opaque_module_tree_after_compiling_gives_eagers_result(change):
    model = WithEncoder().eval()
    compiled = tjc.compile(model)
    inputs = WithEncoder.inputs()
    with torch.no_grad():
        for _ in range(2):                   # the second call runs on recorded tags
            torch.testing.assert_close(compiled(*inputs), model(*inputs))
        node = tjc.cache_entries(compiled)[0].guard_manager.local("self").attr("__dict__") \
            .item("_modules").item("encoder")
        assert node.dict_tags_state["recorded"] if runtime.DICT_TAGS_SUPPORTED else node.dict_tags_state is None
        CHANGES[change](model)
        torch.manual_seed(1)
        expected = model(*inputs)
        for _ in range(2):
            torch.manual_seed(1)
            torch.testing.assert_close(compiled(*inputs), expected)


@pytest.mark.skipif(not runtime.DICT_TAGS_SUPPORTED, reason="no DICT_TAGS on this Python (csrc/cpython/dict_version.h)")
def test_the_opaque_encoders_guards_are_skipped_but_its_tensors_are_checked():
    model = WithEncoder().eval()
    compiled = tjc.compile(model)
    with torch.no_grad():
        for _ in range(2):                   # the first check after compiling records the tags
            compiled(*WithEncoder.inputs())
    (entry,) = tjc.cache_entries(compiled)
    node = entry.guard_manager.local("self").attr("__dict__").item("_modules").item("encoder")
    state = node.dict_tags_state
    tensors = len(list(model.encoder.parameters()))
    assert state["recorded"] and state["dicts"] >= 8 * len(list(model.encoder.modules()))
    assert state["residuals"] >= tensors, "every parameter's TENSOR_MATCH runs on every call"
    assert "| DICT_TAGS: children skipped while the dicts they read are unchanged" in entry.guards


def test_eval_called_before_every_call_rechecks_without_recompiling():
    """model.eval() writes `training` in every module's dict: the tags never match, the full
    check passes, and nothing recompiles."""
    model = WithEncoder()
    counter = CompileCounterWithBackend("eager")
    compiled = tjc.compile(model, backend=counter)
    inputs = WithEncoder.inputs()
    with torch.no_grad():
        for _ in range(4):
            model.eval()
            torch.testing.assert_close(compiled(*inputs), model(*inputs))
    assert counter.frame_count == 1


def test_an_opaque_module_with_recorded_tags_is_freed_without_gc(no_gc):
    model = WithEncoder().eval()
    compiled = tjc.compile(model)
    with torch.no_grad():
        for _ in range(3):
            compiled(*WithEncoder.inputs())
    (entry,) = tjc.cache_entries(compiled)
    if runtime.DICT_TAGS_SUPPORTED:
        assert entry.guard_manager.local("self").dict_tags_state["recorded"]
    freed = [watch(model), watch(model.encoder.layers[1]), watch(model.encoder.layers[0].linear1.weight)]
    del model, compiled
    assert freed == [[True]] * 3
    assert entry.evicted


def _shape_baked(module, call):
    """A compiled function whose graph bakes the opaque call's output width in as a constant: a
    change to that width the guards miss gives a wrong result, not an error."""
    def f(x):
        y = call(module, x)
        return y * y.shape[-1]
    return f


def test_a_parameter_resized_in_place_under_recorded_tags_recompiles():
    """TENSOR_MATCH runs on every call: `.data =` changes no dict."""
    mha = nn.MultiheadAttention(8, 2).eval()
    f = _shape_baked(mha, lambda m, x: m(x, x, x, need_weights=False)[0])
    counter = CompileCounterWithBackend("eager")
    compiled = tjc.compile(f, backend=counter)
    x = torch.randn(5, 2, 8)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), f(x))
        mha.out_proj.weight.data = torch.randn(16, 8)
        mha.out_proj.bias.data = torch.randn(16)
        assert f(x).shape[-1] == 16
        torch.testing.assert_close(compiled(x), f(x))
    assert counter.frame_count == 2


def test_a_hook_that_widens_an_opaque_layers_output_under_recorded_tags_is_seen():
    encoder = WithEncoder().eval().encoder
    f = _shape_baked(encoder, lambda m, x: m(x))
    compiled = tjc.compile(f)
    x = torch.randn(5, 2, 8)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), f(x))
        encoder.register_forward_hook(lambda m, args, out: torch.cat([out, out], -1))
        assert f(x).shape[-1] == 16
        torch.testing.assert_close(compiled(x), f(x))
