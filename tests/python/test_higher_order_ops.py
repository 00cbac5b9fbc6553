"""torch's higher-order control flow (torch.cond, control_flow.map, torch.while_loop) inside a
compiled function. torch.cond and map are traced as one node each: their functions become graphs
of their own (tracer/variables/torch_objects/control_flow.py), compared here with eager, with the
breaks they make (none) and the cases refused (a branch that changes Python state made outside
it, aliasing outputs, branches that disagree), which run as written and still match eager.
torch.while_loop, called from Python, compiles its functions with TorchDynamo itself: the call
runs as written, at a graph break. Before, a cond with builtin branches raised dynamo's "Attempt
to trace generator" where eager returned."""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.pipeline.convert_frame import FullGraphError  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def _builtin_branches(x):
    return torch.cond(x.sum() > 0, torch.sin, torch.cos, (x,)) + 1


def _python_branches(x, flag: bool):
    def yes(t):
        return t * 2

    def no(t):
        return t - 1
    return torch.cond(flag, yes, no, (x,)).relu()


def _nested(x):
    def outer_true(t):
        return torch.cond(t.mean() > 0, torch.sin, torch.cos, (t,))

    def outer_false(t):
        return t * 3
    return torch.cond(x.sum() > 0, outer_true, outer_false, (x,))


def _while(x):
    def cond_fn(i, t):
        return i < 3

    def body_fn(i, t):
        return i + 1, t * 2
    i, t = torch.while_loop(cond_fn, body_fn, (torch.tensor(0), x))
    return t + i


@pytest.mark.parametrize("fn,args", [
    (_builtin_branches, (torch.tensor([1.0, -2.0, 3.0]),)),
    (_builtin_branches, (torch.tensor([-1.0, -2.0, 3.0]),)),
    (_python_branches, (torch.randn(3), True)),
    (_python_branches, (torch.randn(3), False)),
    (_nested, (torch.tensor([0.5, 1.0]),)),
    (_while, (torch.ones(2),)),
], ids=["builtin-true", "builtin-false", "python-true", "python-false", "nested", "while_loop"])
def test_control_flow_ops_match_eager(fn, args):
    expected = fn(*args)
    got = tjc.compile(fn, backend="eager")(*args)
    torch.testing.assert_close(got, expected)


def test_a_compiled_call_after_a_cond_still_hits_its_entry():
    x = torch.tensor([1.0, 2.0])
    torch.testing.assert_close(tjc.compile(_builtin_branches, backend="eager")(x), _builtin_branches(x))
    compiled = tjc.compile(lambda t: t * 2 + 1, backend="eager")
    compiled(x)
    before = tjc.stats()["hits"]
    torch.testing.assert_close(compiled(x), x * 2 + 1)
    assert tjc.stats()["hits"] == before + 1   # tjc's frame hook is still in place


# -- traced as one node --------------------------------------------------------------------------
def _explain(fn, *args):
    return tjc.explain(fn)(*args)


def _close(a, b):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(b, a)
    else:
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)


def _run(fn, *args, graphs=1, breaks=0):
    """fn compiled (eager backend) against eager on `args`: equal, `graphs` graphs, `breaks` breaks."""
    counter = CompileCounter()
    compiled = tjc.compile(fn, backend=counter)
    expected = fn(*args)   # eager first: torch.cond run eagerly compiles with torch._dynamo itself
    before = tjc.stats()["graph_breaks"]
    _close(expected, compiled(*args))
    assert (counter.frame_count, tjc.stats()["graph_breaks"] - before) == (graphs, breaks)
    return compiled, counter


NEGATE = False


def _reads_global(p, x):
    def up(t):
        return -t if NEGATE else t * 3   # read while tracing: a constant of the graph, guarded

    def down(t):
        return t - 1
    return torch.cond(p, up, down, (x,))


def test_cond_is_one_node_serving_both_branches():
    def f(p, x):
        def yes(t):
            return t.sin() * 2

        def no(t):
            return t.cos() - 1
        return torch.cond(p, yes, no, [x]) + 1

    x = torch.randn(4)
    compiled, counter = _run(f, torch.tensor(True), x)
    _close(f(torch.tensor(False), x), compiled(torch.tensor(False), x))
    assert counter.frame_count == 1   # the predicate's value is data: the same graph takes it
    report = _explain(f, torch.tensor(True), x)
    assert report.graph_break_count == 0 and "cond" in report.ops_per_graph[0]


