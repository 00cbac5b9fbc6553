"""Stack shuffling and no-op opcodes: NOP, POP_TOP, PUSH_NULL, COPY, SWAP.

RESUME, PRECALL and COPY_FREE_VARS decode to NOP (instructions.py): the shadow frame has done
what they do before the trace's view of the frame begins.
"""
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("NOP")
def nop(tx, inst):
    pass


@handler("POP_TOP")
def pop_top(tx, inst):
    tx.pop()


@handler("PUSH_NULL")
def push_null(tx, inst):
    tx.push(tx.NULL)


@handler("COPY")
def copy(tx, inst):
    tx.push(tx.stack[-inst.arg])


@handler("SWAP")
def swap(tx, inst):
    s = tx.stack
    s[-1], s[-inst.arg] = s[-inst.arg], s[-1]
