"""Calls: KW_NAMES, CALL (3.11 null-or-self convention), CALL_FUNCTION_EX, MAKE_FUNCTION."""
from ..variables import DictVariable, NestedFunctionVariable, TupleVariable
from ..variables.base import unsupported
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("KW_NAMES")
def kw_names(tx, inst):
    tx.kw_names = tx.code.co_consts[inst.arg]


@handler("CALL")
def call(tx, inst):
    argc = inst.arg
    args = tx.popn(argc)
    kw = tx.kw_names or ()
    tx.kw_names = None
    kwargs = dict(zip(kw, args[len(args) - len(kw):])) if kw else {}
    args = args[:len(args) - len(kw)]
    second, first = tx.pop(), tx.pop()
    if first is tx.NULL:
        fn = second
    else:  # a method: first is the function, second is self
        fn, args = first, [second, *args]
    tx.push(tx.call(fn, args, kwargs))


@handler("CALL_FUNCTION_EX")
def call_function_ex(tx, inst):
    kwargs = tx.pop() if inst.arg & 1 else DictVariable({})
    args = tx.pop()
    fn = tx.pop()
    null = tx.pop()
    if null is not tx.NULL:
        unsupported("CALL_FUNCTION_EX without NULL")
    if not isinstance(kwargs, DictVariable):
        unsupported("** of a non-dict")
    items = args.unpack(tx) if not isinstance(args, TupleVariable) else args.items
    tx.push(tx.call(fn, list(items), dict(kwargs.items)))


@handler("MAKE_FUNCTION")
def make_function(tx, inst):
    code = tx.pop().as_python_constant()
    flags = inst.arg
    cells = tx.pop().items if flags & 0x08 else []
    if flags & 0x04:
        tx.pop()  # annotations
    kwdefaults = tx.pop().items if flags & 0x02 else {}
    defaults = tx.pop().items if flags & 0x01 else []
    tx.push(NestedFunctionVariable(code, tx.f_globals, tx.global_source, list(defaults),
                                   dict(kwdefaults), list(cells)))
