"""mode="reduce-overhead": graph inputs that are parameters, buffers and tensors marked with
mark_static_address are static inputs for inductor's CUDA graphs (backends/static_inputs.py), as
torch.compile marks them; other inputs are copied into the graph's memory at each call.

On the CPU: inductor is asked which inputs are static (a spy on its inner compile) and every result
is compared with eager. Where CUDA is present: the graphs are recorded and replayed (no skip), a
buffer updated in place (a KV cache) is handled, a training step and a graph break work."""
import weakref

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")


@pytest.fixture
def inner_compiles(monkeypatch):
    """Each inductor inner compile as (input shapes, static input positions, is_backward), with
    inductor's and AOTAutograd's caches off so that every compile is seen."""
    import torch._functorch.config as functorch_config
    import torch._inductor.compile_fx as compile_fx_module
    import torch._inductor.config as inductor_config

    seen = []
    real = compile_fx_module._compile_fx_inner

    def spy(gm, example_inputs, **kwargs):
        shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in example_inputs]
        seen.append((shapes, sorted(kwargs.get("static_input_idxs") or ()), kwargs.get("is_backward", False)))
        return real(gm, example_inputs, **kwargs)
    monkeypatch.setattr(compile_fx_module, "_compile_fx_inner", spy)
    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        yield seen


def static_shapes(compile_record):
    shapes, static, _ = compile_record
    return sorted((shapes[i] for i in static), key=lambda s: (len(s), s))


class Cache(nn.Module):
    """A decode step's attention cache: a buffer written in place at a position, read back whole."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 6)
        self.register_buffer("cache", torch.zeros(5, 6))

    def forward(self, x, pos):
        self.cache[pos] = self.proj(x)
        return self.cache.sum(0)


def test_parameters_are_static_inputs_under_reduce_overhead(inner_compiles):
    m = nn.Sequential(nn.Linear(4, 5), nn.ReLU())
    cm = tjc.compile(m, backend="inductor", mode="reduce-overhead")
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))
    (record,) = inner_compiles
    assert static_shapes(record) == [(5,), (5, 4)]   # the weight and the bias; x is copied


def test_without_cuda_graphs_no_input_is_marked(inner_compiles):
    m = nn.Linear(4, 5)
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(tjc.compile(m, backend="inductor")(x), m(x))
    ((_, static, _),) = inner_compiles
    assert static == []


def test_a_buffer_updated_in_place_is_static(inner_compiles):
    """A KV cache written at a position: CUDA graph trees accept mutation of static inputs only."""
    m, ref = Cache(), Cache()
    ref.load_state_dict(m.state_dict())
    cm = tjc.compile(m, backend="inductor", mode="reduce-overhead")
    with torch.no_grad():
        for pos in range(3):
            x = torch.randn(4)
            torch.testing.assert_close(cm(x, pos), ref(x, pos))
    torch.testing.assert_close(m.cache, ref.cache)
    assert static_shapes(inner_compiles[0]) == [(6,), (5, 6), (6, 4)]   # bias, cache, weight


def test_mark_static_address_marks_an_argument(inner_compiles):
    """torch._dynamo.mark_static_address (HF's StaticCache calls it on its tensors) is honoured."""
    import torch._dynamo

    def f(x, kv):
        kv.add_(x)
        return kv * 2

    kv, x = torch.zeros(7), torch.ones(1)
    torch._dynamo.mark_static_address(kv)
    out = tjc.compile(f, backend="inductor", mode="reduce-overhead")(x, kv)
    torch.testing.assert_close(out, torch.full((7,), 2.0))
    torch.testing.assert_close(kv, torch.ones(7))
    (record,) = inner_compiles
    assert static_shapes(record) == [(7,)]   # kv, not x


def test_training_marks_parameters_in_the_forward(inner_compiles):
    m = nn.Linear(4, 3)
    cm = tjc.compile(m, backend="inductor", mode="reduce-overhead")
    x = torch.randn(2, 4)
    cm(x).sum().backward()
    grads = [p.grad.clone() for p in m.parameters()]
    for p in m.parameters():
        p.grad = None
    m(x).sum().backward()
    for g, p in zip(grads, m.parameters()):
        torch.testing.assert_close(g, p.grad)
    forward = [r for r in inner_compiles if not r[2]]
    assert forward and static_shapes(forward[0]) == [(3,), (3, 4)]


def test_identical_blocks_share_a_compile_only_with_the_same_static_inputs(inner_compiles):
    """The sharing key holds which inputs are static: a block's graph called with a parameter and
    the same graph called with a plain tensor are not one compile."""
    def f(w, x):
        return x @ w

    w_param, x = nn.Parameter(torch.randn(4, 4)), torch.randn(2, 4)
    w_plain = torch.randn(4, 4, requires_grad=True)   # as the parameter, in all but being one
    with torch.no_grad():
        first = tjc.compile(f, backend="inductor", mode="reduce-overhead")
        first(w_param, x)
        second = tjc.compile(f, backend="inductor", mode="reduce-overhead")   # while first lives
        second(w_plain, x)
    assert [r[1] for r in inner_compiles] == [[1], []]   # x @ w: w is the second input


def test_an_entry_loaded_from_disk_keeps_its_static_inputs(disk_cache_on, inner_compiles, tmp_path, monkeypatch):
    m = nn.Linear(4, 5)
    x = torch.randn(3, 4)
    with torch.no_grad():
        tjc.compile(m, backend="inductor", mode="reduce-overhead")(x)
        tjc.reset()
        torch.testing.assert_close(tjc.compile(m, backend="inductor", mode="reduce-overhead")(x), m(x))
    assert tjc.stats()["disk_cache_hits"] == 1
    assert [static_shapes(r) for r in inner_compiles] == [[(5,), (5, 4)]] * 2


def test_the_marks_do_not_keep_the_module_alive():
    m = nn.Linear(4, 5)
    cm = tjc.compile(m, backend="inductor", mode="reduce-overhead")
    with torch.no_grad():
        cm(torch.randn(2, 4))
    ref = weakref.ref(m)
    del m, cm
    assert ref() is None


# -- on a CUDA device: the graphs are recorded and replayed ---------------------------------------

def cudagraph_skips() -> int:
    from torch._dynamo.utils import counters
    return counters["inductor"]["cudagraph_skips"]


@needs_cuda
def test_reduce_overhead_records_and_replays_on_cuda():
    m = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64)).cuda()
    cm = tjc.compile(m, backend="inductor", mode="reduce-overhead")
    skips = cudagraph_skips()
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(8, 64, device="cuda")
            torch.testing.assert_close(cm(x), m(x))
    assert cudagraph_skips() == skips


