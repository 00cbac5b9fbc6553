"""A compiled call gives eager's result while running compiled code: arguments bind as Python binds
them (*args with keyword-only parameters), and what changes after compiling (a method set on an
instance or replaced on a class, a hook, an inlined function's code) is noticed by a guard.

Each test compares with eager and asserts the compiled call really ran compiled code (a graph was
made), so the case cannot pass by falling back."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402



# --- 1. *args with keyword-only parameters --------------------------------------------------------

def shift(*ts, by=(1.0,)):
    return ts[0] - by[0]


def cat_all(*ts, dim=-1):
    return torch.cat(ts, dim=dim)


def scale_all(first, *rest, factor, bias=0.0, **extra):
    return [first * factor + bias] + [t * factor + extra.get("offset", 0.0) for t in rest]


def call_shift(x):
    return shift(x, by=(3.0,))


def call_cat_all(x):
    return cat_all(x, x * 2, dim=0)


def call_cat_all_default(x):
    return cat_all(x, x + 1)


def call_scale_all(x):
    return scale_all(x, x + 1, x + 2, factor=2.0, offset=0.5)


@pytest.mark.parametrize("fn", [call_shift, call_cat_all, call_cat_all_default, call_scale_all],
                         ids=lambda f: f.__name__)
def test_star_args_with_keyword_only_parameters_bind_by_name(fn):
    x = torch.arange(6.0).reshape(2, 3)
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    expected, got = fn(x), compiled(x)
    if isinstance(expected, list):
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e)
    else:
        torch.testing.assert_close(got, expected)
    assert cnt.frame_count == 1, "the helper must be inlined into one graph, not fall back"
    assert tjc.stats()["fallbacks"] == 0


# --- 2-4. Methods set on instances, replaced on classes, hooks, code replaced after compiling -------

class Block(torch.nn.Module):
    def forward(self, h):
        return h + 1


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)


def fresh_net():
    """A Net whose block's class is made for this test, so a test may replace its methods."""
    m = Net()
    m.block.__class__ = type("LocalBlock", (Block,), {})
    return m


def test_forward_set_on_the_instance_wins_over_the_class():
    m = Net()
    m.block.forward = lambda h: h * 10
    cnt = CompileCounter()
    out = tjc.compile(m, backend=cnt)(torch.ones(2))
    torch.testing.assert_close(out, m(torch.ones(2)))
    assert cnt.frame_count == 1


def _instance_forward(m):
    m.block.forward = lambda h: h * 10


def _class_forward(m):
    type(m.block).forward = lambda self, h: h * 100


def _forward_hook(m):
    m.block.register_forward_hook(lambda mod, args, out: out * 3)


def _forward_pre_hook(m):
    m.block.register_forward_pre_hook(lambda mod, args: (args[0] * 5,))


def _backward_hook(m):
    m.block.register_full_backward_hook(lambda mod, gin, gout: (gin[0] * 3,))


@pytest.mark.parametrize("change", [_instance_forward, _class_forward, _forward_hook, _forward_pre_hook,
                                    _backward_hook], ids=lambda f: f.__name__.strip("_"))
def test_module_changes_after_compiling_are_noticed(change):
    m = fresh_net()
    compiled = tjc.compile(m)
    compiled(torch.ones(2, requires_grad=True))
    change(m)
    for _ in range(2):
        x_eager, x_comp = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
        expected, got = m(x_eager), compiled(x_comp)
        torch.testing.assert_close(got, expected)
        expected.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(x_comp.grad, x_eager.grad)


def test_a_global_module_hook_added_after_compiling_is_noticed():
    m = Net()
    compiled = tjc.compile(m)
    x = torch.ones(2)
    compiled(x)
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: out * 7)
    try:
        torch.testing.assert_close(compiled(x), m(x))
    finally:
        handle.remove()
    torch.testing.assert_close(compiled(x), m(x))   # and back to the hook-free entry


class Cfg:
    def factor(self):
        return 2.0


def scaled(x, cfg):
    return x * cfg.factor()


def test_a_method_patched_on_the_instance_after_compiling_is_noticed():
    cfg, compiled = Cfg(), tjc.compile(scaled)
    compiled(torch.ones(2), cfg)
    cfg.factor = lambda: 5.0
    torch.testing.assert_close(compiled(torch.ones(2), cfg), torch.full((2,), 5.0))
    assert tjc.stats()["recompiles"] == 1
    # The miss is explained in words: the guard on the method that the first entry ran.
    reasons = [e.explain({"x": torch.ones(2), "cfg": cfg}) for e in tjc.cache_entries(compiled)]
    failing = [r for r in reasons if r is not None]
    assert len(reasons) == 2 and len(failing) == 1, reasons
    assert "factor.__func__" in failing[0], failing


def test_a_method_replaced_on_the_class_after_compiling_is_noticed():
    cls = type("LocalCfg", (Cfg,), {"factor": lambda self: 2.0})
    cfg, compiled = cls(), tjc.compile(scaled)
    compiled(torch.ones(2), cfg)
    cls.factor = lambda self: 9.0
    torch.testing.assert_close(compiled(torch.ones(2), cfg), torch.full((2,), 9.0))


def plus_one(t):
    return t + 1


def uses_helper(x):
    return plus_one(x) * 2


def test_code_replaced_on_an_inlined_function_is_noticed():
    compiled = tjc.compile(uses_helper)
    old = plus_one.__code__
    compiled(torch.ones(2))
    plus_one.__code__ = (lambda t: t - 100).__code__
    try:
        torch.testing.assert_close(compiled(torch.ones(2)), uses_helper(torch.ones(2)))
    finally:
        plus_one.__code__ = old


def test_the_new_guards_hold_methods_and_code_weakly(no_gc):
    import weakref

    cls = type("WeakCfg", (Cfg,), {"factor": lambda self: 2.0})
    cfg, compiled = cls(), tjc.compile(scaled)
    compiled(torch.ones(2), cfg)
    method = weakref.ref(cls.__dict__["factor"])
    cls.factor = lambda self: 4.0            # the class drops the old method: nothing else may hold it
    assert method() is None
    torch.testing.assert_close(compiled(torch.ones(2), cfg), torch.full((2,), 4.0))

    # Code made by exec: no enclosing function keeps it in its constants.
    ns = {}
    exec("def helper(t):\n    return t + 1\n\ndef outer(x):\n    return helper(x)\n", ns)
    helper, outer = ns["helper"], ns["outer"]
    compiled_outer = tjc.compile(outer)
    compiled_outer(torch.ones(2))
    code = weakref.ref(helper.__code__)
    helper.__code__ = (lambda t: t * 3).__code__
    assert code() is None
    torch.testing.assert_close(compiled_outer(torch.ones(2)), torch.full((2,), 3.0))
