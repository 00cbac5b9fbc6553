"""graph_break/plan.py: where a frame may be cut, and what runs there (torch-free)."""
import pytest

from torch_jit_cache.bytecode.instructions import decode
from torch_jit_cache.bytecode.versions import FACTS
from torch_jit_cache.graph_break import BreakRefused, plan_break


def _call(x, y):
    z = x + 1
    w = len(y)
    return z + w


def _branch(x, y):
    if x:
        return y
    return x


def _raise(x):
    raise ValueError(x)


def _in_try(x):
    try:
        return len(x)
    except TypeError:
        return 0


def _reads_locals(x):
    y = len(x)
    return locals()


def _at(fn, raw_name, nth=0):
    insts = decode(fn.__code__).insts
    return [i for i in insts if i.instr.name == raw_name and i.first][nth].index


def test_a_call_is_cut_with_what_it_consumes_and_pushes():
    plan = plan_break(_call.__code__, _at(_call, "CALL"))
    assert (plan.consumed, plan.pushed, plan.jump) == (3, (False,), None)
    assert len(plan.targets) == 1
    assert plan.live == (("z",),)   # y and x are dead after len(y); z is read later
    assert plan.emit is plan.instr


def test_a_conditional_jump_resumes_at_both_targets():
    insts = decode(_branch.__code__).insts
    jump = next(i for i in insts if i.op == "POP_JUMP_IF_FALSE" and i.first)
    plan = plan_break(_branch.__code__, jump.index)
    assert plan.jump == "POP_JUMP_IF_FALSE" and plan.consumed == 1 and plan.pushed == ()
    assert plan.targets[1] == jump.target
    assert plan.live == (("y",), ("x",))


def test_a_raise_has_no_target():
    plan = plan_break(_raise.__code__, _at(_raise, "RAISE_VARARGS"))
    assert plan.targets == () and plan.consumed == 1


def test_a_global_callable_is_loaded_plainly_and_its_null_pushed_by_the_resume_function():
    plan = plan_break(_call.__code__, _at(_call, "LOAD_GLOBAL"))
    assert plan.emit.name == "LOAD_GLOBAL" and plan.emit.arg == (False, "len")
    assert plan.pushed == ((True, False) if FACTS.null_before_callable else (False, True))


def test_inside_a_try_block_is_refused():
    with pytest.raises(BreakRefused, match="try block"):
        plan_break(_in_try.__code__, _at(_in_try, "CALL"))


def test_a_frame_that_reads_its_locals_is_refused():
    with pytest.raises(BreakRefused, match=r"reads its own locals \(locals\)"):
        plan_break(_reads_locals.__code__, _at(_reads_locals, "CALL"))
