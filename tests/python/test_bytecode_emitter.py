"""bytecode/emitter.py: the primitives generated code is written with, torch-free.

The version's call sequence (where NULL goes, PRECALL) is spelled in one place: every call the
transformed code, a break's instruction or a resume prologue makes goes through `Emitter`.
"""
import pathlib
import re
import types

import bytecode
import pytest

from torch_jit_cache.bytecode import emitter
from torch_jit_cache.bytecode.emitter import CodegenError, Emitter, attr_arg, emitted_jump, temps
from torch_jit_cache.bytecode.versions import FACTS

PACKAGE = pathlib.Path(emitter.__file__).resolve().parents[1]


def _code_of(source: str) -> types.CodeType:
    return next(c for c in compile(source, "<t>", "exec").co_consts if hasattr(c, "co_code"))


def _run(em: Emitter, original: types.CodeType):
    """The emitted body after the original's prologue, run as a function of `original`'s arguments."""
    bc = bytecode.Bytecode.from_code(original)
    prologue = []
    for instr in bc:
        prologue.append(instr)
        if isinstance(instr, bytecode.Instr) and instr.name == "RESUME":
            break
    new = bytecode.Bytecode(prologue + em.instrs)
    for attr in ("argcount", "argnames", "name", "qualname", "filename", "first_lineno", "flags"):
        setattr(new, attr, getattr(bc, attr))
    return types.FunctionType(new.to_code(), {})


def test_a_call_is_the_versions_sequence():
    em = Emitter(_code_of("def f(a, b):\n    pass\n"), 1)
    em.call_const_with(max, [lambda: em.emit("LOAD_FAST", "a"), lambda: em.emit("LOAD_FAST", "b")])
    names = [i.name for i in em.instrs]
    callable_and_null = ["PUSH_NULL", "LOAD_CONST"] if FACTS.null_before_callable else ["LOAD_CONST", "PUSH_NULL"]
    assert names == callable_and_null + ["LOAD_FAST", "LOAD_FAST"] + (["PRECALL"] if FACTS.precall else []) + ["CALL"]


def test_an_emitted_call_runs():
    original = _code_of("def f(a, b):\n    pass\n")
    em = Emitter(original, 1)
    em.call_const_with(max, [lambda: em.load_argument("a", "a"), lambda: em.load_argument("b", "b")])
    em.emit("RETURN_VALUE")
    assert _run(em, original)(3, 7) == 7


def test_a_plain_attribute_load_runs():
    original = _code_of("def f(a):\n    pass\n")
    em = Emitter(original, 1)
    em.load_argument("a", "a")
    em.load_attr("real")
    em.emit("RETURN_VALUE")
    assert _run(em, original)(3 + 4j) == 3.0
    assert attr_arg("x") == ((False, "x") if FACTS.load_attr_method_flag else "x")


def test_a_name_that_is_not_an_argument_is_refused():
    em = Emitter(_code_of("def f(a):\n    b = 1\n"), 1)
    with pytest.raises(CodegenError, match="'b' is not an argument"):
        em.load_argument("b", "b")


def test_temporaries_are_fresh_names():
    made = []
    temp = temps({"x", "x_1"}, made)
    assert (temp("x"), temp("x"), temp("y")) == ("x_2", "x_3", "y")
    assert made == ["x_2", "x_3", "y"]


def test_a_conditional_jump_is_emitted_forward_where_the_version_has_the_forward_form():
    name = emitted_jump("POP_JUMP_IF_TRUE")
    assert name in ("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_IF_TRUE")
    assert name == ("POP_JUMP_FORWARD_IF_TRUE" if FACTS.precall else "POP_JUMP_IF_TRUE")


def test_only_the_emitter_spells_the_versions_call_sequence():
    """The facts that shape a call (NULL placement, PRECALL) are read where calls are emitted and
    nowhere else in code that writes bytecode: codegen, graph_break/ and the resume builder emit
    their calls through Emitter."""
    writers = [PACKAGE / "pipeline" / "codegen.py", *sorted((PACKAGE / "graph_break").glob("*.py")),
               PACKAGE / "bytecode" / "resume.py"]
    readers = [str(p.relative_to(PACKAGE)) for p in writers
               if re.search(r"FACTS\.(precall|null_before_callable|load_attr_method_flag)", p.read_text())
               and p.name != "plan.py"]
    assert readers == []
    assert "FACTS.precall" in (PACKAGE / "bytecode" / "emitter.py").read_text()
