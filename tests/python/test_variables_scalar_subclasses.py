"""tracer/variables/python_objects/scalar_subclasses.py: instances of a plain subclass of int, float, complex,
str or bytes built in the trace are constants of their class.

The contract: `Digits("12")` for `class Digits(int): pass`, called in the trace on constants, is
made while tracing by the class itself; what the frame does with it is Python's answer on the very
value (type, isinstance, operators, str), Python's error from the constructor is raised in the
trace (a `try` catches it), and the instance never leaves the trace (the frame then runs as
written, with eager's result). Compared with eager; a class that adds anything is not taken."""
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, compiled_like_eager  # noqa: E402


class Digits(int):
    pass


class Label(str):
    pass


class Ratio(float):
    pass


class Counted(int):
    def twice(self):
        return self * 2


def built_and_used(x):
    d, e = Digits("12"), Digits(" +12 ", 10)
    try:
        Digits("1" * (sys.get_int_max_str_digits() + 1))
    except ValueError as err:
        too_long = str(err)
    return (x * Ratio(0.5), d == e, -d, type(-d).__name__, type(d).__name__, str(d), isinstance(d, Digits),
            Label("ab").upper(), type(Label("a")) is Label, too_long, d + 1, Digits(7) in {7: 1})


def test_plain_scalar_subclasses_are_built_in_the_trace():
    compiled_like_eager(built_and_used, torch.ones(2))


def with_class(x, cls):
    return x + 1, type(cls("3")).__name__, cls("3") * 2


def test_the_class_read_from_the_frame_is_guarded():
    calls = CompiledCalls(with_class)
    for cls in (Digits, Label, Digits):
        got, expected = calls(torch.ones(2), cls), with_class(torch.ones(2), cls)
        assert got[1:] == expected[1:]
    calls.check(graphs=2, recompiles=1)


def returns_instance(x):
    return x + 1, Digits(5)


def test_an_instance_leaving_the_trace_runs_the_frame_as_written():
    got = tjc.compile(returns_instance, backend="eager")(torch.ones(2))
    assert type(got[1]) is Digits and got[1] == 5


def uses_a_method(x):
    return x + Counted(2).twice()


def test_a_subclass_that_adds_a_method_is_not_taken():
    rep = tjc.explain(uses_a_method)(torch.ones(2))
    assert rep.graph_break_count + len(rep.fallbacks) >= 1
    torch.testing.assert_close(tjc.compile(uses_a_method, backend="eager")(torch.ones(2)), uses_a_method(torch.ones(2)))


# -- a scalar subclass that adds its own __bool__ (ScalarObjectVariable) ----------------------------

class Switch(int):
    def __bool__(self):
        return self > 1   # a comparison on the value itself: breaks (int's own slot, not traced)


TOGGLED = []


class Toggle(int):
    def __bool__(self):
        TOGGLED.append(1)   # a side effect eager makes at each truth test
        return False


def truth_of_subclasses(x):
    class Itself(int):
        def __bool__(self):
            return self   # not a bool: TypeError

    class One(str):
        def __bool__(self):
            return 1      # not a bool either

    class Blocked(bytes):
        __bool__ = None   # Python calls None: TypeError

    out = []
    for make in (lambda: Itself(3), lambda: One("a"), lambda: Blocked(b"")):
        try:
            bool(make())
        except TypeError as e:
            out.append(str(e))
    t = Toggle(5)
    out.append(bool(t))
    out.append(not t)
    if t:
        out.append("true")
    return x + 1, out, len(TOGGLED)


def test_a_scalar_subclass_with_its_own_bool_is_built_and_its_truth_traced():
    TOGGLED.clear()
    expected = truth_of_subclasses(torch.ones(2))
    TOGGLED.clear()
    calls = CompiledCalls(truth_of_subclasses)
    got = calls(torch.ones(2))
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:]
    calls.check(graphs=1)
    got = calls(torch.ones(2))   # the cached code replays the appends eager makes
    assert got[2] == 2 * expected[2]


def leaves(x):
    return x + 1, Toggle(2)


def uses_its_value(x):
    s = Switch(2)
    return x + 1, bool(s)


def test_other_uses_of_it_break_and_match_eager():
    for fn in (leaves, uses_its_value):
        expected = fn(torch.ones(2))
        got = tjc.compile(fn, backend="eager")(torch.ones(2))
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1] and type(got[1]) is type(expected[1])
