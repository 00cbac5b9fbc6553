"""Calling a class whose metaclass is not `type` (tracer/variables/python_objects/new_object.py,
UserClassVariable._call_through_metaclass) and an Enum lookup next to a class's own `_missing_`
(classes.py): each traced whole and compared with eager.

- a metaclass that leaves calls to type.__call__ (it only adds `__instancecheck__`, or class-level
  hooks) builds its instances as a plain class does, and __init__ runs only on what __new__
  returned if that is an instance of the class by type, whatever the metaclass's own check says;
- a metaclass's own `__call__` written in Python is inlined, bound to the class;
- one that is no descriptor (TypedDict's metaclass: `__call__ = dict`) is called with the
  arguments alone, so calling a TypedDict makes a plain dict;
- an Enum with a `_missing_` of its own: a value the class maps is a member, without `_missing_`.
"""
import enum
import gc
import typing
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class CheckingMeta(type):
    """Answers isinstance by a tag, not by type: type.__call__ must not ask it."""

    def __instancecheck__(cls, obj):
        return getattr(obj, "label", None) == "swapped"


class Plain:
    def __init__(self, label="plain"):
        self.label = label
        self.inits = getattr(self, "inits", 0) + 1


class Swapping(Plain, metaclass=CheckingMeta):
    def __new__(cls):
        return Plain("swapped")        # not a Swapping: type.__call__ skips Swapping.__init__


class Counted(metaclass=CheckingMeta):
    def __init__(self, scale):
        self.scale = scale


def _swap(x):
    obj = Swapping()
    return x * obj.inits, obj.label, type(obj) is Plain


def test_a_metaclass_without_its_own_call_builds_as_type_does():
    x = torch.randn(3)
    calls = CompiledCalls(_swap)
    got, want = calls(x), _swap(x)
    assert same(got, want) and got[1] == "swapped"
    calls.check(graphs=1)


def _counted(x, s):
    c = Counted(s)
    return x * c.scale, c


def test_instances_of_a_metaclass_class_are_rebuilt_and_guarded_on_their_arguments():
    x = torch.randn(4)
    calls = CompiledCalls(_counted)
    for s in (2.0, 3.0):   # the argument read in the trace: another value compiles again
        got, want = calls(x, s), _counted(x, s)
        assert same(got[0], want[0])
        assert type(got[1]) is Counted and vars(got[1]) == vars(want[1])
    calls.check(graphs=2)


class Registry(type):
    """A metaclass whose own __call__ counts the instances it makes."""

    def __call__(cls, *args, **kwargs):
        obj = cls.__new__(cls)
        obj.__init__(*args, **kwargs)
        obj.serial = cls.offset + len(args)
        return obj


class Registered(metaclass=Registry):
    offset = 10

    def __init__(self, a, b=1):
        self.total = a + b


def _registered(x):
    r = Registered(2, b=5)
    return x + r.total + r.serial


def test_a_python_call_on_the_metaclass_is_inlined_bound_to_the_class():
    x = torch.randn(3)
    calls = CompiledCalls(_registered)
    assert same(calls(x), _registered(x))
    calls.check(graphs=1)
    Registered.offset = 20   # read by the traced __call__: guarded
    assert same(calls(x), _registered(x))


class Point(typing.TypedDict):
    kind: str
    data: torch.Tensor


def _typed_dict(x, y):
    p = Point(kind="p", data=y)
    out = x * p["data"]
    p["data"] = 3
    return out * p["data"], p, type(p) is dict


def test_calling_a_typed_dict_makes_a_plain_dict():
    x, y = torch.randn(4), torch.randn(4)
    calls = CompiledCalls(_typed_dict)
    got, want = calls(x, y), _typed_dict(x, y)
    assert same(got, want) and type(got[1]) is dict and got[2] is True
    calls.check(graphs=1)


def _typed_dict_extra(x, y):
    return x * Point(data=y, total=False)["data"], sorted(Point(data=y, total=False))


def test_a_typed_dict_keeps_any_keyword_as_dict_does():
    x, y = torch.randn(4), torch.randn(4)
    calls = CompiledCalls(_typed_dict_extra)
    assert same(calls(x, y), _typed_dict_extra(x, y))
    calls.check(graphs=1)


class Mode(str, enum.Enum):
    @classmethod
    def _missing_(cls, value):
        return cls.FAST if value == "quick" else None


class Speed(Mode):
    FAST = "fast"
    SLOW = "slow"


def _lookup(x, name):
    m = Speed(name)
    return torch.sin(x) if m == Speed.FAST else torch.cos(x)


def test_an_enum_with_its_own_missing_looks_a_mapped_value_up():
    x = torch.randn(3)
    calls = CompiledCalls(_lookup)
    for name in ("fast", "slow", "fast"):
        assert same(calls(x, name), _lookup(x, name))
    calls.check(graphs=2)


def test_an_enum_value_only_missing_knows_is_left_to_eager():
    x = torch.randn(3)
    compiled = tjc.compile(_lookup)
    assert same(compiled(x, "quick"), _lookup(x, "quick"))   # _missing_ maps it: runs as written
    with pytest.raises(ValueError):
        compiled(x, "nothing")


def test_classes_called_through_a_metaclass_are_not_held_by_the_cache():
    def make():
        class Meta(type):
            def __call__(cls, v):
                obj = cls.__new__(cls)
                obj.v = v * 2
                return obj

        class Local(metaclass=Meta):
            pass
        return Local

    cls = make()

    def fn(x, c):
        return x * c(3).v

    x = torch.randn(2)
    compiled = tjc.compile(fn)
    assert same(compiled(x, cls), fn(x, cls))
    ref = weakref.ref(cls)
    del cls
    gc.collect()   # the class statement's own cycles (its __dict__ and __mro__) need the collector
    assert ref() is None


class Stamping(type):
    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)   # type.__call__: __new__, then __init__
        obj.stamp = cls.__name__
        return obj


class Stamped(metaclass=Stamping):
    def __init__(self, v):
        self.v = v


def _stamped(x):
    s = Stamped(4)
    return x * s.v, s.stamp, s


def test_super_call_in_a_metaclass_call_builds_as_type_does():
    x = torch.randn(3)
    calls = CompiledCalls(_stamped)
    got, want = calls(x), _stamped(x)
    assert same(got[:2], want[:2]) and type(got[2]) is Stamped and vars(got[2]) == vars(want[2])
    calls.check(graphs=1)


class Singleton(type):
    instances = {}

    def __call__(cls, *args):
        if cls not in cls.instances:
            cls.instances[cls] = super().__call__(*args)
        return cls.instances[cls]


class Only(metaclass=Singleton):
    def __init__(self, v):
        self.v = v


def _only(x, v):
    return x * Only(v).v, Only(v + 1)


def test_a_singleton_metaclass_keeps_one_instance_as_eager():
    x = torch.randn(3)
    compiled = tjc.compile(_only)
    got = compiled(x, 2)
    made = Singleton.instances[Only]
    want = _only(x, 5)   # the instance made first stays, in both
    assert same(got[0], x * 2) and got[1] is made and want[1] is made and made.v == 2
    assert same(compiled(x, 7)[0], want[0])
    Singleton.instances.clear()
