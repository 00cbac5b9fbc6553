"""Cells as values after the graph (tracer/variables/python_objects/cells.py): a function the trace made that
leaves it (returned, or held across a graph break) closes over the very cells eager's would. A
function made by the frame over its free variables closes over the frame's real cells; one made in
an inlined call over the frame's cells and the inlined call's own cells gets the frame's real
cells and one new cell per inlined cell, shared by every function closing over it, so a nonlocal
store through one after the call is seen by the others. Compared with eager: the functions' results
and the cells' contents after calls; no fallback; nothing kept alive."""
import contextlib
import io
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = pytest.mark.torch


def _compiled(fn):
    """fn compiled; its calls must not fall back to eager."""
    counter = CompileCounter()
    return tjc.compile(fn, backend=counter), counter


def _no_fallback(before):
    assert tjc.stats()["fallbacks"] == before


def _frame_over_free_variables():
    """A frame with a free variable `out` it shares with its maker: the nested function it returns
    closes over `out` (a cell not the frame's own) and over its own cell `c`."""
    out = None

    def fn(a, b):
        c = a + b

        def inner(f=7.0):
            nonlocal out
            out = a + b * 10
            return c * f
        return inner
    return fn, lambda: out


def test_a_function_closing_over_the_frames_free_variable_is_returned_and_writes_its_cell():
    (eager_fn, eager_out), (fn, out) = _frame_over_free_variables(), _frame_over_free_variables()
    compiled, counter = _compiled(fn)
    before = tjc.stats()["fallbacks"]
    a, b = torch.randn(3), torch.randn(3)
    want, got = eager_fn(a, b), compiled(a, b)
    _no_fallback(before)
    assert counter.frame_count == 1
    torch.testing.assert_close(got(1.5), want(1.5))
    torch.testing.assert_close(out(), eager_out())   # the nonlocal store reached the maker's cell
    cell = dict(zip(got.__code__.co_freevars, got.__closure__))["out"]
    assert cell is fn.__closure__[0]   # the frame's very cell


def _make_counter(start):
    n = start

    def bump(by=1):
        nonlocal n
        n = n + by
        return n

    def read():
        return n
    return bump, read


def _over_frame_and_inlined_cells(w):
    def f(x):
        y = x + 1

        def maker():   # inlined: `deep` closes over f's cell y, maker's cell z and f's free w
            z = y * 2

            def deep():
                return y + z + w
            return deep
        d = maker()
        y = y + 100       # written after `deep` was made: eager's deep sees it
        return d
    return f


def test_a_function_made_in_an_inlined_call_over_the_frames_and_its_own_cells():
    fn = _over_frame_and_inlined_cells(5.0)
    compiled, counter = _compiled(fn)
    before = tjc.stats()["fallbacks"]
    x = torch.randn(3)
    got, want = compiled(x), fn(x)
    _no_fallback(before)
    assert counter.frame_count == 1
    torch.testing.assert_close(got(), want())


def _two_counters(x):
    bump, read = _make_counter(x)
    other_bump, _ = _make_counter(x * 0)
    bump(2)
    return bump, read, other_bump


def test_two_closures_share_an_inlined_cell_and_a_store_after_the_call_is_seen_by_both():
    compiled, counter = _compiled(_two_counters)
    before = tjc.stats()["fallbacks"]
    x = torch.randn(3)
    (bump, read, other), (e_bump, e_read, e_other) = compiled(x), _two_counters(x)
    _no_fallback(before)
    assert counter.frame_count == 1
    assert bump.__closure__[0] is read.__closure__[0]
    assert bump.__closure__[0] is not other.__closure__[0]
    torch.testing.assert_close(read(), e_read())
    for fn, e_fn in ((bump, e_bump), (other, e_other), (bump, e_bump)):
        torch.testing.assert_close(fn(5), e_fn(5))
    torch.testing.assert_close(read(), e_read())


def _held_across_a_break(x):
    bump, read = _make_counter(x)
    bump(1)            # traced: a store to the inlined call's cell, then both are held at the break
    print("break")
    return read() * 2, bump


def test_closures_over_inlined_cells_held_at_a_graph_break():
    compiled, counter = _compiled(_held_across_a_break)
    before = tjc.stats()["fallbacks"]
    x = torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()):
        (got, bump), (want, e_bump) = compiled(x), _held_across_a_break(x)
    _no_fallback(before)
    assert counter.frame_count == 2
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(bump(3), e_bump(3))


def test_returned_closures_and_their_cells_keep_nothing_alive(no_gc):
    fn = _frame_over_free_variables()[0]
    compiled, _ = _compiled(fn)
    two, _ = _compiled(_two_counters)
    a = torch.randn(3)
    inner, counters = compiled(a, a * 2), two(a * 3)
    c = dict(zip(inner.__code__.co_freevars, inner.__closure__))["c"].cell_contents
    c, bumped = weakref.ref(c), weakref.ref(counters[1]())
    del inner, counters
    assert c() is None and bumped() is None


