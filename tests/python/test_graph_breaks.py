"""Graph breaks: the frame is compiled up to an unsupported instruction, which
runs as bytecode, and a resume function carries on. Compared with eager: values, gradients, and
the number of graphs and breaks. Frames with closures and cells: test_graph_breaks_closures.py;
frames that read their own locals: test_graph_breaks_locals.py."""
import io
import operator
import random
import contextlib
import functools
import logging
import sys
import traceback
import weakref

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")   # with torch; the torch-free debug venv (hunt-leaks) has neither

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import graph_break  # noqa: E402
from torch_jit_cache.pipeline.convert_frame import FullGraphError  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import check_graphs_and_breaks, run_counting_breaks  # noqa: E402

pytestmark = pytest.mark.torch


def _print_between(x, y):
    a = x + y
    print("between", a.shape)
    return (a * 2).relu()


def _item(x):
    a = x.sin()
    v = a.sum().item()
    return a * v


def _branch(x):
    a = x.cos() - 0.5
    if a.sum() > 0:
        return a + 1
    return a - 1


def _numpy(x):
    a = x + 1
    n = np.float64(np.sum(np.ones(3)))
    return a * float(n)


def _builtin(x):
    a = x * 2
    k = len(repr(compile))   # repr of a builtin the tracer does not model: not traced
    return a + k


def _helper(t):
    t = t * 3
    print("in helper")
    return t + 1


def _inlined(x):
    y = x + 1
    z = _helper(y)
    return z * 2


def _two(x):
    x = x + 1
    print("one")
    x = x * 2
    print("two")
    return x - 3


def _five(x):
    for_print = print
    x = x + 1
    for_print(1)
    x = x * 2
    for_print(2)
    x = x - 3
    for_print(3)
    x = x.sin()
    for_print(4)
    x = x.cos()
    for_print(5)
    return x + 1


def test_print_between_tensor_ops():
    check_graphs_and_breaks(_print_between, torch.randn(4), torch.randn(4), graphs=2, breaks=1)


def test_item_used_as_python_value():
    check_graphs_and_breaks(_item, torch.randn(4), graphs=2, breaks=1)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_branch_on_a_tensor(sign):
    # Every version breaks at the conditional jump: two resume functions, one traced per call
    # here (3.13's COMPARE_OP casts to bool itself: the break is at that cast, and the cast and
    # the jump run as bytecode).
    check_graphs_and_breaks(_branch, sign * torch.ones(4), graphs=2, breaks=1)


def test_branch_on_a_tensor_keeps_the_comparison_in_the_graph_and_a_resume_per_branch():
    # Before, 3.13 ran the comparison outside the graph and resumed after it with a Python bool:
    # the other branch recompiled that resume function.
    explained = tjc.explain(_branch)(torch.ones(4))
    assert explained.ops_per_graph[0][-1] == "gt"
    cnt = CompileCounter()
    compiled = tjc.compile(_branch, backend=cnt)
    before = tjc.stats()["recompiles"]
    for v in (0.0, 3.0, 0.0, 3.0):   # cos(0) - 0.5 > 0, cos(3) - 0.5 < 0: both branches, twice
        x = torch.full((4,), v)
        torch.testing.assert_close(compiled(x), _branch(x))
    assert cnt.frame_count == 3 and tjc.stats()["recompiles"] == before


def test_call_into_numpy():
    # numpy calls on constants run while tracing (tracer/variables/torch_objects/numpy_values.py): one graph.
    # Before, each numpy call was a break (2 graphs, 4 breaks).
    check_graphs_and_breaks(_numpy, torch.randn(4), graphs=1, breaks=0)


def _numpy_on_tensor(x):
    a = x + 1
    n = np.sum(np.abs(x.numpy()))      # numpy on a tensor: traced through torch._numpy
    return a * float(n)                # a numpy scalar read as a Python number: the break


def test_call_into_numpy_on_a_tensor_breaks():
    # x.numpy() and the numpy calls on the array it made are graph ops (numpy_tensors.py); float()
    # of the result, a value the graph computes, is the one break (before: 4 breaks, at each call)
    check_graphs_and_breaks(_numpy_on_tensor, torch.randn(4), graphs=2, breaks=1)


