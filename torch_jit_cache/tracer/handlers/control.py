"""Control flow on Python values: jumps, conditional jumps, TO_BOOL, FOR_ITER, RETURN_VALUE,
BEFORE_WITH, and a generator's RETURN_GENERATOR / YIELD_VALUE (variables/python_objects/generators.py). Raises and
their handlers are exceptions.py's.

A condition must be a Python value known while tracing; a branch on a tensor raises Unsupported
(from TensorVariable.truthy). Loops unroll: FOR_ITER over an IteratorVariable of known items.
"""
from ...bytecode.versions import FACTS
from ..variables import ConstantVariable, IteratorVariable
from ..variables.collections.iterators import iterate
from ..variables.torch_objects.contexts import (AutocastVariable, GradModeVariable, InferenceModeVariable, context_object,
                                                enter_user_context)
from ..variables.torch_objects.dynamo_contexts import DynamoOnlyContextVariable
from ..variables.torch_objects.saved_hooks_contexts import HooksDisabledVariable
from ..variables.python_objects.generators import GeneratorVariable
from ..variables.python_objects.new_object import NewObjectVariable
from ..variables.base import unsupported
from ..variables.python_objects.exceptions import HandledInfoVariable
from ..variables.python_objects.user_object import UserObjectVariable
from ..variables.python_objects.user_iterators import has_python_next, next_or_none
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("JUMP")
def jump(tx, inst):
    tx.jump_to(inst.target)


def _is_none(v):
    if getattr(v, "caller_exception", False):   # what the caller handles: None or not, unknown
        unsupported(f"{v} compared with None: the exception the caller handles is unknown")
    return isinstance(v, ConstantVariable) and v.value is None


@handler("POP_JUMP_IF_TRUE")
def pop_jump_if_true(tx, inst):
    if tx.pop().truthy(tx):
        tx.jump_to(inst.target)


@handler("POP_JUMP_IF_FALSE")
def pop_jump_if_false(tx, inst):
    if not tx.pop().truthy(tx):
        tx.jump_to(inst.target)


@handler("POP_JUMP_IF_NONE")
def pop_jump_if_none(tx, inst):
    if _is_none(tx.pop()):
        tx.jump_to(inst.target)


@handler("POP_JUMP_IF_NOT_NONE")
def pop_jump_if_not_none(tx, inst):
    if not _is_none(tx.pop()):
        tx.jump_to(inst.target)


@handler("JUMP_IF_TRUE_OR_POP")
def jump_if_true_or_pop(tx, inst):
    if tx.stack[-1].truthy(tx):
        tx.jump_to(inst.target)
    else:
        tx.pop()


@handler("JUMP_IF_FALSE_OR_POP")
def jump_if_false_or_pop(tx, inst):
    if not tx.stack[-1].truthy(tx):
        tx.jump_to(inst.target)
    else:
        tx.pop()


@handler("TO_BOOL")
def to_bool(tx, inst):
    # 3.13: conditional jumps and `not` take an exact bool, made here.
    tx.push(ConstantVariable(bool(tx.pop().truthy(tx))))


@handler("GET_ITER")
def get_iter(tx, inst):
    obj = tx.pop()
    if isinstance(obj, (IteratorVariable, GeneratorVariable)):   # iter(it) is it
        tx.push(obj)
    elif hasattr(obj, "get_iter"):   # a user class's iteration, traced lazily (user_object.py)
        tx.push(obj.get_iter(tx))
    else:
        tx.push(iterate(tx, obj))


@handler("FOR_ITER")
def for_iter(tx, inst):
    it = tx.stack[-1]
    if has_python_next(it):   # a user class's iterator: its __next__ inlined (user_iterators.py)
        item = next_or_none(tx, it)
    elif not isinstance(it, (IteratorVariable, GeneratorVariable)):
        unsupported(f"FOR_ITER over {it}")
    else:
        item = it.next_item()
    if item is None:  # exhausted: the iterator goes, and the loop's exit follows (instructions.py)
        tx.pop()
        tx.jump_to(inst.target)
    else:
        tx.push(item)


