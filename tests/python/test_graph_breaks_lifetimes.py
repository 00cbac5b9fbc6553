"""Objects a frame lets go of are freed when eager frees them, across graph breaks.

A resume function receives the locals live at a break as its arguments. Its transformed code reads
them into the graph and the next break's temporaries; the frame's own argument slots must not keep
what the traced code rebound or deleted (`obj = None`, `del obj`) alive through the next break
instruction and the rest of the call (graph_break/emit.py unbinds them; the runtime hands the
arguments to the frame without keeping references of its own). Every test compares with eager:
what the function sees about the object's lifetime (a finalizer's log, a weak reference) at the
break after it let go of it, and after the call.
"""
import gc
import io
import contextlib
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

pytestmark = pytest.mark.torch

FREED = []


class Tracked:
    """Logs its own end in FREED."""

    def __init__(self, name, scale=1.0):
        self.name, self.scale = name, scale

    def __del__(self):
        FREED.append(self.name)


def _run(fn, *make_args):
    """fn's result and FREED after the call, eagerly and compiled, each on fresh arguments."""
    out = []
    for run in (fn, tjc.compile(fn, backend="eager")):
        FREED.clear()
        with contextlib.redirect_stdout(io.StringIO()):
            result = run(*[make() for make in make_args])
        out.append((result, list(FREED)))
    FREED.clear()
    return out


def _rebound_after_a_break(x, items):
    obj = items.pop()          # the frame's only reference
    y = x + 1
    print("break 1")           # the resume function gets `obj` as an argument
    y = y * obj.scale
    obj = None
    print("break 2")           # eager has freed it: the finalizer ran before this line
    return y, list(FREED)


def _deleted_after_a_break(x, items):
    obj = items.pop()
    print("break 1")
    y = x * obj.scale
    del obj
    print("break 2")
    return y, len(FREED)


def test_a_local_rebound_after_a_break_is_freed_before_the_next_break():
    (eager, eager_freed), (got, got_freed) = _run(_rebound_after_a_break, lambda: torch.ones(3),
                                                  lambda: [Tracked("a", 2.0)])
    assert eager[1] == ["a"]
    assert got[1] == eager[1] and got_freed == eager_freed
    torch.testing.assert_close(got[0], eager[0])


def test_a_local_deleted_after_a_break_is_freed_before_the_next_break():
    (eager, _), (got, _) = _run(_deleted_after_a_break, lambda: torch.ones(3), lambda: [Tracked("b", 3.0)])
    assert eager[1] == 1 and got[1] == eager[1]
    torch.testing.assert_close(got[0], eager[0])


def _weak_reference_dies(x, items):
    obj = items.pop()
    ref = weakref.ref(obj)
    y = x + 1
    print("break 1")
    y = y + obj.scale
    obj = None
    gc.collect()               # the break instruction itself: the object is already gone in eager
    return y, ref() is None


def test_a_weak_reference_sees_the_object_die_as_in_eager():
    (eager, _), (got, _) = _run(_weak_reference_dies, lambda: torch.ones(2), lambda: [Tracked("c")])
    assert eager[1] is True and got[1] is True
    torch.testing.assert_close(got[0], eager[0])


def _tensor_dropped(x, refs):
    h = x * 2
    print("break 1")
    refs.append(weakref.ref(h))
    h = h + 1                  # the old `h` has no other reference
    print("break 2")
    return h, refs[0]() is None


def test_an_intermediate_tensor_is_freed_when_rebound_after_a_break():
    eager = _tensor_dropped(torch.ones(4), [])
    with contextlib.redirect_stdout(io.StringIO()):
        got = tjc.compile(_tensor_dropped, backend="eager")(torch.ones(4), [])
    assert eager[1] is True and got[1] is True
    torch.testing.assert_close(got[0], eager[0])


