"""Graph breaks: the frame is compiled up to an unsupported instruction, which
runs as bytecode, and a resume function carries on. Compared with eager: values, gradients, and
the number of graphs and breaks."""
import io
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
from torch_jit_cache.convert_frame import FullGraphError  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = pytest.mark.torch


def _run(fn, *args):
    """(eager result, compiled results of two calls, graphs compiled, breaks made)."""
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    with contextlib.redirect_stdout(io.StringIO()):
        expected = fn(*args)
        got = [compiled(*args), compiled(*args)]
    return expected, got, cnt.frame_count, tjc.stats()["graph_breaks"] - before


def _check(fn, *args, graphs, breaks):
    expected, got, n_graphs, n_breaks = _run(fn, *args)
    for g in got:
        torch.testing.assert_close(g, expected)
    assert (n_graphs, n_breaks) == (graphs, breaks)


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
    k = len(repr(id))   # repr of a builtin: not traced
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
    _check(_print_between, torch.randn(4), torch.randn(4), graphs=2, breaks=1)


def test_item_used_as_python_value():
    _check(_item, torch.randn(4), graphs=2, breaks=1)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_branch_on_a_tensor(sign):
    # Every version breaks at the conditional jump: two resume functions, one traced per call
    # here (3.13's COMPARE_OP casts to bool itself: the break is at that cast, and the cast and
    # the jump run as bytecode).
    _check(_branch, sign * torch.ones(4), graphs=2, breaks=1)


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
    # Each numpy call is a break (np.ones fails inside numpy: the break moves to its call); the
    # ndarray and the numpy.float64 the resume functions receive are opaque values, so the
    # multiplication after them is compiled (before opaque values: 1 graph, then a fallback).
    _check(_numpy, torch.randn(4), graphs=2, breaks=4)


def test_unsupported_builtin():
    # `repr(id)` breaks at the call; the resume function carries on with its result compiled
    # (before opaque values, the break was at LOAD_GLOBAL id and the resume function, handed the
    # builtin, ran uncompiled: 1 graph).
    _check(_builtin, torch.randn(4), graphs=2, breaks=1)


class _Opaque:
    __slots__ = ("n",)   # no __dict__: not a plain user object, so opaque to the tracer

    def __init__(self, n):
        self.n = n

    def scale(self):
        return self.n


def _uses_opaque(x, obj, dq):
    a = x + 1
    same = obj is None          # decided by the type guard, no break
    s = obj.scale()             # the break: a call on an opaque value
    c = dq.count(1)             # the break: a method of a deque
    return a * s + c + same


def test_opaque_values_break_where_used_and_their_type_is_guarded():
    import collections
    x = torch.randn(3)
    # graphs: before the first break, and after the second (nothing between them is tensor work)
    _check(_uses_opaque, x, _Opaque(2.0), collections.deque([1, 1]), graphs=2, breaks=2)
    compiled = tjc.compile(_uses_opaque, backend="eager")
    torch.testing.assert_close(compiled(x, _Opaque(3.0), collections.deque([1])), (x + 1) * 3 + 1)
    # Another type in the same place misses the guard: a tuple's count, not a deque's.
    torch.testing.assert_close(compiled(x, _Opaque(3.0), (1, 1, 1)), (x + 1) * 3 + 3)
    with pytest.raises(AttributeError):   # as eager raises: None has no scale
        compiled(x, None, collections.deque())


class _Descriptor:
    """A non-data descriptor the tracer does not follow: reading `obj.method` is Unsupported."""

    def __get__(self, obj, cls):
        return lambda: 5


class _WithDescriptor:
    method = _Descriptor()


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
    _check(fn, torch.randn(3), _WithDescriptor(), graphs=2, breaks=1)


def test_break_inside_an_inlined_helper():
    # The break is at the root's call of _helper; _helper then runs as its own frame and breaks
    # too: root-before, helper-before, helper-after, root-after.
    _check(_inlined, torch.randn(4), graphs=4, breaks=2)


