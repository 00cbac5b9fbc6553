"""Container opcodes: BUILD_*, LIST_APPEND/EXTEND, SET_ADD/UPDATE (variables/collections/sets.py), MAP_ADD,
UNPACK_SEQUENCE, subscripts, strings."""
from ..variables import ConstantVariable, DictVariable, ListVariable, TupleVariable
from ..variables.base import unsupported
from ..variables.builtin_functions.operators import delitem, getitem, setitem
from ..variables.collections.sets import SetVariable, constants_of
from ..variables.torch_objects.symbolic import SymbolicSliceVariable, SymNodeVariable
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("BUILD_TUPLE")
def build_tuple(tx, inst):
    tx.push(TupleVariable(tx.popn(inst.arg)))


@handler("BUILD_LIST")
def build_list(tx, inst):
    tx.push(ListVariable(tx.popn(inst.arg)))


@handler("BUILD_SET")
def build_set(tx, inst):
    tx.push(SetVariable(constants_of(tx.popn(inst.arg), "a set literal", tx)))


@handler("SET_ADD")
def set_add(tx, inst):
    v = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "add", [v], {})


@handler("SET_UPDATE")
def set_update(tx, inst):
    v = tx.pop()
    target = tx.stack[-inst.arg]
    if not isinstance(target, SetVariable):
        unsupported(f"SET_UPDATE on {target} (tracer bug)")
    target.items.update(constants_of(v.unpack(tx), "a set literal", tx))


@handler("LIST_TO_TUPLE")
def list_to_tuple(tx, inst):
    tx.push(TupleVariable(tx.pop().unpack(tx)))


@handler("LIST_APPEND")
def list_append(tx, inst):
    v = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "append", [v], {})


@handler("LIST_EXTEND")
def list_extend(tx, inst):
    v = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "extend", [v], {})


@handler("BUILD_MAP")
def build_map(tx, inst):
    flat = tx.popn(2 * inst.arg)
    if not all(flat[i].is_python_constant() for i in range(0, len(flat), 2)):
        # Objects of the trace among the keys: stored one by one, each looked up as Python's
        # PyDict_SetItem does (DictVariable.setitem, object_keys.py).
        made = DictVariable({})
        for i in range(0, len(flat), 2):
            made.setitem(tx, flat[i], flat[i + 1])
        tx.push(made)
        return
    made = DictVariable({flat[i].as_python_constant(): flat[i + 1] for i in range(0, len(flat), 2)})
    if not inst.arg:
        made.table = {}   # `{}`: eager's is a new empty dict too (its layout followed from here)
    tx.push(made)


@handler("BUILD_CONST_KEY_MAP")
def build_const_key_map(tx, inst):
    keys = tx.pop().as_python_constant()
    values = tx.popn(inst.arg)
    tx.push(DictVariable(dict(zip(keys, values))))


@handler("MAP_ADD")
def map_add(tx, inst):
    value, key = tx.pop(), tx.pop()
    tx.stack[-inst.arg].setitem(tx, key, value)


@handler("DICT_UPDATE", "DICT_MERGE")
def dict_update(tx, inst):
    other = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "update", [other], {})


@handler("UNPACK_SEQUENCE")
def unpack_sequence(tx, inst):
    items = tx.pop().unpack(tx)
    if len(items) != inst.arg:
        unsupported(f"unpacking {len(items)} values into {inst.arg}")
    for item in reversed(items):
        tx.push(item)


@handler("UNPACK_EX")
def unpack_ex(tx, inst):
    before, after = inst.arg
    items = tx.pop().unpack(tx)
    if len(items) < before + after:
        unsupported("not enough values to unpack")
    rest = ListVariable(items[before:len(items) - after])
    for item in reversed([*items[:before], rest, *items[len(items) - after:]]):
        tx.push(item)


@handler("BUILD_SLICE")
def build_slice(tx, inst):
    parts = tx.popn(inst.arg)
    if any(isinstance(p, SymNodeVariable) for p in parts):
        tx.push(SymbolicSliceVariable(parts))   # x[:, :T] with T a symbolic size
        return
    if not all(p.is_python_constant() for p in parts):
        unsupported("a slice with non-constant bounds")
    tx.push(ConstantVariable(slice(*[p.as_python_constant() for p in parts])))


@handler("BINARY_SUBSCR")
def binary_subscr(tx, inst):
    key = tx.pop()
    obj = tx.pop()
    tx.push(getitem(tx, obj, key))


@handler("STORE_SUBSCR")
def store_subscr(tx, inst):
    key, obj, value = tx.pop(), tx.pop(), tx.pop()
    setitem(tx, obj, key, value)


@handler("DELETE_SUBSCR")
def delete_subscr(tx, inst):
    key, obj = tx.pop(), tx.pop()
    delitem(tx, obj, key)


_CONVERSIONS = {"str": str, "repr": repr, "ascii": ascii}


def _constant_of(value, what: str):
    if not value.is_python_constant():
        unsupported(f"{what} {value} into a string")
    return value.as_python_constant()


@handler("CONVERT_VALUE")
def convert_value(tx, inst):
    value = _constant_of(tx.pop(), "converting")
    tx.push(ConstantVariable(_CONVERSIONS[inst.arg](value)))


@handler("FORMAT_SIMPLE")
def format_simple(tx, inst):
    tx.push(ConstantVariable(format(_constant_of(tx.pop(), "formatting"))))


@handler("FORMAT_WITH_SPEC")
def format_with_spec(tx, inst):
    spec = tx.pop().as_python_constant()
    tx.push(ConstantVariable(format(_constant_of(tx.pop(), "formatting"), spec)))


@handler("BUILD_STRING")
def build_string(tx, inst):
    tx.push(ConstantVariable("".join(p.as_python_constant() for p in tx.popn(inst.arg))))
