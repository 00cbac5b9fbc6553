"""The version-neutral instruction layer (torch_jit_cache/bytecode/instructions.py): torch-free.

The same source must decode to the same program on 3.11, 3.12 and 3.13 wherever the versions
differ only in spelling; where they differ in stack layout (NULL beside a callable, keyword names
on the stack), the difference is the one VERSIONS states.
"""
import sys
import weakref

import pytest

from torch_jit_cache.bytecode import instructions, versions
from torch_jit_cache.bytecode.instructions import DecodeError, decode
from torch_jit_cache.bytecode.versions import FACTS


def reachable_listing(fn) -> list:
    """The decoded instructions the interpreter can reach, in order, as `OP arg` (jump targets as
    the position of the target in this listing). NOPs are left out: what 3.11 spells PRECALL or
    RESUME, later versions leave out or spell otherwise."""
    insts = decode(fn.__code__).insts
    seen, todo = set(), [0]
    while todo:
        i = todo.pop()
        while i < len(insts) and i not in seen:
            seen.add(i)
            inst = insts[i]
            if inst.target is not None:
                todo.append(inst.target)
            if inst.op in ("JUMP", "RETURN_VALUE"):
                break
            i += 1
    order = [i for i in sorted(seen) if insts[i].op != "NOP"]
    position = {i: n for n, i in enumerate(order)}

    def target_position(t):
        while insts[t].op == "NOP":
            t += 1
        return position[t]

    lines = []
    for i in order:
        inst = insts[i]
        if inst.target is not None:
            arg = f" -> {target_position(inst.target)}"
        elif inst.arg is None and inst.op != "LOAD_CONST":
            arg = ""
        else:
            arg = f" {inst.arg!r}"
        lines.append(f"{inst.op}{arg}")
    return lines


def arithmetic_and_slices(x, y):
    a, b = x[1:3], y[::2]
    x[0:1] = b
    return +a - b * 2 ** a, (*a, 1)


def loop_then_code(xs):
    total = 0
    for v in xs:
        total += v
    return total


def strings(v, w):
    # (A conversion and a spec together, f"{v!r:>8}", is SWAP, CONVERT_VALUE, SWAP on 3.11/3.12:
    # the spec is already on the stack when FORMAT_VALUE converts. test_tracer runs that case.)
    return f"{v!r}{w}{v!s}{w:3}"


def none_checks_and_methods(x, y):
    if x is None:
        return y.sum()
    del y
    return x.view(-1)


EXPECTED = {
    arithmetic_and_slices: """
        LOAD_FAST 'x'
        LOAD_CONST 1
        LOAD_CONST 3
        BUILD_SLICE 2
        BINARY_SUBSCR
        LOAD_FAST 'y'
        LOAD_CONST None
        LOAD_CONST None
        LOAD_CONST 2
        BUILD_SLICE 3
        BINARY_SUBSCR
        STORE_FAST 'b'
        STORE_FAST 'a'
        LOAD_FAST 'b'
        LOAD_FAST 'x'
        LOAD_CONST 0
        LOAD_CONST 1
        BUILD_SLICE 2
        STORE_SUBSCR
        LOAD_FAST 'a'
        UNARY_POSITIVE
        LOAD_FAST 'b'
        LOAD_CONST 2
        LOAD_FAST 'a'
        BINARY_OP '**'
        BINARY_OP '*'
        BINARY_OP '-'
        BUILD_LIST 0
        LOAD_FAST 'a'
        LIST_EXTEND 1
        LOAD_CONST 1
        LIST_APPEND 1
        LIST_TO_TUPLE
        BUILD_TUPLE 2
        RETURN_VALUE""",
    loop_then_code: """
        LOAD_CONST 0
        STORE_FAST 'total'
        LOAD_FAST 'xs'
        GET_ITER
        FOR_ITER -> 11
        STORE_FAST 'v'
        LOAD_FAST 'total'
        LOAD_FAST 'v'
        BINARY_OP '+='
        STORE_FAST 'total'
        JUMP -> 4
        LOAD_FAST 'total'
        RETURN_VALUE""",
    strings: """
        LOAD_FAST 'v'
        CONVERT_VALUE 'repr'
        FORMAT_SIMPLE
        LOAD_FAST 'w'
        FORMAT_SIMPLE
        LOAD_FAST 'v'
        CONVERT_VALUE 'str'
        FORMAT_SIMPLE
        LOAD_FAST 'w'
        LOAD_CONST '3'
        FORMAT_WITH_SPEC
        BUILD_STRING 4
        RETURN_VALUE""",
    none_checks_and_methods: """
        LOAD_FAST 'x'
        POP_JUMP_IF_NOT_NONE -> 6
        LOAD_FAST 'y'
        LOAD_METHOD 'sum'
        CALL 0
        RETURN_VALUE
        DELETE_FAST 'y'
        LOAD_FAST 'x'
        LOAD_METHOD 'view'
        LOAD_CONST -1
        CALL 1
        RETURN_VALUE""",
}


