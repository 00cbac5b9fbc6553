"""Objects of classes the tracer has no model for, read through their source (open_object.py):
a dataclasses.Field in a closure (huggingface_hub's strict-dataclass validators), a torch.finfo in
a global, a `__slots__` class, C objects' attributes; and functions' `__class__` (torchvision's
`_log_api_usage_once(stochastic_depth)`). Each compared with eager, with 0 breaks where
torch.compile has none, guarded by what was read."""
import dataclasses
import io
import types
import typing
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from torch_jit_cache.testing.stochastic_depth import log_api_usage_once  # noqa: E402

from context_helpers import check_graphs_and_breaks  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


@dataclasses.dataclass
class _Config:
    hidden: int = 4
    tags: list = dataclasses.field(default_factory=list)   # default: dataclasses.MISSING


def _validator_for(field):
    def validator(x):          # huggingface_hub's shape: the Field held in a closure cell
        return x * len(field.name) + (field.default if field.default is not dataclasses.MISSING else 0)
    return validator


def _check_each_change_recompiles(fn, changes):
    """Each change to what the trace read compiles again and matches eager; nothing else does."""
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), fn(x))
    for change in changes:
        change()
        torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 1 + len(changes)
    compiled(x)
    assert cnt.frame_count == 1 + len(changes)


def test_a_field_read_through_a_closure_is_traced_whole():
    hidden, tags = dataclasses.fields(_Config)
    check_graphs_and_breaks(_validator_for(hidden), torch.randn(3), graphs=1, breaks=0)
    check_graphs_and_breaks(_validator_for(tags), torch.randn(3), graphs=1, breaks=0)


def test_what_was_read_from_a_field_is_guarded():
    @dataclasses.dataclass
    class Local:
        a: int = 2
        bb: int = 3
    f = dataclasses.fields(Local)[0]
    validator = _validator_for(f)
    _check_each_change_recompiles(validator, [lambda: setattr(f, "default", 7),   # as eager sees it
                                              lambda: setattr(f, "name", "longer")])


class _Slotted:
    __slots__ = ("scale", "__weakref__")

    def __init__(self, scale):
        self.scale = scale

    def apply(self, x):
        return x * self.scale


def test_a_slotted_object_and_its_python_methods_are_traced():
    def fn(x, obj):
        return obj.apply(x.cos()) + 1
    check_graphs_and_breaks(fn, torch.randn(3), _Slotted(2.0), graphs=1, breaks=0)
    compiled = tjc.compile(fn, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x, _Slotted(5.0)), fn(x, _Slotted(5.0)))


def test_a_slotted_object_is_freed_after_a_compiled_call():
    def fn(x, obj):
        return obj.apply(x)
    compiled = tjc.compile(fn, backend="eager")
    obj = _Slotted(3.0)
    compiled(torch.randn(2), obj)
    probe = weakref.ref(obj)
    del obj
    assert probe() is None


_FI = torch.finfo(torch.float32)
_II = torch.iinfo(torch.int8)


def test_finfo_and_iinfo_attributes_read_from_globals():
    def fn(x):
        return x.clamp(min=_FI.min, max=_FI.max) * _FI.eps + _II.max + _FI.bits
    check_graphs_and_breaks(fn, torch.randn(3), graphs=1, breaks=0)


def test_function_attributes_and_class_as_torchvision_logs_them():
    # torchvision.ops.stochastic_depth calls _log_api_usage_once(stochastic_depth) each forward.
    def stochastic_depth(x, p, training=True):
        log_api_usage_once(stochastic_depth)
        if not training or p == 0.0:
            return x
        return x * (1.0 - p)

    def fn(x):
        return stochastic_depth(x.cos(), 0.25) + (stochastic_depth.__class__ is types.FunctionType)
    check_graphs_and_breaks(fn, torch.randn(3), graphs=1, breaks=0)


def test_typing_helpers_are_not_taken_for_torch_functions():
    # torch's namespace imports typing.get_origin; calling it is typing's code, not a torch op.
    def fn(x, tp):
        return x + (typing.get_origin(tp) is None) + len(typing.get_args(tp))
    check_graphs_and_breaks(fn, torch.randn(3), int, graphs=1, breaks=0)


def test_c_methods_and_unlisted_getsets_still_break_and_match_eager():
    import array
    import re

    def fn(x, arr, pattern):
        y = x + arr.count(1)                    # a C method: the break is at the call
        return y * (pattern.pattern == "a+")    # re.Pattern.pattern: a member, read
    check_graphs_and_breaks(fn, torch.randn(3), array.array("i", [1, 1]), re.compile("a+"), graphs=1, breaks=1)

    def closed(x, f):
        return x + (f.closed is False)          # a getset of io.StringIO: not in the pure table
    check_graphs_and_breaks(closed, torch.randn(3), io.StringIO(), graphs=1, breaks=1)


