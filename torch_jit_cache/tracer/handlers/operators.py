"""Operator opcodes: BINARY_OP (3.11 oparg), COMPARE_OP, IS_OP, CONTAINS_OP, UNARY_*."""
import dis

from ..variables.operators import binary_op, compare_op, contains_op, is_op, unary_op
from .registry import make_registry

HANDLERS, handler = make_registry()
_NB_SYMBOLS = [symbol for _, symbol in dis._nb_ops]


@handler("BINARY_OP")
def binary(tx, inst):
    b, a = tx.pop(), tx.pop()
    tx.push(binary_op(tx, _NB_SYMBOLS[inst.arg], a, b))


@handler("COMPARE_OP")
def compare(tx, inst):
    b, a = tx.pop(), tx.pop()
    tx.push(compare_op(tx, inst.argval, a, b))


@handler("IS_OP")
def is_(tx, inst):
    b, a = tx.pop(), tx.pop()
    tx.push(is_op(tx, a, b, invert=bool(inst.arg)))


@handler("CONTAINS_OP")
def contains(tx, inst):
    b, a = tx.pop(), tx.pop()
    tx.push(contains_op(tx, a, b, invert=bool(inst.arg)))


@handler("UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "UNARY_NOT")
def unary(tx, inst):
    tx.push(unary_op(tx, inst.opname, tx.pop()))
