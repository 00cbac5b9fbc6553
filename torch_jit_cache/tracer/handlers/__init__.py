"""The opcode dispatch table: opname -> handler(tx, inst), gathered from the family modules.

Each family module fills its own HANDLERS dict with the `handler` decorator from registry.py.
"""
from . import calls, containers, control, exceptions, load_store, operators, stack

DISPATCH = {}
for _family in (stack, load_store, calls, control, exceptions, containers, operators):
    overlap = DISPATCH.keys() & _family.HANDLERS.keys()
    assert not overlap, f"opcodes handled twice: {overlap}"
    DISPATCH.update(_family.HANDLERS)