@pytest.mark.parametrize("fn", list(EXPECTED), ids=lambda fn: fn.__name__)
def test_the_same_source_decodes_to_the_same_program_on_every_version(fn):
    # 3.11 spells these with FORMAT_VALUE flags, LIST_TO_TUPLE, UNARY_POSITIVE, forward jumps and a
    # FOR_ITER that exits past the loop; 3.12 with BINARY_SLICE/STORE_SLICE, intrinsics, END_FOR,
    # RETURN_CONST; 3.13 adds superinstructions and CONVERT_VALUE/FORMAT_*. Decoded, one program.
    expected = [line.strip() for line in EXPECTED[fn].strip().splitlines()]
    assert reachable_listing(fn) == expected


def call_with_null_and_keywords(x):
    return len(x, key=1)


def test_calls_keep_the_version_stack_layout():
    listing = reachable_listing(call_with_null_and_keywords)
    null_then_callable = ["PUSH_NULL", "LOAD_GLOBAL 'len'"]
    if FACTS.null_before_callable:   # 3.11/3.12: [NULL, callable, args...]
        assert listing[:2] == null_then_callable
    else:                            # 3.13: [callable, NULL, args...]
        assert listing[:2] == null_then_callable[::-1]
    keywords = {(3, 11): ["KW_NAMES ('key',)", "CALL 2"], (3, 12): ["KW_NAMES ('key',)", "CALL 2"],
                (3, 13): ["LOAD_CONST ('key',)", "CALL_KW 2"]}[sys.version_info[:2]]
    assert listing[-3:-1] == keywords


def test_an_expansion_is_one_boundary_and_jumps_land_on_boundaries():
    for fn in [*EXPECTED, call_with_null_and_keywords]:
        insts = decode(fn.__code__).insts
        for i, inst in enumerate(insts):
            assert inst.index == i
            # `first` exactly where the raw instruction changes
            assert inst.first == (i == 0 or insts[i - 1].instr is not inst.instr), inst
            if inst.target is not None:
                assert insts[inst.target].first, (fn.__name__, inst)


def test_comprehension_restores_a_shadowed_local():
    # 3.12+ inline comprehensions (PEP 709): the loop variable's outer value is saved with
    # LOAD_FAST_AND_CLEAR and stored back after; 3.11 calls a nested function instead.
    def f(xs, v):
        return [v * 2 for v in xs], v
    ops = [inst.op for inst in decode(f.__code__).insts]
    if sys.version_info >= (3, 12):
        assert "LOAD_FAST_AND_CLEAR" in ops and "MAKE_FUNCTION" not in ops
    else:
        assert "MAKE_FUNCTION" in ops and "LOAD_FAST_AND_CLEAR" not in ops


def test_describe_names_the_raw_instruction():
    insts = decode(none_checks_and_methods.__code__).insts
    described = {inst.describe() for inst in insts}
    assert "LOAD_FAST x" in described
    method = "LOAD_METHOD sum" if sys.version_info < (3, 12) else "LOAD_ATTR sum"
    assert method in described


def test_decoding_is_cached_while_the_code_lives_and_goes_with_it(no_gc):
    # The code object alone (a function and its globals would form a cycle).
    code = next(c for c in compile("def g(a):\n    return a + 1\n", "<g>", "exec").co_consts
                if hasattr(c, "co_code"))
    decoded = decode(code)
    assert decode(code) is decoded
    ref = weakref.ref(decoded)
    code_ref = weakref.ref(code)
    del decoded, code
    assert code_ref() is None
    assert ref() is None, "the decoded instructions outlived their code object"


def test_an_unsupported_python_is_named(monkeypatch):
    monkeypatch.setattr(instructions, "FACTS", None)
    monkeypatch.setattr(instructions, "_CACHE", {})
    with pytest.raises(DecodeError, match=r"\(3, 11\), \(3, 12\), \(3, 13\)"):
        decode(loop_then_code.__code__)


def test_every_supported_version_has_its_facts():
    assert set(versions.VERSIONS) == {(3, 11), (3, 12), (3, 13)}
    assert FACTS is versions.VERSIONS[sys.version_info[:2]]
