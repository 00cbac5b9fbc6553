"""tracer/variables/modules/nn_module.py through the public API: nn.Module instances read from the frame.

The contract: a user module is traced by inlining its forward; built-in leaf modules become their
functional form with parameters and buffers as graph inputs (read at call time, so an in-place
update of a weight shows in the next call without a recompile); containers (Sequential,
ModuleList, ModuleDict) are unrolled; the training flag is guarded (eval() after compiling is a
miss, not train mode's answer); `self.name = v` of a plain attribute is replayed after the graph,
and assigning a Parameter in forward is refused. Each case compares with eager and counts.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch.nn as nn  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import compiled_like_eager  # noqa: E402


class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})

    def forward(self, x):
        x = self.seq(x)
        for block in self.blocks:
            x = block(x).tanh()
        return {k: head(x) for k, head in self.heads.items()}


def test_containers_are_unrolled_into_one_graph():
    torch.manual_seed(0)
    compiled_like_eager(Containers(), torch.randn(3, 4))


def test_a_leaf_module_is_its_functional_form_with_the_weights_as_inputs():
    lin = nn.Linear(3, 2)
    out = tjc.explain(lin)(torch.randn(1, 3))
    assert out.ops_per_graph == [["linear"]]


def test_an_in_place_weight_update_shows_without_a_recompile():
    lin = nn.Linear(2, 2)
    cnt = CompileCounter()
    compiled = tjc.compile(lin, backend=cnt)
    x = torch.randn(1, 2)
    compiled(x)
    with torch.no_grad():
        lin.weight.mul_(3)
    torch.testing.assert_close(compiled(x), lin(x))
    assert cnt.frame_count == 1


def test_the_training_flag_is_guarded():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    cnt = CompileCounter()
    compiled = tjc.compile(m, backend=cnt)
    x = torch.randn(8, 4)
    compiled(x)
    m.eval()
    torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 2


class Counts(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        self.calls = self.calls + 1
        return self.lin(x) * self.calls


def test_a_plain_attribute_stored_in_forward_is_replayed_after_the_graph():
    eager, compiled_module = Counts(), Counts()
    compiled_module.load_state_dict(eager.state_dict())
    compiled = tjc.compile(compiled_module, backend="eager")
    x = torch.randn(1, 2)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), eager(x))
    assert compiled_module.calls == eager.calls == 3


class StoresAParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))

    def forward(self, x):
        self.w = nn.Parameter(x.detach().clone())
        return x * 2


def test_assigning_a_parameter_in_forward_is_refused_and_runs_as_eager():
    m = StoresAParameter()
    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(m, backend="eager")(x), x * 2)
    torch.testing.assert_close(m.w.detach(), x)
    out = tjc.explain(StoresAParameter())(x)
    assert out.graph_break_count + len(out.fallbacks) >= 1


# -- torch.nn modules outside the leaf table: their own forward, inlined ------------------------

class _Wraps(nn.Module):
    def __init__(self, *mods):
        super().__init__()
        self.mods = nn.ModuleList(mods)

    def forward(self, x):
        for m in self.mods:
            x = m(x)
        return x * 2


@pytest.mark.parametrize("mod", [nn.GroupNorm(2, 4), nn.Hardsigmoid(), nn.Hardswish(), nn.ReLU6(), nn.Mish(),
                                 nn.Hardtanh(-0.5, 0.5), nn.ELU(0.7), nn.PReLU(), nn.Upsample(scale_factor=2),
                                 nn.InstanceNorm2d(4, affine=True), nn.ConvTranspose2d(4, 4, 3, stride=2)],
                         ids=lambda m: type(m).__name__)
def test_a_built_in_module_outside_the_leaf_table_is_traced_through_its_forward(mod):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 5, 5, requires_grad=True)
    m = _Wraps(mod)
    compiled_like_eager(m, x)
    expected = torch.autograd.grad(m(x).sum(), [x, *m.parameters()])
    got = torch.autograd.grad(tjc.compile(m, backend="eager")(x).sum(), [x, *m.parameters()])
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("mod, setting, value", [(nn.GroupNorm(2, 4), "eps", 0.5), (nn.Hardtanh(-0.5, 0.5), "min_val", -0.1),
                                                 (nn.ELU(0.7), "alpha", 2.0)], ids=lambda v: str(v)[:12])
def test_a_changed_setting_of_an_inlined_built_in_module_recompiles(mod, setting, value):
    m = _Wraps(mod)
    cnt = CompileCounter()
    compiled = tjc.compile(m, backend=cnt)
    x = torch.randn(2, 4, 3, 3)
    compiled(x)
    setattr(mod, setting, value)
    torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 2


def test_equal_inlined_built_in_modules_share_one_entry():
    cnt = CompileCounter()
    call = tjc.compile(lambda m, x: m(x), backend=cnt)
    x = torch.randn(2, 4, 3, 3)
    for _ in range(3):
        m = _Wraps(nn.GroupNorm(2, 4), nn.Hardswish())
        torch.testing.assert_close(call(m, x), m(x))
    assert cnt.frame_count == 1
    m = _Wraps(nn.GroupNorm(2, 4, eps=0.1), nn.Hardswish())   # another eps: its own entry
    torch.testing.assert_close(call(m, x), m(x))
    assert cnt.frame_count == 2


def test_a_built_in_module_holding_buffers_stays_a_clean_break():
    # InstanceNorm with running statistics updates them in place: not inlined, and runs as eager.
    m = _Wraps(nn.InstanceNorm2d(4, track_running_stats=True))
    ref = _Wraps(nn.InstanceNorm2d(4, track_running_stats=True))
    x = torch.randn(2, 4, 3, 3)
    report = tjc.explain(_Wraps(nn.InstanceNorm2d(4, track_running_stats=True)))(x)
    assert report.graph_break_count == 1 and "holds buffers" in report.break_reasons[0]
    torch.testing.assert_close(tjc.compile(m, backend="eager")(x), ref(x))
    torch.testing.assert_close(m.mods[0].running_mean, ref.mods[0].running_mean)


# -- parameter names: named_parameters() keys returned, iterated, made into a dict ---------------

class _Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Sequential(nn.Linear(4, 2))

    def forward(self, x):
        params = dict(self.named_parameters())
        y = x @ params["a.weight"].t()
        for n, p in self.named_parameters(prefix="model"):
            if n.endswith("bias"):
                y = y + p.sum()
        return y, [n for n, _ in self.named_parameters()], [n for n, _ in self.named_modules(prefix="root")]


def test_parameter_names_are_constants_of_one_graph():
    torch.manual_seed(0)
    compiled_like_eager(_Named(), torch.randn(2, 4))


def test_a_parameter_added_after_compiling_changes_the_names():
    m, cnt = _Named(), CompileCounter()
    compiled = tjc.compile(m, backend=cnt)
    x = torch.randn(2, 4)
    compiled(x)
    m.a.register_parameter("extra_bias", nn.Parameter(torch.ones(4)))
    got, expected = compiled(x), m(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] and "a.extra_bias" in got[1] and cnt.frame_count == 2


def test_torch_nn_classes_outside_the_layer_library_are_not_inlined():
    # DataParallel's forward (torch.nn.parallel) drives devices and replicas: a break, as eager.
    m = _Wraps(nn.DataParallel(nn.Hardswish()))
    x = torch.randn(2, 4)
    report = tjc.explain(m)(x)
    assert report.graph_break_count == 1 and "layer library" in report.break_reasons[0]
    torch.testing.assert_close(tjc.compile(m, backend="eager")(x), m(x))


class _TrainsItself(nn.Linear):
    def forward(self, x):
        y = x * 2
        nn.Module.train(self, False)   # nn.Module's own method: not inlined
        return super().forward(y)


def test_a_method_of_nn_module_itself_called_through_the_class_breaks():
    torch.manual_seed(0)
    m, ref = _TrainsItself(4, 4), _TrainsItself(4, 4)
    ref.load_state_dict(m.state_dict())
    x = torch.randn(2, 4)
    report = tjc.explain(_TrainsItself(4, 4))(x)
    assert report.graph_break_count == 1 and "nn.Module itself" in report.break_reasons[0]
    torch.testing.assert_close(tjc.compile(m, backend="eager")(x), ref(x))
    assert m.training is False and ref.training is False


# -- forward hooks and pre-hooks (module_hooks.py) -------------------------------------------------
class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.inner = Inner()

    def forward(self, x):
        return self.inner(self.fc(x), scale=2.0) + 1


class Inner(nn.Module):
    def forward(self, x, scale=1.0):
        return x * scale


def test_forward_hooks_and_pre_hooks_are_inlined_in_order():
    torch.manual_seed(0)
    m = Hooked()
    m.fc.register_forward_pre_hook(lambda mod, args: args[0] + 1)          # one value: the new args
    m.fc.register_forward_pre_hook(lambda mod, args: None)                 # None: args unchanged
    m.fc.register_forward_hook(lambda mod, args, out: out * 2)             # replaces the output
    m.fc.register_forward_hook(lambda mod, args, out: out - args[0])       # sees the replaced args
    m.fc.register_forward_hook(lambda mod, args, out: None)
    compiled_like_eager(m, torch.randn(2, 4))


def test_hooks_with_kwargs_see_and_replace_the_keyword_arguments():
    torch.manual_seed(0)
    m = Hooked()
    m.inner.register_forward_pre_hook(lambda mod, a, k: ((a[0] + 1,), {**k, "scale": k["scale"] * 3}),
                                      with_kwargs=True)
    m.inner.register_forward_hook(lambda mod, a, k, out: out + k["scale"], with_kwargs=True)
    m.inner.register_forward_hook(lambda mod, a, out: out * a[0])
    compiled_like_eager(m, torch.randn(2, 4))


def test_a_hook_added_or_removed_after_compiling_recompiles():
    torch.manual_seed(0)
    m = Hooked()
    cnt = CompileCounter()
    compiled = tjc.compile(m, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), m(x))
    handle = m.fc.register_forward_hook(lambda mod, args, out: out * 3)
    torch.testing.assert_close(compiled(x), m(x))
    pre = m.inner.register_forward_pre_hook(lambda mod, args: (args[0] - 5,))
    torch.testing.assert_close(compiled(x), m(x))
    handle.remove()
    torch.testing.assert_close(compiled(x), m(x))
    pre.remove()
    m.inner.register_forward_pre_hook(lambda mod, args: (args[0] * 7,))    # another hook, same place
    torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 5


def test_backward_hooks_stay_a_graph_break():
    torch.manual_seed(0)
    m = Hooked()
    grads = []
    m.fc.register_full_backward_hook(lambda mod, gin, gout: grads.append(gout[0].shape))
    x = torch.randn(2, 4, requires_grad=True)
    out = tjc.explain(m)(x)
    assert out.graph_break_count >= 1 and "backward hooks" in out.break_reasons[0]
    compiled = tjc.compile(m, backend="eager")
    compiled(x).sum().backward()
    assert grads == [torch.Size([2, 4])]


def test_hooks_see_the_very_args_a_pre_hook_returned():
    torch.manual_seed(0)
    m = Hooked()
    m.fc.register_forward_pre_hook(lambda mod, a, k: ([a[0] * 2], k), with_kwargs=True)   # a list
    m.fc.register_forward_hook(lambda mod, a, out: out * 3 if isinstance(a, list) else out)
    compiled_like_eager(m, torch.randn(2, 4))


class Weighted(nn.Module):
    """Reformer's AxialPositionEmbeddings: a ParameterList iterated, indexed, measured."""

    def __init__(self, n=3):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(n)])

    def forward(self, x):
        scaled = [x * w for w in self.weights]
        return sum(scaled) + self.weights[-1] * len(self.weights) + (1 if self.weights else 0)


