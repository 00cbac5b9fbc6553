"""Operator opcodes: BINARY_OP, COMPARE_OP, IS_OP, CONTAINS_OP, UNARY_*.

BINARY_OP's and COMPARE_OP's arguments are operator symbols ('+', '+=', '<'), decoded from each
version's numbering in instructions.py.
"""
from ..variables.builtin_functions.operators import binary_op, compare_op, contains_op, is_op, unary_op
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("BINARY_OP")
def binary(tx, inst):
    b, a = tx.pop(), tx.pop()
    tx.push(binary_op(tx, inst.arg, a, b))


@handler("COMPARE_OP")
def compare(tx, inst):
    b, a = tx.pop(), tx.pop()
    tx.push(compare_op(tx, inst.arg, a, b))


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
    tx.push(unary_op(tx, inst.op, tx.pop()))