def test_two_breaks():
    _check(_two, torch.randn(4), graphs=3, breaks=2)


def test_five_breaks_resume_functions_break_again():
    _check(_five, torch.randn(4), graphs=6, breaks=5)


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
    expected, got, _, breaks = _run(fn, torch.randn(4), [1.0, 2.0, 3.0])
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
    _check(m, torch.randn(2, 4), graphs=4, breaks=3)
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
    _check(_loops, torch.randn(3), (2.0, 3.0), graphs=4, breaks=4)
    assert tjc.stats()["fallbacks"] == before


def test_a_break_in_a_long_loop_stops_making_resume_functions(monkeypatch):
    monkeypatch.setattr(tjc.config, "max_resume_depth", 4)

    def fn(x):
        for k in range(10):
            x = x + k
            print(k)
        return x * 2

    before = tjc.stats()["fallbacks"]
    _check(fn, torch.randn(3), graphs=5, breaks=4)
    assert tjc.stats()["fallbacks"] > before   # the fifth resume function runs uncompiled


def test_live_locals_and_stack_are_rebuilt():
    def fn(x, n):
        scale = n * 2
        xs = [x + 1, x + 2]
        d = {"a": x * 3}
        print("state")
        return xs[0] * scale + xs[1] + d["a"]

    _check(fn, torch.randn(4), 3, graphs=2, breaks=1)


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
    _check(_maybe_bound, x, True, graphs=2, breaks=1)
    _check(_maybe_bound, x, False, graphs=2, breaks=1)   # v unbound at the print, bound after


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
    n = np.float64(np.sum(np.ones(3)))
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
    expected, got, graphs, breaks = _run(fn, torch.randn(3))
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
    # before log.py's first handler set INFO, which would hide the INFO records from this test.
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


def _make_closure(w):
    def fn(x):
        a = x * w
        print("break")
        return a + w
    return fn


