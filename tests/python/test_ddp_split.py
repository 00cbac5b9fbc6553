"""backends/ddp_split.py in one process: where a graph is cut for DDP's buckets, and that the
pieces compute what the whole graph does (the two-process DDP runs are in
test_variables_distributed.py)."""
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import backends  # noqa: E402
from torch_jit_cache.backends import ddp_split  # noqa: E402
from torch_jit_cache.sources import FrameValues  # noqa: E402

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
