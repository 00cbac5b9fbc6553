"""Output specs and side effects as stored (torch_jit_cache/pipeline/disk_cache/output_codec.py): decoded
specs equal the encoded ones and keep their identities; what cannot be stored exactly is refused;
names re-bound on load reach the very objects they named (pipeline/disk_cache/names.py), and a code guarded
by its content loads only for that content (pipeline/disk_cache/guard_codec.py)."""
import collections
import functools
import pickle
import types

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from torch_jit_cache.pipeline.disk_cache import names, output_codec  # noqa: E402
from torch_jit_cache.pipeline.disk_cache.names import Mismatch, NotStored  # noqa: E402
from torch_jit_cache.guard.sources import AttrSource, ComputedSource, ItemSource, LocalSource  # noqa: E402
from torch_jit_cache.guard.trace_result import (AttrOutput, CallOutput, ConstantOutput, DictOutput, EffectKind,  # noqa: E402
                                                FrameCellOutput, FunctionOutput, GraphOutput, IterOutput, ListOutput, ObjectOutput,
                                                SideEffect, SourceOutput, SuperOutput, TupleOutput, built_dict,
                                                call_with, cell_of, reversed_at)


def _frame(k):
    def inner(t):
        return t * k
    return inner


FRAME = _frame.__code__
INNER = next(c for c in FRAME.co_consts if isinstance(c, types.CodeType))
Pair = collections.namedtuple("Pair", "a b")


def _round_trip(output, effects=()):
    files = set()
    record = output_codec.encode(output, effects, FRAME, files)
    return output_codec.decode(pickle.loads(pickle.dumps(record)), FRAME)


def test_every_spec_kind_round_trips_equal():
    x = SourceOutput(AttrSource(LocalSource("self"), "config"))
    output = TupleOutput((
        GraphOutput(0), x, ConstantOutput(None), ConstantOutput((1, "a")),
        ConstantOutput(torch.float16), ConstantOutput(torch.device("cpu")), ConstantOutput({1, 2}),
        ConstantOutput([1, {"k": 2}]), ConstantOutput(functools.partial(torch.autocast, "cpu", torch.bfloat16)),
        ConstantOutput(torch.nn.Linear), ConstantOutput(torch.sin), ConstantOutput(torch),
        TupleOutput((GraphOutput(1), GraphOutput(2)), Pair), ListOutput((GraphOutput(3),)),
        DictOutput((("k", GraphOutput(4)),)), AttrOutput(x, "use_cache"), IterOutput(x, 2), IterOutput(None, 0, (x,)),
        SuperOutput(x, x), FrameCellOutput("k"), ObjectOutput(x, ("a",), (GraphOutput(0),)),
        CallOutput(ConstantOutput(built_dict), ("cls", "items"), (ConstantOutput(collections.OrderedDict), x)),
        FunctionOutput(INNER, ("k",), TupleOutput((ConstantOutput(1),)), None, None),
    ))
    effects = (SideEffect(EffectKind.SET_ATTR, x, "flag", ConstantOutput(True)),
               SideEffect(EffectKind.SET_GLOBAL, None, "STATE", ListOutput(())),
               SideEffect(EffectKind.DEL_GLOBAL, None, "OLD", None))
    got, got_effects = _round_trip(output, effects)
    partial, got_partial = output.items[8].value, got.items[8].value   # partials compare by identity
    assert (got_partial.func, got_partial.args, got_partial.keywords) == (partial.func, partial.args, partial.keywords)
    assert got.items[:8] + got.items[9:] == output.items[:8] + output.items[9:] and got_effects == effects
    assert got.items[-1].code is INNER   # the frame's own nested code, not a copy
    assert got.items[9].value is torch.nn.Linear and got.items[12].cls is Pair


def test_specs_of_objects_made_again_after_the_graph_round_trip():
    # tracer/rebuild.py: a range, zip/enumerate/partial called with rebuilt parts, a reversed()
    # at its position, a new cell of an inlined frame.
    x = SourceOutput(LocalSource("x"))
    output = TupleOutput((
        ConstantOutput(range(1, 7, 2)),
        CallOutput(ConstantOutput(call_with), ("fn", "args", "kwargs"),
                   (ConstantOutput(zip), TupleOutput((x, x)), DictOutput(()))),
        CallOutput(ConstantOutput(call_with), ("fn", "args", "kwargs"),
                   (ConstantOutput(functools.partial), TupleOutput((ConstantOutput(torch.add), x)),
                    DictOutput((("alpha", ConstantOutput(2)),)))),
        CallOutput(ConstantOutput(reversed_at), ("seq", "position"), (x, ConstantOutput(2))),
        CallOutput(ConstantOutput(cell_of), ("contents",), (GraphOutput(0),)),
    ))
    got, _ = _round_trip(output)
    assert got == output and got.items[1].fn.value is call_with and got.items[1].values[0].value is zip


def test_identities_of_specs_are_kept():
    # One list reached from the return value and a side effect is one object after decoding; two
    # equal lists stay two (codegen builds one object per spec object).
    shared, twin = ListOutput((GraphOutput(0),)), ListOutput((GraphOutput(0),))
    effects = (SideEffect(EffectKind.SET_ATTR, SourceOutput(LocalSource("box")), "items", shared),)
    got, got_effects = _round_trip(TupleOutput((shared, shared, twin)), effects)
    assert got.items[0] is got.items[1] is got_effects[0].value
    assert got.items[2] is not got.items[0] and got.items[2] == got.items[0]


