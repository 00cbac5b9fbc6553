"""What each CPython version does differently, as data: one `VersionFacts` row per version.

Decoding (instructions.py), analysis (analysis.py) and emitting (emitter.py, resume.py) read
`FACTS`, the running version's row, and never a version number; a version without a row is
refused by decode() and by codegen with the list of the supported ones.
"""
from __future__ import annotations

import dataclasses
import sys

__all__ = ["VersionFacts", "VERSIONS", "PYTHON", "FACTS"]


@dataclasses.dataclass(frozen=True)
class VersionFacts:
    """What one CPython version does differently, for decoding (tracer) and emitting (codegen)."""
    # 3.11/3.12: [NULL, callable, args...] (or [method, self, args...]); 3.13: [callable, NULL,
    # args...] (or [method, self, args...]).
    null_before_callable: bool
    # 3.11 needs PRECALL n before CALL n.
    precall: bool
    # 3.12+: LOAD_ATTR's argument is (is_method, name); 3.11 has LOAD_METHOD.
    load_attr_method_flag: bool
    # What FOR_ITER skips at its target when the iterator is exhausted: 3.12 jumps past END_FOR,
    # 3.13 past END_FOR and the POP_TOP after it; 3.11's target is the loop's exit itself.
    for_iter_skips: tuple
    # 3.13 loads a cell for a closure tuple with LOAD_FAST (LOAD_CLOSURE became a pseudo-op).
    load_fast_of_cell_is_load_closure: bool
    # 3.13: MAKE_FUNCTION takes no flags; SET_FUNCTION_ATTRIBUTE sets a closure or defaults after it.
    set_function_attribute: bool
    # 3.12+: LOAD_FAST trusts the compiler that the local is bound (an unbound one crashes the
    # interpreter); LOAD_FAST_CHECK raises UnboundLocalError. 3.11's LOAD_FAST checks.
    load_fast_unchecked: bool
    # `yield from`'s SEND, once its iterator is exhausted: 3.11 replaces the iterator with the
    # return value; 3.12+ pushes the return value over the iterator, which END_SEND then removes.
    send_keeps_receiver: bool


VERSIONS = {
    (3, 11): VersionFacts(null_before_callable=True, precall=True, load_attr_method_flag=False,
                          for_iter_skips=(), load_fast_of_cell_is_load_closure=False,
                          set_function_attribute=False, load_fast_unchecked=False, send_keeps_receiver=False),
    (3, 12): VersionFacts(null_before_callable=True, precall=False, load_attr_method_flag=True,
                          for_iter_skips=("END_FOR",), load_fast_of_cell_is_load_closure=False,
                          set_function_attribute=False, load_fast_unchecked=True, send_keeps_receiver=True),
    (3, 13): VersionFacts(null_before_callable=False, precall=False, load_attr_method_flag=True,
                          for_iter_skips=("END_FOR", "POP_TOP"),
                          load_fast_of_cell_is_load_closure=True, set_function_attribute=True,
                          load_fast_unchecked=True, send_keeps_receiver=True),
}
PYTHON = sys.version_info[:2]
FACTS = VERSIONS.get(PYTHON)
