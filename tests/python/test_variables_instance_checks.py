"""isinstance / issubclass / type() in a compiled function answer as eager (instance_checks.py):
a table of torch's C types (storages, Size, dtype, device, finfo, iinfo, Generator, Stream, layout,
memory_format, Tensor, Parameter, Buffer, Variable) against values of each, read from the frame and
made in it; metaclasses with their own __instancecheck__ (traced, guarded on what they read);
tuples, unions and ABCs.
"""
import abc
import collections.abc
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch.autograd import Variable  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches"),
              pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")]

VALUES = {
    "bool_storage": lambda: torch.BoolStorage.from_buffer(b"\x01\x00", "big"),
    "float_storage": lambda: torch.FloatStorage(2),
    "untyped_storage": lambda: torch.ones(2).untyped_storage(),
    "size": lambda: torch.Size([2, 3]),
    "dtype": lambda: torch.float32,
    "device": lambda: torch.device("cpu"),
    "finfo": lambda: torch.finfo(torch.float32),
    "iinfo": lambda: torch.iinfo(torch.int32),
    "generator": lambda: torch.Generator(),
    "stream": lambda: torch.Stream("cpu"),
    "layout": lambda: torch.strided,
    "memory_format": lambda: torch.contiguous_format,
    "tensor": lambda: torch.ones(2),
    "parameter": lambda: torch.nn.Parameter(torch.ones(2)),
    "int": lambda: 3,
}
CLASSES = (torch.TypedStorage, torch.UntypedStorage, torch.BoolStorage, torch.FloatStorage, torch.Size, tuple,
           torch.dtype, torch.device, torch.finfo, torch.iinfo, torch.Generator, torch.Stream, torch.layout,
           torch.memory_format, torch.Tensor, torch.nn.Parameter, torch.nn.Buffer, Variable, object,
           collections.abc.Sequence, collections.abc.Hashable, (int, torch.dtype), int | torch.device)
# Values whose check reads what the tracer does not model (a TypedStorage's device, whose read
# warns): one graph break, at the isinstance call, which then runs as written.
BREAKS = {"bool_storage": 1, "float_storage": 1}


def _answers(v):
    return (tuple(isinstance(v, c) for c in CLASSES), type(v),
            tuple(issubclass(type(v), c) for c in CLASSES))


def _checks(x, v):
    return x + 1, _answers(v)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_type_answers_of_a_value_read_from_the_frame(name):
    v = VALUES[name]()
    expected = _answers(v)
    report = tjc.explain(_checks)(torch.ones(1), v)
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, BREAKS.get(name, 0), [])
    for _ in range(2):
        assert tjc.compile(_checks)(torch.ones(1), v)[1] == expected


def _made_in_frame(x):
    values = (x.shape, x.dtype, x.device, torch.finfo(x.dtype), torch.iinfo(torch.int8), x.layout,
              torch.contiguous_format, x, x.untyped_storage(), x.size(), torch.device("cpu"))
    return x * 2, tuple(_answers(v) for v in values)


def test_type_answers_of_values_made_in_the_frame():
    x = torch.ones(2, 3)
    expected = _made_in_frame(x)
    got = tjc.compile(_made_in_frame)(x)
    assert got[1] == expected[1]
    torch.testing.assert_close(got[0], expected[0])


def _storage_program(x):
    f = bytearray([0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x10, 0x40])
    bools = torch.BoolStorage.from_buffer(f, "big")
    assert isinstance(bools, torch.BoolStorage)
    return x + 1, isinstance(bools, torch.FloatStorage), bools.tolist()


def test_storage_from_buffer_isinstance_as_eager():
    # Was: AssertionError in the compiled call (BoolStorage's metaclass decides from the storage's
    # dtype, not from its type, TypedStorage).
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _storage_program(x)
        got = tjc.compile(_storage_program)(x)
    assert got[1:] == expected[1:]
    torch.testing.assert_close(got[0], expected[0])


class _ByFlag(type):
    def __instancecheck__(cls, obj):
        return getattr(obj, "flag", False)


class Flagged(metaclass=_ByFlag):
    pass


class _Narrowing(type):
    def __instancecheck__(cls, obj):
        return super().__instancecheck__(obj) and obj.kind == "ok"


class Narrow(metaclass=_Narrowing):
    def __init__(self, kind):
        self.kind = kind