def _local_function():
    return 1


@pytest.mark.parametrize("spec, reason", [
    (ConstantOutput(object()), "no importable name"),
    (ConstantOutput(_frame(1)), "does not name"),   # a closure: its __name__ reaches nothing
    (ConstantOutput(ValueError("x")), "no importable name"),
    (SourceOutput(ComputedSource(LocalSource("p"), _local_function)), "ComputedSource"),
    (SourceOutput(ItemSource(LocalSource("d"), object())), "item key"),
    (DictOutput(((object(), GraphOutput(0)),)), "non-constant keys"),
    (FunctionOutput(_local_function.__code__), "not one of the frame's"),
])
def test_what_cannot_be_stored_exactly_is_refused(spec, reason):
    with pytest.raises(NotStored, match=reason):
        output_codec.encode(TupleOutput((spec,)), (), FRAME, set())


def test_a_constant_named_by_a_name_that_now_reaches_another_object_does_not_load(monkeypatch):
    record = output_codec.encode(ConstantOutput(_local_function), (), FRAME, set())
    monkeypatch.setitem(globals(), "_local_function", lambda: 2)
    with pytest.raises(Mismatch):
        output_codec.decode(record, FRAME)


def _decorate(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)
    return wrapper


def _strict(fn):   # a decorator that keeps the function in its closure alone (no functools.wraps)
    def checked(*args):
        return fn(*args)
    checked.__qualname__, checked.__module__ = fn.__qualname__, fn.__module__
    return checked


class Model:
    @_decorate
    def forward(self):
        return 1

    @_strict
    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)

    @property
    def size(self):
        return 2


def test_functions_no_name_reaches_are_named_through_their_wrapper_closure_or_property(monkeypatch):
    inner, getter = Model.forward.__wrapped__, Model.__dict__["size"].fget
    kept = Model.__setattr__.__closure__[0].cell_contents
    for fn, steps in ((inner, ("__wrapped__",)), (getter, ("fget",)), (kept, (0,))):
        record = names.name_of(fn, set())
        assert record[0] == "via" and record[3] == steps
        assert names.rebind(pickle.loads(pickle.dumps(record))) is fn
    # Another function under the wrapper (same name, other code) is not taken for it.
    record = names.name_of(inner, set())
    monkeypatch.setattr(Model, "forward", _decorate(lambda self: 3))
    Model.forward.__wrapped__.__qualname__ = inner.__qualname__
    with pytest.raises(Mismatch):
        names.rebind(record)


def test_a_code_guarded_by_content_loads_only_for_that_content():
    # C['func'].__code__ (a decorated function held by its wrapper's closure, guarded by its code):
    # stored as the code's file, qualname, first line and digest; on load the frame's code there
    # must be such a code, which the loaded guard then holds.
    from torch_jit_cache.pipeline.disk_cache.guard_codec import StoreContext, decode_guard, encode_guard
    from torch_jit_cache.guard.sources import ClosureSource
    from torch_jit_cache.guard.trace_result import GuardKind, GuardSpec
    source = AttrSource(ClosureSource("func"), "__code__")
    context = StoreContext(set())
    record = encode_guard(GuardSpec(source, GuardKind.ID_MATCH, INNER), context)
    assert record[2][0] == "code" and FRAME.co_filename in context.files
    again = INNER.replace()   # equal content, another object (another process's)
    assert decode_guard(record, lambda s: again).value is again
    for other in (_local_function.__code__, INNER.replace(co_firstlineno=INNER.co_firstlineno + 1), None):
        with pytest.raises(Mismatch):
            decode_guard(record, lambda s: other)


def test_a_function_a_factory_made_is_named_by_its_name():
    # F.max_pool2d is boolean_dispatch's local `fn`, named 'max_pool2d' in torch.nn.functional.
    import torch.nn.functional as F
    assert "<locals>" in F.max_pool2d.__qualname__
    record = names.name_of(F.max_pool2d, set())
    assert record[:3] == ("named", "torch.nn.functional", "max_pool2d")
    assert names.rebind(record) is F.max_pool2d


def test_an_entry_whose_graph_input_is_computed_is_not_stored():
    # A ComputedSource (FSDP2's local shard) holds a function that pickle would store by name,
    # unchecked: refused wherever an entry would hold it.
    from torch_jit_cache.runtime import counters
    from torch_jit_cache.pipeline.disk_cache import entries
    from torch_jit_cache.guard.trace_result import TraceResult
    computed = ComputedSource(LocalSource("p"), _local_function)
    result = TraceResult(graph=None, graph_inputs=[computed], example_inputs=[], output=GraphOutput(0), guards=[])
    rewritten = types.SimpleNamespace(graph_inputs=[computed], guards=[])
    compiler = types.SimpleNamespace(backend="eager", backend_patches=())
    frame = types.SimpleNamespace(f_code=FRAME)
    with pytest.raises(NotStored, match="ComputedSource"):
        entries._entry(compiler, frame, result, rewritten, None, counters.MadeEntry(False, None, False))