def test_unsupported_builtin():
    # `repr(id)` breaks at the call; the resume function carries on with its result compiled
    # (before opaque values, the break was at LOAD_GLOBAL id and the resume function, handed the
    # builtin, ran uncompiled: 1 graph).
    check_graphs_and_breaks(_builtin, torch.randn(4), graphs=2, breaks=1)


class _Opaque(float):
    __slots__ = ()   # a builtin's subclass without a __dict__: not a plain user object, so opaque

    def __getattr__(self, name):   # a lookup of its own: not followed, so opaque to the tracer
        raise AttributeError(name)

    def scale(self):
        return float(self)


def _uses_opaque(x, obj, dq):
    a = x + 1
    same = obj is None          # decided by the type guard, no break
    s = obj.scale()             # the break: a call on an opaque value
    c = dq.count(1)             # the break: a C method of an array
    return a * s + c + same


def test_opaque_values_break_where_used_and_their_type_is_guarded():
    import array
    x = torch.randn(3)
    # graphs: before the first break, and after the second (nothing between them is tensor work)
    check_graphs_and_breaks(_uses_opaque, x, _Opaque(2.0), array.array("i", [1, 1]), graphs=2, breaks=2)
    compiled = tjc.compile(_uses_opaque, backend="eager")
    torch.testing.assert_close(compiled(x, _Opaque(3.0), array.array("i", [1])), (x + 1) * 3 + 1)
    # Another type in the same place misses the guard: a tuple's count, not an array's.
    torch.testing.assert_close(compiled(x, _Opaque(3.0), (1, 1, 1)), (x + 1) * 3 + 3)
    with pytest.raises(AttributeError):   # as eager raises: None has no scale
        compiled(x, None, array.array("i"))


class _Descriptor(property):
    """A descriptor the tracer does not follow (a property subclass: its __get__ is property's, in
    C, not a Python function to trace): reading `obj.method` is Unsupported."""


class _WithDescriptor:
    method = _Descriptor(lambda self: lambda: 5)


def test_a_method_load_that_fails_breaks_at_the_load():
    def fn(x, obj):
        a = x * 2
        k = obj.method()   # LOAD_METHOD / LOAD_ATTR's method form: the break is the load itself
        return a + k

    line = fn.__code__.co_firstlineno
    with contextlib.redirect_stdout(io.StringIO()):
        explained = tjc.explain(fn)(torch.randn(3), _WithDescriptor())
    assert len(explained.break_reasons) == 1
    assert f":{line + 2} (LOAD_" in explained.break_reasons[0]
    assert "descriptor" in explained.break_reasons[0]
    check_graphs_and_breaks(fn, torch.randn(3), _WithDescriptor(), graphs=2, breaks=1)


def test_break_inside_an_inlined_helper():
    # The break is at the root's call of _helper; _helper then runs as its own frame and breaks
    # too: root-before, helper-before, helper-after, root-after.
    check_graphs_and_breaks(_inlined, torch.randn(4), graphs=4, breaks=2)


def test_two_breaks():
    check_graphs_and_breaks(_two, torch.randn(4), graphs=3, breaks=2)


def test_five_breaks_resume_functions_break_again():
    check_graphs_and_breaks(_five, torch.randn(4), graphs=6, breaks=5)


def test_gradients_flow_through_a_break():
    def fn(w, x):
        a = (w * x).tanh()
        print("mid")
        return (a * a).sum()

    w0, x = torch.randn(5, requires_grad=True), torch.randn(5)
    w1 = w0.detach().clone().requires_grad_(True)
    with contextlib.redirect_stdout(io.StringIO()):
        fn(w0, x).backward()
        tjc.compile(fn, backend="eager")(w1, x).backward()
    torch.testing.assert_close(w1.grad, w0.grad)


