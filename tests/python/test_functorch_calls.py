"""functorch (torch.vmap, torch.func.*) in a compiled function: the transforms and the functions
they return run as written, at a graph break (trace_rules.functorch_transform), and the user's
function they call is compiled as its own frame. Each case is compared with eager: the result, its
shape, and the Python side effects of the transformed function (counted).

Also: a torch function is a graph op by its name only where FX's name for it is that very object
(tracer/variables/torch_objects/tensor.py `_reachable_by_name`): `functools.wraps` makes torch.vmap's wrapper
of torch.sum call itself `torch.sum`.
"""
import functools

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.frontend.trace_rules import functorch_transform  # noqa: E402
from torch_jit_cache.tracer.variables.torch_objects.tensor import is_torch_callable  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

CALLS = []


def _user_fn(x):
    return x.sin() * x.sum()


def _counted(x):
    CALLS.append(1)
    return x.cos()


_LINEAR = torch.nn.Linear(3, 2)

# name -> fn(x): each a function of a (4, 3) tensor, as a user writes it in a compiled function.
CASES = {
    "vmap_inplace_tensor_method": lambda x: torch.vmap(torch.Tensor.acos_)(x.clone()),
    "vmap_torch_sum": lambda x: torch.vmap(torch.sum)(x),
    "vmap_torch_sin": lambda x: torch.vmap(torch.sin)(x) + 1,
    "vmap_user_fn": lambda x: torch.vmap(_user_fn)(x) + 1,
    "vmap_lambda": lambda x: torch.vmap(lambda t: t * t.sum())(x),
    "vmap_side_effect": lambda x: torch.vmap(_counted)(x),
    "func_vmap_in_dims": lambda x: torch.func.vmap(_user_fn, in_dims=1)(x),
    "vmap_of_vmap": lambda x: torch.vmap(torch.vmap(torch.sum))(x.reshape(2, 2, 3)),
    "func_grad": lambda x: torch.func.grad(lambda t: t.sin().sum())(x[0]) * 2,
    "func_grad_side_effect": lambda x: torch.func.grad(lambda t: _counted(t).sum())(x[0]),
    "func_grad_and_value": lambda x: torch.func.grad_and_value(lambda t: t.pow(2).sum())(x)[0],
    "jacrev": lambda x: torch.func.jacrev(torch.sin)(x[0]),
    "jacfwd": lambda x: torch.func.jacfwd(_user_fn)(x[0]),
    "vmap_of_grad": lambda x: torch.vmap(torch.func.grad(lambda t: t.sin().sum()))(x),
    "functional_call": lambda x: torch.func.functional_call(
        _LINEAR, {"weight": torch.ones(2, 3), "bias": torch.zeros(2)}, (x,)),
    "functional_call_side_effect": lambda x: torch.func.functional_call(
        _Counting(), {"w": torch.ones(3)}, (x,)),
}


class _Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x):
        CALLS.append(1)
        return x * self.w


def _run(fn, x):
    CALLS.clear()
    out = fn(x)
    return out, len(CALLS)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_functorch_call_matches_eager(name, backend):
    fn = CASES[name]
    compiled = tjc.compile(fn, backend=backend)
    for call in range(2):   # the call that traces, then the cached code
        x = torch.rand(4, 3)
        expected, expected_calls = _run(fn, x)
        got, got_calls = _run(compiled, x)
        assert got.shape == expected.shape, (name, call)
        torch.testing.assert_close(got, expected)
        assert got_calls == expected_calls, (name, call)


def test_transforms_break_with_a_reason():
    report = tjc.explain(CASES["vmap_inplace_tensor_method"])(torch.rand(4, 3))
    assert report.graph_break_count >= 1
    assert any("vmap is functorch or higher-order-op code" in r for r in report.break_reasons), report.break_reasons
    assert not report.fallbacks, report.fallbacks


