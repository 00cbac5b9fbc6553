"""Control flow on Python values: jumps, conditional jumps, FOR_ITER, RETURN_VALUE.

A condition must be a Python value known while tracing; a branch on a tensor raises Unsupported
(from TensorVariable.truthy). Loops unroll: FOR_ITER over an IteratorVariable of known items.
"""
from ..variables import ConstantVariable, IteratorVariable
from ..variables.base import unsupported
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE")
def jump(tx, inst):
    tx.jump_to(inst.argval)


def _is_none(v):
    return isinstance(v, ConstantVariable) and v.value is None


@handler("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_IF_TRUE")
def pop_jump_if_true(tx, inst):
    if tx.pop().truthy(tx):
        tx.jump_to(inst.argval)


@handler("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_IF_FALSE")
def pop_jump_if_false(tx, inst):
    if not tx.pop().truthy(tx):
        tx.jump_to(inst.argval)


@handler("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_IF_NONE")
def pop_jump_if_none(tx, inst):
    if _is_none(tx.pop()):
        tx.jump_to(inst.argval)


@handler("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE",
         "POP_JUMP_IF_NOT_NONE")
def pop_jump_if_not_none(tx, inst):
    if not _is_none(tx.pop()):
        tx.jump_to(inst.argval)


@handler("JUMP_IF_TRUE_OR_POP")
def jump_if_true_or_pop(tx, inst):
    if tx.stack[-1].truthy(tx):
        tx.jump_to(inst.argval)
    else:
        tx.pop()


@handler("JUMP_IF_FALSE_OR_POP")
def jump_if_false_or_pop(tx, inst):
    if not tx.stack[-1].truthy(tx):
        tx.jump_to(inst.argval)
    else:
        tx.pop()


@handler("GET_ITER")
def get_iter(tx, inst):
    obj = tx.pop()
    tx.push(obj if isinstance(obj, IteratorVariable) else IteratorVariable(obj.unpack(tx)))


@handler("FOR_ITER")
def for_iter(tx, inst):
    it = tx.stack[-1]
    if not isinstance(it, IteratorVariable):
        unsupported(f"FOR_ITER over {it}")
    item = it.next_item()
    if item is None:
        tx.pop()
        tx.jump_to(inst.argval)
    else:
        tx.push(item)


@handler("RETURN_VALUE")
def return_value(tx, inst):
    tx.return_value(tx.pop())
