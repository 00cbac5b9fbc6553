"""Each guard kind's stored form (pipeline/disk_cache/guard_codec.py, named by the kind's row in
guards.GUARD_KINDS): the guard decoded from the stored record accepts exactly the values the live
guard accepts.

Property tests (hypothesis) over tensors and values of every kind. The record goes through pickle,
as on disk; both guards are real C++ trees (guards.build_guards) checked with GuardManager.check.
Where decoding against the loading frame says Mismatch, the live guard must reject that frame too.
"""
import contextlib
import math
import pickle

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from hypothesis import HealthCheck, assume, given, settings, strategies as st  # noqa: E402

import guard_codec_helpers as helpers  # noqa: E402
from torch_jit_cache import _C
from torch_jit_cache.guard import tree as guards  # noqa: E402
from torch_jit_cache.pipeline.disk_cache import keys  # noqa: E402
from torch_jit_cache.pipeline.disk_cache.guard_codec import (CODECS, Codec, StoreContext, decode_guard,  # noqa: E402
                                                             encode_guard)
from torch_jit_cache.pipeline.disk_cache.names import Mismatch, NotStored  # noqa: E402
from torch_jit_cache.guard.sources import LocalSource  # noqa: E402
from torch_jit_cache.guard.trace_result import GuardKind, GuardSpec  # noqa: E402

X, Y = LocalSource("x"), LocalSource("y")
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _resolve(frame):
    return lambda source: frame[source.local_name]


def _tree(spec, frame):
    return guards.build_guards([spec], global_state=False)


def _stored(spec, context=None):
    """The record as a later process reads it."""
    record = encode_guard(spec, context or StoreContext(set()))
    return pickle.loads(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))


def assert_exact(spec, store_frame, load_frame, others=(), *, context=None, store_mode=contextlib.nullcontext,
                 load_mode=contextlib.nullcontext) -> bool:
    """The live guard (built for `store_frame` under `store_mode`) and the one decoded against
    `load_frame` (under `load_mode`, where both are checked) accept the same frames. True when the
    record decoded, False on Mismatch."""
    with store_mode():
        live = _tree(spec, store_frame)
        record = _stored(spec, context)
    with load_mode():
        try:
            decoded_spec = decode_guard(record, _resolve(load_frame))
        except Mismatch:
            assert not live.check(load_frame), (spec, load_frame)
            return False
        decoded = _tree(decoded_spec, load_frame)
        for frame in (load_frame, store_frame, *others):
            assert decoded.check(frame) == live.check(frame), (spec, frame, str(live), str(decoded))
    return True


# --- the table ---------------------------------------------------------------------------------

def test_every_guard_kind_has_a_codec_with_both_directions():
    assert set(guards.GUARD_KINDS) == set(GuardKind)
    for kind, rule in guards.GUARD_KINDS.items():
        assert isinstance(CODECS[rule.codec], Codec), kind
        codec = type(CODECS[rule.codec])
        assert codec.encode is not Codec.encode and codec.decode is not Codec.decode, kind


# One value of each kind and a frame it holds for (relations: two locals).
_SET = {"a", 1}
ROUND_TRIPS = {
    GuardKind.TYPE_MATCH: (helpers.TaggedTensor, {"x": torch.zeros(2).as_subclass(helpers.TaggedTensor)}),
    GuardKind.ID_MATCH: (helpers.Color.GREEN, {"x": helpers.Color.GREEN}),
    GuardKind.EQUALS_MATCH: ((1, "a", -0.0), {"x": (1, "a", 0.0)}),
    GuardKind.NONE_MATCH: (None, {"x": None}),
    GuardKind.NOT_NONE: (None, {"x": 3}),
    GuardKind.BOOL_MATCH: (False, {"x": False}),
    GuardKind.LENGTH: (2, {"x": [1, 2]}),
    GuardKind.DICT_KEYS: (("a", 1), {"x": {"a": 0, 1: 0}}),
    GuardKind.SET_ITEMS: (tuple(_SET), {"x": _SET}),
    GuardKind.TENSOR_MATCH: (None, {"x": torch.zeros(2, 3).t()}),
    GuardKind.SAME_AS: (Y, {"x": helpers.Obj(), "y": None}),
    GuardKind.DISTINCT_FROM: (Y, {"x": helpers.Obj(), "y": helpers.Obj()}),
    GuardKind.ALIAS_OF: (Y, {"x": helpers.Obj(), "y": None}),
    GuardKind.DICT_TAGS: (None, {"x": {"a": 1}}),
}