def _cell_argument(x, items):
    obj = items.pop()

    def scale():
        return obj.scale

    print("break 1")           # `obj` is a cell of this frame, shared with `scale`
    y = x * scale()
    print("break 2")
    return y + scale(), list(FREED)


def test_a_cell_shared_with_a_closure_keeps_its_value_across_breaks():
    (eager, eager_freed), (got, got_freed) = _run(_cell_argument, lambda: torch.ones(2),
                                                  lambda: [Tracked("d", 4.0)])
    assert got[1] == eager[1] == [] and got_freed == eager_freed == ["d"]
    torch.testing.assert_close(got[0], eager[0])


def _argument_read_after_breaks(x, scale):
    y = x + scale
    print("break 1")
    y = y * scale
    print("break 2")
    return y + x


def test_arguments_still_read_after_the_breaks_are_passed_on_and_guarded():
    compiled = tjc.compile(_argument_read_after_breaks, backend="eager")
    for scale in (2.0, 2.0, 3.0):
        with contextlib.redirect_stdout(io.StringIO()):
            got = compiled(torch.ones(3), scale)
        torch.testing.assert_close(got, _argument_read_after_breaks(torch.ones(3), scale))


def test_a_compiled_call_leaves_no_reference_to_its_arguments():
    compiled = tjc.compile(_rebound_after_a_break, backend="eager")
    x = torch.ones(3)
    ref = weakref.ref(x)
    with contextlib.redirect_stdout(io.StringIO()):
        compiled(x, [Tracked("e")])
    FREED.clear()
    del x
    assert ref() is None


def _dead_after_the_break(x, items, out):
    obj = items.pop()
    print("break 1")
    y = x * obj.scale
    print(FREED, file=out)         # a break: `obj` is still bound in eager while it runs
    obj = None
    return y


def test_an_argument_dead_after_a_break_stays_bound_while_the_break_instruction_runs():
    outs = []
    for run in (_dead_after_the_break, tjc.compile(_dead_after_the_break, backend="eager")):
        FREED.clear()
        out = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()):
            run(torch.ones(2), [Tracked("f", 2.0)], out)
        outs.append((out.getvalue(), list(FREED)))
    FREED.clear()
    assert outs[0] == ("[]\n", ["f"]) and outs[1] == outs[0]


def _deleted_before_the_break(x, items):
    obj = items.pop()
    obj.me = obj                   # a cycle: only the collector frees it
    print("break 1")               # the resume function gets `obj` as an argument
    y = x * obj.scale
    del obj
    gc.collect()                   # a break: eager's frame no longer holds `obj` while it runs
    return y, list(FREED)


def test_an_argument_deleted_before_a_break_is_not_held_while_the_break_instruction_runs():
    (eager, _), (got, _) = _run(_deleted_before_the_break, lambda: torch.ones(2), lambda: [Tracked("g", 5.0)])
    assert eager[1] == ["g"] and got[1] == eager[1]
    torch.testing.assert_close(got[0], eager[0])


class _Holder:
    def __init__(self):
        self.func = len


def _reached_through_a_proxy(x):
    obj = _Holder()
    proxy = weakref.proxy(obj)
    print("break 1")               # `obj` is not read again, only stored: eager still holds it
    found = proxy.func
    obj = None
    gc.collect()
    try:
        getattr(proxy, "func")
        return "alive", found, x + 1
    except ReferenceError:
        return "dead", found, x + 1


def test_a_local_not_read_again_lives_until_it_is_stored_again():
    """A local the code never reads after a break, but stores again later, goes to the resume
    function all the same: until that store, a weak proxy to its object still reaches it."""
    eager = _reached_through_a_proxy(torch.ones(2))
    with contextlib.redirect_stdout(io.StringIO()):
        got = tjc.compile(_reached_through_a_proxy, backend="eager")(torch.ones(2))
    assert eager[:2] == ("dead", len) and got[:2] == eager[:2]
    torch.testing.assert_close(got[2], eager[2])
