"""Resume functions: which code objects are resume codes, their chains, and one per break target.

A resume code (bytecode/resume.py builds it) exists only because its origin was compiled: the hook
compiles it whatever the trace rules say of its module (`is_resume_code`). A break in every
iteration of a loop makes one resume function per iteration, each continuing the previous one, in
a chain at most `max_depth` long (config.max_resume_depth); past it the break is refused and the
rest runs uncompiled. The transformed code of a resume function clears its stack arguments once
loaded, as the prologue does (`stack_args`).

No torch here: codegen and the runtime's torch-free tests import this module.
"""
from __future__ import annotations

import dataclasses
import types
import weakref

from ..bytecode.analysis import BreakRefused
from ..bytecode.resume import ITER, NULL, VALUE, build_resume_code
from ..guard.trace_result import BreakOutput, EnteredContext

__all__ = ["is_resume_code", "stack_args", "resume_function", "resume_functions"]

# Resume codes made by this process, held weakly, with how many resume codes they descend from
# (1: made from a user's code).
_RESUME_CODES: "weakref.WeakKeyDictionary[types.CodeType, _Origin]" = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class _Origin:
    """Where a resume code comes from: the user's function it continues, and its depth."""
    name: str
    qualname: str
    depth: int
    stack_args: tuple = ()   # its arguments that carry stack items, not locals of the original


def is_resume_code(code: types.CodeType) -> bool:
    return code in _RESUME_CODES


def stack_args(code: types.CodeType) -> tuple:
    """The arguments of a resume code that carry stack items (none for any other code): the
    transformed code of a resume function clears them once loaded, as the prologue does."""
    origin = _RESUME_CODES.get(code)
    return origin.stack_args if origin is not None else ()


def resume_code(code: types.CodeType, target: int, slots: tuple, live: tuple,
                max_depth: int = 32) -> types.CodeType:
    """The resume code continuing `code` at decoded index `target` (bytecode/resume.py has what
    `slots` and `live` mean), registered with its origin; BreakRefused past `max_depth`."""
    parent = _RESUME_CODES.get(code)
    origin = _Origin(code.co_name, code.co_qualname, 1) if parent is None \
        else _Origin(parent.name, parent.qualname, parent.depth + 1)
    if origin.depth > max_depth:
        raise BreakRefused(f"more than {max_depth} resume functions in a chain (a graph break in a "
                           "long loop: the rest runs uncompiled; TJC_MAX_RESUME_DEPTH raises it)")
    resume, names = build_resume_code(code, target, slots, live, origin.name, origin.qualname)
    _RESUME_CODES[resume] = dataclasses.replace(origin, stack_args=names)
    return resume


def resume_function(code: types.CodeType, f_globals: dict, target: int, slots: tuple,
                    live: tuple, max_depth: int = 32):
    """The resume function for `code` at `target`, held only by the transformed code that calls
    it; for a code with free variables, the resume code (the transformed code makes the function
    per call, with the frame's closure)."""
    resume = resume_code(code, target, slots, live, max_depth)
    if resume.co_freevars:
        return resume
    return types.FunctionType(resume, f_globals, resume.co_name)


def resume_functions(code, f_globals, spec: BreakOutput, max_depth: int) -> list:
    """One resume function per target of the break: the stack there is the items the instruction
    left below (NULL where it was, a grad-mode or autocast block entered again where its exit was)
    and the ones it pushed; its arguments are those values and the live locals bound at the break."""
    plan = spec.plan
    carried = spec.stack[:len(spec.stack) - plan.consumed]
    slots = tuple(NULL if item is None else item if isinstance(item, EnteredContext) else
                  ITER if i in spec.iter_slots else VALUE
                  for i, item in enumerate(carried))
    slots += tuple(NULL if null else VALUE for null in plan.pushed)
    bound = {name for name, _ in spec.locals}
    return [resume_function(code, f_globals, target, slots, tuple(n for n in live if n in bound), max_depth)
            for target, live in zip(plan.targets, plan.live)]
