"""bytecode/analysis.py: stack effects, liveness, with blocks and superinstructions, torch-free."""
import contextlib
import dis

import pytest
from bytecode import Instr

from torch_jit_cache.bytecode.analysis import (BreakRefused, SUPERINSTRUCTIONS, liveness, split_superinstruction,
                                               stack_effect, with_block_exits)
from torch_jit_cache.bytecode.instructions import decode


def _first(fn, op):
    insts = decode(fn.__code__).insts
    return next(i for i in insts if i.op == op and i.first), insts


def test_stack_effects_are_the_instructions_own():
    assert stack_effect(Instr("CALL", 2)) == (4, 1)   # callable, NULL or self, two arguments
    assert stack_effect(Instr("BEFORE_WITH")) == (1, 2)
    assert stack_effect(Instr("LOAD_CONST", 1)) == (0, 1)
    assert stack_effect(Instr("BINARY_SUBSCR")) == (2, 1)
    assert stack_effect(Instr("STORE_FAST", "x")) == (1, 0)


def _branchy(x, flag):
    a = x + 1
    if flag:
        b = a * 2
        return b
    return x


def test_a_local_is_live_where_a_later_read_needs_it():
    insts = decode(_branchy.__code__).insts
    live = liveness(insts)
    store_a = next(i for i in insts if i.op == "STORE_FAST" and i.arg == "a")
    jump = next(i for i in insts if i.target is not None)
    assert live[store_a.index] >= {"x", "flag"}
    assert "a" in live[jump.index] and "x" in live[jump.index]   # both branches follow
    assert "a" not in live[jump.target]   # the not-taken path reads x only
    assert live[jump.target] == {"x"}


def _in_two_with_blocks(x):
    with contextlib.nullcontext():
        with contextlib.nullcontext():
            y = x.foo()
    return y


def _in_try(x):
    try:
        y = x.foo()
    except ValueError:
        y = 0
    return y


def test_with_blocks_around_an_instruction_are_read_from_the_exception_table():
    call, insts = _first(_in_two_with_blocks, "LOAD_METHOD")
    slots = with_block_exits(insts, call)
    assert len(slots) == 2 and slots[0] < slots[1]
    outside = next(i for i in insts if i.op == "LOAD_GLOBAL")
    assert with_block_exits(insts, outside) == ()


def test_a_try_block_is_refused():
    call, insts = _first(_in_try, "LOAD_METHOD")
    with pytest.raises(BreakRefused, match="try block"):
        with_block_exits(insts, call)


def test_a_superinstruction_splits_into_its_pair():
    if "LOAD_FAST_LOAD_FAST" not in dis.opmap:
        pytest.skip("superinstructions are 3.13's")
    for name, pair in SUPERINSTRUCTIONS.items():
        parts = split_superinstruction(Instr(name, ("a", "b"), lineno=3))
        assert [(p.name, p.arg, p.lineno) for p in parts] == [(pair[0], "a", 3), (pair[1], "b", 3)]
    plain = Instr("LOAD_FAST", "a", lineno=3)
    assert split_superinstruction(plain) == [plain]