def test_a_frame_with_free_variables_breaks_and_each_closure_resumes_with_its_own_cells():
    f2, f3 = _make_closure(2.0), _make_closure(3.0)
    _check(f2, torch.randn(3), graphs=2, breaks=1)
    x = torch.randn(3)
    c2, c3 = tjc.compile(f2, backend="eager"), tjc.compile(f3, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(2):
            torch.testing.assert_close(c2(x), x * 2 + 2)
            torch.testing.assert_close(c3(x), x * 3 + 3)


class _Base(torch.nn.Module):
    def forward(self, x):
        return x + 1


class _UsesSuper(_Base):   # zero-argument super(): forward has the free variable __class__
    def forward(self, x):
        y = super().forward(x) * 2
        print("break")
        return super().forward(y)


def test_a_method_using_super_breaks_instead_of_falling_back():
    m = _UsesSuper()
    assert m.forward.__code__.co_freevars == ("__class__",)
    before = tjc.stats()["fallbacks"]
    # super() is traced (3.11 calls super(), 3.12+ load super().forward in one
    # LOAD_SUPER_ATTR): the print is the one break. The resume function finds `self` as its first
    # argument, as zero-argument super() needs.
    breaks = 1
    _check(m, torch.randn(3), graphs=2, breaks=breaks)
    assert tjc.stats()["fallbacks"] == before


def test_a_closure_compiled_with_a_break_and_dropped_is_freed(no_gc):
    big = torch.randn(64)
    fn = _make_closure(big)
    compiled = tjc.compile(fn, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        torch.testing.assert_close(compiled(torch.ones(64)), big + big)
    (entry,) = tjc.cache_entries(compiled)
    resume_codes = [c for c in entry.code.co_consts if isinstance(c, type(fn.__code__))
                    and graph_break.is_resume_code(c)]
    assert len(resume_codes) == 1 and resume_codes[0].co_freevars == ("w",)
    refs = [weakref.ref(o) for o in (fn, big, resume_codes[0])]
    del entry, resume_codes, compiled, fn, big
    assert [r() for r in refs] == [None] * len(refs)


_logger = logging.getLogger("tjc.test_graph_breaks")


def _logs(x):
    a = x + 1
    _logger.warning("shape %s", tuple(a.shape))
    return a * 2


def test_logging_call_is_a_break_and_logs_as_eager(caplog):
    with caplog.at_level(logging.WARNING, logger=_logger.name):
        _check(_logs, torch.randn(3), graphs=2, breaks=1)
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
    _check(fn, torch.randn(3), graphs=2, breaks=1)


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
    _check(_locals_move_up, torch.randn(3), graphs=2, breaks=1)


def _captured_then_changed(x):
    k = 2.0
    def scale(t):
        return t * k
    a = scale(x)
    print("break")
    k = 3.0             # the frame's own cell, written by the resume function
    return scale(a) + k  # the inner function, made before the break, sees the new value


def _argument_cell(x, n):
    def add(t):
        return t + n    # n: an argument captured by an inner function
    a = add(x)
    print("break")
    return add(a) * 2


# The store to k after the first break is a second one: in the resume function k is a free
# variable, whose cell `scale` shares, so the store runs as bytecode on the real cell.
@pytest.mark.parametrize("fn, args, breaks", [(_captured_then_changed, (3,), 2), (_argument_cell, (3, 4), 1)],
                         ids=["own_cell_written_after_the_break", "argument_cell"])
def test_a_frame_with_cell_variables_breaks_and_shares_its_cells(fn, args, breaks):
    # Before: the whole frame ran uncompiled (the resume function would need the frame's cells).
    # Now the resume function closes over the frame's own cells, and an inner function made
    # before the break is made again over those very cells.
    assert fn.__code__.co_cellvars
    x = torch.randn(*args[:1])
    before = tjc.stats()["fallbacks"]
    _check(fn, x, *args[1:], graphs=2, breaks=breaks)
    assert tjc.stats()["fallbacks"] == before


def _make_counter():
    count = 0
    def step(x):
        nonlocal count
        count += 1
        return x * count
    return step, lambda: count


def test_a_nonlocal_store_to_a_free_variable_is_a_break_on_the_real_cell():
    # The cell is shared with the closure's other users (read() here): the store runs as bytecode
    # (before: the whole frame ran uncompiled). The multiplication after it is compiled, once per
    # value of count (an int read from a cell is a constant of the graph).
    step, read = _make_counter()
    eager_step, eager_read = _make_counter()
    cnt = CompileCounter()
    compiled = tjc.compile(step, backend=cnt)
    x = torch.randn(3)
    before = tjc.stats()
    for _ in range(3):
        torch.testing.assert_close(compiled(x), eager_step(x))
    assert read() == eager_read() == 3
    after = tjc.stats()
    assert (cnt.frame_count, after["graph_breaks"] - before["graph_breaks"]) == (3, 3)
    assert after["fallbacks"] == before["fallbacks"]


def _returns_a_closure(x):
    s = x.sum()
    return (lambda t: t * s), s


def test_a_returned_closure_is_made_over_the_frames_cell():
    x = torch.randn(3)
    cnt = CompileCounter()
    fn, s = tjc.compile(_returns_a_closure, backend=cnt)(x)
    eager_fn, eager_s = _returns_a_closure(x)
    torch.testing.assert_close(fn(x), eager_fn(x))
    assert fn.__closure__[0].cell_contents is s
    assert fn.__code__ is eager_fn.__code__ and cnt.frame_count == 1


def test_cells_and_functions_made_at_a_break_are_freed(no_gc):
    x = torch.randn(64)
    compiled = tjc.compile(_argument_cell, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        out = compiled(x, 4)
    torch.testing.assert_close(out, (x + 8) * 2)
    (entry,) = tjc.cache_entries(compiled)
    resume_codes = [c for c in entry.code.co_consts if isinstance(c, type(_argument_cell.__code__))
                    and graph_break.is_resume_code(c)]
    assert [c.co_freevars for c in resume_codes] == [("n",)]
    refs = [weakref.ref(o) for o in (x, out, resume_codes[0])]
    del entry, resume_codes, compiled, x, out
    assert [r() for r in refs] == [None] * len(refs)


def _returns_a_closure_over_a_changed_cell(x):
    s = x.sum()
    f = lambda t: t * s   # noqa: E731
    s = s + 1             # a store to the cell the returned function reads
    return f


def test_a_returned_closure_sees_the_cells_last_value():
    x = torch.randn(3)
    compiled = tjc.compile(_returns_a_closure_over_a_changed_cell, backend="eager")
    torch.testing.assert_close(compiled(x)(x), _returns_a_closure_over_a_changed_cell(x)(x))


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
    _check(m, torch.randn(3), graphs=2, breaks=1)


# -- frames that read their own locals (locals(), vars(), eval, frame objects) ----------------
# A resume function has the live locals only, and the break instruction runs among the
# transformed code's temporaries: such a frame is never cut (graph_break._INTROSPECTION), it runs
# uncompiled where its trace fails, and every version's eager semantics (3.13's PEP 667 snapshot,
# 3.11/3.12's one dict per frame) hold as they are.

def _locals_after_break(x):
    a = x + 1
    b = 5
    print("", end="")
    return x + len(locals()) + b, a


def _locals_item_after_break(x):
    a = x + 1
    print("", end="")
    return locals()["a"] * 2


def _vars_after_break(x):
    a = x * 3
    print("", end="")
    return sorted(vars()), a


def _locals_before_break(x):
    snapshot = locals()
    a = x + 1
    print("", end="")
    c = a * 2
    locals()   # 3.11/3.12: refreshes `snapshot` (one dict per frame); 3.13: a new snapshot
    return sorted(snapshot), c


def _eval_after_break(x):
    a = x + 1
    print("", end="")
    return eval("a * 2")


def _frame_after_break(x):
    import inspect
    a = x - 1
    print("", end="")
    return sorted(inspect.currentframe().f_locals), a


def _locals_in_resume_after_stack_items(x):
    a = x + 1
    out = (a, print("", end=""))
    return x + len(locals()), out[0]


@pytest.mark.parametrize("fn", [_locals_after_break, _locals_item_after_break, _vars_after_break,
                                _locals_before_break, _eval_after_break, _frame_after_break,
                                _locals_in_resume_after_stack_items])
def test_a_frame_reading_its_locals_sees_eager_locals(fn):
    x = torch.randn(3)
    expected = fn(x)
    compiled = tjc.compile(fn)
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(2):
            got = compiled(x)
            assert type(got) is type(expected)
            for g, e in zip(got if isinstance(got, tuple) else (got,),
                            expected if isinstance(expected, tuple) else (expected,)):
                if isinstance(e, torch.Tensor):
                    torch.testing.assert_close(g, e)
                else:
                    assert g == e


def test_a_frame_reading_its_locals_is_not_cut_and_says_why(caplog):
    tjc.reset()   # the reason is warned once per process until reset
    with caplog.at_level(logging.WARNING, logger="torch_jit_cache"):
        with contextlib.redirect_stdout(io.StringIO()):
            tjc.compile(_locals_after_break)(torch.randn(3))
    assert any("reads its own locals (locals)" in r.getMessage() for r in caplog.records)
    with pytest.raises(graph_break.BreakRefused, match="reads its own locals"):
        graph_break.plan_break(_locals_after_break.__code__, 0)


class _HasEvalAndVars:
    """Attributes named like the introspection builtins: `obj.eval()` reads no frame's locals."""

    def __init__(self):
        self.vars = 2

    def eval(self):
        return self


def _attribute_named_eval_then_break(x, obj):
    y = x.sin()
    obj.eval()
    print("", end="")
    return y * obj.vars


def test_an_attribute_named_like_locals_readers_still_breaks():
    # Refused by name before: `model.eval()` in forward made every break of the frame a fallback.
    _check(_attribute_named_eval_then_break, torch.randn(3), _HasEvalAndVars(), graphs=2, breaks=1)