@needs_cuda
def test_kv_cache_decode_under_cuda_graphs():
    m, ref = Cache().cuda(), Cache().cuda()
    ref.load_state_dict(m.state_dict())
    cm = tjc.compile(m, backend="inductor", mode="reduce-overhead")
    skips = cudagraph_skips()
    with torch.no_grad():
        for pos in range(5):
            x = torch.randn(4, device="cuda")
            torch.testing.assert_close(cm(x, pos).clone(), ref(x, pos))
    torch.testing.assert_close(m.cache, ref.cache)
    assert cudagraph_skips() == skips


@needs_cuda
def test_training_steps_under_cuda_graphs():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1)).cuda()
    ref = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1)).cuda()
    ref.load_state_dict(m.state_dict())
    cm = tjc.compile(m, backend="inductor", mode="reduce-overhead")
    opt, ref_opt = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(4):
        torch.compiler.cudagraph_mark_step_begin()
        x = torch.randn(16, 32, device="cuda")
        for model, o in ((cm, opt), (ref, ref_opt)):
            o.zero_grad()
            model(x).square().mean().backward()
            o.step()
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)


@needs_cuda
def test_one_cuda_graph_per_graph_across_a_break():
    def f(x):
        y = torch.sin(x) * 2
        print("break", end="")   # a graph break: two graphs, each its own CUDA graph
        return torch.cos(y) + 1

    cf = tjc.compile(f, backend="inductor", mode="reduce-overhead")
    skips = cudagraph_skips()
    for _ in range(3):
        x = torch.randn(32, device="cuda")
        torch.testing.assert_close(cf(x).clone(), f(x))
    assert cudagraph_skips() == skips


@needs_cuda
def test_cuda_autocast_dtype_inside_compiled_code():
    def f(a, b):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return a @ b

    a, b = torch.randn(8, 8, device="cuda"), torch.randn(8, 8, device="cuda")
    out = tjc.compile(f, backend="inductor")(a, b)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, f(a, b))


@needs_cuda
def test_a_tensor_moved_to_another_device_recompiles():
    def f(x):
        return x * 2

    cf = tjc.compile(f, backend="eager")
    cf(torch.ones(3))
    out = cf(torch.ones(3, device="cuda"))
    assert out.device.type == "cuda"
    assert tjc.stats()["recompiles"] >= 1


@needs_cuda
def test_cuda_streams_and_events_in_model_code_run_right():
    """Streams and events are not traced: a clean break (or the frame as written), never wrong."""
    def f(x):
        s, e = torch.cuda.Stream(), torch.cuda.Event()
        with torch.cuda.stream(s):
            y = x * 2
            e.record(s)
        torch.cuda.current_stream().wait_event(e)
        return y + 1

    x = torch.randn(16, device="cuda")
    for backend in ("eager", "inductor"):
        torch.testing.assert_close(tjc.compile(f, backend=backend)(x), x * 2 + 1)

