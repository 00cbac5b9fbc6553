"""tracer/variables/builder.py: the tracker and the guards each kind of value read from the frame
gets (WRAP_RULES, in order), and wrap_constant for values computed from constants.

The builder is driven here through its own API, `wrap(tx, value, source, guard)`, with a stand-in
translator that records guards: no trace runs, so each test names exactly one rule's outcome.
Tensors need a trace's fake mode; they are covered through tjc.compile below."""
import collections
import functools
import inspect
import math
import os
import threading
import types

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.guard.sources import LocalSource  # noqa: E402
from torch_jit_cache.guard.trace_result import Unsupported  # noqa: E402
from torch_jit_cache.tracer.variables import builder  # noqa: E402

pytestmark = pytest.mark.torch
nn = torch.nn


class _Output:
    """What wrap reads and writes on the OutputGraph, guards recorded as (source, kind) text."""

    def __init__(self):
        self.guards = []
        self.by_source, self.by_id, self.keepalive = {}, {}, []
        self.frame_plan = None   # no dynamic shapes: an int is a constant
        self.modules_by_identity = False   # no store to a module yet (nn_module.py)
        self.side_effects = types.SimpleNamespace(reached=lambda value, vt: None)
        self.sequences_in_wrap = {}   # containers.wrap_sequence: lists being wrapped

    def add_guard(self, source, kind, value=None):
        self.guards.append((str(source), kind.name))


class _Tx:
    def __init__(self):
        self.output = _Output()

    def wrap(self, value, source, guard=True):
        return builder.wrap(self, value, source, guard)


def _wrap(value, guard=True, source=LocalSource("x")):
    tx = _Tx()
    return builder.wrap(tx, value, source, guard), tx.output.guards


def _fn():
    pass


class _Obj:
    def method(self):
        pass


class _Dict(dict):
    pass


class _ReadHookDict(dict):
    def __getitem__(self, key):
        return dict.__getitem__(self, key)


class _OwnLookup:
    def __getattr__(self, name):
        raise AttributeError(name)


_Point = collections.namedtuple("_Point", "a b")

# value, tracker class, the first guards added (at L['x'] unless named)
KINDS = [
    # A frame argument's scalar: its value is guarded when the trace first reads it (constant.py),
    # so one only passed on to a resume function does not recompile per value.
    (3, "ConstantVariable", ["TYPE_MATCH"]),
    (True, "ConstantVariable", ["TYPE_MATCH"]),
    ("s", "ConstantVariable", ["TYPE_MATCH"]),
    (None, "ConstantVariable", ["TYPE_MATCH"]),
    (torch.float32, "ConstantVariable", ["ID_MATCH"]),
    (torch.device("cpu"), "ConstantVariable", ["TYPE_MATCH", "L['x'].type EQUALS_MATCH", "L['x'].index EQUALS_MATCH"]),
    (nn.Linear(2, 2), "NNModuleVariable", ["TYPE_MATCH", "L['x'].training EQUALS_MATCH"]),  # ID_MATCH: lazily
    ([1, 2], "ListVariable", ["TYPE_MATCH", "LENGTH", "L['x'][0] TYPE_MATCH"]),
    ((1, 2), "TupleVariable", ["TYPE_MATCH", "LENGTH"]),
    (torch.Size([2]), "TupleVariable", ["TYPE_MATCH", "LENGTH"]),
    (_Point(1, 2), "TupleVariable", ["TYPE_MATCH", "LENGTH"]),
    ({"a": 1}, "DictVariable", ["TYPE_MATCH", "DICT_KEYS", "L['x']['a'] TYPE_MATCH"]),
    (range(3), "RangeVariable", ["TYPE_MATCH", "L['x'].start EQUALS_MATCH", "L['x'].stop EQUALS_MATCH"]),
    (math, "PythonModuleVariable", ["ID_MATCH"]),
    (len, "BuiltinVariable", ["ID_MATCH"]),
    (int, "BuiltinVariable", ["ID_MATCH"]),
    (torch.no_grad, "GradModeClassVariable", ["ID_MATCH"]),
    (torch.relu, "TorchFunctionVariable", ["ID_MATCH"]),
    (inspect.signature, "SignatureFunctionVariable", ["ID_MATCH"]),
    (_fn, "UserFunctionVariable", ["TYPE_MATCH", "ID_MATCH", "L['x'].__code__ ID_MATCH"]),
    (functools.partial(_fn), "PartialVariable", ["TYPE_MATCH", "L['x'].func TYPE_MATCH"]),
    (_Obj().method, "UserMethodVariable", ["L['x'].__func__ TYPE_MATCH"]),
    (math.sqrt, "PureFunctionVariable", ["ID_MATCH"]),
    (_Obj, "UserClassVariable", ["ID_MATCH"]),
    (nn.Softmax, "ClassVariable", ["ID_MATCH"]),
    (os.environ, "EnvironVariable", ["TYPE_MATCH"]),
    (_Obj(), "UserObjectVariable", ["TYPE_MATCH"]),
    (_Dict(), "FrameDictSubclassVariable", ["TYPE_MATCH", "DICT_KEYS"]),   # a dict of its class
    (_ReadHookDict(), "DictSubclassVariable", ["TYPE_MATCH"]),   # read through its own hook
    (threading.Lock(), "OpenObjectVariable", ["TYPE_MATCH"]),
    (_OwnLookup(), "UserObjectVariable", ["TYPE_MATCH"]),   # its __getattr__ is traced (object_protocol.py)
    (memoryview(b"a"), "OpaqueVariable", ["TYPE_MATCH"]),
]


