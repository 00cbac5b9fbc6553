"""`torch.inference_mode()` in traced code (tracer/variables/torch_objects/contexts.py, OutputGraph's inference
blocks): the block is traced into the graph between _enter_inference_mode / _exit_inference_mode
nodes, so under the eager backend its tensors are inference tensors as in eager, and what eager
refuses with them (saving one for backward, an in-place update outside the block) is refused the
same way. AOTAutograd backends keep the graph only where no inference tensor leaves it."""
import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounterWithBackend  # noqa: E402
from context_helpers import explain_counts  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check_same(fn, *args, backend="eager"):
    """fn eagerly and compiled twice: values, is_inference, requires_grad, grad mode after."""
    expected = _flat(fn(*args))
    compiled = tjc.compile(fn, backend=backend)
    for _ in range(2):
        got = _flat(compiled(*args))
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(g, e)
                assert (g.is_inference(), g.requires_grad) == (e.is_inference(), e.requires_grad)
            else:
                assert g == e
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def block(x):
    with torch.inference_mode():
        y = x * 2
    return y.clone() + 1, y


def nested_false(x, w):
    with torch.no_grad():
        with torch.inference_mode():
            a = x * 2
            inside = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
            with torch.inference_mode(False):
                b = x * w                  # grad on again (inference_mode(False) enables it)
                nested = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
            c = b * 3
        d = x * w                          # no_grad again
    return a, b, c, d, inside, nested, torch.is_grad_enabled()


@torch.inference_mode()
def _helper(x):
    return x.sin() * 2


@torch.inference_mode(False)
def _helper_off(x):
    return x.cos()


def decorated(x):
    a = _helper(x)
    with torch.inference_mode():
        b = _helper_off(x)
    return a, b, a.clone() + b.clone()


def mode_keyword(x):
    with torch.inference_mode(mode=False):
        a = x + 1
    with torch.inference_mode(True):
        b = x + 2
    return a, b


@pytest.mark.parametrize("fn, args", [
    (block, (torch.randn(3),)),
    (block, (torch.randn(3, requires_grad=True),)),
    (nested_false, (torch.randn(3), torch.randn(3, requires_grad=True))),
    (decorated, (torch.randn(3, requires_grad=True),)),
    (mode_keyword, (torch.randn(3, requires_grad=True),)),
], ids=["block", "block_requires_grad", "nested_false", "decorated", "mode_keyword"])
def test_inference_mode_is_traced_whole_and_makes_inference_tensors(fn, args):
    assert explain_counts(fn, *args) == (1, 0, [])
    check_same(fn, *args)


def saved_for_backward(x, w):
    with torch.inference_mode():
        y = x * 2
    return y * w          # eager: RuntimeError, an inference tensor saved for backward


def updated_in_place(x):
    with torch.inference_mode():
        y = x * 2
    y.add_(1)             # eager: RuntimeError, in-place update outside InferenceMode
    return y


def test_what_eager_refuses_with_inference_tensors_raises_as_in_eager():
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    for fn, args, match in [(saved_for_backward, (x, w), "saved for backward"),
                            (updated_in_place, (x,), "Inplace update to inference tensor")]:
        with pytest.raises(RuntimeError, match=match):
            fn(*args)
        with pytest.raises(RuntimeError, match=match):
            tjc.compile(fn, backend="eager")(*args)


def test_an_output_is_an_inference_tensor_for_the_caller():
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    _, y = tjc.compile(block, backend="eager")(x)
    assert y.is_inference()
    with pytest.raises(RuntimeError, match="saved for backward"):
        y * w


def break_inside(x):
    with torch.inference_mode():
        y = x * 2
        print("", end="")      # a graph break inside the block: runs inside it, the rest resumes in it
        z = y + 1
        inside = torch.is_inference_mode_enabled()
    return y, z, inside, z.clone() * 3


def break_inside_nested(x, w):
    with torch.inference_mode():
        a = x * 2
        with torch.enable_grad():
            b = a.clone() * 0 + x      # grad on inside inference mode: still inference tensors
            print("", end="")
            c = b + 1
            grad = torch.is_grad_enabled()
        with torch.inference_mode(False):
            d = x * w                  # a normal tensor, with grad
            print("", end="")
            e = d * 2
    return a, b, c, d, e, grad, torch.is_grad_enabled()


