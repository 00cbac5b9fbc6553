"""tracer/variables/constant.py through the public API: immutable Python values in the trace.

The contract: an int, float, str, bool, None, slice or Ellipsis is known while tracing; its pure
methods (str.format, str.join, int.bit_length, ...) run in Python and their results stay
constants, so no graph op stands for them; a constant read from the frame is guarded by value
(another value recompiles, never reuses the old answer); what would raise in eager raises the same
error. Each case compares with eager and counts graphs and breaks.
"""
import typing

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import compiled_like_eager  # noqa: E402


def _string_methods(x, name):
    key = "{}.{}".format("layer", name.upper())
    parts = "-".join([key, name.strip()]).split("-")
    return x * len(parts), key, parts, name.startswith("q"), key.replace(".", "_")


def _number_methods(x, n, f):
    return x * n.bit_length() + f.is_integer(), (7).to_bytes(2, "little"), round(f, 1), divmod(n, 3)


def _none_slice_ellipsis(x, start):
    s = slice(start, None)
    return x[s], x[..., 0], s.start is None, x[None].shape


@pytest.mark.parametrize("fn, args", [
    (_string_methods, lambda: (torch.randn(2), " q_proj ")),
    (_number_methods, lambda: (torch.randn(2), 12, 2.5)),
    (_none_slice_ellipsis, lambda: (torch.randn(4, 3), 1)),
], ids=["str", "numbers", "none-slice-ellipsis"])
def test_constant_methods_run_in_python_and_trace_in_one_graph(fn, args):
    compiled_like_eager(fn, *args())


def test_a_constant_computation_leaves_no_op_in_the_graph():
    def scaled(x, name):
        return x * len(name.upper().split("_"))

    out = tjc.explain(scaled)(torch.zeros(2), "a_b_c")
    assert out.ops_per_graph == [["mul"]]
    (guards,) = out.guards
    assert "L['name']" in guards


@pytest.mark.parametrize("first, second", [(2, 3), (2.0, 2.5), ("ab", "abc"), (None, 1), (True, False)])
def test_a_constant_argument_is_guarded_by_value(first, second):
    def use(x, c):
        return x + (1 if c is None else len(c) if isinstance(c, str) else c)

    cnt = CompileCounter()
    compiled = tjc.compile(use, backend=cnt)
    x = torch.zeros(1)
    for c in (first, second, first):
        torch.testing.assert_close(compiled(x, c), use(x, c))
    assert cnt.frame_count == 2, "each value compiled once, the third call a hit"


def test_a_missing_attribute_of_a_constant_raises_eagers_error():
    def bad(x, n):
        return x * n.no_such_attribute

    with pytest.raises(AttributeError) as eager:
        bad(torch.ones(1), 3)
    with pytest.raises(AttributeError) as compiled:
        tjc.compile(bad, backend="eager")(torch.ones(1), 3)
    assert str(compiled.value) == str(eager.value)


# -- enum members --------------------------------------------------------------------------------
import enum  # noqa: E402


class Mode(enum.Enum):
    A = 1
    B = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class Odd(enum.Enum):
    X = 1

    def __eq__(self, other):   # user code: not folded while tracing
        return True

    __hash__ = enum.Enum.__hash__


class _Holder:
    def __init__(self, mode):
        self.mode = mode


def _enum_branches(x, holder, level):
    if holder.mode == Mode.A:
        x = x + 1
    if holder.mode is Mode.B:
        x = x * 2
    if level > 2 and level == Level.HIGH:
        x = x - 1
    return x * holder.mode.value, holder.mode.name, Mode(2), Mode(2).value, holder.mode


@pytest.mark.parametrize("mode", [Mode.A, Mode.B])
def test_enum_members_compare_as_constants_in_one_graph(mode):
    compiled_like_eager(_enum_branches, torch.randn(3), _Holder(mode), Level.HIGH)


