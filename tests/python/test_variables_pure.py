"""Pure builtins and C functions on constants run while tracing (variables/builtin_functions/pure.py, one table):
each call's result under the compiler equals CPython's, of the same type, with no graph break and
no fallback; Python's error on constants is raised in the trace and caught by the program's own
`try` as in eager; a table of calls, and hypothesis over math and operator.
"""
import cmath
import keyword
import math
import operator
import string
import struct
import unicodedata

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings, strategies as st  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.tracer.variables.builtin_functions.pure import hash_is_per_process, is_pure  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

CALLS = [
    (abs, (-3,)), (abs, (-2.5,)), (divmod, (17, 5)), (divmod, (7.5, 2)), (divmod, (-7, 2)), (pow, (2, 10)),
    (pow, (2, 10, 7)), (round, (2.675, 2)), (round, (7,)), (min, (3, 1, 2)), (max, ((4, 9, 2),)),
    (sum, ((1, 2, 3),)), (sum, ((1.5, 2.5), 10)), (len, ("hello",)), (sorted, ((3, 1, 2),)), (sorted, ("cab",)),
    (hash, (12345,)), (hash, ((1, 2.5, None),)), (hash, (-1,)), (chr, (65,)), (ord, ("A",)), (bin, (10,)),
    (hex, (255,)), (oct, (8,)), (format, (3.14159, ".2f")), (ascii, ("é",)), (repr, ("x",)), (all, ((1, 2),)),
    (any, ((0, 0),)), (int, ("42",)), (int, ("ff", 16)), (float, ("1.5",)), (bool, (0,)), (str, (12,)),
    (complex, (1, 2)), (bytes, (3,)),
    (math.sqrt, (16.0,)), (math.floor, (2.7,)), (math.ceil, (2.1,)), (math.log, (100, 10)), (math.gcd, (12, 18)),
    (math.isclose, (1.0, 1.0 + 1e-12)), (math.prod, ((2, 3, 4),)), (math.comb, (5, 2)), (math.factorial, (6,)),
    (math.hypot, (3, 4)), (math.copysign, (1, -0.0)), (math.isqrt, (17,)), (math.fsum, ((0.1,) * 10,)),
    (math.lcm, (4, 6)), (math.dist, ((0, 0), (3, 4))), (math.trunc, (2.9,)), (math.radians, (180,)),
    (math.isfinite, (float("inf"),)), (cmath.sqrt, (-1,)), (cmath.phase, (1j,)),
    (operator.add, (1, 2)), (operator.mul, ("ab", 3)), (operator.floordiv, (7, 2)), (operator.neg, (5,)),
    (operator.index, (5,)), (operator.getitem, ((1, 2, 3), 1)), (operator.contains, ("abc", "b")),
    (operator.truth, ((),)), (operator.lshift, (1, 4)), (operator.concat, ((1,), (2,))), (operator.iadd, (1, 2)),
    (operator.length_hint, ((1, 2),)), (operator.countOf, ((1, 2, 1), 1)), (operator.indexOf, ((1, 2), 2)),
    (str.upper, ("abc",)), (str.split, ("a,b", ",")), (str.join, (",", ("a", "b"))), (str.format, ("{}-{}", 1, 2)),
    (str.startswith, ("abc", "ab")), (str.replace, ("aab", "a", "c")), (str.zfill, ("7", 3)),
    (str.strip, ("  x ",)), (bytes.hex, (b"\x01\x02",)), (int.bit_length, (255,)),
    (int.from_bytes, (b"\x00\x10", "big")), (float.fromhex, ("0x1.8p1",)), (float.is_integer, (2.0,)),
    (int.to_bytes, (16, 2, "little")), (bytes.fromhex, ("0102",)), (complex.conjugate, (1 + 2j,)),
    ("a-b".split, ("-",)), ((3).to_bytes, (2, "big")), (struct.pack, ("<i", 7)), (struct.calcsize, ("<iq",)),
    (struct.unpack, ("<h", b"\x01\x00")), (keyword.iskeyword, ("for",)), (unicodedata.category, ("A",)),
    (string.capwords, ("hello world",)),
]
ERRORS = [(int, ("x",)), (math.sqrt, (-1,)), (divmod, (1, 0)), (operator.truediv, (1, 0)), (chr, (-1,)),
          (math.log, (0,)), (str.index, ("abc", "z")), ("abc".index, ("z",)), (struct.pack, ("<h", 1 << 20))]


def _name(case):
    fn, args = case
    return f"{getattr(fn, '__qualname__', fn)}{args!r}"[:60]


@pytest.mark.parametrize("case", CALLS, ids=_name)
def test_pure_call_matches_cpython(case):
    fn, args = case

    def f(x):
        return x + 1, fn(*args)

    expected = f(torch.ones(1))[1]
    report = tjc.explain(f)(torch.ones(1))
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])
    got = tjc.compile(f)(torch.ones(1))[1]
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("case", ERRORS, ids=_name)
def test_python_error_on_constants_is_raised_in_the_trace(case):
    fn, args = case

    def f(x):
        try:
            return x + 1, fn(*args)
        except Exception as e:  # noqa: BLE001 - the program's own handler, as eager runs it
            return x - 1, (type(e), str(e))

    expected = f(torch.ones(1))
    report = tjc.explain(f)(torch.ones(1))
    assert (report.graph_break_count, report.fallbacks) == (0, [])
    got = tjc.compile(f)(torch.ones(1))
    assert got[1] == expected[1]
    torch.testing.assert_close(got[0], expected[0])


