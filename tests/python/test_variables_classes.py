"""tracer/variables/python_objects/classes.py through the public API: attributes read from a class.

The contract: a functools.cached_property read from its class is the descriptor itself (its
__get__ with no instance returns it), also from a fresh import of functools; a name missing from a
builtin class raises AttributeError in the trace (the class cannot gain it); types.MethodType(fn,
obj) binds in the trace; compared with eager.
"""
import collections.abc
import functools
import sys
import types

import pytest
from test.support import import_helper

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import compiled_like_eager, explain_counts  # noqa: E402

# functools as its Python source alone, as CPython's own tests import it: another cached_property class.
_fresh_functools = import_helper.import_fresh_module("functools", blocked=["_functools"])


class _Priced:
    @functools.cached_property
    def cost(self):
        """What it costs."""
        return 4


class _FreshFunctoolsPriced:
    cost = _fresh_functools.cached_property(lambda self: 5)


def _reads_the_descriptor(x):
    a, b = _Priced.cost, _FreshFunctoolsPriced.cost
    return (isinstance(a, functools.cached_property), a.__doc__, a.attrname,
            isinstance(b, _fresh_functools.cached_property), x + 1)


def test_a_cached_property_read_from_its_class_is_the_descriptor_itself():
    compiled_like_eager(_reads_the_descriptor, torch.randn(2))


# -- super().name of a plain class value ------------------------------------------------------------

class _Base:
    scale = 4
    tag = "ab"


class _Child(_Base):
    scale = 100   # shadowed: super() skips it

    def forward(self, x):
        return super().scale * x + len(super().tag)

    @classmethod
    def of_class(cls, x):
        return super().scale * x


def test_super_reads_a_plain_class_value_guarded_by_value():
    # super().scale is the base's own number (no descriptor), read through the MRO and guarded
    # there: changing it on the base recompiles.
    cnt = CompileCounter()
    method = _Child().forward
    compiled = tjc.compile(method, backend=cnt)
    x = torch.ones(2)
    try:
        for value in (4, 4, 7):
            _Base.scale = value
            torch.testing.assert_close(compiled(x), method(x))
            torch.testing.assert_close(tjc.compile(_Child.of_class)(x), _Child.of_class(x))
    finally:
        _Base.scale = 4
    assert cnt.frame_count == 2
    assert tjc.explain(method)(x).graph_break_count == 0


# -- calling a class object: a builtin type given by type(), a struct sequence ---------------------
def _same_kind_of_sequence(seq):
    a, b = seq
    return type(seq)([a * 2, b - 1, a + b])


def _named_result(x, y):
    r = torch.return_types.max((x * 2, y))
    return r, r.values + 1, r.indices, tuple(torch.return_types.qr((x, y)))


@pytest.mark.parametrize("fn,args", [
    (_same_kind_of_sequence, ([torch.ones(2), torch.zeros(2)],)),
    (_same_kind_of_sequence, ((torch.ones(2), torch.zeros(2)),)),
    (_named_result, (torch.randn(3), torch.randn(3))),
], ids=["list", "tuple", "structseq"])
def test_a_class_object_called_builds_what_eager_builds(fn, args):
    assert explain_counts(fn, *args) == (1, 0, [])
    got, want = tjc.compile(fn, backend="eager")(*args), fn(*args)
    assert type(got) is type(want)
    if fn is _named_result:
        assert type(got[0]) is type(want[0])
        flat = lambda r: [r[0][0], r[0][1], r[1], r[2], *r[3]]  # noqa: E731
        got, want = flat(got), flat(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_a_struct_sequence_python_cannot_make_raises_as_in_eager():
    def f(x):
        return type(sys.flags)((1,) * sys.flags.n_sequence_fields), x
    with pytest.raises(TypeError):
        f(torch.ones(1))
    with pytest.raises(TypeError):
        tjc.compile(f, backend="eager")(torch.ones(1))


_MAPPING_FLAG = 1 << 6   # Py_TPFLAGS_MAPPING


class _MappingModule(torch.nn.ModuleDict, collections.abc.MutableMapping):
    def __hash__(self):
        return id(self)


def _by_flags(x, cls):
    return x + 1 if cls.__flags__ & _MAPPING_FLAG else x - 1


def _by_type_flags(x, obj):
    # a class known from a guarded type: its sizes are constants (its __flags__, which change,
    # are a break without a source)
    return x * 2 if type(obj).__dictoffset__ else x + 1, type(obj).__basicsize__


def test_numbers_of_a_types_c_struct_are_read_through_its_source_and_guarded():
    x = torch.randn(2)
    assert explain_counts(_by_flags, x, _MappingModule) == (1, 0, [])
    compiled = tjc.compile(_by_flags, backend="eager")
    for cls in (_MappingModule, torch.nn.Linear, _MappingModule):   # another class: recompiles
        torch.testing.assert_close(compiled(x, cls), _by_flags(x, cls))
    assert explain_counts(_by_type_flags, x, {"a": 1}) == (1, 0, [])
    compiled = tjc.compile(_by_type_flags, backend="eager")
    for obj in ({"a": 1}, [1], _MappingModule()):
        got, want = compiled(x, obj), _by_type_flags(x, obj)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]


def _missing_class_names(x):
    def cb():
        return 1

    try:
        type(cb).__exit__   # contextlib.ExitStack.push's test for a context manager
        found = True
    except AttributeError as e:
        found = str(e)
    try:
        int.absent
    except AttributeError as e:
        args = e.args
    return x + 1, found, args, getattr(type(x.shape), "nowhere", 5), hasattr(float, "__exit__")


def test_a_name_missing_from_a_builtin_class_raises_attribute_error_in_the_trace():
    """A builtin class cannot gain attributes: the AttributeError is raised, and caught, in the trace."""
    compiled_like_eager(_missing_class_names, torch.randn(2))