class Thing:
    def __init__(self, flag):
        self.flag = flag


def test_a_metaclass_check_reading_the_object_is_traced_and_guarded():
    def f(x, obj):
        return x + 1 if isinstance(obj, Flagged) else x - 1

    compiled = tjc.compile(f)
    thing = Thing(True)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x, thing), f(x, thing))
    thing.flag = False   # what the check read changes: the guard fails, and the answer with it
    torch.testing.assert_close(compiled(x, thing), f(x, thing))
    report = tjc.explain(f)(x, thing)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_super_instancecheck_in_a_metaclass():
    def f(x, obj):
        return x + 1 if isinstance(obj, Narrow) else x - 1

    compiled = tjc.compile(f)
    x = torch.ones(2)
    for obj in (Narrow("ok"), Narrow("no"), Thing(True)):
        torch.testing.assert_close(compiled(x, obj), f(x, obj))
    assert tjc.explain(f)(x, Narrow("ok")).graph_break_count == 0


def test_user_object_freed_after_a_traced_instance_check():
    def f(x, obj):
        return x + 1 if isinstance(obj, Flagged) else x - 1

    compiled = tjc.compile(f)
    thing = Thing(True)
    compiled(torch.ones(2), thing)
    ref = weakref.ref(thing)
    del thing
    assert ref() is None


class Base(abc.ABC):
    @abc.abstractmethod
    def go(self):
        ...


class Registered:
    pass


Base.register(Registered)


def test_abc_registry_and_tuples():
    def f(x, a, b):
        return x, (isinstance(a, Base), isinstance(b, (int, Base)), issubclass(type(a), Base),
                   isinstance(b, int | str), issubclass(Registered, (str, collections.abc.Hashable)))

    for a, b in ((Registered(), 3), (object(), "s"), (Registered(), 2.5)):
        assert tjc.compile(f)(torch.ones(1), a, b)[1] == f(torch.ones(1), a, b)[1]


class _Real:
    pass


class _Pretender:
    @property
    def __class__(self):
        return _Real


def test_an_object_that_answers_its_own_class():
    def f(x, obj):
        return x + 1, isinstance(obj, _Real), isinstance(obj, _Pretender)

    x = torch.ones(1)
    for obj in (_Pretender(), _Real()):
        assert tjc.compile(f)(x, obj)[1:] == f(x, obj)[1:]


class Interface:
    """No class: an object whose type answers isinstance / issubclass from what it holds."""

    def __init__(self, *names):
        self.names = names

    def __instancecheck__(self, obj):
        return all(hasattr(type(obj), n) for n in self.names)

    def __subclasscheck__(self, cls):
        return all(hasattr(cls, n) for n in self.names)


SIZED_ITERABLE = Interface("__len__", "__iter__")


def _typing_checks(x, m):
    import typing
    return x + 1, (isinstance(m, typing.Mapping), isinstance(m, (typing.Sequence, float)),
                   issubclass(type(m), typing.MutableMapping), isinstance(m, SIZED_ITERABLE),
                   issubclass(type(m), (int, SIZED_ITERABLE)))


def test_an_object_with_its_own_instancecheck_is_traced():
    # typing's unsubscripted aliases (typing.Mapping) are such objects; so is a user's
    x = torch.ones(1)
    for m in ({"a": 1}, [1, 2], (3,), 4.5, 7):
        assert tjc.compile(_typing_checks)(x, m)[1] == _typing_checks(x, m)[1]
    report = tjc.explain(_typing_checks)(x, {"a": 1})
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_what_such_an_object_reads_is_guarded():
    def f(x, m):
        return x + 1 if isinstance(m, SIZED_ITERABLE) else x - 1

    compiled = tjc.compile(f)
    x = torch.ones(1)
    torch.testing.assert_close(compiled(x, [1]), f(x, [1]))
    SIZED_ITERABLE.names = ("__len__", "__iter__", "missing")
    try:
        torch.testing.assert_close(compiled(x, [1]), f(x, [1]))
    finally:
        SIZED_ITERABLE.names = ("__len__", "__iter__")


def test_an_object_without_a_python_check_raises_as_eager():
    def f(x):
        return isinstance(x, object())

    with pytest.raises(TypeError):
        tjc.compile(f)(torch.ones(1))