class _Sentinel:
    pass


_MISSING = _Sentinel()


class _Holder:
    def __init__(self, default):
        self.default = default


def test_identity_with_a_sentinel_is_decided_and_pinned():
    # `field.default is MISSING` (dataclasses, huggingface_hub's validators): two objects of one
    # type, each pinned by identity; another type is apart by its type guard alone.
    def fn(x, holder):
        return x + (holder.default is _MISSING) * 2 + (holder.default is int) + (holder.default is not None)
    check_graphs_and_breaks(fn, torch.randn(3), _Holder(_MISSING), graphs=1, breaks=0)
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    x = torch.randn(3)
    for holder in (_Holder(_MISSING), _Holder(_Sentinel()), _Holder(_MISSING)):
        torch.testing.assert_close(compiled(x, holder), fn(x, holder))
    assert cnt.frame_count == 2


def test_c_types_with_the_generic_lookup_are_open():
    # types.UnionType (`int | None`, read by typing.get_args), slices and code objects set their
    # own tp_getattro to CPython's generic one: their members are read, guarded by value.
    def fn(x, tp, s, code):
        return x * len(typing.get_args(tp)) + (s.stop - s.start) + code.co_argcount
    check_graphs_and_breaks(fn, torch.randn(3), int | None, slice(1, 4), fn.__code__, graphs=1, breaks=0)
    compiled = tjc.compile(fn, backend="eager")
    x = torch.randn(3)
    for args in ((int | None, slice(1, 4)), (int | str | None, slice(0, 9))):
        torch.testing.assert_close(compiled(x, *args, fn.__code__), fn(x, *args, fn.__code__))

    def module_of(x, tp):
        return x + len(tp.__module__)           # read from the type by union_getattro: a break
    check_graphs_and_breaks(module_of, torch.randn(3), int | None, graphs=1, breaks=1)


# -- attributes of functions, methods, builtins and classes: C objects' attributes --------------

class _WithMethod:
    scale = 3

    def method(self, x):
        return x * self.scale


def _defaults(a, b=2, *, c=5):
    return a


def test_attributes_of_callables_and_classes_trace_whole():
    import math
    obj = _WithMethod()

    def fn(x):
        bound = obj.method
        names = (torch.Tensor.add.__name__, math.sqrt.__name__, len.__qualname__, bound.__name__,
                 _WithMethod.__module__, _WithMethod.__qualname__, _defaults.__qualname__)
        y = bound.__func__(bound.__self__, x) + sum(len(n) for n in names)
        y = y + _defaults.__defaults__[0] + _defaults.__kwdefaults__["c"]
        return y + len(_WithMethod.__mro__) + len(_WithMethod.__bases__) + (_WithMethod.__base__ is object)
    check_graphs_and_breaks(fn, torch.randn(3), graphs=1, breaks=0)


def test_what_is_read_from_a_function_or_class_is_guarded():
    def f(a, b=2):
        return a

    class K:
        pass

    def fn(x):
        return x * f.__defaults__[0] + len(K.__module__) + len(K.__mro__)
    _check_each_change_recompiles(fn, [lambda: setattr(f, "__defaults__", (7,)),
                                       lambda: setattr(K, "__module__", "a.much.longer.module")])


class _WithProperty:
    __slots__ = ("a",)

    @property
    def doubled(self):
        return 2


def test_descriptors_read_from_their_class_are_open_objects():
    # `Cls.prop` is the property itself, `Cls.slot` the member descriptor: their own members and
    # names read through the class's source.
    def fn(x):
        prop = _WithProperty.doubled
        return x + len(prop.fget.__name__) + (prop.fset is None) + len(_WithProperty.a.__name__)
    check_graphs_and_breaks(fn, torch.randn(3), graphs=1, breaks=0)


class _OwnIndexing(typing.NamedTuple):
    """A namedtuple whose class replaces tuple's indexing: read as the object it is."""
    scale: torch.Tensor
    shift: float

    def __getitem__(self, index):
        return "own"


def test_fields_of_a_namedtuple_with_its_own_protocol_are_read_through_the_object():
    def fn(t):
        return t.scale * 2 + t.shift, t[0], t._fields

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    for shift in (1.0, 2.0):   # the field's value is guarded: another value recompiles
        t = _OwnIndexing(torch.ones(2), shift)
        got, want = compiled(t), fn(t)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert cnt.frame_count == 2
    assert tjc.explain(fn)(_OwnIndexing(torch.ones(2), 3.0)).graph_break_count == 0