class _Growing:
    pass


def _reads_growing(x):
    try:
        return x + _Growing.later
    except AttributeError:
        return x - 1


def test_a_name_missing_from_a_user_class_is_read_as_eager_after_it_is_set():
    """A user class may gain the name later: its absence is not a constant of the graph."""
    compiled = tjc.compile(_reads_growing, backend="eager")
    x = torch.randn(2)
    torch.testing.assert_close(compiled(x), _reads_growing(x))
    _Growing.later = 2
    try:
        torch.testing.assert_close(compiled(x), _reads_growing(x))
    finally:
        del _Growing.later
    torch.testing.assert_close(compiled(x), _reads_growing(x))


class _Holder:
    def __init__(self, scale):
        self.scale = scale


def _binds_methods(x, held):
    def scaled(self, y):
        return y * self.scale

    made = _Holder(3)
    bound_made, bound_held = types.MethodType(scaled, made), types.MethodType(scaled, held)
    return (bound_made(x), bound_held(x), bound_made.__self__ is made, bound_held.__func__ is scaled,
            bound_held)


def test_method_type_binds_a_function_to_an_object_in_the_trace():
    """types.MethodType(fn, obj), as contextlib.ExitStack binds an __exit__: called in the trace,
    and made again after the graph where it leaves it."""
    x, held = torch.randn(2), _Holder(2)
    expected = _binds_methods(x, held)
    compiled = tjc.compile(_binds_methods, backend=CompileCounter())
    before = tjc.stats()
    got = compiled(x, held)
    for a, b in zip(got[:4], expected[:4]):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    assert got[4].__self__ is held and torch.equal(got[4](x), expected[4](x))
    assert tjc.stats()["graph_breaks"] == before["graph_breaks"] and tjc.stats()["fallbacks"] == before["fallbacks"]


class _Documented:
    """The class's own words."""


class _Undocumented(_Documented):
    pass


def _reads_docs(x):
    return (x + 1, _Documented.__doc__, _Undocumented.__doc__, _Documented().__doc__, int.__doc__,
            functools.partial.__doc__)


def test_a_class_docstring_is_read_through_its_source_and_guarded():
    """type's __doc__ getset: the class's own docstring (not its bases'), guarded by value."""
    compiled = tjc.compile(_reads_docs, backend=CompileCounter())
    before = tjc.stats()
    x = torch.randn(2)
    try:
        for doc in ("The class's own words.", "changed", None):
            _Documented.__doc__ = doc
            got, expected = compiled(x), _reads_docs(x)
            assert got[1:] == expected[1:] and torch.equal(got[0], expected[0])
    finally:
        _Documented.__doc__ = "The class's own words."
    assert tjc.stats()["graph_breaks"] == before["graph_breaks"] and tjc.stats()["fallbacks"] == before["fallbacks"]


# -- type's methods that read a class's state: __subclasses__(), mro() ------------------------------

class _Root:
    pass


class _Leaf(_Root):
    pass


def _subclass_reader(x):
    subs = _Root.__subclasses__()
    return x * len(subs), subs, _Leaf.mro(), subs[0].__subclasses__()


def test_subclasses_and_mro_are_read_and_follow_later_classes():
    import gc
    import weakref

    cnt = CompileCounter()
    compiled = tjc.compile(_subclass_reader, backend=cnt)
    x = torch.ones(2)
    assert repr(compiled(x)) == repr(_subclass_reader(x))
    assert explain_counts(_subclass_reader, x)[1] == 0   # no break

    class Extra(_Root):   # a new subclass: the guard on __subclasses__() fails, eager's answer
        pass
    assert repr(compiled(x)) == repr(_subclass_reader(x))
    assert len(compiled(x)[1]) == 2
    ref = weakref.ref(Extra)
    del Extra
    gc.collect()   # a class is in a cycle with its own __mro__: only the collector frees it
    assert ref() is None   # the compiled entry that read it did not keep it
    assert repr(compiled(x)) == repr(_subclass_reader(x))


class _Tint(__import__("enum").Enum):
    RED = 1


_Tint.note = "warm"   # a class attribute that is no member


def _reads_the_class_of_a_value(x, member):
    # type(member) and type(x * 2): classes the trace knows from a value, not from a source.
    kind, tensor_kind = type(member), type(x * 2)
    return x + len(kind.note), kind.__mro__, [c.__name__ for c in tensor_kind.__mro__], tensor_kind


def test_a_class_known_only_from_a_value_is_read_through_its_import_path():
    # Where the module's name reaches the very class, its attributes are read through
    # sys.modules[module].<qualname>, guarded: a changed attribute recompiles.
    cnt = CompileCounter()
    compiled = tjc.compile(_reads_the_class_of_a_value, backend=cnt)
    x = torch.ones(2)
    for _ in range(2):
        assert repr(compiled(x, _Tint.RED)) == repr(_reads_the_class_of_a_value(x, _Tint.RED))
    assert explain_counts(_reads_the_class_of_a_value, x, _Tint.RED)[1] == 0
    assert cnt.frame_count == 1
    try:
        _Tint.note = "colder"
        assert repr(compiled(x, _Tint.RED)) == repr(_reads_the_class_of_a_value(x, _Tint.RED))
        assert cnt.frame_count == 2
    finally:
        _Tint.note = "warm"


def test_a_class_made_in_a_function_known_only_from_a_value_still_breaks():
    class Local(__import__("enum").Enum):
        A = 1

    def reads(x, member):
        return x + 1, type(member).__mro__

    x = torch.ones(2)
    assert repr(tjc.compile(reads)(x, Local.A)) == repr(reads(x, Local.A))
    assert explain_counts(reads, x, Local.A)[1] == 1
