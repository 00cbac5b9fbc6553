"""backends/ddp_split.py in one process: where a graph is cut for DDP's buckets, and that the
pieces compute what the whole graph does (the two-process DDP runs are in
test_variables_distributed.py)."""
import contextlib

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import backends  # noqa: E402
from torch_jit_cache.backends import ddp_split  # noqa: E402
from torch_jit_cache.guard.sources import FrameValues  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


class Stack(nn.Module):
    def __init__(self, n=6):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])   # 80 bytes each

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x.sum()


def traced(model, *args):
    """The graph tjc traces for model(*args) and its example inputs."""
    seen = []

    def keep(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward
    tjc.compile(model, backend=keep)(*args)
    (graph,) = seen
    return graph


@pytest.mark.parametrize("cap, count", [(80, 6), (160, 3), (240, 2), (1000, None)])
def test_pieces_close_where_the_buckets_fill(cap, count):
    gm, inputs = traced(Stack(), torch.randn(2, 4))
    pieces = ddp_split.partitions(gm, inputs, cap)
    if count is None:
        assert pieces is None   # one bucket: compiled whole
        return
    order = [pieces[n] for n in gm.graph.nodes if n in pieces]
    assert order == sorted(order) and order[0] == 0 and max(order) == count - 1


def test_the_pieces_compute_what_the_whole_graph_does():
    model = Stack()
    x = torch.randn(2, 4, requires_grad=True)
    gm, inputs = traced(model, x)
    pieces = ddp_split.partitions(gm, inputs, 160)
    compiled = []

    def compile_piece(piece, example_inputs):
        compiled.append(len(example_inputs))
        return backends.compile_graph("aot_eager", piece, example_inputs)
    backends.ensure_tuple_output(gm)
    run = ddp_split.compile_split(gm, inputs, pieces, compile_piece)
    assert len(compiled) == 3
    # The graph's inputs in placeholder order, loaded from the frame as the transformed code does.
    frame = FrameValues({"self": model, "x": x}, {}, {})
    real = [node.meta["source"].load(frame) for node in gm.graph.find_nodes(op="placeholder")]
    out = run(*real)[0]
    expected = model(x)
    torch.testing.assert_close(out, expected)
    out.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected.backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)


def test_without_a_ddp_forward_nothing_is_cut():
    assert ddp_split.bucket_cap() is None


# -- the sharing key (backends/sharing.py): a shared compile is the split its graph needs ------------

class _ActiveDDP:
    """What a DDP forward shows the compiler: itself as the active DDP module, with its bucket cap."""

    def __init__(self, cap):
        self.bucket_bytes_cap = cap


@contextlib.contextmanager
def _ddp_forward(cap):
    """As DDP's `_inside_ddp_forward`: the active DDP module for the duration (None: no DDP)."""
    ddp = torch.nn.parallel.DistributedDataParallel
    old = ddp._active_ddp_module
    ddp._active_ddp_module = None if cap is None else _ActiveDDP(cap)
    try:
        yield
    finally:
        ddp._active_ddp_module = old


@pytest.mark.parametrize("caps, pieces, shared", [
    ((160, 80), (3, 6), 0),          # different caps: each graph its own cuts
    ((160, None), (3, 0), 0),        # under DDP, then not: the second whole
    ((None, 160), (0, 3), 0),        # whole first, then under DDP: cut all the same
    ((160, 160), (3, 3), 1),         # the same cuts: one compile, shared
    ((160, 150), (3, 3), 1),         # two caps that cut alike share too (the key holds the cuts)
])
def test_a_shared_compile_is_cut_as_its_own_ddp_asks(caps, pieces, shared):
    """Two identical models compiled apart, under DDP forwards with the bucket caps `caps` (None:
    no DDP), each at its first call: each gets its own DDP's cuts. Failed before the cuts were part
    of the sharing key: the second model was handed the first's compile (1 shared compile, and
    ddp_pieces 3, not 3 + 6, for caps 160 and 80)."""
    models = [Stack(), Stack()]
    # Bound forwards: a cache each (two modules of one class compiled alike would share one, and
    # the second call would hit the first's entry); both alive throughout.
    compiled = [tjc.compile(model.forward, backend="aot_eager") for model in models]
    x = torch.randn(2, 4)
    seen = []
    for model, opt, cap in zip(models, compiled, caps):
        before = tjc.stats()["ddp_pieces"]
        with _ddp_forward(cap):
            out = opt(x)
        torch.testing.assert_close(out, model(x))
        seen.append(tjc.stats()["ddp_pieces"] - before)
    if shared:
        pieces = (pieces[0], 0)   # a shared compile counts no new pieces: it is the first's
    assert tuple(seen) == pieces
    assert tjc.stats()["shared_backend_compiles"] == shared


def _train_compiled_under_ddp(caps):
    """Models compiled under DDP forwards with bucket caps `caps`, one step each, then dropped:
    weak references to them and to their compiled modules."""
    import weakref

    x = torch.randn(2, 4)
    refs = []
    for cap in caps:
        model = Stack()
        compiled = tjc.compile(model, backend="aot_eager")
        with _ddp_forward(cap):
            compiled(x).backward()
        refs += [weakref.ref(model), weakref.ref(compiled)]
    return refs


def test_models_compiled_under_ddp_forwards_are_freed_by_reference_counting(no_gc):
    """A compile cut for DDP goes with its entries, and they with the compiled module, without the
    collector. Failed before: the split's compiler was a class made per split, whose
    call_module closed over compile_piece and with it the compile() call's FrameCompiler (its cache
    owner, its entries): a class is in a cycle with itself, so the entries, the split compile and
    its sharing key lived until the collector ran (the compiled modules and memo still alive)."""
    from torch_jit_cache.backends import sharing

    _train_compiled_under_ddp([160])   # torch's first compile leaves cycles of its own
    import gc
    gc.collect()
    refs = _train_compiled_under_ddp([160, 80])
    assert [ref() for ref in refs] == [None] * 4
    assert len(tjc.cache_entries(Stack.forward)) == 0
    assert sharing._MEMO == {}
