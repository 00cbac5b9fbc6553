"""Graph breaks in frames with closures and cells: a frame with free variables resumes with each
closure's own cells, zero-argument super() (the free variable __class__) breaks instead of falling
back, a frame's own cell variables are shared with the resume function (a store after the break
runs on the real cell), a nonlocal store is replayed into the real cell, a returned closure is made
over the frame's cell and sees its last value, a closure over an argument made after the break
is built from the argument's cell when the resume function runs as bytecode, and cells, resume
functions and closures are freed with the compiled function. Compared with eager: values and
the number of graphs and breaks."""
import contextlib
import io
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import graph_break  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import check_graphs_and_breaks  # noqa: E402

pytestmark = pytest.mark.torch


def _make_closure(w):
    def fn(x):
        a = x * w
        print("break")
        return a + w
    return fn


def test_a_frame_with_free_variables_breaks_and_each_closure_resumes_with_its_own_cells():
    f2, f3 = _make_closure(2.0), _make_closure(3.0)
    check_graphs_and_breaks(f2, torch.randn(3), graphs=2, breaks=1)
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
    check_graphs_and_breaks(m, torch.randn(3), graphs=2, breaks=breaks)
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


# In the resume function k is a free variable: the store to it is traced (replayed into the real
# cell), and `scale`, read from the frame and closing over that very cell (pinned: ALIAS_OF of
# cell(C['k']) and scale's __closure__[0]), is inlined and reads the store.
@pytest.mark.parametrize("fn, args, graphs, breaks", [(_captured_then_changed, (3,), 2, 1),
                                                      (_argument_cell, (3, 4), 2, 1)],
                         ids=["own_cell_written_after_the_break", "argument_cell"])
def test_a_frame_with_cell_variables_breaks_and_shares_its_cells(fn, args, graphs, breaks):
    # Before: the whole frame ran uncompiled (the resume function would need the frame's cells).
    # Now the resume function closes over the frame's own cells, and an inner function made
    # before the break is made again over those very cells.
    assert fn.__code__.co_cellvars
    x = torch.randn(*args[:1])
    before = tjc.stats()["fallbacks"]
    check_graphs_and_breaks(fn, x, *args[1:], graphs=graphs, breaks=breaks)
    assert tjc.stats()["fallbacks"] == before


def _make_counter():
    count = 0
    def step(x):
        nonlocal count
        count += 1
        return x * count
    return step, lambda: count


def test_a_nonlocal_store_to_a_free_variable_is_replayed_into_the_real_cell():
    # The cell is shared with the closure's other users (read() here): the store is traced and
    # replayed into the real cell after the graph (before: a break, the store running as bytecode;
    # before that, the whole frame ran uncompiled). The frame compiles once per value of count
    # (an int read from a cell is a constant of the graph).
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
    assert (cnt.frame_count, after["graph_breaks"] - before["graph_breaks"]) == (3, 0)
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


_CLOSURE_AFTER_THE_BREAK = '''
import torch
import torch_jit_cache as tjc

def f(x, n):
    y = x * 2
    print("break")
    def get():           # made after the break, over the argument n, which is a cell
        return n + 1
    return y, get()

x = torch.ones(2)
compiled = tjc.compile(f)
breaks = []
for n in (3, 4):   # the second: a new n, the closure made over its cell
    got, want = compiled(x, n), f(x, n)
    assert torch.equal(got[0], want[0]) and got[1] == want[1], (got, want)
    breaks.append(tjc.stats()["graph_breaks"])
print("RESULT", breaks[0])
'''


def test_a_closure_over_an_argument_made_after_the_break_runs_in_the_resume_function(tmp_path):
    # The resume function, with no tensor work of its own, runs as bytecode: it must build the
    # closure from the argument's cell (its free variable). On 3.13 it built it from an unbound
    # local and the process died (SIGSEGV), hence a separate process here.
    import os
    import pathlib
    import subprocess
    import sys

    path = tmp_path / "closure_after_break.py"
    path.write_text(_CLOSURE_AFTER_THE_BREAK)
    root = str(pathlib.Path(__file__).resolve().parents[2])
    env = dict(os.environ, TJC_DISABLE_DISK_CACHE="1",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "RESULT 1" in done.stdout, done.stdout + done.stderr[-2000:]
