"""Stack shuffling and no-op opcodes: NOP, RESUME, POP_TOP, PUSH_NULL, COPY, SWAP, ..."""
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("NOP", "RESUME", "EXTENDED_ARG", "PRECALL", "CACHE", "COPY_FREE_VARS")
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
