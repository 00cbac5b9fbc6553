"""Error paths of compiled frames (graph_break.py, pipeline/codegen.py): an exception leaving a compiled
frame frees what eager frees, at once, with the collector off (an exception that reaches itself
through its traceback would keep every frame's locals alive until gc.collect()).

Each case runs a function eagerly and compiled and, with gc disabled, checks that the arguments and
every tensor the traceback's frames held are dead once the exception is dropped, and that the
exception is eager's."""
import gc
import logging
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.pipeline.convert_frame import FullGraphError  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh():
    tjc.reset()
    yield
    tjc.reset()


def _held_by_traceback(exc) -> list:
    """Weakrefs to the tensors the frames of `exc`'s traceback hold (the intermediates), past the
    catching frame (reading its f_locals would make a cycle of its own)."""
    refs, tb = [], exc.__traceback__.tb_next
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, torch.Tensor):
                refs.append(weakref.ref(value))
            elif isinstance(value, (tuple, list)):
                refs += [weakref.ref(v) for v in value if isinstance(v, torch.Tensor)]
        tb = tb.tb_next
    return refs


def _raise_and_check_freed(fn, make_args, expected_type):
    """Call fn(*make_args()) with gc off; the (type, message) it raised. Asserts the arguments and
    the tensors its traceback held are freed once the exception is dropped, without gc."""
    args = make_args()
    refs = [weakref.ref(a) for a in args if isinstance(a, torch.Tensor)]
    gc.disable()
    try:
        try:
            fn(*args)
        except expected_type as e:
            refs += _held_by_traceback(e)
            raised = (type(e), str(e), type(e.__cause__))
        else:
            pytest.fail("no exception")
        del args
        alive = [r() for r in refs if r() is not None]
        assert not alive, f"{len(alive)} tensors kept alive by the exception: {[tuple(t.shape) for t in alive]}"
    finally:
        gc.enable()
    return raised


def _check(fn, make_args, expected_type, warm=None, **options):
    """Eager and compiled raise the same and both free at once; `warm` args run first (compiling
    the frame on a path that does not raise)."""
    eager = _raise_and_check_freed(fn, make_args, expected_type)
    # A first run imports what the compile needs: torch modules that call torch.fx.wrap() at
    # import leave a frame cycle (wrap's `currentframe` local) whose f_back chain reaches the
    # importing frame, here the compile's, once per process.
    gc.disable()
    try:
        _run_once(tjc.compile(fn, **options), warm, make_args)
    finally:
        gc.enable()
        gc.collect()
    compiled = tjc.compile(fn, **options)
    if warm is not None:
        compiled(*warm())
    for _ in range(2):   # the compiling call, then a cache hit
        assert _raise_and_check_freed(compiled, make_args, expected_type) == eager


def _run_once(compiled, warm, make_args):
    if warm is not None:
        compiled(*warm())
    try:
        compiled(*make_args())
    except Exception:   # noqa: BLE001 - only the imports matter here
        pass


def raise_after_graph(x, y):
    z = x + 1
    if y.shape[0] > 3:
        raise RuntimeError("boom")
    return z


def test_raise_after_a_graph_frees_arguments():
    _check(raise_after_graph, lambda: (torch.zeros(4), torch.zeros(5)), RuntimeError,
           warm=lambda: (torch.zeros(4), torch.zeros(2)))


def test_raise_at_first_call_frees_arguments():
    _check(raise_after_graph, lambda: (torch.zeros(4), torch.zeros(5)), RuntimeError)


def _check_size(y):
    if y.shape[0] > 3:
        raise ValueError(f"too long: {y.shape[0]}")
    return y


def raise_in_inlined_call(x, y):
    z = x * 2
    _check_size(y)
    return z + y.sum()


def test_raise_inside_an_inlined_call_frees_arguments():
    _check(raise_in_inlined_call, lambda: (torch.ones(3), torch.ones(5)), ValueError,
           warm=lambda: (torch.ones(3), torch.ones(2)))


def raise_from(x, y):
    z = x.sin()
    if y.shape[0] > 3:
        raise RuntimeError("outer") from ValueError("inner")
    return z


def test_raise_from_frees_arguments():
    _check(raise_from, lambda: (torch.ones(3), torch.ones(5)), RuntimeError)


def reraise(x, y):
    z = x.cos()
    try:
        _check_size(y)
    except ValueError:
        raise
    return z


def test_reraise_frees_arguments():
    _check(reraise, lambda: (torch.ones(3), torch.ones(5)), ValueError)


def raise_keyerror(x, y):
    z = x + 2
    if y.shape[0] > 3:
        raise KeyError("missing")
    return z


def test_raise_of_a_traced_exception_is_a_new_one_per_call():
    # KeyError("missing") is a constant of the trace; each call raises a fresh one, so no
    # traceback accumulates on a shared exception object.
    compiled = tjc.compile(raise_keyerror)
    seen = []
    for _ in range(3):
        try:
            compiled(torch.ones(2), torch.ones(5))
        except KeyError as e:
            seen.append(e)
            depth, tb = 0, e.__traceback__
            while tb is not None:
                depth, tb = depth + 1, tb.tb_next
            assert depth <= 2
    assert len({id(e) for e in seen}) == 3
    seen.clear()
    _check(raise_keyerror, lambda: (torch.ones(3), torch.ones(5)), KeyError)


def graph_raises(x, idx):
    return x.index_select(0, idx) * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_exception_raised_by_the_compiled_graph_frees_arguments(backend):
    _check(graph_raises, lambda: (torch.ones(3), torch.tensor([0, 7])), IndexError,
           warm=lambda: (torch.ones(3), torch.tensor([0, 1])), backend=backend)


def raise_in_resume(x, y):
    a = x + 1
    print("", end="")        # a graph break: the rest runs in a resume function
    b = a * 2
    if y.shape[0] > 3:
        raise RuntimeError("after the break")
    return b


def test_exception_escaping_a_resume_function_frees_arguments():
    _check(raise_in_resume, lambda: (torch.ones(3), torch.ones(5)), RuntimeError,
           warm=lambda: (torch.ones(3), torch.ones(2)))


def break_instruction_raises(x, y):
    a = x + 1
    print("", end="")
    return a + [1, 2][y.shape[0]]     # the subscript raises IndexError where it is cut


def test_exception_raised_by_the_break_instruction_frees_arguments():
    _check(break_instruction_raises, lambda: (torch.ones(3), torch.ones(5)), IndexError)


def test_raise_compiles_without_running_a_frame_uncompiled(caplog):
    # The raise is cut like any break (no resume function after it): nothing falls back.
    compiled = tjc.compile(raise_after_graph)
    with caplog.at_level(logging.WARNING, logger="torch_jit_cache"):
        for _ in range(2):
            with pytest.raises(RuntimeError, match="boom"):
                compiled(torch.zeros(4), torch.zeros(5))
    assert not [r for r in caplog.records if "uncompiled" in r.getMessage()]
    assert tjc.stats()["fallbacks"] == 0
    torch.testing.assert_close(compiled(torch.zeros(4), torch.zeros(2)), torch.ones(4))


def test_fullgraph_lists_a_raise_as_a_break():
    def fn(x, y):
        z = x + 1
        print("", end="")
        if y.shape[0] > 3:
            raise RuntimeError("boom")
        return z

    with pytest.raises(FullGraphError, match="print"):
        tjc.compile(fn, fullgraph=True)(torch.zeros(2), torch.zeros(5))