def test_a_parameter_list_is_unrolled_with_its_parameters_as_graph_inputs():
    # Failed before: "iteration over module ParameterList", a break and the list run as written.
    torch.manual_seed(0)
    m, x = Weighted(), torch.randn(4)
    compiled_like_eager(m, x)
    compiled = tjc.compile(m, backend="eager")
    torch.autograd.grad(compiled(x).sum(), list(m.weights))   # each parameter reaches the graph
    with torch.no_grad():
        m.weights[0].add_(1)   # read at call time: no recompile
    torch.testing.assert_close(compiled(x), m(x))
    m.weights.append(nn.Parameter(torch.randn(4)))   # one more: guarded by length and keys
    torch.testing.assert_close(compiled(x), m(x))
    assert tjc.stats()["recompiles"] == 1


class _FallsBackToAnAlias(nn.Module):
    """A subclass __getattr__ that defers to nn.Module's and answers a name it lacks."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.full((3,), 2.0))

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "alias":
                return self.scale
            raise

    def forward(self, x):
        return x * self.scale * self.alias


def test_nn_module_getattr_raises_attribute_error_in_the_trace():
    # nn.Module.__getattr__ of a name in none of its stores raises AttributeError in the trace,
    # where the subclass's except catches it: no break. Registering the name later recompiles.
    m = _FallsBackToAnAlias()
    cnt = CompileCounter()
    compiled = tjc.compile(m, backend=cnt)
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x), m(x))
    assert tjc.explain(m)(x).graph_break_count == 0
    m._parameters["alias"] = nn.Parameter(torch.full((3,), 5.0))
    torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 2


def _missing_name(x, mod):
    try:
        return mod.missing_name
    except AttributeError as e:
        return x + 1, str(e)


def test_missing_module_attribute_message_is_eager_s():
    compiled_like_eager(_missing_name, torch.ones(2), nn.Linear(2, 2))
