"""DICT_TAGS (csrc/guards/dict_tags.h): a node's children skipped while the dicts they read keep
their version tags; what tags cannot vouch for (TENSOR_MATCH, LENGTH of a list, a class attribute)
runs every time. Each test records the tags with passing checks, then changes one thing and needs
the check's answer to follow, as it would without tags. Inlined modules carry DICT_TAGS too
(builder.py): their attributes changed after compiling give eager's result.
"""
import pytest

from torch_jit_cache import runtime

# DICT_TAGS exists where dict version tags follow every change (not 3.13: csrc/cpython/dict_version.h).
needs_tags = pytest.mark.skipif(not runtime.DICT_TAGS_SUPPORTED,
                                reason="no DICT_TAGS on this Python (its dict tags miss inline-value stores)")


class Obj:
    pass


def _tree(obj):
    root = runtime.GuardManager()
    node = root.local("o")
    node.id_match(obj)
    node.dict_tags()
    d = node.attr("__dict__")
    d.dict_keys(tuple(vars(obj)))
    d.item("n").equals_match(obj.n)
    d.item("xs").length(len(obj.xs))
    d.item("pair").item(0).equals_match(obj.pair[0])
    d.item("sub").attr("__dict__").item("flag").equals_match(obj.sub.flag)
    d.item("sub").attr("kind").equals_match(type(obj.sub).kind)   # a class attribute: residual
    return root, node


class Sub:
    kind = "a"

    def __init__(self):
        self.flag = True


class OtherSub(Sub):
    pass


def _obj():
    o = Obj()
    o.n, o.xs, o.pair, o.sub = 1, [1, 2], (3, 4), Sub()
    return o


CHANGES = {
    "an attribute set": lambda o: setattr(o, "n", 2),
    "an attribute set through __dict__": lambda o: o.__dict__.__setitem__("n", 2),
    "an attribute deleted": lambda o: delattr(o, "n"),
    "the instance dict replaced": lambda o: setattr(o, "__dict__", dict(vars(o), n=2)),
    "a list grown in place": lambda o: o.xs.append(3),
    "a nested object's attribute": lambda o: setattr(o.sub, "flag", False),
    "a nested object's dict replaced": lambda o: setattr(o.sub, "__dict__", {"flag": False}),
    "a nested object's class": lambda o: setattr(o.sub, "__class__", OtherSub) or setattr(OtherSub, "kind", "b"),
    "a class attribute": lambda o: setattr(Sub, "kind", "b"),
    "a nested object replaced": lambda o: setattr(o, "sub", Sub()) or setattr(o.sub, "flag", 0),
}


@pytest.fixture(autouse=True)
def _restore_sub_kind():
    yield
    Sub.kind = "a"


@needs_tags
@pytest.mark.parametrize("change", CHANGES)
def test_a_change_after_the_tags_were_recorded_fails_the_check(change):
    o = _obj()
    root, node = _tree(o)
    assert node.dict_tags_state == {"recorded": False, "dicts": 0, "residuals": 0}
    for _ in range(3):
        assert root.check({"o": o})
    state = node.dict_tags_state
    assert state["recorded"] and state["residuals"] == 2, "xs (LENGTH of a list) and sub.kind"
    CHANGES[change](o)
    assert not root.check({"o": o})
    assert root.explain({"o": o}) is not None


@needs_tags
def test_an_equal_value_written_again_rechecks_and_passes():
    o = _obj()
    root, node = _tree(o)
    assert root.check({"o": o})
    o.n = 1                     # a new tag, the same value: the full check runs and passes
    o.sub.flag = True
    assert root.check({"o": o}) and root.check({"o": o})
    assert node.dict_tags_state["recorded"]


def _type_guarded_tree(obj):
    """DICT_TAGS under a TYPE_MATCH (an nn.Module's node, guarded by value for every equal
    instance): the record outlives the instance it was made for."""
    root = runtime.GuardManager()
    node = root.local("o")
    node.type_match(type(obj))
    node.dict_tags()
    d = node.attr("__dict__")
    d.item("n").equals_match(obj.n)
    d.item("payload").attr("__dict__").item("flag").equals_match(obj.payload.flag)
    return root, node


class Payload:
    def __init__(self):
        self.flag = True


@needs_tags
def test_a_record_dies_with_the_value_it_was_made_for():
    # The record holds the instance's dicts (and what they hold) only while the instance lives:
    # its death drops the record, by reference counting.
    import weakref

    o = Obj()
    o.n, o.payload = 1, Payload()
    root, node = _type_guarded_tree(o)
    assert root.check({"o": o}) and root.check({"o": o})
    assert node.dict_tags_state["recorded"]
    payload = weakref.ref(o.payload)
    del o
    assert payload() is None
    assert node.dict_tags_state == {"recorded": False, "dicts": 0, "residuals": 0}
    first, second = Obj(), Obj()
    for x in (first, second):
        x.n, x.payload = 1, Payload()
    assert root.check({"o": first})
    kept = weakref.getweakrefs(first)   # the record's weakref, kept alive past the record
    assert root.check({"o": second}) and node.dict_tags_state["recorded"]   # recorded anew
    del first   # its callback fires after its record was replaced: it must not touch the new one
    assert node.dict_tags_state["recorded"]
    second.n = 2
    assert not root.check({"o": second})
    del kept


@needs_tags
def test_dict_tags_is_printed_and_counts_no_guard():
    o = _obj()
    root, node = _tree(o)
    before = root.num_guards()
    assert "| DICT_TAGS: children skipped while the dicts they read are unchanged" in str(node)
    node.dict_tags()                       # idempotent
    assert root.num_guards() == before
    with pytest.raises(Exception):
        root.dict_tags()                   # the root has no value


@pytest.mark.skipif(runtime.DICT_TAGS_SUPPORTED, reason="DICT_TAGS works on this Python")
def test_dict_tags_is_refused_where_tags_miss_changes():
    root = runtime.GuardManager()
    with pytest.raises(Exception, match="dict version tags miss stores"):
        root.local("o").dict_tags()


# --- inlined modules -------------------------------------------------------------------------------

torch_only = pytest.mark.torch


@torch_only
@pytest.mark.usefixtures("seeded_fresh_caches")
@pytest.mark.parametrize("change", ["setattr", "dict", "nested", "list", "class", "eval each call"])
def test_an_inlined_modules_attribute_changed_after_compiling_gives_eagers_result(change):
    torch = pytest.importorskip("torch")
    import torch_jit_cache as tjc
    from torch_jit_cache.testing import CompileCounterWithBackend

    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) * self.scale

    class Doubled(Inner):
        def forward(self, x):
            return super().forward(x) * 2

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()
            self.shift = 1
            self.sizes = [4]

        def forward(self, x):
            return self.inner(x) + self.shift * len(self.sizes)

    model = Outer().eval()
    counter = CompileCounterWithBackend("eager")
    compiled = tjc.compile(model, backend=counter)
    x = torch.randn(2, 4)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), model(x))
    if change == "setattr":
        model.shift = 5
    elif change == "dict":
        vars(model)["shift"] = 5
    elif change == "nested":
        model.inner.scale = -1.0
    elif change == "list":
        model.sizes.append(8)
    elif change == "class":
        model.inner.__class__ = Doubled
    for _ in range(3):
        if change == "eval each call":
            model.eval()
        torch.testing.assert_close(compiled(x), model(x))
    assert counter.frame_count == (1 if change == "eval each call" else 2)
