"""Loads and stores: constants, fast locals, globals, cells, attributes."""
from ...trace_result import Unsupported  # noqa: F401
from ..variables import CellVariable, ConstantVariable, TupleVariable
from ..variables.base import unsupported
from ..variables.constant import is_constant_value
from .registry import make_registry

HANDLERS, handler = make_registry()


def const_variable(value):
    if isinstance(value, tuple):
        return TupleVariable([const_variable(v) for v in value])
    if is_constant_value(value) or hasattr(value, "co_code"):
        return ConstantVariable(value)
    unsupported(f"constant of type {type(value).__name__}")


@handler("LOAD_CONST")
def load_const(tx, inst):
    tx.push(const_variable(inst.argval))


@handler("LOAD_FAST")
def load_fast(tx, inst):
    tx.push(tx.load_local(inst.argval))


@handler("STORE_FAST")
def store_fast(tx, inst):
    tx.locals[inst.argval] = tx.pop()


@handler("DELETE_FAST")
def delete_fast(tx, inst):
    tx.load_local(inst.argval)
    del tx.locals[inst.argval]


@handler("LOAD_GLOBAL")
def load_global(tx, inst):
    if inst.arg & 1:
        tx.push(tx.NULL)
    tx.push(tx.load_global(inst.argval))


@handler("MAKE_CELL")
def make_cell(tx, inst):
    name = inst.argval
    value = tx.load_local(name) if tx.has_local(name) else None
    tx.locals.pop(name, None)
    tx.cells[name] = CellVariable(value)


@handler("LOAD_DEREF")
def load_deref(tx, inst):
    tx.push(tx.cell(inst.argval).load(tx))


@handler("STORE_DEREF")
def store_deref(tx, inst):
    tx.cell(inst.argval).store(tx, tx.pop())


@handler("LOAD_CLOSURE")
def load_closure(tx, inst):
    tx.push(tx.cell(inst.argval))


@handler("LOAD_ATTR")
def load_attr(tx, inst):
    obj = tx.pop()
    tx.push(obj.var_getattr(tx, inst.argval))


@handler("LOAD_METHOD")
def load_method(tx, inst):
    # Push NULL + the bound attribute: CALL then sees an ordinary call of a callable.
    obj = tx.pop()
    tx.push(tx.NULL)
    tx.push(obj.var_getattr(tx, inst.argval))


@handler("STORE_ATTR", "DELETE_ATTR", "STORE_GLOBAL", "DELETE_GLOBAL", "DELETE_DEREF")
def store_side_effect(tx, inst):
    unsupported(f"{inst.opname} {inst.argval} (a side effect on an object outside the graph)")
