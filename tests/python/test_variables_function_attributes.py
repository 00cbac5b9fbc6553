"""tracer/variables/python_objects/function_attributes.py through the public API: attributes set on functions.

The contract: on a function made in the trace, plain attributes are the trace's own (read, changed,
deleted there; hasattr answers as eager) and the function made again after the graph carries them;
on a function read from the frame, a store or delete is replayed on the very function after the
graph and a read after it sees it. On a function made in the trace, the function type's own
descriptors (`__doc__`, `__module__`, `__annotations__`, `__dict__`, ...) answer as CPython's do,
and names it does not define (`__wrapped__`) live in its `__dict__`. Each case compares
with eager (results and the function's __dict__ after the call) and counts graphs and breaks.
"""
import functools
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from context_helpers import CompiledCalls, compiled_like_eager, same  # noqa: E402


def _nested_attributes(x):
    def f(y):
        return y + 1

    f.scale = 3
    f.log = []
    f.log.append(1)
    had = hasattr(f, "gone")
    f.gone = 1
    del f.gone
    return f(x) * f.scale, f.log, had, hasattr(f, "gone"), getattr(f, "missing", 7)


def test_attributes_of_a_function_made_in_the_trace_are_its_own():
    compiled_like_eager(_nested_attributes, torch.randn(3))


def _returns_tagged(x):
    def f(y):
        return y * 2

    f.tag = x + 1
    f.count = 2
    return f


def test_a_function_made_in_the_trace_leaves_it_with_its_attributes_and_is_freed():
    x = torch.randn(3)
    expected = _returns_tagged(x)
    calls = CompiledCalls(_returns_tagged)
    for _ in range(2):
        got = calls(x)
        assert set(vars(got)) == set(vars(expected)) and got.count == 2
        assert same(got.tag, expected.tag) and same(got(x), expected(x))
    calls.check(graphs=1, breaks=0, recompiles=0)
    ref = weakref.ref(got)
    del got
    assert ref() is None


def _counted(y):
    return y - 1


def _tags_a_frame_function(x, fn):
    fn.calls = getattr(fn, "calls", 0) + 1
    fn.last = x * 2
    seen = fn.calls
    if hasattr(fn, "old"):
        del fn.old
    return fn(x) + seen


def test_stores_on_a_frame_function_are_replayed_on_it():
    x = torch.randn(3)
    calls = CompiledCalls(_tags_a_frame_function)
    for _ in range(3):
        _counted.old = 1
        before = dict(vars(_counted))
        got = calls(x, _counted)
        after = dict(vars(_counted))
        vars(_counted).clear()
        vars(_counted).update(before)
        expected = _tags_a_frame_function(x, _counted)
        assert same(got, expected)
        assert after.keys() == vars(_counted).keys() and after["calls"] == _counted.calls
        assert same(after["last"], _counted.last)
        vars(_counted).clear()
        _counted.calls = 5   # a changed attribute recompiles (guarded where read)
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0


def _renames(x):
    def f():
        return 1

    f.__defaults__ = ()
    return x + f()


def test_a_store_to_a_descriptor_that_changes_calls_still_breaks():
    calls = CompiledCalls(_renames)
    x = torch.randn(2)
    assert same(calls(x), _renames(x))
    assert calls.delta("graph_breaks") == 1


def _special_names(x):
    def f(a: int, b: "text" = 2) -> float:
        """f's own words"""
        return a

    def g(y):
        return y

    before = (f.__doc__, g.__doc__, f.__module__, dict(f.__annotations__), g.__annotations__,
              f.__annotations__ is f.__annotations__, len(f.__dict__), hasattr(f, "__wrapped__"),
              hasattr(f, "__doc__"))
    f.__wrapped__ = g           # not a descriptor of the function type: a __dict__ name
    f.__dict__["tag"] = x * 2   # the dict is the function's own
    g.__doc__ = "renamed"
    g.__name__, g.__qualname__, g.__module__ = "h", "outer.h", "elsewhere"
    g.__annotations__["y"] = int
    del f.__dict__["tag"]
    f.kept = 1
    return (x + 1, before, f.__wrapped__ is g, sorted(f.__dict__), g.__doc__, g.__name__,
            g.__qualname__, g.__module__, g.__annotations__, hasattr(f, "tag"), f, g)


def test_special_names_of_a_function_made_in_the_trace_answer_as_eager():
    x = torch.randn(3)
    expected = _special_names(x)
    calls = CompiledCalls(_special_names)
    for _ in range(2):
        got = calls(x)
        assert same(got[:-2], expected[:-2])
        for made, eager in zip(got[-2:], expected[-2:]):   # made again after the graph with them
            for name in ("__name__", "__qualname__", "__doc__", "__module__", "__annotations__"):
                assert getattr(made, name) == getattr(eager, name), name
            assert set(vars(made)) == set(vars(eager))
        assert got[-2].__wrapped__ is got[-1]
    calls.check(graphs=1, breaks=0, recompiles=0)
    ref = weakref.ref(got[-2])
    del got
    assert ref() is None


