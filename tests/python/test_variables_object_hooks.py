"""Objects built in the trace whose class writes its own __getattribute__ / __setattr__ /
__delattr__ in Python (tracer/variables/python_objects/object_hooks.py): HuggingFace's PreTrainedConfig renames
through `attribute_map`, huggingface_hub's `@strict` validates in a try block. The hooks are run
step by step down to object's; hasattr and getattr with a default catch the AttributeError; the
object's __dict__ is one dict with its attributes; deepcopy follows what Python's copy asks of
such a class. Each is compared with eager and counted; what the trace cannot follow still runs
eagerly with eager's answer, and what the trace built is freed without the cycle collector."""
import copy
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import CompiledCalls, same_exactly  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class Doubling:
    def __init__(self):
        self.v = 1

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value * 2)


class Renaming:
    """PreTrainedConfig's hooks, reduced: `hidden` is stored and read as `d_model`."""
    attribute_map = {"hidden": "d_model"}

    def __init__(self, hidden):
        self.hidden = hidden
        self.layers = 2

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __delattr__(self, key):
        super().__delattr__(super().__getattribute__("attribute_map").get(key, key))

    @property
    def missing_here(self):
        raise AttributeError("not on this one")


def _positive(value):
    if value <= 0:
        raise ValueError(f"{value} is not positive")


def strict(cls):
    """huggingface_hub's @strict, reduced: validators run in a try block before the store."""
    original = cls.__setattr__

    def __strict_setattr__(self, name, value):
        for validator in self.__validators__.get(name, []):
            try:
                validator(value)
            except (ValueError, TypeError) as e:
                raise RuntimeError(f"invalid {name}") from e
        original(self, name, value)

    cls.__setattr__ = __strict_setattr__
    return cls


@strict
class StrictRenaming(Renaming):
    __validators__ = {"layers": [_positive]}


def _hooks(x):
    d = Doubling()
    r = StrictRenaming(3)
    r.hidden = r.hidden + d.v             # __getattribute__ and __setattr__ rename
    r.extra = 5
    del r.extra
    del r.hidden                          # __delattr__ renames too
    r.d_model = 7
    found = (hasattr(r, "layers"), hasattr(r, "nope"), getattr(r, "nope", -1),
             getattr(r, "missing_here", -2), hasattr(r, "missing_here"), "d_model" in r.__dict__)
    return x * r.hidden * r.layers + d.v, found, d, r


def test_python_attribute_hooks_run_step_by_step_in_one_graph():
    calls = CompiledCalls(_hooks)
    x = torch.randn(3)
    for _ in range(2):
        got, want = calls(x), _hooks(x)
        same_exactly(got[0], want[0])
        assert got[1] == want[1] == (True, False, -1, -2, False, True)
        for a, b in zip(got[2:], want[2:]):
            assert type(a) is type(b) and vars(a) == vars(b)
    calls.check(graphs=1)


def _through_dict(x):
    r = Renaming(2)
    d = r.__dict__
    d["w"] = 4                            # seen by the object: one dict
    r.layers = 3
    return x * r.w * d["layers"] * d["d_model"], d, r


def test_an_objects_dict_is_its_attributes_and_goes_back_to_it():
    calls = CompiledCalls(_through_dict)
    x = torch.randn(3)
    got, want = calls(x), _through_dict(x)
    same_exactly(got[0], want[0])
    assert got[1] == want[1] == {"d_model": 2, "layers": 3, "w": 4}
    # the __dict__ of a class with its own __getattribute__ is not rebuilt: a break before return
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1


class Plain:
    def __init__(self):
        self.v = 1

    @property
    def absent(self):
        raise AttributeError("computed, and absent")


def _property_raising(x):
    p = Plain()
    return x * p.v, hasattr(p, "absent"), getattr(p, "absent", 7), hasattr(p, "v")


def test_hasattr_runs_a_property_and_catches_its_attribute_error():
    calls = CompiledCalls(_property_raising)
    x = torch.randn(3)
    got, want = calls(x), _property_raising(x)
    same_exactly(got[0], want[0])
    assert got[1:] == want[1:] == (False, 7, True)
    calls.check(graphs=1)


def _plain_dict(x):
    d = Doubling()
    dd = d.__dict__
    dd["w"] = 5
    a, b = copy.deepcopy([dd, d.__dict__])   # one dict: copied once
    a["w"] = 6
    return x * d.w * b["w"], dd, d


def test_the_dict_of_a_plain_object_leaves_the_trace_as_the_objects_own():
    calls = CompiledCalls(_plain_dict)
    x = torch.randn(3)
    got, want = calls(x), _plain_dict(x)
    same_exactly(got[0], want[0])
    assert got[1] == want[1] and got[1] is vars(got[2])
    calls.check(graphs=1)