def _inlined_closure_over_the_frames_cell_at_a_break(x):
    y = x + 1

    def maker():
        def deep(v):
            nonlocal y
            y = y + v
            return y
        return deep
    d = maker()
    d(5)              # traced: a store to the frame's own cell through the inlined call's function
    print("break")
    r = d(1)
    y = y * 10        # after the break: the resume function's cell is the one `d` closes over
    return r, d, y


def test_a_function_made_in_an_inlined_call_held_at_a_break_shares_the_frames_cell():
    compiled, counter = _compiled(_inlined_closure_over_the_frames_cell_at_a_break)
    before = tjc.stats()["fallbacks"]
    x = torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()):
        got, want = compiled(x), _inlined_closure_over_the_frames_cell_at_a_break(x)
    _no_fallback(before)
    # Before the break, d's store to the frame's cell is traced. After it, d is a real function
    # over the resume function's own free variable `y`, pinned as that cell (ALIAS_OF of
    # cell(C['y']) and C['d'].__closure__[0]): its store is traced in the resume function's graph.
    assert counter.frame_count == 2
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[2], want[2])
    torch.testing.assert_close(got[1](3), want[1](3))


# -- stores to real cells: the root frame's free variables and real functions' closures ---------
def _breaks_and_fallbacks(fn, *args):
    rep = tjc.explain(fn)(*args)
    return rep.graph_break_count, rep.fallbacks


def _store_maker():
    result = None

    def keep(a):
        nonlocal result
        result = a * 2 + 1
    return keep, lambda: result


def test_a_store_to_the_frames_free_variable_is_replayed_into_its_cell():
    keep, read = _store_maker()
    assert _breaks_and_fallbacks(keep, torch.ones(2)) == (0, [])
    keep, read = _store_maker()
    x = torch.randn(3)
    assert tjc.compile(keep, backend="eager")(x) is None
    torch.testing.assert_close(read(), x * 2 + 1)


def _counter_maker():
    total = 0.5
    scale = torch.ones(2)

    def bump():
        nonlocal total, scale
        before = scale + 1
        total += 1
        scale = scale * 3
        return total, scale, before

    def outer():
        return bump()     # `bump` read from outer's closure, inlined: its cells are real cells
    return outer, lambda: (total, scale)


def test_a_store_to_an_inlined_functions_cell_is_replayed_into_that_cell():
    outer, read = _counter_maker()
    assert _breaks_and_fallbacks(outer) == (0, [])
    outer, read = _counter_maker()
    eager_outer, eager_read = _counter_maker()
    compiled = tjc.compile(outer, backend="eager")
    for _ in range(3):
        got, want = compiled(), eager_outer()
        assert got[0] == want[0]
        torch.testing.assert_close(got[1], want[1])
        torch.testing.assert_close(got[2], want[2])
    assert read()[0] == eager_read()[0] == 3.5
    torch.testing.assert_close(read()[1], eager_read()[1])


def _sharing_maker():
    x = torch.zeros(2)

    def step():
        nonlocal x
        x = x + 1

    def root(h, t):
        h()
        return t + x      # eager: sees h's store when h closes over this very cell
    return root, step


def _pair_maker(shared):
    n = torch.zeros(1)
    m = torch.zeros(1)

    def put():
        nonlocal n
        n = n + 5

    def get_own():
        return n

    def get_other():
        return m
    return put, (get_own if shared else get_other)


def test_two_paths_to_one_cell_are_pinned_by_identity():
    def use(put, get, t):
        put()
        return get() + t
    compiled = tjc.compile(use, backend=CompileCounter())
    t = torch.ones(1)
    for shared in (True, False, True):
        mine, eager = _pair_maker(shared), _pair_maker(shared)
        torch.testing.assert_close(compiled(*mine, t), use(*eager, t))


def test_a_function_whose_cell_the_trace_stored_to_is_freed():
    keep, read = _store_maker()
    compiled = tjc.compile(keep, backend="eager")
    compiled(torch.ones(2))
    ref = weakref.ref(keep)
    del keep, read, compiled
    assert ref() is None


def _shadowing_maker():
    x = torch.zeros(1)
    y = x

    def inner_scope():
        x = y            # another cell of the same name

        def put(v):
            nonlocal x
            x = v
        return put, lambda: x
    put, get = inner_scope()

    def root(t):
        put(t * 2)       # inner_scope's x
        return t + x     # the maker's x: eager reads the other cell
    return root, get