@pytest.mark.parametrize("value,cls,guards", KINDS, ids=lambda p: repr(p)[:30] if not isinstance(p, list) else "")
def test_each_kind_of_value_maps_to_its_tracker(value, cls, guards):
    vt, added = _wrap(value)
    assert type(vt).__name__ == cls
    shown = [kind if source == "L['x']" else f"{source} {kind}" for source, kind in added]
    assert shown[:len(guards)] == guards


def test_the_table_order_is_the_precedence():
    names = [rule.name for rule in builder.WRAP_RULES]
    assert len(names) == len(set(names))
    before = lambda a, b: names.index(a) < names.index(b)  # noqa: E731
    # An object whose class writes its own attribute hooks first, so that no later rule's
    # isinstance or getattr runs them; an int or a float is a graph input before it is a constant.
    assert names[:5] == ["user object with attribute hooks", "tensor", "dynamic int", "dynamic float", "scalar"]
    assert before("module", "user object") and before("sequence", "user object")
    assert before("builtin", "class") and before("context class", "class")
    assert before("built-in module method", "torch function") and before("distributed", "torch function")
    assert names[-1] == "opaque"


def test_an_earlier_rule_wins_over_a_later_one_that_also_applies():
    # nn.Embedding.forward is a Python function, but a built-in module's method first.
    assert builder.WRAP_RULES[[r.name for r in builder.WRAP_RULES].index("function")].applies(
        nn.Embedding.forward, None)
    assert type(_wrap(nn.Embedding.forward)[0]).__name__ == "BuiltinModuleMethodVariable"
    # F.relu is a Python function too, but a torch function first.
    assert type(_wrap(torch.nn.functional.relu)[0]).__name__ == "TorchFunctionVariable"
    # torch.no_grad is a class: the context rule answers before the class rule does.
    assert type(_wrap(torch.no_grad)[0]).__name__ == "GradModeClassVariable"
    # A dict subclass object is a plain user object too, but modelled as a dict.
    assert type(_wrap(_Dict())[0]).__name__ == "FrameDictSubclassVariable"
    assert type(_wrap(_ReadHookDict())[0]).__name__ == "DictSubclassVariable"


def test_no_guards_when_asked_and_none_without_a_source():
    assert _wrap([1, "a"], guard=False)[1] == []
    vt, guards = _wrap((1, 2), source=None)
    assert type(vt).__name__ == "TupleVariable" and guards == []


def test_values_that_need_a_source_are_refused_without_one():
    for value in (nn.Linear(2, 2), _Obj(), threading.Lock()):
        with pytest.raises(Unsupported):
            _wrap(value, source=None)


def test_the_same_source_gives_the_same_tracker():
    tx = _Tx()
    src = LocalSource("x")
    first = builder.wrap(tx, [1], src)
    assert builder.wrap(tx, [1], src) is first


def test_wrap_constant_builds_containers_of_constants():
    vt = builder.wrap_constant((1, [2.0, "a"], {3}))
    assert type(vt).__name__ == "TupleVariable"
    assert [type(i).__name__ for i in vt.items] == ["ConstantVariable", "ListVariable", "SetVariable"]
    assert vt.as_python_constant() == (1, [2.0, "a"], {3})
    with pytest.raises(Unsupported):
        builder.wrap_constant(object())


def test_a_tensor_reached_twice_is_one_graph_input():
    def f(x, pair):
        return x + pair[0]

    inputs = []

    def backend(gm, example_inputs):
        inputs.append(len(example_inputs))
        return gm.forward

    x = torch.ones(3)
    torch.testing.assert_close(tjc.compile(f, backend=backend)(x, (x,)), x + x)
    assert inputs == [1]   # SAME_AS: the second source is guarded to be the first tensor
    torch.testing.assert_close(tjc.compile(f, backend=backend)(x, (torch.ones(3),)), x + x)
    assert inputs == [1, 2]


class _CountingHash:
    """Hashes and compares in Python, counting each call (user code the tracer must not run)."""

    def __init__(self):
        self.calls = []

    def __hash__(self):
        self.calls.append("hash")
        return 42

    def __eq__(self, other):
        self.calls.append("eq")
        return self is other


def test_no_rule_runs_a_values_own_hash_or_eq():
    for rule in builder.WRAP_RULES:
        value = _CountingHash()
        rule.applies(value, LocalSource("x"))
        assert value.calls == [], rule.name


def test_a_compiled_method_hashes_its_object_once_per_call():
    # the frame of __hash__ itself is compiled: wrapping its `self` must not hash it again
    class Counted:
        def __init__(self):
            self.count = 0

        def __hash__(self):
            self.count += 1
            return 7

    def f(x):
        o = Counted()
        d = {o: 1}
        return x + d[o], o.count

    x = torch.ones(2)
    assert f(x)[1] == 2
    out, count = tjc.compile(f, backend="eager")(x)
    torch.testing.assert_close(out, x + 1)
    assert count == 2