def test_another_enum_member_recompiles():
    holder, cnt = _Holder(Mode.A), CompileCounter()
    compiled = tjc.compile(_enum_branches, backend=cnt)
    x = torch.randn(3)
    compiled(x, holder, Level.LOW)
    holder.mode = Mode.B
    got, expected = compiled(x, holder, Level.LOW), _enum_branches(x, holder, Level.LOW)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] and cnt.frame_count == 2
    got = compiled(x, holder, Level.HIGH)   # an IntEnum member, guarded the same way
    torch.testing.assert_close(got[0], _enum_branches(x, holder, Level.HIGH)[0])
    assert cnt.frame_count == 3


def _odd_enum(x, m):
    return x + 1 if m == 5 else x - 1


def test_an_enum_with_its_own_eq_is_not_folded():
    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(_odd_enum, backend="eager")(x, Odd.X), _odd_enum(x, Odd.X))


class Color(str, enum.Enum):
    RED = "red"


class Loud(enum.Enum):
    X = 1

    def __str__(self):   # user code: str(member) is not folded while tracing
        Loud.calls += 1
        return f"loud{Loud.calls}"


Loud.calls = 0


def _enum_text(x, m):
    return x * Level.HIGH + (Color.RED == "red"), str(m), f"{m.name}-{Level.HIGH}", {Mode.A: 1, Mode.B: 2}[m]


def test_enum_members_in_ops_text_and_dict_keys():
    compiled_like_eager(_enum_text, torch.randn(3), Mode.B)


def test_an_enum_with_its_own_str_runs_it_every_call():
    def fn(x, m):
        return x + 1, str(m)

    compiled = tjc.compile(fn, backend="eager")
    x = torch.randn(2)
    assert [compiled(x, Loud.X)[1] for _ in range(3)] == ["loud1", "loud2", "loud3"]


# Annotations as huggingface_hub's strict dataclasses read them (typing.get_args/get_origin of a
# field's type): `int | None`, `list[int]`, `typing.Optional[...]` are constants of the trace.
_ANNOTATION = typing.Optional[typing.List[int]]


def _annotations(x):
    union_args = typing.get_args(int | None)
    origin = typing.get_origin(_ANNOTATION)
    made_here = typing.get_args(list[int])
    return x + len(union_args) + (origin is typing.Union) + len(made_here) + (made_here[0] is int)


def test_type_annotations_are_read_as_constants_and_guarded():
    global _ANNOTATION
    cnt = CompileCounter()
    compiled = tjc.compile(_annotations, backend=cnt)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), _annotations(x))
    assert (cnt.frame_count, tjc.stats()["graph_breaks"]) == (1, 0)
    try:
        _ANNOTATION = typing.Optional[typing.Tuple[int]]   # same origin: what was read still holds
        torch.testing.assert_close(compiled(x), _annotations(x))
        assert cnt.frame_count == 1
        _ANNOTATION = list[int]                            # another origin: recompiles, as eager sees
        torch.testing.assert_close(compiled(x), _annotations(x))
        assert cnt.frame_count == 2
    finally:
        _ANNOTATION = typing.Optional[typing.List[int]]


def _missing_on_constants(x, n):
    caught = []
    for value in (n, "text", 1.5, None):
        try:
            value.update({})   # functools.update_wrapper's getattr(wrapper, name).update(...)
        except AttributeError as e:
            caught.append(e.args)
    return x + 1, caught, getattr(n, "absent", "default"), hasattr("s", "nothing")


def test_a_name_missing_from_a_builtin_constant_raises_attribute_error_in_the_trace():
    compiled_like_eager(_missing_on_constants, torch.randn(2), 3)


def test_a_slice_passed_in_is_a_constant_guarded_by_its_bounds():
    def fn(items, idx, x):
        return x + 1, items[idx] + [100], x[idx]

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    items, x = list(range(10)), torch.arange(10.0)
    for idx in (slice(0, 2, 1), slice(3, 8, 2), slice(0, 2, 1), slice(None, 5)):
        got, want = compiled(items, idx, x), fn(items, idx, x)
        assert got[1] == want[1] and torch.equal(got[0], want[0]) and torch.equal(got[2], want[2])
    assert cnt.frame_count == 3   # one graph per distinct slice, none broke
    assert tjc.explain(fn)(items, slice(1, 3), x).graph_break_count == 0