@pytest.mark.parametrize("kind", list(GuardKind), ids=lambda k: k.name)
def test_every_kind_round_trips_to_the_same_guard(kind):
    value, frame = ROUND_TRIPS[kind]
    frame = dict(frame)
    if kind is GuardKind.TENSOR_MATCH:
        value = frame["x"]
    if kind in (GuardKind.SAME_AS, GuardKind.ALIAS_OF):
        frame["y"] = frame["x"]
    if kind is GuardKind.DICT_TAGS and not guards.runtime.DICT_TAGS_SUPPORTED:
        pytest.skip("DICT_TAGS is not available on this Python")
    spec = GuardSpec(X, kind, value)
    live = _tree(spec, frame)
    decoded = _tree(decode_guard(_stored(spec), _resolve(frame)), frame)
    assert str(decoded) == str(live)
    assert live.check(frame) and decoded.check(frame)


# --- tensors -----------------------------------------------------------------------------------

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool,
          torch.complex64]
SHAPES = [(), (2,), (3,), (2, 3), (3, 2), (1, 2, 3, 2)]
VIEWS = ["none", "t", "step", "offset", "channels_last", "conj", "neg"]
WRAPS = ["plain", "requires_grad", "parameter", "subclass"]


@st.composite
def recipes(draw):
    return (draw(st.sampled_from(DTYPES)), draw(st.sampled_from(SHAPES)), draw(st.sampled_from(["cpu", "meta"])),
            draw(st.booleans()), draw(st.sampled_from(VIEWS)), draw(st.sampled_from(WRAPS)))


def build(recipe):
    """The tensor `recipe` describes: (dtype, shape, device, made in inference mode, view, wrapper);
    a recipe that does not apply (conj of a float) is rejected."""
    dtype, shape, device, inference, view, wrap = recipe
    with torch.inference_mode() if inference else contextlib.nullcontext():
        t = torch.zeros(shape, dtype=dtype, device=device)
        if view == "t":
            assume(t.dim() >= 2)
            t = t.transpose(0, -1)
        elif view == "step":
            assume(t.dim() >= 1)
            t = t[::2]
        elif view == "offset":
            assume(t.numel() > 1)
            t = t.view(-1)[1:]
        elif view == "channels_last":
            assume(t.dim() == 4)
            t = t.contiguous(memory_format=torch.channels_last)
        elif view == "conj":
            assume(dtype.is_complex)
            t = t.conj()
        elif view == "neg":
            t = torch._neg_view(t)
    grad_dtype = dtype.is_floating_point or dtype.is_complex
    if wrap == "requires_grad":
        assume(grad_dtype and not inference)
        t = t.detach().requires_grad_()
    elif wrap == "parameter":
        assume(not inference)
        t = torch.nn.Parameter(t, requires_grad=grad_dtype)
    elif wrap == "subclass":
        t = t.as_subclass(helpers.TaggedTensor)
    return t


def _modes(inference):
    return torch.inference_mode if inference else contextlib.nullcontext


@PROPERTY
@given(stored=recipes(), loaded=st.one_of(st.none(), recipes()), other=recipes(),
       store_inference=st.booleans(), load_inference=st.booleans())
def test_tensor_match_decoded_accepts_exactly_what_the_live_guard_accepts(stored, loaded, other, store_inference,
                                                                         load_inference):
    # loaded None: the loading frame's tensor is made by the stored recipe (a fresh tensor).
    a, b, c = build(stored), build(loaded or stored), build(other)
    spec = GuardSpec(X, GuardKind.TENSOR_MATCH, a)
    others = [{"x": c}, {"x": a.detach()}, {"x": 0}, {"x": None}]
    decoded = assert_exact(spec, {"x": a}, {"x": b}, others, store_mode=_modes(store_inference),
                           load_mode=_modes(load_inference))
    if loaded is None and store_inference == load_inference:
        assert decoded   # equal facts: the entry applies


@pytest.mark.parametrize("plain, make", [
    (torch.zeros(2, dtype=torch.complex64), lambda: torch.zeros(2, dtype=torch.complex64).conj()),
    (torch.zeros(2), lambda: torch._neg_view(torch.zeros(2))),
    (torch.zeros(2), lambda: torch.zeros(2).requires_grad_()),
    (torch.zeros(2), lambda: torch.zeros(2, device="meta")),
    (torch.zeros(2), lambda: torch.zeros(2).as_subclass(helpers.TaggedTensor)),
    (torch.zeros(2), lambda: torch.nn.Parameter(torch.zeros(2))),
    (torch.zeros(2), lambda: torch.zeros(3)[1:]),   # storage offset 1: TENSOR_MATCH does not compare it
], ids=["conj", "neg", "requires_grad", "meta", "subclass", "parameter", "offset"])
def test_a_stored_tensor_does_not_load_for_one_the_live_guard_rejects(plain, make):
    other = make()
    live = _tree(GuardSpec(X, GuardKind.TENSOR_MATCH, plain), {"x": plain})
    record = _stored(GuardSpec(X, GuardKind.TENSOR_MATCH, plain))
    if live.check({"x": other}):
        assert decode_guard(record, _resolve({"x": other})).value is other
    else:
        with pytest.raises(Mismatch):
            decode_guard(record, _resolve({"x": other}))