def _updates_a_wrapper(x):
    def f(a: "new"):
        """f's words"""
        return a * 2

    f.attr = "kept"
    f.__wrapped__ = "replaced by update_wrapper"

    def wrapper(b: "old"):
        return f(b) + 1

    functools.update_wrapper(wrapper, f)   # traced as Python: getattr, setattr, __dict__.update
    return (wrapper(x), wrapper.__name__, wrapper.__doc__, wrapper.__annotations__, wrapper.attr,
            wrapper.__wrapped__ is f, wrapper.__qualname__, wrapper)


def test_update_wrapper_traced_as_python_gives_the_wrapper_the_names_eager_gives():
    x = torch.randn(3)
    expected = _updates_a_wrapper(x)
    calls = CompiledCalls(_updates_a_wrapper)
    got = calls(x)
    assert same(got[:-1], expected[:-1])
    wrapper = got[-1]
    assert (wrapper.__name__, wrapper.__doc__, wrapper.__annotations__) == \
        (expected[-1].__name__, expected[-1].__doc__, expected[-1].__annotations__)
    assert set(vars(wrapper)) == {"attr", "__wrapped__"} and wrapper.__wrapped__.attr == "kept"
    calls.check(graphs=1, breaks=0)


_MODULE_SOURCE = """
def module_of(x):
    def f():
        pass
    return x + 1, f.__module__
"""


def test_the_module_name_a_function_reads_from_its_globals_is_guarded():
    namespace = {"__name__": "first"}
    exec(_MODULE_SOURCE, namespace)
    fn = namespace["module_of"]
    calls = CompiledCalls(fn)
    x = torch.randn(2)
    for name in ("first", "second", "first"):
        namespace["__name__"] = name
        assert same(calls(x), fn(x))
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0



def _wraps_with_plain_names(x):
    def f(y):
        return y + 1

    f.attr = "f's"
    f.table = {"a": 1, "b": 2}
    f.extra = 3

    def wrapper(y):
        return f(y) * 2

    wrapper.table = {"c": 3}
    wrapper = functools.wraps(f, ("attr", "__name__"), ("table",))(wrapper)

    def copied(y):
        return y

    copied = functools.wraps(f)(copied)   # the default: f's whole __dict__
    return (wrapper(x), wrapper.attr, wrapper.table, wrapper.__name__, wrapper.__wrapped__ is f,
            copied.extra, copied.table is f.table, hasattr(wrapper, "extra"))


def test_functools_wraps_copies_and_updates_plain_attributes_as_update_wrapper():
    compiled_like_eager(_wraps_with_plain_names, torch.randn(3))


def _returns_wrapped(x):
    def f(y):
        return y + 1

    f.attr = x + 1

    @functools.wraps(f)
    def wrapper(y):
        return f(y)

    return wrapper


def test_a_wrapper_with_copied_attributes_is_made_again_with_them():
    x = torch.randn(2)
    expected = _returns_wrapped(x)
    calls = CompiledCalls(_returns_wrapped)
    got = calls(x)
    calls.check(graphs=1, breaks=0)
    assert set(vars(got)) == set(vars(expected)) and got.__name__ == "f"
    assert same(got.attr, expected.attr) and got.__wrapped__.attr is got.attr


def _annotated(a: int, b: "text" = "x") -> float:
    return a


def _reads_annotations(x, fn):
    notes = fn.__annotations__
    notes["seen"] = bool                       # a change replayed on the function's own dict
    return x * len(notes), sorted(notes), notes.get("b")


def test_annotations_of_a_frame_function_are_its_own_dict():
    """`fn.__annotations__` (what functools.wraps copies) of a function read from the frame is the
    function's very dict, read through its source: a change made in the trace is on the function
    after the graph, and other keys recompile. Before: a graph break at the read."""
    calls = CompiledCalls(_reads_annotations)

    def fresh():
        def f(a: int, b: "text" = "x") -> float:
            return a
        return f

    for _ in range(2):
        f_eager, f_compiled = fresh(), fresh()
        got, expected = calls(torch.ones(1), f_compiled), _reads_annotations(torch.ones(1), f_eager)
        assert same(got, expected) and f_compiled.__annotations__ == f_eager.__annotations__
    g = fresh()
    g.__annotations__ = {"only": int}
    assert same(calls(torch.ones(1), g), (torch.ones(1) * 2, ["only", "seen"], None))
    calls.check(graphs=2)