@handler("RETURN_GENERATOR")
def return_generator(tx, inst):
    # A generator's first instruction: by the time its body runs (the first next()), the value
    # sent in (None) is on the stack, and the POP_TOP after this pops it (generators.py).
    tx.push(ConstantVariable(None))


@handler("YIELD_VALUE")
def yield_value(tx, inst):
    if any(isinstance(v, HandledInfoVariable) for v in tx.stack):
        # Python swaps the generator's handled exception out while it is suspended; the trace
        # keeps one for all frames (handlers/exceptions.py).
        unsupported("yield inside an except block")
    # The translator returns the value to the consumer; resumed, the value sent in (None: only
    # next() and for loops drive a traced generator) is what the yield expression gives.
    tx.yield_value(tx.pop())
    tx.push(ConstantVariable(None))


# `yield from it` in a traced generator (only next() and for loops drive one, so the value sent in
# is always None): GET_YIELD_FROM_ITER takes iter(it), a generator being its own; each SEND takes
# the next item of it, which YIELD_VALUE hands out, until it is exhausted, when the value of the
# `yield from` expression is what it returned (a generator's return value; None for an iterator).
@handler("GET_YIELD_FROM_ITER")
def get_yield_from_iter(tx, inst):
    get_iter(tx, inst)


@handler("SEND")
def send(tx, inst):
    sent, receiver = tx.pop(), tx.stack[-1]
    if not _is_none(sent):
        unsupported(f"send() of {sent} into a yield from")
    if not isinstance(receiver, (IteratorVariable, GeneratorVariable)):
        unsupported(f"yield from {receiver}")
    finished_before = isinstance(receiver, GeneratorVariable) and receiver.done
    item = receiver.next_item()
    if item is not None:
        tx.push(item)
        return
    # A generator that returned just now gives its return value; one finished earlier, None.
    returned = receiver.child.result if isinstance(receiver, GeneratorVariable) and not finished_before \
        else ConstantVariable(None)
    if not FACTS.send_keeps_receiver:
        tx.pop()
    tx.push(returned)
    tx.jump_to(inst.target)


@handler("END_SEND")
def end_send(tx, inst):
    returned = tx.pop()
    tx.pop()   # the exhausted iterator
    tx.push(returned)


@handler("RETURN_VALUE")
def return_value(tx, inst):
    tx.return_value(tx.pop())


def _pushed_at(tx):
    """Root frame: (index, arrival) of the raw instruction just before the running BEFORE_WITH
    (what pushed its context manager), where the trace ran it; else None. A graph break inside the
    block is cut there instead (graph_break/state.py)."""
    if tx.arrivals is None:
        return None
    index = tx.boundary - 1
    while index >= 0 and not tx.instructions[index].first:
        index -= 1
    if index < 0 or tx.arrivals[index] == 0:
        return None
    return index, tx.arrivals[index]


@handler("BEFORE_WITH")
def before_with(tx, inst):
    # [ctx] -> [bound __exit__, what __enter__ returned]. Grad-mode, autocast and inference-mode
    # blocks are entered by their trackers (variables/torch_objects/contexts.py), Python-written ones inlined;
    # their exception path (PUSH_EXC_INFO, WITH_EXCEPT_START) is never reached while tracing: a
    # raise in the block is refused there (translator._handle).
    ctx = tx.pop()
    if isinstance(ctx, (GradModeVariable, AutocastVariable, InferenceModeVariable, DynamoOnlyContextVariable,
                        HooksDisabledVariable)):
        exit_, entered = ctx.enter(tx)
    elif isinstance(ctx, (UserObjectVariable, NewObjectVariable)):
        exit_, entered = enter_user_context(tx, ctx)
        exit_.made_at = _pushed_at(tx)
    elif context_object(tx, ctx) is not None:   # a no_grad or inference_mode object made by a call
        exit_, entered = context_object(tx, ctx).enter(tx)
    else:
        unsupported(f"with {ctx}: only grad-mode, autocast, inference-mode and Python-written context "
                    "managers are traced")
    tx.push(exit_)
    tx.push(entered)