def test_an_inference_tensor_does_not_load_an_entry_stored_for_a_normal_one():
    plain = torch.zeros(2)
    with torch.inference_mode():
        inference = torch.zeros(2)
    record = _stored(GuardSpec(X, GuardKind.TENSOR_MATCH, plain))
    with pytest.raises(Mismatch, match="dispatch_keys"):
        decode_guard(record, _resolve({"x": inference}))


def test_dynamic_dims_are_stored_as_the_leaf_leaves_them():
    a = torch.zeros(4, 3)
    context = StoreContext(set(), dynamic={X: ((0,), ())})
    record = _stored(GuardSpec(X, GuardKind.TENSOR_MATCH, a), context)
    assert record[2]["sizes"] == (None, 3) and record[2]["strides"] == (3, 1)
    assert decode_guard(record, _resolve({"x": torch.zeros(7, 3)[:4]})).kind is GuardKind.TENSOR_MATCH
    with pytest.raises(Mismatch):
        decode_guard(record, _resolve({"x": torch.zeros(4, 2)}))


@PROPERTY
@given(recipe=recipes(), other=recipes(), inference=st.booleans())
def test_both_backends_give_the_same_state_and_answers(recipe, other, inference):
    # The state a record stores does not depend on the backend that read it.
    a, c = build(recipe), build(other)
    with _modes(inference)():
        lib, api = (_C._make_tensor_match_for_test(a, backend) for backend in ("libtorch", "python-api"))
        assert lib.state() == api.state() == _C.tensor_match_state(a)
        for value in (a, c, a.detach(), 1):
            assert lib.check(value) == api.check(value)


# --- values ------------------------------------------------------------------------------------

CONSTANTS = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(), st.sampled_from([0.0, -0.0, 1.5, math.inf]),
              st.floats(allow_nan=True), st.text(max_size=3), st.binary(max_size=2)),
    lambda inner: st.tuples(inner, inner), max_leaves=4)
OBJECTS = st.sampled_from([
    None, True, False, Ellipsis, helpers.Color.RED, helpers.Color.GREEN, helpers.Color.CRIMSON, helpers.Perm.R,
    helpers.Perm.R | helpers.Perm.W, helpers.helper, helpers.other_helper, helpers, math, int, bool, float, str,
    type(None), tuple, torch.Tensor, torch.nn.Parameter, helpers.TaggedTensor, helpers.Color, torch.float32,
    torch.float64, torch.sin, torch.Tensor.add_, 1, "a", (1,), 0.5,
])
VALUES = st.one_of(CONSTANTS, OBJECTS, st.lists(st.integers(0, 2), max_size=3),
                   st.dictionaries(st.sampled_from(["a", "b", 1, (1, 2)]), st.none(), max_size=3))
PROPERTY_VALUES = settings(max_examples=300, deadline=None)


def _value_property(kind, expected, frame_values, others):
    spec = GuardSpec(X, kind, expected)
    try:
        _stored(spec)
    except NotStored:
        return None
    loaded = frame_values[0]
    return assert_exact(spec, {"x": frame_values[-1]}, {"x": loaded}, [{"x": v} for v in others])


@PROPERTY_VALUES
@given(expected=CONSTANTS, loaded=VALUES, others=st.lists(VALUES, max_size=4))
def test_equals_match(expected, loaded, others):
    stored = _value_property(GuardKind.EQUALS_MATCH, expected, [loaded, expected], [expected, *others])
    # Only a NaN (equal to nothing but itself) is not stored.
    assert stored is not None or any(isinstance(v, float) and math.isnan(v) for v in _flat(expected))


def _flat(value):
    return [x for v in value for x in _flat(v)] if isinstance(value, tuple) else [value]


@PROPERTY_VALUES
@given(expected=OBJECTS, loaded=VALUES, others=st.lists(VALUES, max_size=4))
def test_id_match(expected, loaded, others):
    stored = _value_property(GuardKind.ID_MATCH, expected, [loaded, expected], [expected, *others])
    # Not stored: objects without a name (ints, strings, tuples: identity within one process only)
    # and a composite Flag value.
    nameable = type(expected) not in (int, str, tuple, float) and expected is not helpers.Perm.R | helpers.Perm.W
    assert (stored is not None) == nameable, expected


@PROPERTY_VALUES
@given(value=VALUES, loaded=VALUES, others=st.lists(VALUES, max_size=4))
def test_type_match(value, loaded, others):
    expected = type(value)
    stored = _value_property(GuardKind.TYPE_MATCH, expected, [loaded, value], [value, *others])
    assert stored is not None, expected