def test_cond_branches_read_outer_tensors_and_parameters():
    lin = torch.nn.Linear(3, 3)
    bias = torch.randn(3)

    def f(p, x):
        y = x * 2

        def yes(t):
            return lin(t) + y      # a parameter and a tensor of the outer graph: lifted

        def no(t):
            return t - bias
        return torch.cond(p, yes, no, (x,))

    x = torch.randn(2, 3)
    for p in (True, False):
        _run(f, torch.tensor(p), x)


def test_cond_nested_and_structured_outputs():
    def f(p, q, x):
        def inner_yes(t):
            return t * 10

        def inner_no(t):
            return -t

        def yes(t):
            return (t.sin(), [t + 1])

        def no(t):
            return (torch.cond(q, inner_yes, inner_no, (t,)), [t * 0])
        return torch.cond(p, yes, no, (x,))

    x = torch.randn(3)
    for p in (True, False):
        for q in (True, False):
            _run(f, torch.tensor(p), torch.tensor(q), x)


def test_cond_global_read_in_a_branch_is_guarded():
    global NEGATE
    x = torch.randn(3)
    counter = CompileCounter()
    compiled = tjc.compile(_reads_global, backend=counter)
    _close(_reads_global(torch.tensor(True), x), compiled(torch.tensor(True), x))
    NEGATE = True
    try:
        _close(_reads_global(torch.tensor(True), x), compiled(torch.tensor(True), x))
        _close(_reads_global(torch.tensor(False), x), compiled(torch.tensor(False), x))
        assert counter.frame_count == 2
    finally:
        NEGATE = False


def test_cond_with_a_symbolic_predicate():
    def f(x):
        return torch.cond(x.shape[0] > 3, torch.sin, torch.cos, (x,))

    compiled = tjc.compile(f, backend="eager", dynamic=True)
    for n in (2, 5, 7, 3):
        _close(f(torch.ones(n)), compiled(torch.ones(n)))


def test_cond_with_a_constant_predicate_runs_the_branch_it_picks():
    def f(x, flag):
        return torch.cond(flag, lambda t: t + 1, lambda t: t - 1, (x,))

    x = torch.randn(2)
    _run(f, x, True)
    _run(f, x, False)


def test_map_traced_as_one_node():
    from functorch.experimental.control_flow import map as cf_map
    w = torch.randn(3)

    def body(row, y):
        return row * y + w, [row.sum()]

    def f(xs, y):
        return cf_map(body, xs, y)

    _run(f, torch.randn(4, 3), torch.randn(3))
    assert "map_impl" in _explain(f, torch.randn(4, 3), torch.randn(3)).ops_per_graph[0]


def test_a_graph_module_called_in_a_compiled_function_is_inlined():
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()))

    def f(p, x):
        return torch.cond(p, lambda t: gm(t), lambda t: t * 2, (x,)) + gm(x)

    x = torch.randn(2, 3)
    for p in (True, False):
        _run(f, torch.tensor(p), x)


def test_a_branch_calling_a_function_an_earlier_trace_saw_called_in_place_is_traced():
    # Tracing F.relu(x, inplace=True) puts F.relu in torch.fx's process-wide set of side-effecting
    # functions (dead-code elimination must keep the call). A later branch calling F.relu(t) is
    # still pure: before, it was refused as impure from then on, and the cond ran as written (the
    # model zoo's ReLU(inplace=True) did that to every later test's branches).
    relu = torch.nn.functional.relu

    def in_place(x):
        relu(x, inplace=True)
        return x * 2

    x = torch.randn(5)
    expected = in_place(x.clone())
    torch.testing.assert_close(tjc.compile(in_place, backend="eager")(x.clone()), expected)

    def f(p, x):
        return torch.cond(p, lambda t: relu(t) + 1, lambda t: t - 1, (x,))

    for p in (True, False):
        _run(f, torch.tensor(p), x)


def test_an_in_place_call_in_a_branch_is_still_refused_after_a_pure_call_of_its_function():
    relu = torch.nn.functional.relu

    def in_place(x):
        relu(x, inplace=True)
        return x * 2

    tjc.compile(in_place, backend="eager")(torch.randn(3))   # F.relu marked for that call

    def f(p, x):
        return torch.cond(p, lambda t: relu(t * 1, inplace=True) + 1, lambda t: t - 1, (x,))

    _raises_as_eager(f, torch.tensor(True), torch.randn(3), reason="cannot keep")