@pytest.mark.parametrize("fn, args, graphs, breaks", [
    (break_inside, (torch.randn(3),), 2, 1),
    (break_inside_nested, (torch.randn(3), torch.randn(3, requires_grad=True)), 3, 2),
], ids=["break_inside", "break_inside_nested"])
def test_a_break_inside_the_block_resumes_inside_it(fn, args, graphs, breaks):
    # Before: the whole frame ran uncompiled ("the break is inside a with block of ...").
    assert explain_counts(fn, *args) == (graphs, breaks, [])
    check_same(fn, *args)


def print_under_inference(x):
    with torch.no_grad():
        with torch.inference_mode(False):
            print(torch.is_grad_enabled(), torch.is_inference_mode_enabled())
            y = x + 1
    return y


def test_the_break_instruction_sees_the_blocks_state(capsys):
    x = torch.randn(3, requires_grad=True)
    print_under_inference(x)
    expected = capsys.readouterr().out
    assert expected == "True False\n"
    check_same(print_under_inference, x)
    assert capsys.readouterr().out == expected * 3   # eager once, compiled twice (check_same)


def test_the_decorator_mode_is_guarded():
    dec = torch.inference_mode()

    def inner(x):
        return x * 2

    wrapped = dec(inner)

    def fn(x):
        return wrapped(x)

    counter = CompileCounterWithBackend("eager")
    compiled = tjc.compile(fn, backend=counter)
    x = torch.randn(3)
    assert compiled(x).is_inference()
    dec.mode = False       # the decorator clones its object per call: eager now runs it outside
    out = compiled(x)
    assert not out.is_inference() and out.equal(fn(x)) and not fn(x).is_inference()
    assert counter.frame_count == 2


def internal_only(x):
    with torch.inference_mode():
        y = x * 2
    return y.clone() + 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_aot_backends_keep_a_block_whose_tensors_stay_in_the_graph(backend):
    x = torch.randn(3, requires_grad=True)
    counter = CompileCounterWithBackend(backend)
    check_same(internal_only, x, backend=counter)
    assert counter.frame_count == 1


def test_aot_backends_refuse_a_graph_an_inference_tensor_leaves():
    # AOTAutograd runs the inference-mode nodes while it traces: the output would be a normal
    # tensor. The frame runs as written instead (a fallback, logged with that reason).
    counter = CompileCounterWithBackend("aot_eager")
    check_same(block, torch.randn(3), backend=counter)
    assert counter.frame_count == 0


def test_a_break_inside_the_block_under_aot_eager_runs_as_eager():
    # The graph before the break hands inference tensors to the resume function: refused for
    # AOTAutograd (check_inference_outputs), so that frame runs as written.
    check_same(break_inside, torch.randn(3), backend=CompileCounterWithBackend("aot_eager"))


@torch.inference_mode()
def _decorated_and_compiled(x, y):
    return x.add(1.0) + y


@torch.inference_mode(False)
def _decorated_off_and_compiled(x, y):
    return x.add(1.0) * y


@torch.no_grad()
def _no_grad_decorated_and_compiled(x, y):
    return x.add(1.0) - y


@pytest.mark.parametrize("fn", [_decorated_and_compiled, _decorated_off_and_compiled,
                                _no_grad_decorated_and_compiled], ids=lambda f: f.__name__)
def test_the_compiled_function_itself_decorated_is_traced_whole(fn):
    # The frame compiled is the decorator's wrapper, which enters the object its `ctx_factory()`
    # (a torch method run while tracing) makes: before, that object was a torch callable to the
    # tracer, and the frame ran uncompiled.
    x, y = torch.ones(4, requires_grad=True), torch.ones(4, requires_grad=True)
    assert explain_counts(fn, x, y) == (1, 0, [])
    check_same(fn, x, y)


_OFF = torch.inference_mode(False)


def _with_a_global_object(x):
    with _OFF:
        y = x * 2
    return y


def test_an_object_read_from_the_frame_is_entered_with_its_mode_guarded():
    x = torch.ones(3, requires_grad=True)
    assert explain_counts(_with_a_global_object, x) == (1, 0, [])
    check_same(_with_a_global_object, x)
    compiled = tjc.compile(_with_a_global_object, backend="eager")
    compiled(x)
    _OFF.mode = True   # read where it is entered: a changed mode compiles again
    try:
        got, expected = compiled(x), _with_a_global_object(x)
        assert (got.is_inference(), got.requires_grad) == (expected.is_inference(), expected.requires_grad) \
            == (True, False)
    finally:
        _OFF.mode = False
