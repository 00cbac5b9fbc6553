"""pipeline/codegen.py by round trips: build the transformed code, run it through the real runtime, and
compare what it returns with the structure the output spec describes.

Torch-free (a plain Python callable stands in for the compiled graph): runs on 3.11, 3.12, 3.13.
"""
import sys
import types
import weakref

import bytecode
import pytest

import torch_jit_cache as tjc
from torch_jit_cache.pipeline import codegen
from torch_jit_cache import runtime
from torch_jit_cache.pipeline.codegen import CodegenError, build_transformed_code, format_code
from torch_jit_cache.guard.sources import (AttrSource, BuiltinSource, ClosureSource, GlobalSource, ItemSource,
                                           LocalSource)
from torch_jit_cache.guard.trace_result import (ConstantOutput, DictOutput, EffectKind, GraphOutput, ListOutput,
                                                SideEffect, SourceOutput, TupleOutput)

SCALE = 7


pytestmark = pytest.mark.usefixtures("fresh_runtime")


class Recorder:
    """A stand-in compiled graph: records its inputs, returns (sum, first input) or `returns(xs)`."""

    def __init__(self, returns=None):
        self.calls = []
        self.returns = returns or (lambda xs: (sum(xs), xs[0]))

    def __call__(self, *xs):
        self.calls.append(xs)
        return self.returns(xs)


def run_transformed(fn, code, *args, **kwargs):
    """Call fn with the runtime answering its miss with `code`; return the result of the call.

    Checks that the transformed code (not the original) ran: exactly one cache entry, and after a
    second call, one hit.
    """
    def jit(frame, entries):
        if frame.f_code is fn.__code__:
            return runtime.GuardedCode(code, runtime.GuardManager())
        return runtime.RUN_ORIGINAL

    with runtime.eval_frame(jit):
        first = fn(*args, **kwargs)
        second = fn(*args, **kwargs)   # a cache hit runs the same code again
    entries = runtime.cache_entries(fn)
    assert len(entries) == 1 and entries[0].hits >= 1
    assert entries[0].code is code
    assert first == second
    return first


def build(fn, compiled_fn, inputs, spec):
    return build_transformed_code(fn.__code__, compiled_fn, inputs, spec)


# --- the shape of the code -------------------------------------------------------------------

def _sample(a, b, /, c, *args, k=3, **kw):
    return None


@pytest.mark.parametrize("attr", ["co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags",
                                  "co_cellvars", "co_freevars", "co_name", "co_qualname", "co_filename",
                                  "co_firstlineno"])
def test_code_keeps_the_originals_signature(attr):
    code = build(_sample, Recorder(), [LocalSource("a")], GraphOutput(0))
    assert getattr(code, attr) == getattr(_sample.__code__, attr)


def test_argument_names_are_a_prefix_and_the_result_local_comes_after():
    code = build(_sample, Recorder(), [LocalSource("a")], GraphOutput(0))
    args = _sample.__code__.co_varnames[:6]
    assert code.co_varnames[:6] == args == ("a", "b", "c", "k", "args", "kw")
    assert len(code.co_varnames) == 7 and code.co_varnames[6] not in args


def test_result_local_does_not_clash_with_a_user_name():
    def f(___tjc_graph_out):
        return ___tjc_graph_out

    code = build(f, Recorder(), [LocalSource("___tjc_graph_out")], GraphOutput(0))
    assert len(set(code.co_varnames)) == len(code.co_varnames) == 2
    assert run_transformed(f, code, 5) == 5


def test_compiled_fn_lives_in_co_consts_not_in_globals():
    compiled = Recorder()
    code = build(_sample, compiled, [LocalSource("a")], GraphOutput(0))
    assert any(c is compiled for c in code.co_consts)
    assert all(v is not compiled for v in _sample.__globals__.values())
    names = {i.name for i in bytecode.Bytecode.from_code(code) if isinstance(i, bytecode.Instr)}
    assert "LOAD_GLOBAL" not in names   # nothing but the explicit sources reads the globals


def test_prologue_is_kept_exactly():
    z = 1

    def f(a, b):
        def g():
            return a + z
        return g

    original = [i for i in bytecode.Bytecode.from_code(f.__code__)]
    new = [i for i in bytecode.Bytecode.from_code(build(f, Recorder(), [LocalSource("b")], GraphOutput(0)))]
    end = [i.name for i in original].index("RESUME") + 1
    assert [(i.name, i.arg) for i in new[:end]] == [(i.name, i.arg) for i in original[:end]]
    assert new[0].name == "COPY_FREE_VARS"   # the runtime requires it first