def _grows_while_iterated(x):
    d = Doubling()
    y = x * d.v
    for name in d.__dict__:
        d.other = 1                        # RuntimeError in eager: the dict changed size
    return y


def test_an_attribute_added_under_a_loop_over_the_dict_raises_as_in_eager():
    calls = CompiledCalls(_grows_while_iterated)
    with pytest.raises(RuntimeError, match="changed size"):
        _grows_while_iterated(torch.randn(3))
    with pytest.raises(RuntimeError, match="changed size"):
        calls(torch.randn(3))


def _copy_doubling(x):
    d = Doubling()
    c = copy.deepcopy(d)                  # the copy fills its __dict__: no __setattr__ runs
    return x * c.v, c


def test_deepcopy_of_an_object_with_its_own_setattr_is_built_in_the_graph():
    calls = CompiledCalls(_copy_doubling)
    x = torch.randn(3)
    got, want = calls(x), _copy_doubling(x)
    same_exactly(got[0], want[0])
    assert vars(got[1]) == vars(want[1]) == {"v": 2}
    calls.check(graphs=1)


def _copy_passed_in(x, d):
    c = copy.deepcopy(d)
    c.w = 1                               # the copy's own __setattr__: doubled
    return x * c.v, c


def test_deepcopy_of_an_argument_with_its_own_setattr_is_built_in_the_graph():
    calls = CompiledCalls(_copy_passed_in)
    x, d = torch.randn(3), Doubling()
    for _ in range(2):
        got, want = calls(x, d), _copy_passed_in(x, d)
        same_exactly(got[0], want[0])
        assert vars(got[1]) == vars(want[1]) == {"v": 2, "w": 2} and vars(d) == {"v": 2}
    calls.check(graphs=1)
    d.v = 3                               # read through its __dict__, guarded: recompiles
    got, want = calls(x, d), _copy_passed_in(x, d)
    same_exactly(got[0], want[0])
    assert vars(got[1]) == vars(want[1]) == {"v": 6, "w": 2}


def _copy_renaming(x):
    r = Renaming(2)
    c = copy.deepcopy(r)
    return x * c.hidden, c


def test_deepcopy_of_an_object_with_its_own_getattribute_follows_the_hook():
    # deepcopy's protocol names are looked up through the traced __getattribute__ (copying.py).
    calls = CompiledCalls(_copy_renaming)
    x = torch.randn(3)
    for _ in range(2):
        got, want = calls(x), _copy_renaming(x)
        same_exactly(got[0], want[0])
        assert vars(got[1]) == vars(want[1])
    calls.check(graphs=1)


def _invalid(x):
    r = StrictRenaming(2)
    r.layers = -1                         # the validator raises: eager raises RuntimeError
    return x


def test_a_validator_that_raises_raises_as_in_eager():
    calls = CompiledCalls(_invalid)
    with pytest.raises(RuntimeError, match="invalid layers"):
        _invalid(torch.randn(3))
    with pytest.raises(RuntimeError, match="invalid layers"):
        calls(torch.randn(3))


class Counting:
    """A __getattribute__ that is not a pure renaming: each read is logged."""
    log = []

    def __init__(self):
        self.v = 2

    def __getattribute__(self, key):
        type(self).log.append(key)
        return object.__getattribute__(self, key)


def _counting(x):
    c = Counting()
    return x * c.v


def test_a_getattribute_with_side_effects_runs_them_as_eager():
    # (Compiling may read the class's attributes off real objects, through its hook, where its own
    # frame is compiled: the log is compared at calls that hit the cache.)
    calls = CompiledCalls(_counting)
    x = torch.randn(3)
    calls(x)
    for _ in range(2):
        Counting.log.clear()
        want = _counting(x)
        eager_log = list(Counting.log)
        Counting.log.clear()
        got = calls(x)
        same_exactly(got, want)
        assert Counting.log == eager_log == ["v"]
    assert calls.cnt.frame_count == 1 and calls.delta("graph_breaks") == 0


def test_objects_with_hooks_built_in_the_trace_are_freed_when_dropped(no_gc):
    cnt = CompileCounter()
    compiled = tjc.compile(_hooks, backend=cnt)
    x = torch.randn(3)
    out = compiled(x)
    refs = [weakref.ref(o) for o in out[2:]]
    del out
    assert [r() for r in refs] == [None, None]
    out = compiled(x)                     # a cache hit builds new ones
    assert cnt.frame_count == 1 and type(out[3]) is StrictRenaming
