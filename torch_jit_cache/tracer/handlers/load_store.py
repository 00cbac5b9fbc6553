"""Loads and stores: constants, fast locals, globals, cells, attributes, imports."""
from ...bytecode.versions import FACTS
from ..variables import CellVariable, ConstantVariable, DictVariable, TupleVariable
from ..variables.base import refuse_outer_change, unsupported
from ..variables.python_objects.class_statements import BuildClassVariable, NamespaceVariable
from ..variables.constant import is_constant_value
from ..variables.torch_objects.contexts import context_class
from ..variables.torch_objects.dynamo_contexts import dynamo_context_class
from ..variables.python_objects.imports import import_from, import_name
from .registry import make_registry

HANDLERS, handler = make_registry()


def const_variable(value):
    if isinstance(value, tuple):
        return TupleVariable([const_variable(v) for v in value])
    if is_constant_value(value) or hasattr(value, "co_code"):
        return ConstantVariable(value)
    ctx = context_class(value, None) or dynamo_context_class(value)
    if ctx is not None:   # a resume function's prologue enters a grad-mode or autocast block again
        return ctx
    unsupported(f"constant of type {type(value).__name__}")


@handler("LOAD_CONST")
def load_const(tx, inst):
    tx.push(const_variable(inst.arg))


@handler("LOAD_FAST")
def load_fast(tx, inst):
    tx.push(tx.load_local(inst.arg))


@handler("LOAD_FAST_AND_CLEAR")
def load_fast_and_clear(tx, inst):
    # 3.12+ (an inlined comprehension saves the outer value of its loop variable): the value, or
    # NULL where the local is unbound; the local is unbound afterwards.
    name = inst.arg
    value = tx.load_local(name) if tx.has_local(name) else tx.NULL
    tx.locals.pop(name, None)
    tx.push(value)


@handler("STORE_FAST")
def store_fast(tx, inst):
    value = tx.pop()
    if value is tx.NULL:  # restoring a local LOAD_FAST_AND_CLEAR found unbound
        tx.locals.pop(inst.arg, None)
        tx.raw_args.pop(inst.arg, None)
    else:
        tx.locals[inst.arg] = value


@handler("DELETE_FAST")
def delete_fast(tx, inst):
    tx.load_local(inst.arg)
    del tx.locals[inst.arg]


@handler("LOAD_GLOBAL")
def load_global(tx, inst):
    tx.push(tx.load_global(inst.arg))


@handler("MAKE_CELL")
def make_cell(tx, inst):
    name = inst.arg
    value = tx.load_local(name) if tx.has_local(name) else None
    tx.locals.pop(name, None)
    tx.cells[name] = CellVariable(value, root_name=name if tx.depth == 0 else None)


@handler("LOAD_DEREF")
def load_deref(tx, inst):
    tx.push(tx.cell(inst.arg).load(tx))


@handler("STORE_DEREF")
def store_deref(tx, inst):
    tx.cell(inst.arg).store(tx, tx.pop())


@handler("LOAD_CLOSURE")
def load_closure(tx, inst):
    tx.push(tx.cell(inst.arg))


# A class body (class_statements.py): its locals are the class namespace, `tx.namespace`.
def _namespace(tx, inst) -> dict:
    if tx.namespace is None:
        unsupported(f"{inst.op} outside a class body (module-level code)")
    return tx.namespace


@handler("LOAD_BUILD_CLASS")
def load_build_class(tx, inst):
    tx.push(BuildClassVariable())


@handler("LOAD_NAME")
def load_name(tx, inst):
    namespace = _namespace(tx, inst)
    tx.push(namespace[inst.arg] if inst.arg in namespace else tx.load_global(inst.arg))


@handler("STORE_NAME")
def store_name(tx, inst):
    _namespace(tx, inst)[inst.arg] = tx.pop()


@handler("SETUP_ANNOTATIONS")
def setup_annotations(tx, inst):
    # `name: T = v` in a class body stores T in the namespace's __annotations__ dict.
    namespace = _namespace(tx, inst)
    if "__annotations__" not in namespace:
        namespace["__annotations__"] = DictVariable({})


@handler("LOAD_LOCALS")
def load_locals(tx, inst):
    tx.push(NamespaceVariable(_namespace(tx, inst)))


@handler("LOAD_FROM_DICT_OR_DEREF")
def load_from_dict_or_deref(tx, inst):
    mapping = tx.pop()
    if not isinstance(mapping, NamespaceVariable):
        unsupported(f"{inst.op} over {mapping}")
    name = inst.arg
    tx.push(mapping.namespace[name] if name in mapping.namespace else tx.cell(name).load(tx))


@handler("LOAD_ATTR")
def load_attr(tx, inst):
    obj = tx.pop()
    tx.push(obj.var_getattr(tx, inst.arg))


def push_callable(tx, fn):
    """Push `fn` with the NULL beside it, in this version's order (instructions.VersionFacts): a
    bound method is tracked as one callable, so CALL sees an ordinary call."""
    if FACTS.null_before_callable:
        tx.push(tx.NULL)
        tx.push(fn)
    else:
        tx.push(fn)
        tx.push(tx.NULL)


@handler("LOAD_METHOD")
def load_method(tx, inst):
    obj = tx.pop()
    push_callable(tx, obj.var_getattr(tx, inst.arg))


def _super_attribute(tx, inst):
    # 3.12+: [global super, class, self] -> super(class, self).name, whether the source wrote
    # super() or super(class, self).
    self_, cls, super_fn = tx.pop(), tx.pop(), tx.pop()
    return tx.call(super_fn, [cls, self_], {}).var_getattr(tx, inst.arg)


@handler("LOAD_SUPER_ATTR")
def load_super_attr(tx, inst):
    tx.push(_super_attribute(tx, inst))


@handler("LOAD_SUPER_METHOD")
def load_super_method(tx, inst):
    push_callable(tx, _super_attribute(tx, inst))


# Side effects on objects outside the graph: recorded for replay after the graph where that can be
# done faithfully (tracer/side_effects.py), refused otherwise.
@handler("STORE_ATTR")
def store_attr(tx, inst):
    obj, value = tx.pop(), tx.pop()
    refuse_outer_change(obj, "an attribute store")
    obj.var_setattr(tx, inst.arg, value)


@handler("DELETE_ATTR")
def delete_attr(tx, inst):
    obj = tx.pop()
    refuse_outer_change(obj, "an attribute deletion")
    obj.var_delattr(tx, inst.arg)


@handler("STORE_GLOBAL")
def store_global(tx, inst):
    tx.store_global(inst.arg, tx.pop())


@handler("DELETE_GLOBAL")
def delete_global(tx, inst):
    tx.delete_global(inst.arg)


@handler("IMPORT_NAME")
def import_name_(tx, inst):
    # [level, fromlist] -> module (variables/python_objects/imports.py: modules already imported only)
    fromlist, level = tx.pop().as_python_constant(), tx.pop().as_python_constant()
    tx.push(import_name(tx, inst.arg, fromlist, level))


@handler("IMPORT_FROM")
def import_from_(tx, inst):
    # [module] -> [module, module.name]
    tx.push(import_from(tx, tx.stack[-1], inst.arg))


@handler("DELETE_DEREF")
def delete_deref(tx, inst):
    unsupported(f"{inst.op} {inst.arg} (a side effect on an object outside the graph)")