def test_written_inline_as_users_write_them():
    def f(x, n):
        s = "w-%d" % n
        key = "-".join(part.upper() for part in s.split("-"))
        size = struct.calcsize("<" + "i" * n) + math.prod((n, 2)) + int.from_bytes(b"\x01", "little")
        return x * size, key, hex(size), divmod(size, 3), math.isclose(size, 17.0), "abc".index("b")

    x = torch.ones(2)
    expected = f(x, 3)
    report = tjc.explain(f)(x, 3)
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])
    got = tjc.compile(f)(x, 3)
    assert got[1:] == expected[1:]
    torch.testing.assert_close(got[0], expected[0])


_FN = math.floor


def test_a_pure_function_read_from_the_frame_is_guarded():
    global _FN

    def f(x):
        return x + _FN(2.5)

    compiled = tjc.compile(f)
    x = torch.ones(1)
    torch.testing.assert_close(compiled(x), f(x))
    try:
        for replacement in (math.ceil, math.trunc, float.__round__):
            _FN = replacement
            torch.testing.assert_close(compiled(x), f(x))
    finally:
        _FN = math.floor


def test_a_method_read_from_the_frame_is_guarded_by_what_holds_it():
    def f(x, method):
        return x + method("b")

    compiled = tjc.compile(f)
    x = torch.ones(1)
    for method in ("abc".index, "xxb".index, "bb".count, "abcb".count):
        torch.testing.assert_close(compiled(x, method), f(x, method))


def test_the_table():
    def sqrt(v):
        return v ** 0.5

    sqrt.__module__ = "math"   # claims math's name: not math.sqrt
    assert is_pure(math.sqrt) and is_pure(operator.add) and is_pure(str.upper) and is_pure("a".upper)
    assert is_pure(int.from_bytes) and is_pure(keyword.iskeyword) and is_pure(struct.pack) and is_pure(abs)
    # T.__new__ of a pure type is listed; fold() takes it only with T itself as the class.
    assert is_pure(tuple.__new__) and is_pure(int.__new__)
    for fn in (sqrt, print, id, hash, len, open, list.append, [].append, {}.get, set().add, bytearray().extend,
               dict.fromkeys, list.__new__, object.__new__, str.__init__, __import__("time").time, __import__("random").random,
               __import__("os").getcwd):
        assert not is_pure(fn), fn
    assert hash_is_per_process("abc") and hash_is_per_process((1, b"x")) and not hash_is_per_process((1, 2.5, None))


def test_hash_of_a_str_is_not_a_graph_constant():
    def f(x):
        return x + 1, hash("abc")

    report = tjc.explain(f)(torch.ones(1))
    assert report.graph_break_count == 1 and "differs per process" in report.break_reasons[0]
    assert tjc.compile(f)(torch.ones(1))[1] == hash("abc")


_NUMBERS = st.one_of(st.integers(-10**6, 10**6), st.floats(-1e6, 1e6, allow_nan=False))
_BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
           math.copysign, math.atan2, math.fmod, math.hypot, divmod, round, min, max]
_UNARY = [math.sqrt, math.floor, math.ceil, math.exp, math.log, math.fabs, math.trunc, abs, operator.neg, math.isnan]


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001 - compared with the compiled call's
        return "raised", type(e)


def _same(a, b):
    if a[0] == "ok" and isinstance(a[1], float) and math.isnan(a[1]):
        return b[0] == "ok" and isinstance(b[1], float) and math.isnan(b[1])
    return a == b and type(a[1]) is type(b[1])


@settings(max_examples=40, deadline=None)
@given(fn=st.sampled_from(_BINARY), a=_NUMBERS, b=_NUMBERS)
def test_binary_functions_against_cpython(fn, a, b):
    if fn is round:
        b = int(b) % 5
    if fn is operator.pow:
        b = int(b) % 4
    args = (a, b)

    def f(x):
        return x + 1, _outcome(fn, *args)

    assert _same(tjc.compile(f)(torch.ones(1))[1], f(torch.ones(1))[1])


@settings(max_examples=40, deadline=None)
@given(fn=st.sampled_from(_UNARY), a=_NUMBERS)
def test_unary_functions_against_cpython(fn, a):
    if fn is math.exp:
        a = a % 50

    def f(x):
        return x + 1, _outcome(fn, a)

    assert _same(tjc.compile(f)(torch.ones(1))[1], f(torch.ones(1))[1])


# -- T.__new__(T, ...) of a pure type ----------------------------------------------------------------

def _made_by_new(x):
    return (x + 1, bool.__new__(bool), bool.__new__(bool, 3), int.__new__(int), int.__new__(int, "12"),
            float.__new__(float, "2.5"), str.__new__(str, 7), tuple.__new__(tuple, [1, 2]))


def test_new_of_a_pure_type_with_its_own_class_folds():
    got, want = tjc.compile(_made_by_new)(torch.ones(1)), _made_by_new(torch.ones(1))
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:] and [type(v) for v in got] == [type(v) for v in want]
    assert tjc.explain(_made_by_new)(torch.ones(1)).graph_break_count == 0


class _Count(int):
    pass


def test_new_of_a_pure_type_for_a_subclass_breaks_and_matches_eager():
    # int.__new__(Sub, 5) makes a Sub: no constant. The call runs as written at the break (the
    # function is made again from its builtin type), and nothing falls back.
    def fn(x):
        return int.__new__(_Count, 5), x + 1

    got = tjc.compile(fn)(torch.ones(1))
    assert type(got[0]) is _Count and got[0] == 5
    explanation = tjc.explain(fn)(torch.ones(1))
    assert explanation.graph_break_count == 1 and tjc.stats()["fallbacks"] == 0