@PROPERTY_VALUES
@given(loaded=VALUES, others=st.lists(VALUES, max_size=4))
def test_none_and_not_none(loaded, others):
    for kind in (GuardKind.NONE_MATCH, GuardKind.NOT_NONE):
        assert _value_property(kind, None, [loaded, None if kind is GuardKind.NONE_MATCH else 1], others) \
            is not None


@PROPERTY_VALUES
@given(flag=st.booleans(), loaded=VALUES, others=st.lists(VALUES, max_size=4))
def test_bool_match(flag, loaded, others):
    assert _value_property(GuardKind.BOOL_MATCH, flag, [loaded, flag], [0, 1, *others]) is not None


@PROPERTY_VALUES
@given(n=st.integers(0, 3), loaded=VALUES, others=st.lists(VALUES, max_size=4))
def test_length(n, loaded, others):
    assert _value_property(GuardKind.LENGTH, n, [loaded, [0] * n], others) is not None


@PROPERTY_VALUES
@given(keys=st.lists(st.sampled_from(["a", "b", 1, True, (1, 2), 1.5]), unique=True, max_size=3),
       loaded=VALUES, others=st.lists(VALUES, max_size=4))
def test_dict_keys(keys, loaded, others):
    expected = tuple(keys)
    assert _value_property(GuardKind.DICT_KEYS, expected, [loaded, dict.fromkeys(expected)], others) is not None


@PROPERTY_VALUES
@given(items=st.lists(st.sampled_from(["a", "b", 1, (1, 2), 1.5, None]), unique=True, max_size=3),
       loaded=VALUES, others=st.lists(VALUES, max_size=4))
def test_set_items(items, loaded, others):
    made = set(items)
    assert _value_property(GuardKind.SET_ITEMS, tuple(made), [loaded, made], others) is not None


OBJS = [helpers.Obj() for _ in range(2)]


@PROPERTY_VALUES
@given(kind=st.sampled_from([GuardKind.SAME_AS, GuardKind.DISTINCT_FROM, GuardKind.ALIAS_OF]),
       pairs=st.lists(st.tuples(st.sampled_from([0, 1]), st.sampled_from([0, 1])), min_size=2, max_size=5))
def test_relations(kind, pairs):
    # A relation between two sources is stored as the other Source, and compared at check time;
    # SAME_AS is only made by a trace of a frame where both reach one object, so the oracle is the
    # guard a trace of the loading frame builds.
    frames = [{"x": OBJS[i], "y": OBJS[j]} for i, j in pairs]
    spec = GuardSpec(X, kind, Y)
    store, load = frames[0], frames[1]
    if kind is GuardKind.SAME_AS:
        if load["x"] is not load["y"]:
            return   # no trace of that frame makes SAME_AS
        store = load
    assert assert_exact(spec, store, load, frames[2:])


# --- GLOBAL_STATE ------------------------------------------------------------------------------

GLOBAL_STATES = {
    "grad off": lambda: torch.no_grad(),
    "float64": lambda: _default_dtype(torch.float64),
    "deterministic": lambda: _deterministic(),
    "autocast cpu": lambda: torch.autocast("cpu"),
    "autocast cpu float16": lambda: torch.autocast("cpu", dtype=torch.float16),
    "inference mode": lambda: torch.inference_mode(),   # not global state: the dispatch keys see it
}


@contextlib.contextmanager
def _default_dtype(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


@contextlib.contextmanager
def _deterministic():
    old = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(old)


@pytest.mark.parametrize("store", [None, *GLOBAL_STATES])
@pytest.mark.parametrize("load", [None, *GLOBAL_STATES])
def test_stored_global_state_matches_where_the_guard_passes(store, load):
    def mode(name):
        return GLOBAL_STATES[name]() if name else contextlib.nullcontext()
    with mode(store):
        stored = pickle.loads(pickle.dumps(keys.global_state()))
        guard = guards.runtime.GuardManager()
        guard.global_state()
        backends = [_C._make_global_state_for_test(b) for b in ("libtorch", "python-api")]
        assert [b.state() for b in backends] == [stored, stored]
    with mode(load):
        assert (keys.global_state() == stored) == guard.check({})


def test_a_relation_with_a_cell_of_the_frame_is_not_stored():
    """cell(C['n']) is read in frame mode only: a loaded entry's check reads the frame by name and
    would find it missing, so an entry pinned to the frame's cells is not stored."""
    from torch_jit_cache.guard.sources import AttrSource, FrameCellSource, ItemSource
    through = ItemSource(AttrSource(LocalSource("h"), "__closure__"), 0)
    for kind in (GuardKind.ALIAS_OF, GuardKind.DISTINCT_FROM):
        for a, b in ((through, FrameCellSource("n")), (FrameCellSource("n"), through)):
            with pytest.raises(NotStored, match="a cell of the frame"):
                encode_guard(GuardSpec(a, kind, b), StoreContext(set()))
