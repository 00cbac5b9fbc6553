"""tjc.allow_in_graph (frontend/proxies.py): a marked function or nn.Module class is called as one node of the
graph (run on fake tensors while tracing), outputs and gradients equal to eager; a marked function
that reads tensor values is a graph break run once per call; tied weights are copied once; marks are
weak. What cannot be called opaquely (module state that cannot be guarded, a module passed as an
argument) is a graph break with its reason, never a wrong result, and a marked module compiled and
dropped is freed without the cycle collector. Built-in opaque modules (LSTM, the Transformer
family): test_variables_opaque_calls.py."""
import copy

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.frontend import proxies  # noqa: E402
from torch_jit_cache.testing import CompileCounterWithBackend  # noqa: E402

from context_helpers import Recording  # noqa: E402
from jit_helpers import watch  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


# --- tjc.allow_in_graph ------------------------------------------------------------------------

def _signed(x):
    # Marked allow_in_graph: one node of the graph, run on fake tensors while tracing.
    return torch.where(x.sum() > 0, x * 2, x - 1), x.relu()


def _sign_dependent(x):
    # A branch on a tensor's value: fake tensors cannot answer it, so the call is a graph break
    # even when marked allow_in_graph (as under torch.compile), and runs eagerly, once per call.
    if x.sum() > 0:
        return x * 2, x.relu()
    return x - 1, x.abs()


class Gate(nn.Module):
    """Updates state in forward (BatchNorm's running statistics) and selects by data."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.norm(x)
        return torch.where(y.mean() > 0, self.lin(y), self.lin(-y))


def test_allow_in_graph_rejects_what_it_cannot_mark():
    with pytest.raises(TypeError):
        tjc.allow_in_graph(int)
    with pytest.raises(TypeError):
        tjc.allow_in_graph(nn.Linear(2, 2).forward)


def test_allow_in_graph_function_is_one_opaque_node():
    fn = tjc.allow_in_graph(_signed)
    assert fn is _signed and proxies.is_allowed_in_graph(fn)

    def f(x):
        a, b = _signed(x + 1)
        return a.sin() + b
    counter = CompileCounterWithBackend("eager")
    compiled = tjc.compile(f, backend=counter)
    for x in (torch.ones(3), -torch.ones(3) * 5, torch.full((3,), 2.0)):
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, expected = compiled(x1), f(x2)
        torch.testing.assert_close(got, expected)
        got.sum().backward(), expected.sum().backward()
        torch.testing.assert_close(x1.grad, x2.grad)
    assert counter.frame_count == 1 and tjc.stats()["graph_breaks"] == 0


def test_allow_in_graph_function_that_reads_values_is_a_graph_break_run_once_per_call():
    tjc.allow_in_graph(_sign_dependent)
    calls = []

    def f(x):
        calls.append(1)   # before the break: runs once per call, as eager's
        a, b = _sign_dependent(x + 1)
        return a.sin() + b
    report = tjc.explain(f)(torch.ones(3))
    assert "fake tensors" in report.break_reasons[0], str(report)   # then _sign_dependent is compiled on its own
    compiled = tjc.compile(f)
    calls.clear()
    for x in (torch.ones(3), -torch.ones(3) * 5):
        torch.testing.assert_close(compiled(x), f(x))
    assert len(calls) == 4


def test_allow_in_graph_module_class_runs_once_per_call():
    tjc.allow_in_graph(Gate)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), Gate())
    eager = copy.deepcopy(model)
    counter = CompileCounterWithBackend("eager")
    compiled = tjc.compile(model, backend=counter)
    for scale in (1.0, -1.0, 2.0):
        x = torch.randn(6, 4) * scale
        torch.testing.assert_close(compiled(x), eager(x))
        torch.testing.assert_close(model[1].norm.running_mean, eager[1].norm.running_mean)
    assert model[1].norm.num_batches_tracked.item() == 3, "tracing did not update the statistics"
    assert counter.frame_count == 1 and tjc.stats()["graph_breaks"] == 0


def test_allow_in_graph_marks_are_weak_and_a_marked_local_function_is_freed(no_gc):
    marks = len(proxies._ALLOWED)

    def scale(x):
        return x * 3
    tjc.allow_in_graph(scale)
    assert len(proxies._ALLOWED) == marks + 1

    def f(x):
        return scale(x) + 1
    compiled = tjc.compile(f)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 3 + 1)
    (entry,) = tjc.cache_entries(compiled)
    freed = watch(scale)
    del scale, f, compiled
    assert freed == [True]
    assert entry.evicted
    assert len(proxies._ALLOWED) == marks


class Tied(nn.Module):
    """Two names for one parameter: the example run copies it once (functional_call refuses two
    different values for tied names)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x)) + self.a(x)


