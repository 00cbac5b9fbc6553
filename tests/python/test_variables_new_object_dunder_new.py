"""Classes with their own Python __new__ constructed in the trace (new_object.py): `cls(...)` runs
`cls.__new__(cls, ...)` traced, `object.__new__(cls)` and `super().__new__(cls)` inside it make the
new object, and __init__ runs only where __new__ returned an instance of the class, as calling a
class does in CPython. super().__init__() reaching object's __init__ is a no-op. Each case compares
with eager: outputs and the objects' state."""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, same_exactly, same_object  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class Scaled:
    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def run(self, x):
        return x * self.factor


class Shifted(Scaled):
    created = 0

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.shift = 1.5          # set before __init__, kept after it
        return obj

    def __init__(self, factor, shift_more=0.0):
        super(Shifted, self).__init__(factor)
        self.shift = self.shift + shift_more

    def run(self, x):
        return super().run(x) + self.shift


class Registry:
    """__new__ returns an object of another class: __init__ is not run."""
    def __new__(cls, factor):
        return Scaled(factor * 2)

    def __init__(self, factor):
        raise AssertionError("not called: __new__ returned no Registry")


def _build(x):
    a, b = Scaled(3), Shifted(2, shift_more=0.25)
    r = Registry(5)
    return a.run(x) + b.run(x) + r.run(x), a, b, r, type(r) is Scaled


def test_a_python_dunder_new_is_traced_and_init_runs_only_on_an_instance():
    x = torch.randn(3)
    calls = CompiledCalls(_build)
    for _ in range(2):
        got, want = calls(x), _build(x)
        same_exactly(got[0], want[0])
        for g, w in zip(got[1:4], want[1:4]):
            same_object(g, w)
        assert got[4] is True
    calls.check(graphs=1)
    assert calls.delta("compiles") == 1


class Counted:
    def __new__(cls, k):
        obj = super().__new__(cls)
        obj.k = k * cls.step      # a class attribute read in __new__: guarded
        return obj

    step = 2


def _counted(x):
    return x + Counted(3).k


def test_what_dunder_new_reads_from_the_class_is_guarded():
    x = torch.zeros(2)
    calls = CompiledCalls(_counted)
    same_exactly(calls(x), _counted(x))
    Counted.step = 5
    try:
        same_exactly(calls(x), _counted(x))
    finally:
        Counted.step = 2
    calls.check(graphs=2)


def _returns_object(x):
    s = Shifted(4)
    return s, x * s.factor


def test_an_object_made_by_dunder_new_is_rebuilt_without_running_it_again():
    x = torch.randn(2)
    calls = CompiledCalls(_returns_object)
    got, want = calls(x), _returns_object(x)
    same_object(got[0], want[0])
    same_exactly(got[1], want[1])
    ref = weakref.ref(got[0])
    del got
    assert ref() is None
    calls.check(graphs=1)


class Refusing:
    def __new__(cls, value):
        if value < 0:
            raise ValueError("negative")
        return super().__new__(cls)


def _refusing(x, v):
    try:
        Refusing(v)
    except ValueError:
        return x - 1
    return x + 1


def test_an_exception_raised_in_dunder_new_is_caught_as_eager():
    x = torch.zeros(2)
    calls = CompiledCalls(_refusing)
    for v in (1, -1):
        same_exactly(calls(x, v), _refusing(x, v))
    calls.check(graphs=2)


class Plain:
    def __init__(self, width):
        super().__init__()       # object.__init__: nothing to do
        self.width = width


def _plain(x):
    p = Plain(3)
    return p, x[: p.width]


def test_super_init_reaching_object_is_a_no_op():
    x = torch.arange(5.0)
    calls = CompiledCalls(_plain)
    got, want = calls(x), _plain(x)
    same_object(got[0], want[0])
    same_exactly(got[1], want[1])
    calls.check(graphs=1)
    assert calls.delta("compiles") == 1   # no break before the graph's first op


class Single:
    only = None

    def __new__(cls):
        if cls.only is None:
            cls.only = object.__new__(cls)
        return cls.only

    def __init__(self):
        self.calls = getattr(self, "calls", 0) + 1


class Number:
    def __new__(cls, k):
        return k * 2             # not a Number: __init__ is not run

    def __init__(self, k):
        raise AssertionError("not called")


def _single(x):
    s = Single()
    return x + s.calls + Number(3)


def test_a_dunder_new_returning_an_existing_instance_or_another_type_keeps_eager_behaviour():
    x = torch.zeros(2)
    calls = CompiledCalls(_single)
    Single.only = None
    want = [_single(x) for _ in range(3)]
    Single.only = None
    got = [calls(x) for _ in range(3)]
    for g, w in zip(got, want):
        same_exactly(g, w)
    assert Single.only.calls == 3
    Single.only = None


class Base:
    @classmethod
    def make(cls, k):
        obj = cls.__new__(cls)
        obj.k = k
        return obj


class Child(Base):
    @classmethod
    def make(cls, k):
        obj = super().make(k + 1)   # super() over a class: Base.make bound to Child
        obj.child = True
        return obj


def _made(x):
    c = Child.make(2)
    return c, x * c.k


def test_super_in_a_classmethod_binds_the_parent_classmethod_to_the_class():
    x = torch.ones(2)
    calls = CompiledCalls(_made)
    got, want = calls(x), _made(x)
    same_object(got[0], want[0])
    same_exactly(got[1], want[1])
    calls.check(graphs=1)
    assert calls.delta("compiles") == 1
