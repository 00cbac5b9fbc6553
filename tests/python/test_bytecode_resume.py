"""bytecode/resume.py: resume code continues a code object at one of its instructions (torch-free).

Round trips: the resume code, given the live locals and the stack, returns what the original returns.
"""
import dis
import types

import pytest

from torch_jit_cache.bytecode.analysis import BreakRefused
from torch_jit_cache.bytecode.instructions import decode, next_raw
from torch_jit_cache.bytecode.resume import NULL, VALUE, build_resume_code


def _after_call(a, b):
    c = a * 10
    d = len(b)
    return c + d + a


def _call_in_an_expression(a, b):
    return a + len(b) * 2


def _resume_after(fn, op, nth=0):
    insts = decode(fn.__code__).insts
    at = [i for i in insts if i.op == op and i.first][nth]
    return next_raw(insts, at.index)


def test_resume_code_continues_with_the_live_locals():
    target = _resume_after(_after_call, "STORE_FAST", 1)   # after `d = len(b)`
    code, stack = build_resume_code(_after_call.__code__, target, (), ("a", "c", "d"), "_after_call",
                                    "_after_call")
    assert stack == ()
    assert code.co_varnames[:3] == ("a", "c", "d")
    assert code.co_name.startswith("_after_call_resume_at_")
    assert types.FunctionType(code, {})(2, 20, 5) == 2 * 10 + 5 + 2 == _after_call(2, "abcde")


def test_resume_code_pushes_the_stack_back():
    # After CALL len(b): the stack holds `a` below the call's result.
    target = _resume_after(_call_in_an_expression, "CALL")
    code, stack = build_resume_code(_call_in_an_expression.__code__, target, (VALUE, VALUE), (),
                                    "f", "f")
    assert len(stack) == 2 and all(n.startswith("___tjc_stack") for n in stack)
    assert types.FunctionType(code, {})(1, 3) == _call_in_an_expression(1, "abc")
    assert "___tjc_stack_0" in code.co_varnames   # an argument, deleted by the prologue


def test_a_null_slot_is_pushed_as_null():
    insts = decode(_call_in_an_expression.__code__).insts
    load_len = next(i for i in insts if i.instr.name == "LOAD_GLOBAL" and i.first)
    # After `len` is loaded with its NULL where the version puts it: [a, NULL, len] or [a, len, NULL].
    null_first = insts[load_len.index].op == "PUSH_NULL"
    slots = (VALUE, NULL, VALUE) if null_first else (VALUE, VALUE, NULL)
    code, stack = build_resume_code(_call_in_an_expression.__code__, next_raw(insts, load_len.index),
                                    slots, ("b",), "f", "f")
    assert len(stack) == 2
    assert types.FunctionType(code, {})("abc", 1, len) == _call_in_an_expression(1, "abc")


def test_a_target_outside_the_body_is_refused():
    insts = decode(_after_call.__code__).insts
    prologue = next(i for i in insts if i.instr.name == "RESUME")
    with pytest.raises(BreakRefused, match="not in the code's body"):
        build_resume_code(_after_call.__code__, prologue.index, (), (), "f", "f")


def _closure_over_an_argument(a, b):
    c = len(b)
    def inner():
        return a * 2
    return inner() + c


def test_a_closure_over_an_argument_cell_is_made_from_the_free_variable():
    # The argument `a` is also a cell. Resumed before `def inner`, the resume code holds that cell
    # as a free variable and must build inner's closure from it; 3.13 loads a cell for a closure
    # with LOAD_FAST, whose argument names the shared slot as "a", not as a cell. Left as a name,
    # it became a local of the resume code that nothing binds: the closure was built from NULL and
    # the interpreter crashed.
    code = _closure_over_an_argument.__code__
    assert code.co_cellvars == ("a",)
    target = _resume_after(_closure_over_an_argument, "STORE_FAST", 0)   # after `c = len(b)`
    resumed, stack = build_resume_code(code, target, (), ("c",), "f", "f")
    assert stack == ()
    assert resumed.co_freevars == ("a",)
    assert "a" not in resumed.co_varnames   # no unbound local "a" (checked before running it)
    resume = types.FunctionType(resumed, {}, closure=(types.CellType(5),))
    assert resume(3) == _closure_over_an_argument(5, "abc") == 13


def test_a_local_left_out_of_the_arguments_is_an_error_not_a_crash():
    # Given fewer live locals than the body reads (a liveness mistake), the resume code reads an
    # unbound local. 3.12+'s LOAD_FAST does not check and would crash the process; the resume
    # code loads such locals with LOAD_FAST_CHECK, so the mistake is an UnboundLocalError.
    from torch_jit_cache.bytecode.versions import FACTS

    target = _resume_after(_after_call, "STORE_FAST", 1)   # after `d = len(b)`: a, c, d are live
    code, _ = build_resume_code(_after_call.__code__, target, (), ("a", "d"), "f", "f")
    loads = {(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname.startswith("LOAD_FAST")}
    if FACTS.load_fast_unchecked:
        assert ("LOAD_FAST_CHECK", "c") in loads   # checked before running it
        assert ("LOAD_FAST", "a") in loads         # an argument keeps the fast load
    with pytest.raises(UnboundLocalError):
        types.FunctionType(code, {})(2, 5)