def test_transformed_input_mutated_as_eager():
    x, y = torch.rand(4, 3), None
    y = x.clone()
    torch.vmap(torch.Tensor.acos_)(y)
    x2 = x.clone()
    tjc.compile(lambda t: torch.vmap(torch.Tensor.acos_)(t))(x2)
    torch.testing.assert_close(x2, y)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_function_called_under_a_transform(backend):
    compiled = tjc.compile(_user_fn, backend=backend)
    x = torch.rand(4, 3)
    torch.testing.assert_close(torch.vmap(compiled)(x), torch.vmap(_user_fn)(x))
    torch.testing.assert_close(torch.func.grad(lambda t: compiled(t).sum())(x),
                               torch.func.grad(lambda t: _user_fn(t).sum())(x))
    torch.testing.assert_close(torch.func.jacrev(compiled)(x[0]), torch.func.jacrev(_user_fn)(x[0]))
    torch.testing.assert_close(compiled(x), _user_fn(x))   # and plainly, after


def test_functorch_transform_rule():
    import functorch
    for fn in (torch.vmap, torch.func.vmap, torch.func.grad, torch.func.jacrev, torch.func.jacfwd,
               torch.func.hessian, torch.func.vjp, torch.func.jvp, torch.func.functional_call,
               functorch.vmap, torch.vmap(torch.sum), torch.func.grad(_user_fn), torch.func.jacrev(torch.sin)):
        assert functorch_transform(fn) is not None, fn
    for fn in (torch.sin, torch.nn.functional.relu, _user_fn, torch.Tensor.add, len):
        assert functorch_transform(fn) is None, fn


def test_a_wrapper_is_not_the_torch_function_it_wraps():
    @functools.wraps(torch.sum)
    def wrapper(x):
        return torch.sum(x) + 1

    assert wrapper.__module__ == "torch" and wrapper.__name__ == "sum"
    assert not is_torch_callable(wrapper)
    assert not is_torch_callable(torch.vmap(torch.sum))
    for fn in (torch.sum, torch.nn.functional.relu, torch.nn.functional.max_pool2d, torch.Tensor.backward,
               torch.ops.aten.add, torch.unique, torch.linalg.norm):
        assert is_torch_callable(fn), fn

    def f(x):
        return wrapper(x) * 2

    x = torch.rand(3)
    torch.testing.assert_close(tjc.compile(f)(x), f(x))


_COUNTING = _Counting()


# -- torch functions that call a Python function they are given ----------------------------------
# torch.autograd.functional.jacobian(f, x), checkpoint(f, x): the call runs as written, at a break,
# so f's Python effects happen once per call, as in eager (before: twice on the first call, once
# in the trace and once in the fallback that followed).
HIGHER_ORDER = {
    "autograd_jacobian": lambda x: torch.autograd.functional.jacobian(_counted, x),
    "autograd_vjp": lambda x: torch.autograd.functional.vjp(_counted, x, torch.ones(3))[1],
    "autograd_hessian": lambda x: torch.autograd.functional.hessian(lambda t: _counted(t).sum(), x),
    "checkpoint_function": lambda x: torch.utils.checkpoint.checkpoint(_counted, x, use_reentrant=False),
    "checkpoint_module": lambda x: torch.utils.checkpoint.checkpoint(_COUNTING, x, use_reentrant=False),
}


@pytest.mark.parametrize("name", sorted(HIGHER_ORDER))
def test_torch_function_given_a_python_function_runs_it_once(name):
    fn = HIGHER_ORDER[name]
    compiled = tjc.compile(fn)
    for _ in range(2):
        x = torch.rand(3)
        expected, expected_calls = _run(fn, x)
        got, got_calls = _run(compiled, x)
        torch.testing.assert_close(got, expected)
        assert got_calls == expected_calls
    report = tjc.explain(fn)(torch.rand(3))
    assert report.fallbacks == [] and any("Python callable" in r for r in report.break_reasons)


def test_arguments_freed_after_a_transform_ran_as_written():
    import weakref

    compiled = tjc.compile(CASES["vmap_user_fn"])
    x = torch.rand(4, 3)
    out = compiled(x)
    refs = weakref.ref(x), weakref.ref(out)
    del x, out
    assert refs[0]() is None and refs[1]() is None