def test_break_in_a_loop_over_a_python_list():
    def fn(x, ws):
        for w in ws:
            x = x * w
            print("it")
            x = x + 1
        return x

    # A list read from the frame may change after the break (the loop must see that): the resume
    # function keeps Python's own iterator, which the tracer cannot read, so the rest of the loop
    # runs uncompiled.
    expected, got, _, breaks = run_counting_breaks(fn, torch.randn(4), [1.0, 2.0, 3.0])
    for g in got:
        torch.testing.assert_close(g, expected)
    assert breaks == 1


class _Stack(torch.nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(n))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        x = x * 2
        for layer in self.layers:
            x = layer(x)
            print("layer")
        return self.head(x).relu()


def test_a_break_in_a_loop_over_layers_keeps_the_rest_of_the_loop_compiled():
    # The loop's iterator goes to each resume function as the tuple of layers still to run: one
    # graph per iteration's remainder (before: 1 graph, then the rest of the loop uncompiled).
    m = _Stack()
    check_graphs_and_breaks(m, torch.randn(2, 4), graphs=4, breaks=3)
    x = torch.randn(2, 4)
    compiled = tjc.compile(m, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        expected = m(x)
        expected.sum().backward()
        grads = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        got = compiled(x)
        got.sum().backward()
    torch.testing.assert_close(got, expected)
    for p, g in zip(m.parameters(), grads):
        torch.testing.assert_close(p.grad, g)


def _loops(x, scales):
    for i, s in enumerate(scales):   # enumerate over a tuple: the items are known
        x = x * s + i
        print(i)
    for k in range(2):
        x = x - k
        print(k)
    return x


def test_breaks_in_loops_over_tuples_enumerate_and_range_stay_compiled():
    before = tjc.stats()["fallbacks"]
    # the last resume function only returns x: no tensor work, no graph
    check_graphs_and_breaks(_loops, torch.randn(3), (2.0, 3.0), graphs=4, breaks=4)
    assert tjc.stats()["fallbacks"] == before


def test_a_break_in_a_long_loop_stops_making_resume_functions(monkeypatch):
    monkeypatch.setattr(tjc.config, "max_resume_depth", 4)

    def fn(x):
        for k in range(10):
            x = x + k
            print(k)
        return x * 2

    before = tjc.stats()["fallbacks"]
    check_graphs_and_breaks(fn, torch.randn(3), graphs=5, breaks=4)
    assert tjc.stats()["fallbacks"] > before   # the fifth resume function runs uncompiled


def test_live_locals_and_stack_are_rebuilt():
    def fn(x, n):
        scale = n * 2
        xs = [x + 1, x + 2]
        d = {"a": x * 3}
        print("state")
        return xs[0] * scale + xs[1] + d["a"]

    check_graphs_and_breaks(fn, torch.randn(4), 3, graphs=2, breaks=1)


def _maybe_bound(x, flag):
    if flag:
        v = x * 3
    a = x + 1
    print("between")
    if flag:
        return a + v
    v = a * 2
    return v


def test_a_live_local_unbound_at_the_break_stays_unbound():
    x = torch.randn(3)
    check_graphs_and_breaks(_maybe_bound, x, True, graphs=2, breaks=1)
    check_graphs_and_breaks(_maybe_bound, x, False, graphs=2, breaks=1)   # v unbound at the print, bound after


def _reads_unbound(x, flag):
    if flag:
        v = x * 3
    a = x + 1
    print("between")
    return a + v


def test_reading_a_local_unbound_at_the_break_raises_as_eager():
    compiled = tjc.compile(_reads_unbound, backend="eager")
    before = tjc.stats()["graph_breaks"]
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(UnboundLocalError):
        compiled(torch.randn(3), False)
    assert tjc.stats()["graph_breaks"] == before + 1


def test_user_exception_at_the_break_keeps_its_line():
    def fn(x):
        y = x + 1
        int("not a number")
        return y

    compiled = tjc.compile(fn, backend="eager")
    with pytest.raises(ValueError) as info:
        compiled(torch.randn(2))
    lines = [f.lineno for f in traceback.extract_tb(info.value.__traceback__)]
    assert fn.__code__.co_firstlineno + 2 in lines


def _many_breaks(x, xs):
    a = x + 1
    print("one")
    v = a.sum().item()
    if a.sum() > 0:
        a = a * 2
    for item in xs:
        a = a + item
        print(item)
    n = np.float64(np.sum(x.numpy()))   # numpy on a tensor: a break (on constants it is traced)
    return a * v * float(n)


def test_fullgraph_lists_every_break_with_its_line_and_runs_nothing():
    line = _many_breaks.__code__.co_firstlineno
    compiled = tjc.compile(_many_breaks, backend="eager", fullgraph=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(FullGraphError) as info:
        compiled(torch.randn(3), [1, 2])
    text = str(info.value)
    assert out.getvalue() == ""   # raised before any of the frame ran
    assert "6 graph breaks" in text
    listed = [ln for ln in text.splitlines() if ln.startswith("  ")]
    assert [ln.split(". ", 1)[0].strip() for ln in listed] == ["1", "2", "3", "4", "5"]
    assert f"print() (a side effect) at {__file__}:{line + 2}" in listed[0]
    assert "item()" in listed[1] and f":{line + 3} " in listed[1]
    assert f":{line + 4} " in listed[2]                      # the branch on a tensor
    assert f":{line + 8} " in listed[3] and "(2 times)" in listed[3]   # print in both iterations
    assert "numpy" in listed[4] or "np" in listed[4]


def test_fullgraph_listing_stops_where_the_frame_cannot_be_cut():
    def fn(x):
        x = x + 1
        print("cut here")
        try:
            print("not here")
        finally:
            x = x * 2
        print("never listed")
        return x

    with pytest.raises(FullGraphError) as info:
        tjc.compile(fn, backend="eager", fullgraph=True)(torch.randn(3))
    text = str(info.value)
    assert "2 graph breaks" in text
    assert "inside a try block" in text and "breaks after it are not listed" in text
    assert "never listed" not in text and text.count("print()") == 2


def test_fullgraph_with_one_break_names_it():
    compiled = tjc.compile(_print_between, backend="eager", fullgraph=True)
    with pytest.raises(FullGraphError, match="print"):
        compiled(torch.randn(3), torch.randn(3))


def test_break_inside_a_try_block_falls_back():
    def fn(x):
        y = x + 1
        try:
            print("inside")
        finally:
            y = y * 2
        return y

    before = tjc.stats()
    expected, got, graphs, breaks = run_counting_breaks(fn, torch.randn(3))
    for g in got:
        torch.testing.assert_close(g, expected)
    assert (graphs, breaks) == (0, 0)
    assert tjc.stats()["fallbacks"] > before["fallbacks"]


def test_graph_breaks_are_logged_once(caplog, monkeypatch):
    monkeypatch.setattr(tjc.config, "log", frozenset({"graph_breaks"}))

    def fn(x):
        x = x + 1
        print("logged")
        return x

    compiled = tjc.compile(fn, backend="eager")
    # The level is set here: an earlier test's caplog.at_level puts back the level the logger had
    # before runtime/log.py's first handler set INFO, which would hide the INFO records from this test.
    with caplog.at_level("INFO", logger="torch_jit_cache"):
        for _ in range(3):
            compiled(torch.randn(2))
    lines = [r.getMessage() for r in caplog.records if "graph break in" in r.getMessage()]
    assert len(lines) == 1 and "print" in lines[0] and lines[0].startswith("graph_breaks: ")


def test_entry_resume_function_and_user_objects_die_with_the_compiled_function(no_gc):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            print("break")
            return self.lin(y).relu()

    m, x = M(), torch.randn(2, 4)
    compiled = tjc.compile(m, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        compiled(x)
    (entry,) = tjc.cache_entries(compiled)
    resumes = [c for c in entry.code.co_consts if isinstance(c, type(_two))]
    assert [graph_break.is_resume_code(r.__code__) for r in resumes] == [True]
    refs = [weakref.ref(o) for o in (m, m.lin.weight, x, resumes[0], resumes[0].__code__)]
    del entry, resumes, compiled, m, x
    assert [r() for r in refs] == [None] * len(refs)


_logger = logging.getLogger("tjc.test_graph_breaks")


def _logs(x):
    a = x + 1
    _logger.warning("shape %s", tuple(a.shape))
    return a * 2


def test_logging_call_is_a_break_and_logs_as_eager(caplog):
    with caplog.at_level(logging.WARNING, logger=_logger.name):
        check_graphs_and_breaks(_logs, torch.randn(3), graphs=2, breaks=1)
    # eager once, compiled twice
    assert [r.getMessage() for r in caplog.records if r.name == _logger.name] == ["shape (3,)"] * 3


def _tolist(x):
    a = x + 1
    vals = a.tolist()
    return a * len(vals) + vals[0]


def _bool_of_tensor(x):
    a = x - 0.5
    if bool(a.sum() > 0):
        return a * 2
    return a * 3


@pytest.mark.parametrize("fn", [_tolist, _bool_of_tensor])
def test_tolist_and_bool_of_a_tensor_are_breaks(fn):
    check_graphs_and_breaks(fn, torch.randn(3), graphs=2, breaks=1)


def _random_around_a_break(x):
    a = torch.nn.functional.dropout(x, 0.5, training=True)
    print("between")
    return a + torch.randn(3)


def test_random_ops_on_both_sides_of_a_break_draw_as_eager():
    x = torch.randn(3)
    cnt = CompileCounter()
    compiled = tjc.compile(_random_around_a_break, backend=cnt)
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(2):
            torch.manual_seed(0)
            expected = _random_around_a_break(x)
            torch.manual_seed(0)
            torch.testing.assert_close(compiled(x), expected)
    assert cnt.frame_count == 2


def _locals_move_up(x):
    t = u = None
    a0, a1, a2, a3, a4, a5, a6 = x + 0, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6
    a7, a8, a9, a10, a11, a12, a13 = x + 7, x + 8, x + 9, x + 10, x + 11, x + 12, x + 13
    print("break")
    t, u = a0, a1   # 3.13: STORE_FAST_STORE_FAST, each local's index in 4 bits
    return (t - u) * 3 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13


def test_superinstructions_in_a_resume_function_whose_locals_moved_past_index_15():
    # The resume function's arguments come first: t and u move from indices 1-2 to 15-16. A
    # superinstruction kept as is encoded them in 4 bits, wrongly: 3.13 crashed.
    code = _locals_move_up.__code__
    assert code.co_varnames.index("u") < 16
    check_graphs_and_breaks(_locals_move_up, torch.randn(3), graphs=2, breaks=1)


def _wrapping(fn):
    # transformers' can_return_tuple: a decorator whose wrapper does no tensor work before the call.
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out
    return wrapper


class _Wrapped(torch.nn.Module):
    @_wrapping
    def forward(self, x):
        a = x.sin()
        print("inside forward")
        return a * 2


def test_a_break_inside_the_wrapped_forward_is_counted_once():
    # The wrapper (the compile() target) is cut before its call with no graph before the cut, and
    # forward, compiled on its own, breaks at the print: one break between two graphs, as
    # torch.compile counts it. Before, the wrapper's empty cut counted too (2 breaks).
    m = _Wrapped()
    report = tjc.explain(m)(torch.randn(3))
    assert (report.graph_count, report.graph_break_count) == (2, 1), str(report)
    check_graphs_and_breaks(m, torch.randn(3), graphs=2, breaks=1)


def _break_every_iteration(x, n):
    for i in range(n):
        x = x + i
        print(i, end="")
    return x * 2


def test_a_range_loop_resumes_with_the_rest_of_the_range_not_its_items(capsys):
    # The loop's iterator goes to each resume function as the range still to run (three numbers
    # guarded), not as a tuple of every item left, wrapped and guarded one by one: a break in
    # every iteration of a long loop made each resume function cost its remaining length.
    def guards_text(n):
        tjc.reset()
        explanation = tjc.explain(_break_every_iteration)(torch.ones(2), n)
        return [f.guards for f in explanation.frames if "resume" in f.frame]

    short, long = guards_text(4), guards_text(400)
    assert short and long
    assert len(long[0]) < len(short[0]) + 20, long[0]   # the first resume function: same guards
    print(long[0])
    x = torch.randn(3)
    for n in (4, 40):
        torch.testing.assert_close(tjc.compile(_break_every_iteration, backend="eager")(x, n),
                                   _break_every_iteration(x, n))


def _equal_strings_at_a_break(x):
    a = b = "xyzpdq"
    c = a[:3] + b[3:]        # equal to a, another object
    n = 10 ** 20
    m = n + 0 * len(c)       # equal to n; folded in the trace
    print("", end="")
    return x + 1, a is b, a is c, a == c, operator.is_(a, c), operator.is_not(c, b), m == n


def test_equal_constants_made_apart_stay_apart_across_a_break():
    # Rebuilt as LOAD_CONSTs, equal constants became one object (the code object merges equal
    # constants and interns name-like strings), so `a is c` changed after the break.
    x = torch.randn(2)
    expected = _equal_strings_at_a_break(x)
    got = tjc.compile(_equal_strings_at_a_break, backend="eager")(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] == (True, False, True, False, True, True)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _fresh_word(i):
    print(end="")   # a break inside: the caller is cut at the call
    return _LETTERS[i % 26] * (i % 3 + 1)


def _passes_a_fresh_value_on(x, i):
    # Each break's result is the next resume function's argument, which the rest of the frame
    # only returns.
    y = x + 1
    s = _fresh_word(i)
    z = y * 2
    f = random.random()
    return z - 1, s, f


def _reads_the_value_after_the_break(x, s):
    print(end="")
    return x + len(s) if s.startswith("a") else x - 1


def test_a_value_passed_on_at_a_break_is_not_guarded_by_value():
    # A value differing on each call (random.randint's, a counter's) that the resume function only
    # passes on: guarded by its type, so it neither recompiles each call nor reaches the cache limit.
    from context_helpers import CompiledCalls, same

    x = torch.randn(3)
    compiled = CompiledCalls(_passes_a_fresh_value_on)
    for i in range(12):
        random.seed(i)
        expected = _passes_a_fresh_value_on(x, i)
        random.seed(i)
        assert same(compiled(x, i), expected)
    assert compiled.delta("recompiles") == 0
    assert compiled.delta("cache_limit_hits") == 0 and compiled.delta("fallbacks") == 0


def test_a_value_read_after_the_break_is_still_guarded_by_value():
    from context_helpers import CompiledCalls

    x = torch.randn(3)
    compiled = CompiledCalls(_reads_the_value_after_the_break)
    for s in ("ab", "abc", "b", "ab"):
        assert torch.equal(compiled(x, s), _reads_the_value_after_the_break(x, s))
    assert compiled.delta("recompiles") >= 2


def _passes_a_float_on(x):
    f = random.random()
    print(end="")
    return x + 1, f


def test_a_symbolic_value_passed_on_compiles_its_graph_of_no_tensor_work():
    # dynamic=True: the resume function's float argument is a graph input it only returns; the
    # graph does no tensor work but the frame reads its output, so it is compiled (not a fallback).
    from context_helpers import same

    x = torch.randn(3)
    before = tjc.stats()["fallbacks"]
    compiled = tjc.compile(_passes_a_float_on, backend="eager", dynamic=True)
    for i in range(3):
        random.seed(i)
        expected = _passes_a_float_on(x)
        random.seed(i)
        assert same(compiled(x), expected)
    assert tjc.stats()["fallbacks"] == before


def _rebinds_arguments_before_a_break(x, a, b):
    a, b = b, a + "!"
    c = a
    y = x + 1
    print(end="")
    return y, a, b, c


def test_arguments_passed_on_unread_follow_their_values_not_their_names():
    # An argument the trace only passes on is rebuilt from the frame's argument it came from; one
    # rebound before the break carries the new value (here swapped), as in eager.
    from context_helpers import same

    x = torch.randn(2)
    compiled = tjc.compile(_rebinds_arguments_before_a_break, backend="eager")
    for args in (("p", "q"), ("r", "s"), ("p", "q")):
        assert same(compiled(x, *args), _rebinds_arguments_before_a_break(x, *args))