def test_allow_in_graph_module_with_tied_weights():
    tjc.allow_in_graph(Tied)
    model = nn.Sequential(Tied(), nn.ReLU())
    eager = copy.deepcopy(model)
    report = tjc.explain(model)(torch.randn(2, 4))
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    compiled = tjc.compile(model)
    for scale in (1.0, -1.0):
        x = torch.ones(2, 4) * scale
        got, expected = compiled(x), eager(x)
        torch.testing.assert_close(got, expected)
        got.sum().backward(), expected.sum().backward()
        torch.testing.assert_close(model[0].a.weight.grad, eager[0].a.weight.grad)


# --- what is refused becomes a graph break with its reason, never a wrong result ------------------

class _Settings:
    scale = 2.0


class HoldsAnObject(nn.Module):
    def __init__(self):
        super().__init__()
        self.settings = _Settings()       # read by forward, but only its type could be guarded

    def forward(self, x):
        return x * self.settings.scale


class HoldsATensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.ones(4)        # neither parameter nor buffer

    def forward(self, x):
        return x * self.table


@pytest.mark.parametrize("cls, reason", [(HoldsAnObject, "attribute 'settings'"),
                                         (HoldsATensor, "tensor attribute 'table'")])
def test_an_opaque_module_whose_state_cannot_be_guarded_is_a_graph_break(cls, reason):
    tjc.allow_in_graph(cls)
    inner = cls()

    def f(x):
        return inner(x + 1) - 1
    report = tjc.explain(f)(torch.ones(4))
    assert report.graph_break_count == 1 and reason in report.break_reasons[0], str(report)
    compiled = tjc.compile(f)
    torch.testing.assert_close(compiled(torch.ones(4)), f(torch.ones(4)))
    if cls is HoldsAnObject:
        inner.settings.scale = 5.0        # seen: the module runs eagerly at the break
    else:
        inner.table.mul_(3)
    torch.testing.assert_close(compiled(torch.ones(4)), f(torch.ones(4)))


def test_a_module_called_opaquely_with_a_module_argument_is_a_graph_break():
    @tjc.allow_in_graph
    def apply(layer, x):
        return layer(x) * 2
    lin = nn.Linear(4, 4)

    def f(x):
        return apply(lin, x)
    report = tjc.explain(f)(torch.ones(2, 4))
    assert report.graph_break_count == 1 and "only tensors and constants" in report.break_reasons[0], str(report)


def test_an_allow_in_graph_module_compiled_and_dropped_is_freed(no_gc):
    tjc.allow_in_graph(Gate)
    model = nn.Sequential(nn.Linear(4, 4), Gate()).eval()
    backend = Recording()
    compiled = tjc.compile(model, backend=backend)
    with torch.no_grad():
        compiled(torch.randn(3, 4))
    (entry,) = tjc.cache_entries(compiled)
    assert [type(m) for m in backend.opaque_calls()] == [Gate]
    freed = [watch(model[1]), watch(model[1].norm.running_mean), watch(model[1].lin.weight)]
    del model, compiled
    assert freed == [[True]] * 3
    assert entry.evicted and [ref() for ref in backend.graphs] == [None]