def test_a_store_to_a_cell_named_like_a_free_variable_of_the_frame_leaves_the_frames_cell():
    root, get = _shadowing_maker()
    eager_root, eager_get = _shadowing_maker()
    compiled = tjc.compile(root, backend="eager")
    t = torch.ones(1)
    for _ in range(2):
        torch.testing.assert_close(compiled(t), eager_root(t))
        torch.testing.assert_close(get(), eager_get())


# -- the frame's own free variables as cells with a source (cell(C['name'])) ---------------------------

def _generator_maker():
    """A frame reading its free variable `n` after a generator it reads from its closure, which
    closes over that very cell, stored to it (set.isdisjoint stops the generator early)."""
    n = 0

    def reset():
        nonlocal n
        n = 0

    def numbers():
        nonlocal n
        n += 1
        yield 1
        n += 2
        yield 2
        n += 3
        yield 3

    def fn(x):
        nonlocal n  # noqa: F824 - the frame reads the cell numbers() writes
        {2, 4, 5}.isdisjoint(numbers())
        return x.sin() if n == 3 else x.cos() + n
    return fn, lambda: n, reset


def test_a_generator_from_the_closure_stores_to_the_frames_free_variable_in_one_graph():
    """The frame's cell and the generator's `__closure__[0]` are pinned as one cell (ALIAS_OF of
    cell(C['n']) and C['numbers'].__closure__[0]), so the generator's stores are what the frame
    reads, in one graph, and are replayed into the cell. Before: a break at the store ("two paths
    whose identity no guard can pin")."""
    fn, read, _ = _generator_maker()
    assert _breaks_and_fallbacks(fn, torch.ones(2)) == (0, [])
    (fn, read, reset), (eager_fn, eager_read, eager_reset) = _generator_maker(), _generator_maker()
    compiled, counter = _compiled(fn)
    before = tjc.stats()["fallbacks"]
    x = torch.randn(3)
    for _ in range(3):
        reset(), eager_reset()
        torch.testing.assert_close(compiled(x), eager_fn(x))
        assert read() == eager_read() == 3
    torch.testing.assert_close(compiled(x), eager_fn(x))   # from n == 3: 6, the other branch
    assert read() == eager_read() == 6
    _no_fallback(before)
    assert counter.frame_count == 2   # n == 0 (hit twice), n == 3


def test_a_function_passed_in_over_the_frames_cell_or_another_is_told_apart():
    """`root(h, t)` where h stores to a cell named like root's free variable `x`: h over root's
    own cell and h over another call's cell are different entries (the ALIAS_OF guard fails on the
    other), each whole and equal to eager. Before: h ran as a frame of its own (two graphs)."""
    root, own_step = _sharing_maker()
    rep = tjc.explain(root)(own_step, torch.ones(2))
    assert (rep.graph_count, rep.graph_break_count, rep.fallbacks) == (1, 0, [])
    root, own_step = _sharing_maker()
    _, other_step = _sharing_maker()
    eager_root, eager_own = _sharing_maker()
    _, eager_other = _sharing_maker()
    compiled, counter = _compiled(root)
    before = tjc.stats()
    t = torch.ones(2)
    for mine, eager in ((own_step, eager_own), (other_step, eager_other), (own_step, eager_own),
                        (other_step, eager_other)):
        torch.testing.assert_close(compiled(mine, t), eager_root(eager, t))
    assert tjc.stats()["graph_breaks"] == before["graph_breaks"]
    _no_fallback(before["fallbacks"])
    assert counter.frame_count == 2   # own cell, other cell; then each hits


def test_a_store_to_another_cell_of_the_same_name_is_pinned_distinct():
    """inner_scope's `x` and root's own `x` are distinct cells (DISTINCT_FROM of their sources):
    the store through put() is traced and replayed, root reads its own cell, in one graph."""
    root, get = _shadowing_maker()
    assert _breaks_and_fallbacks(root, torch.ones(1)) == (0, [])


def _reader_maker():
    c = 0

    def reader(x):
        return x - c

    def fn(x):
        nonlocal c
        c = 1
        return reader(x)   # reader closes over fn's own cell c: it reads the store
    return fn, lambda: c


def test_a_function_from_the_closure_reads_the_frames_store_to_their_shared_cell():
    fn, read = _reader_maker()
    assert _breaks_and_fallbacks(fn, torch.ones(2)) == (0, [])
    (fn, read), (eager_fn, eager_read) = _reader_maker(), _reader_maker()
    compiled, _ = _compiled(fn)
    x = torch.randn(2)
    torch.testing.assert_close(compiled(x), eager_fn(x))
    assert read() == eager_read() == 1


def test_a_frame_pinned_to_its_cells_keeps_nothing_alive():
    fn, read, reset = _generator_maker()
    compiled = tjc.compile(fn, backend="eager")
    compiled(torch.ones(2))
    ref = weakref.ref(fn)
    del fn, read, reset, compiled
    assert ref() is None