def test_guarded_code_accepts_the_transformed_code():
    z = 2

    def f(a, b, *args, k=1, **kw):
        def g():
            return a
        return a + z

    code = build(f, Recorder(), [LocalSource("a"), ClosureSource("z")], GraphOutput(0))
    runtime.GuardedCode(code, runtime.GuardManager())  # raises ValueError when incompatible


def test_runtime_refuses_code_built_for_another_function():
    def f(a):
        return a

    def g(b):
        return b

    code = build(g, Recorder(), [LocalSource("b")], GraphOutput(0))

    def jit(frame, entries):
        if frame.f_code is f.__code__:
            return runtime.GuardedCode(code, runtime.GuardManager())
        return runtime.RUN_ORIGINAL

    with pytest.raises(ValueError), runtime.eval_frame(jit):
        f(1)


# --- inputs: every kind of source -----------------------------------------------------------

def test_positional_args():
    def f(x, y):
        return x - y

    compiled = Recorder()
    code = build(f, compiled, [LocalSource("y"), LocalSource("x")], TupleOutput((GraphOutput(0), GraphOutput(1))))
    assert run_transformed(f, code, 2, 5) == (7, 5)
    assert compiled.calls == [(5, 2), (5, 2)]


def test_kw_only_args_and_defaults():
    def f(x, y=10, *, k, m=100):
        return x

    code = build(f, Recorder(), [LocalSource("x"), LocalSource("y"), LocalSource("k"), LocalSource("m")],
                 GraphOutput(0))
    assert run_transformed(f, code, 1, k=1000) == 1111
    tjc.reset()
    assert run_transformed(f, code, 1, 2, k=3, m=4) == 10


def test_star_args_and_kwargs():
    def f(a, *args, **kwargs):
        return a

    code = build(f, Recorder(lambda xs: [xs[0] + len(xs[1]), xs[2]]),
                 [LocalSource("a"), LocalSource("args"), LocalSource("kwargs")],
                 TupleOutput((GraphOutput(0), GraphOutput(1), SourceOutput(LocalSource("args")))))
    assert run_transformed(f, code, 1, 2, 3, q=4) == (3, {"q": 4}, (2, 3))


def test_closure_free_variables():
    scale, shift = 3, 4

    def f(x):
        return x * scale + shift

    assert f.__code__.co_freevars == ("scale", "shift")
    code = build(f, Recorder(lambda xs: (xs[0] * xs[1] + xs[2],)),
                 [LocalSource("x"), ClosureSource("scale"), ClosureSource("shift")], GraphOutput(0))
    assert run_transformed(f, code, 5) == 19


def test_cell_argument_is_loaded_through_its_cell():
    def f(a, b):
        def inner():
            return a
        return inner() + b

    assert f.__code__.co_cellvars == ("a",)
    code = build(f, Recorder(), [LocalSource("a"), LocalSource("b")],
                 TupleOutput((GraphOutput(0), SourceOutput(LocalSource("a")))))
    assert run_transformed(f, code, 3, 4) == (7, 3)


def test_globals_and_builtins():
    def f(x):
        return x * SCALE

    code = build(f, Recorder(lambda xs: (xs[0] * xs[1], xs[2] is len, xs[3])),
                 [LocalSource("x"), GlobalSource("SCALE"), BuiltinSource("len"), AttrSource(LocalSource("x"), "real")],
                 TupleOutput((GraphOutput(0), GraphOutput(1), GraphOutput(2), SourceOutput(BuiltinSource("abs")))))
    assert run_transformed(f, code, 2) == (14, True, 2, abs)


def test_globals_are_read_at_call_time():
    global SCALE

    def f(x):
        return x * SCALE

    code = build(f, Recorder(lambda xs: (xs[0] * xs[1],)), [LocalSource("x"), GlobalSource("SCALE")], GraphOutput(0))
    old = SCALE
    try:
        SCALE = 100
        assert run_transformed(f, code, 2) == 200
    finally:
        SCALE = old


def test_attributes_and_items_of_arguments():
    ns = types.SimpleNamespace(weight=types.SimpleNamespace(data=5), bias=1)

    def f(mod, xs, d):
        return mod

    inputs = [AttrSource(AttrSource(LocalSource("mod"), "weight"), "data"), AttrSource(LocalSource("mod"), "bias"),
              ItemSource(LocalSource("xs"), 1), ItemSource(LocalSource("d"), "key"),
              ItemSource(ItemSource(LocalSource("xs"), 0), -1)]
    code = build(f, Recorder(lambda xs: (xs,)), inputs, GraphOutput(0))
    assert run_transformed(f, code, ns, [[7, 8], 20], {"key": 30}) == (5, 1, 20, 30, 8)