def test_cond_runs_under_inductor():
    def f(p, x):
        return torch.cond(p, lambda t: t.sin() + 1, lambda t: t.cos() * 2, (x,)) * 3

    compiled = tjc.compile(f, backend="inductor")
    x = torch.randn(8)
    for p in (True, False):
        _close(f(torch.tensor(p), x), compiled(torch.tensor(p), x))


# -- refused: the call runs as written -------------------------------------------------------------
# torch.cond run as written refuses a branch with side effects too (it raises). Those calls are
# checked under fullgraph=True: the refusal and its reason, with nothing run. (Run as written inside
# a compiled call, torch.cond's own torch.compile hangs once TorchDynamo has run in the process: see
# docs/graph_breaks.md.)
def _raises_as_eager(f, *args, reason):
    with pytest.raises(FullGraphError, match=reason):
        tjc.compile(f, backend="eager", fullgraph=True)(*args)


def test_branch_changing_an_outer_list_is_refused():
    def f(p, x, seen):
        def yes(t):
            seen.append(1)
            return t + 1
        return torch.cond(p, yes, lambda t: t - 1, (x,))

    seen = []
    _raises_as_eager(f, torch.tensor(True), torch.randn(2), seen, reason="changes an object made outside it")
    assert seen == []


def test_branch_changing_a_list_made_in_the_trace_is_refused():
    def f(p, x):
        log = []

        def yes(t):
            log.append("yes")
            return t + 1
        return torch.cond(p, yes, lambda t: t - 1, (x,)), len(log)

    _raises_as_eager(f, torch.tensor(True), torch.randn(2), reason="changes an object made outside it")


def test_branch_storing_to_a_closure_variable_is_refused():
    def f(p, x):
        hits = 0

        def yes(t):
            nonlocal hits
            hits += 1
            return t + 1
        return torch.cond(p, yes, lambda t: t - 1, (x,)), hits

    _raises_as_eager(f, torch.tensor(True), torch.randn(2), reason="changes an object made outside it")


@pytest.mark.parametrize("branch", [lambda t: t, lambda t: t.view(-1), lambda t: t.add_(1)],
                         ids=["identity", "view", "in-place"])
def test_aliasing_or_mutating_branch_is_refused(branch):
    def f(p, x):
        return torch.cond(p, branch, lambda t: t * 2, (x,))

    with pytest.raises(Exception):   # eager's torch.cond refuses these too
        f(torch.tensor(True), torch.ones(2))
    _raises_as_eager(f, torch.tensor(True), torch.ones(2), reason="torch.cond's true branch (returns|has an op)")


def test_branches_of_different_sizes_are_refused():
    def f(p, x):
        return torch.cond(p, lambda t: t.sum(0), lambda t: t.sum(1), (x,))

    _raises_as_eager(f, torch.tensor(True), torch.randn(3, 4), reason="different sizes")
    assert _explain(f, torch.tensor(True), torch.randn(3, 3)).graph_break_count == 0   # (3,) both


def test_compiled_cond_frees_the_module_it_reads():
    lin = torch.nn.Linear(2, 2)
    ref = weakref.ref(lin)

    def make(m):
        def f(p, x):
            return torch.cond(p, lambda t: m(t), lambda t: t + 1, (x,))
        return f

    compiled = tjc.compile(make(lin), backend="eager")
    compiled(torch.tensor(True), torch.randn(1, 2))
    del compiled, lin
    assert ref() is None


def _branches_over_the_frames_cell():
    c = 0

    def yes(t):
        return t - c

    def no(t):
        return t + c

    def f(p, x):
        nonlocal c
        c = 1            # the branches, read from f's closure, close over this very cell
        return torch.cond(p, yes, no, (x,))
    return f, lambda: c


def test_branches_reading_the_frames_free_variable_after_a_store_see_it_in_one_graph():
    """The branches' `__closure__[0]` is pinned as the frame's cell cell(C['c']) (ALIAS_OF): they
    read the value the trace stored, and cond stays one node. Before: a break at the cond ("a
    closure cell the trace stored to, reached again by a path whose identity no guard can pin")."""
    f, read = _branches_over_the_frames_cell()
    eager_f, eager_read = _branches_over_the_frames_cell()
    for p in (torch.tensor(False), torch.tensor(True)):
        _close(eager_f(p, torch.full((2,), 0.25)), tjc.compile(f, backend="eager")(p, torch.full((2,), 0.25)))
        assert read() == eager_read() == 1
    f, _ = _branches_over_the_frames_cell()
    _run(f, torch.tensor(False), torch.full((2,), 0.25), graphs=1, breaks=0)
