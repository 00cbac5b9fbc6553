"""Calls: KW_NAMES, CALL, CALL_KW, CALL_FUNCTION_EX, MAKE_FUNCTION, SET_FUNCTION_ATTRIBUTE.

Below a call's arguments lie two slots: the callable and NULL, or a method and its self. Their
order is the version's (instructions.VersionFacts.null_before_callable); `_pop_callable` reads it.
"""
from ...bytecode.versions import FACTS
from ..variables import DictVariable, NestedFunctionVariable, TupleVariable
from ..variables.base import unsupported
from .registry import make_registry

HANDLERS, handler = make_registry()


def _pop_callable(tx):
    """Pop the two slots below the arguments: (the function to call, [self] or [])."""
    top, below = tx.pop(), tx.pop()
    # 3.11/3.12 [NULL, callable]; 3.13 [callable, NULL]
    null_slot, fn_slot = (below, top) if FACTS.null_before_callable else (top, below)
    if null_slot is tx.NULL:
        return fn_slot, []
    return below, [top]  # [method, self] in every version


def _call(tx, argc: int, kw: tuple):
    args = tx.popn(argc)
    kwargs = dict(zip(kw, args[len(args) - len(kw):])) if kw else {}
    args = args[:len(args) - len(kw)]
    fn, self_args = _pop_callable(tx)
    tx.push(tx.call(fn, [*self_args, *args], kwargs))


@handler("KW_NAMES")
def kw_names(tx, inst):
    tx.kw_names = inst.arg


@handler("CALL")
def call(tx, inst):
    kw = tx.kw_names or ()
    tx.kw_names = None
    _call(tx, inst.arg, kw)


@handler("CALL_KW")
def call_kw(tx, inst):
    # 3.13: the keyword names are a constant tuple on top of the arguments.
    _call(tx, inst.arg, tuple(tx.pop().as_python_constant()))


@handler("CALL_FUNCTION_EX")
def call_function_ex(tx, inst):
    kwargs = tx.pop() if inst.arg & 1 else DictVariable({})
    args = tx.pop()
    fn, self_args = _pop_callable(tx)
    if self_args:
        unsupported("CALL_FUNCTION_EX on a method with its self (tracer bug)")
    if not isinstance(kwargs, DictVariable):
        unsupported("** of a non-dict")
    items = args.unpack(tx) if not isinstance(args, TupleVariable) else args.items
    tx.push(tx.call(fn, list(items), kwargs.mapping_items(tx)))


# MAKE_FUNCTION's flags (3.11/3.12) and SET_FUNCTION_ATTRIBUTE's argument (3.13) name the same parts.
_DEFAULTS, _KWDEFAULTS, _ANNOTATIONS, _CLOSURE = 0x01, 0x02, 0x04, 0x08


@handler("MAKE_FUNCTION")
def make_function(tx, inst):
    code = tx.pop().as_python_constant()
    flags = inst.arg or 0
    cells = tx.pop().items if flags & _CLOSURE else []
    annotations = tx.pop() if flags & _ANNOTATIONS else None
    kwdefaults = tx.pop().items if flags & _KWDEFAULTS else {}
    defaults = tx.pop().items if flags & _DEFAULTS else []
    tx.push(NestedFunctionVariable(code, tx.f_globals, tx.global_resolver(), list(defaults),
                                   dict(kwdefaults), list(cells), in_root=tx.depth == 0,
                                   annotations=annotations))


@handler("SET_FUNCTION_ATTRIBUTE")
def set_function_attribute(tx, inst):
    fn, value = tx.pop(), tx.pop()
    if not isinstance(fn, NestedFunctionVariable):
        unsupported(f"SET_FUNCTION_ATTRIBUTE on {fn} (tracer bug)")
    if inst.arg == _CLOSURE:
        fn.set_parts(cells=list(value.items))
    elif inst.arg == _KWDEFAULTS:
        fn.set_parts(kwdefaults=dict(value.items))
    elif inst.arg == _DEFAULTS:
        fn.set_parts(defaults=list(value.items))
    elif inst.arg == _ANNOTATIONS:
        fn.set_parts(annotations=value)
    else:
        unsupported(f"SET_FUNCTION_ATTRIBUTE {inst.arg}")
    tx.push(fn)


@handler("CALL_INTRINSIC_1")
def call_intrinsic_1(tx, inst):
    # The intrinsics with a plain meaning (LIST_TO_TUPLE, UNARY_POSITIVE) decode to those opcodes;
    # the rest (import *, StopIteration in generators, type parameters) are not traced.
    unsupported(f"CALL_INTRINSIC_1 {inst.arg}")