# --- outputs ----------------------------------------------------------------------------------

def test_nested_tuple_list_dict_outputs():
    def f(x, y):
        return x

    spec = DictOutput((
        ("sum", GraphOutput(0)),
        ("pair", TupleOutput((GraphOutput(1), ListOutput((GraphOutput(0), ConstantOutput("c")))))),
        (3, ListOutput(())),
        ("t", TupleOutput(())),
        ("d", DictOutput(())),
    ))
    got = run_transformed(f, build(f, Recorder(), [LocalSource("x"), LocalSource("y")], spec), 1, 2)
    assert got == {"sum": 3, "pair": (1, [3, "c"]), 3: [], "t": (), "d": {}}
    assert list(got) == ["sum", "pair", 3, "t", "d"]   # insertion order kept


def test_a_spec_reached_twice_is_one_object_and_equal_specs_are_two():
    def f(x):
        return x

    shared = ListOutput((GraphOutput(0),))   # one list reached three times (guard/trace_result.py)
    spec = TupleOutput((shared, DictOutput((("l", shared),)), shared,
                        ListOutput((GraphOutput(0),)), ListOutput((GraphOutput(0),))))
    code = build(f, Recorder(), [LocalSource("x")], spec)
    got = run_transformed(f, code, 1)
    assert got[0] is got[1]["l"] is got[2]
    assert got[3] == got[4] == got[0] and got[3] is not got[4] and got[3] is not got[0]
    text = format_code(code)
    assert text.count("BUILD_LIST") == 3 and text.count("STORE_FAST       ___tjc_made") == 1


def test_a_spec_stored_by_a_side_effect_and_returned_is_one_object():
    def f(x, o):
        return x

    class Holder:   # keeps every value stored (run_transformed calls twice)
        def __setattr__(self, name, value):
            self.__dict__.setdefault("stored", []).append(value)

    shared = DictOutput((("k", GraphOutput(0)),))
    effects = (SideEffect(EffectKind.SET_ATTR, SourceOutput(LocalSource("o")), "d", shared),)
    code = build_transformed_code(f.__code__, Recorder(), [LocalSource("x")], TupleOutput((shared, shared)),
                                  side_effects=effects)
    o = Holder()
    got = run_transformed(f, code, 1, o)
    assert got[0] is got[1] is o.stored[0] and got[0] == {"k": 1}


def test_constants_without_a_graph_call():
    def f(x):
        return 1

    code = build(f, None, [], TupleOutput((ConstantOutput(None), ConstantOutput(1.5), ConstantOutput((1, "a")))))
    assert not any(callable(c) for c in code.co_consts)
    assert run_transformed(f, code, 0) == (None, 1.5, (1, "a"))


def test_mutable_constants_are_fresh_on_every_call():
    def f(x):
        return x

    code = build(f, None, [], ConstantOutput({"a": [1, {2}], "b": ([],)}))
    with runtime.eval_frame(lambda frame, entries: runtime.GuardedCode(code, runtime.GuardManager())
                            if frame.f_code is f.__code__ else runtime.RUN_ORIGINAL):
        first = f(0)
        first["a"].append(9)
        first["b"][0].append(9)
        second = f(0)
    assert second == {"a": [1, {2}], "b": ([],)}


def test_an_input_returned_as_is_keeps_its_identity():
    def f(x, obj):
        return obj

    obj = object()
    code = build(f, Recorder(), [LocalSource("x")], TupleOutput((SourceOutput(LocalSource("obj")), GraphOutput(0))))
    got = run_transformed(f, code, 1, obj)
    assert got[0] is obj and got[1] == 1


def test_a_single_output_returned_bare():
    def f(x):
        return x

    assert run_transformed(f, build(f, Recorder(lambda xs: [xs[0] * 2]), [LocalSource("x")], GraphOutput(0)), 4) == 8


def test_exceptions_from_the_compiled_fn_propagate():
    def f(x):
        return x

    def boom(*xs):
        raise KeyError("boom")

    code = build(f, boom, [LocalSource("x")], GraphOutput(0))
    with pytest.raises(KeyError, match="boom"), runtime.eval_frame(
            lambda frame, entries: runtime.GuardedCode(code, runtime.GuardManager())
            if frame.f_code is f.__code__ else runtime.RUN_ORIGINAL):
        f(1)


# --- errors ----------------------------------------------------------------------------------

def test_sources_the_frame_cannot_reach_are_refused():
    def f(x):
        y = x
        return y

    with pytest.raises(CodegenError, match="not an argument"):
        build(f, Recorder(), [LocalSource("y")], GraphOutput(0))
    with pytest.raises(CodegenError, match="not a free variable"):
        build(f, Recorder(), [ClosureSource("nope")], GraphOutput(0))
    with pytest.raises(CodegenError, match="unknown output spec"):
        build(f, Recorder(), [LocalSource("x")], object())
    with pytest.raises(CodegenError, match="compiled_fn is None"):
        build(f, None, [], GraphOutput(0))


def test_generators_are_refused():
    def gen(x):
        yield x

    with pytest.raises(CodegenError, match="generators"):
        build(gen, Recorder(), [LocalSource("x")], GraphOutput(0))


# --- lifetime ----------------------------------------------------------------------------------

def test_dropping_the_code_frees_compiled_fn():
    def f(x):
        return x

    compiled = Recorder()
    probe = weakref.ref(compiled)
    code = build(f, compiled, [LocalSource("x")], GraphOutput(0))
    del compiled
    assert probe() is not None   # held by the code's co_consts
    del code
    assert probe() is None       # no gc.collect(): nothing else (no cache, no cycle) held it


def test_evicting_the_cache_entry_frees_compiled_fn():
    def f(x):
        return x

    compiled = Recorder()
    probe = weakref.ref(compiled)
    code = build(f, compiled, [LocalSource("x")], GraphOutput(0))
    del compiled
    assert run_transformed(f, code, 3) == 3
    del code
    assert probe() is not None   # the cache entry owns the code
    tjc.reset()                  # evicts the entry, which owned the code
    assert probe() is None       # again without gc.collect()


# --- format_code ---------------------------------------------------------------------------------

def _listing_body(code):
    return format_code(code).split("\n", 1)[1]   # the header line holds a line number


# How each version calls the compiled graph: codegen's version table, as listing lines.
def _call_lines(args, n):
    fn = "LOAD_CONST       <Recorder>"
    return {
        (3, 11): ["PUSH_NULL", fn, *args, f"PRECALL          {n}", f"CALL             {n}"],
        (3, 12): ["PUSH_NULL", fn, *args, f"CALL             {n}"],
        (3, 13): [fn, "PUSH_NULL", *args, f"CALL             {n}"],
    }[sys.version_info[:2]]


def test_format_code_is_stable_text():
    scale = 2

    def f(x, mod, *, k):
        def inner():
            return k
        return x * scale

    class Rec(Recorder):
        def __repr__(self):
            return "<Recorder>"

    inputs = [LocalSource("x"), LocalSource("k"), ClosureSource("scale"), GlobalSource("SCALE"),
              AttrSource(LocalSource("mod"), "weight"), ItemSource(LocalSource("mod"), "key")]
    spec = TupleOutput((GraphOutput(0), ListOutput((ConstantOutput("c"),)),
                        DictOutput((("m", SourceOutput(LocalSource("mod"))),))))
    code = build(f, Rec(), inputs, spec)
    loads = [
        "LOAD_FAST        x",
        "LOAD_DEREF       cell k",
        "LOAD_DEREF       free scale",
        "LOAD_GLOBAL      SCALE",
        "LOAD_FAST        mod",
        "LOAD_ATTR        weight",
        "LOAD_FAST        mod",
        "LOAD_CONST       'key'",
        "BINARY_SUBSCR",
    ]
    body = [
        "COPY_FREE_VARS   1",
        "MAKE_CELL        cell k",
        "RESUME           0",
        *_call_lines(loads, len(inputs)),
        "STORE_FAST       ___tjc_graph_out",
        "LOAD_FAST        ___tjc_graph_out",
        "LOAD_CONST       0",
        "BINARY_SUBSCR",
        "LOAD_CONST       'c'",
        "BUILD_LIST       1",
        "LOAD_CONST       'm'",
        "LOAD_FAST        mod",
        "BUILD_MAP        1",
        "BUILD_TUPLE      3",
        "RETURN_VALUE",
    ]
    expected = [
        f"code {f.__code__.co_qualname} (line {f.__code__.co_firstlineno})",
        "  varnames: ('x', 'mod', 'k', '___tjc_graph_out')",
        "  cellvars: ('k',)",
        "  freevars: ('scale',)",
        *("    " + line for line in body),
    ]
    assert format_code(code) == "\n".join(expected) + "\n"
    assert codegen.format_code is format_code


def test_importing_codegen_backends_and_testing_does_not_import_torch():
    import subprocess

    script = ("import sys, torch_jit_cache.pipeline.codegen, torch_jit_cache.backends, torch_jit_cache.testing; "
              "assert 'torch' not in sys.modules, 'torch was imported'")
    repo = __import__("pathlib").Path(__file__).resolve().parents[2]   # this checkout's package
    subprocess.run([sys.executable, "-c", script], check=True, cwd=repo)
