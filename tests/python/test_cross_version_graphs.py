"""The tracer captures the same graphs on Python 3.11, 3.12 and 3.13.

Each case below is compiled with a recording backend and called twice. The test checks that the
results equal eager, that exactly the expected number of graphs was compiled with no fallback and
no graph break, that the second call was a cache hit, and that a normalized description of every
captured graph equals the case's section of one expected file shared by all three Pythons,
tests/python/expected/cross_version_graphs.txt. The description holds only what must not depend on
the bytecode: the example inputs' dtypes and shapes, and per node its kind, its target (qualified
function name, method name, submodule path and class) and its arguments, with nodes numbered by
position rather than named. No line numbers, node names or generated source.

3.12 and 3.13 compile what these cases exercise differently. 3.12: comprehensions inlined into the
function (PEP 709, so no nested code object and fewer cells), PRECALL gone, LOAD_METHOD folded into
LOAD_ATTR, POP_JUMP_IF_* without FORWARD/BACKWARD, RETURN_CONST, END_FOR. 3.13: CALL_KW instead of
KW_NAMES, the NULL pushed after the callable, TO_BOOL before conditional jumps, LOAD_FAST_LOAD_FAST.
The graphs must not change.

Regenerating the expected file (after a deliberate change to what the tracer captures, on 3.11,
then check the diff and run the tests on 3.12 and 3.13 against it):

    TJC_UPDATE_EXPECTED=1 .venv/bin/python -m pytest tests/python/test_cross_version_graphs.py

Each case rewrites its own section (run it serially, not under xdist); sections of cases that no
longer exist are dropped by test_expected_file_has_a_section_per_case. In update mode every other
assertion still runs.
"""
import functools
import os
import pathlib

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.fx.node import _get_qualified_name  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

EXPECTED = pathlib.Path(__file__).parent / "expected" / "cross_version_graphs.txt"
UPDATE = os.environ.get("TJC_UPDATE_EXPECTED") == "1"
HEADER = ("# Graphs captured by tests/python/test_cross_version_graphs.py, the same on Python 3.11, "
          "3.12 and 3.13.\n# Regenerate: TJC_UPDATE_EXPECTED=1 (see that module's docstring).\n")

SCALE = 1.5
SHIFTS = (1, 2)
NAMES = ("a", "b")


# --- describing a graph without anything that depends on the bytecode ------------------------------

def _fmt(arg, number):
    if isinstance(arg, torch.fx.Node):
        return f"%{number[arg]}"
    if isinstance(arg, tuple):
        return "(" + ", ".join(_fmt(a, number) for a in arg) + ("," if len(arg) == 1 else "") + ")"
    if isinstance(arg, list):
        return "[" + ", ".join(_fmt(a, number) for a in arg) + "]"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k!r}: {_fmt(v, number)}" for k, v in arg.items()) + "}"
    if isinstance(arg, slice):
        return f"slice({_fmt(arg.start, number)}, {_fmt(arg.stop, number)}, {_fmt(arg.step, number)})"
    if arg is None or arg is Ellipsis or isinstance(arg, (bool, int, float, str, torch.dtype, torch.device)):
        return repr(arg)
    return f"<{type(arg).__name__}>"


def _target(node, gm):
    if node.op == "call_function":
        return _get_qualified_name(node.target)
    if node.op == "call_module":
        return f"{node.target} [{type(gm.get_submodule(node.target)).__name__}]"
    return str(node.target)


def describe(gm, example_inputs) -> str:
    number = {node: i for i, node in enumerate(gm.graph.nodes)}
    inputs = ", ".join(f"{str(t.dtype).removeprefix('torch.')}{tuple(t.shape)}"
                       if isinstance(t, torch.Tensor) else type(t).__name__ for t in example_inputs)
    lines = [f"inputs [{inputs}]"]
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            lines.append(f"%{number[node]} = placeholder")
        elif node.op == "output":
            lines.append(f"output {_fmt(node.args[0], number)}")
        else:
            args = ", ".join([_fmt(a, number) for a in node.args]
                             + [f"{k}={_fmt(v, number)}" for k, v in node.kwargs.items()])
            lines.append(f"%{number[node]} = {node.op} {_target(node, gm)}({args})")
    return "\n".join(lines)


class GraphRecorder:
    """A backend that keeps each graph's description (text, never the GraphModule) and runs it."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(describe(gm, example_inputs))
        return gm.forward

    def text(self):
        return "\n".join(f"graph {i}\n" + "\n".join("  " + line for line in g.splitlines())
                         for i, g in enumerate(self.graphs))


def _read_sections():
    if not EXPECTED.exists():
        return {}
    sections, name = {}, None
    for line in EXPECTED.read_text().splitlines():
        if line.startswith("=== "):
            name = line[4:]
            sections[name] = []
        elif name is not None and line:
            sections[name].append(line)
    return {k: "\n".join(v) for k, v in sections.items()}


def _write_sections(sections):
    order = [c.id for c in CASES]
    names = sorted(sections, key=lambda n: order.index(n) if n in order else len(order))
    EXPECTED.parent.mkdir(exist_ok=True)
    EXPECTED.write_text(HEADER + "".join(f"\n=== {n}\n{sections[n]}\n" for n in names))


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and torch.allclose(a, b, atol=1e-5, rtol=1e-4))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# --- the cases -------------------------------------------------------------------------------------

def r(*shape):
    return torch.randn(*shape)


def tensor_arith(x, y):
    return -(x * y + x - y / 2) ** 2 + abs(x) // 1 % 3


def torch_functions_and_methods(x):
    h = torch.relu(x).sin() + torch.tanh(x.t().t())
    return torch.cat([h, x], dim=0).sum(dim=1), F.softmax(x, dim=-1), x.view(-1).reshape(2, 6).mean()


def _scaled(t, *, k=2.0):
    return t * k


def make_closures_and_nested_functions():
    offset = torch.ones(3)
    k = 3

    def outer(x):
        def inner(t):
            return t * k + offset      # free variables of outer, reached through inner
        y = x * 2

        def uses_local():
            return y + 1               # a cell of outer, created per call
        return inner(x) + uses_local()
    return outer


HALF = functools.partial(_scaled, k=0.5)        # partials made outside: the tracer does not build them
ADD_TWICE = functools.partial(torch.add, alpha=2)


def lambdas_and_partial(x, scale=functools.partial(_scaled, k=3.0)):
    square = lambda t: t * t  # noqa: E731
    return square(x) + HALF(x) + ADD_TWICE(x, x) + scale(x), (lambda: x - 1)()


def for_loops(xs, d):
    total = xs[0] * 0
    for t in xs:
        total = total + t
    for i in range(2):
        total = total * (i + 1)
    for i, t in enumerate(xs):
        total = total - t * i
    for a, b in zip(xs, xs[1:]):
        total = total + a * b
    for key, value in d.items():
        total = total + value * len(key)
    return total


def build_and_unpack(x, y):
    pair = (x, y)
    a, b = pair
    first, *rest = [x, y, x + y]
    head, *middle, last = (x, x * 2, y * 2, y)
    merged = {"a": a, **{"b": b}}
    both = [*pair, *rest]
    return merged["a"] + merged["b"], len(both), first * last, middle[0] - middle[1], [*middle]


def fstrings_on_constants(x):
    out = {}
    for i in range(2):
        out[f"layer_{i}"] = x + i
    name = f"{'w'}{len(out)}:{SCALE:.1f}"
    return out, name, out[f"layer_{1}"]


def comparisons_and_checks(x, mask=None, mode="sum", sizes=(2, 3)):
    if mask is None:
        x = x + 1
    if mask is not None:
        x = x * mask
    if mode in ("sum", "mean"):
        x = x - 1
    if 3 in sizes and len(sizes) == 2 and sizes[0] < sizes[1] and mode != "max":
        x = x * 2
    return x, x.dim() >= 2, mode == "sum"


def conditionals_and_bool_ops(x, scale=None, flag=True, name=""):
    s = scale or 2.0
    t = x * s if flag else x
    label = name or "default"
    both = flag and s
    neither = not flag or None
    return t + (1 if label == "default" else 0), both, neither, x.relu() if flag and s > 1 else x


def tensor_slicing(x):
    return x[1:3], x[:, ::2], x[..., None], x[0, -1], x[-1], x[:, 1:-1].sum(), x[None, 1:]


def subscript_stores(x):
    xs = [x, x]
    xs[1] = x * 2
    d = {"a": x}
    d["b"] = xs[1] + 1
    d["a"] = d["a"] - 1
    xs[-1] = xs[0] * 3
    return xs, d


def _takes_everything(a, b=1.0, *args, c=0.0, **kwargs):
    total = a * b + c
    for t in args:
        total = total + t
    for key in sorted(kwargs):
        total = total * kwargs[key]
    return total


def keyword_and_star_calls(x, y):
    args = (x, y)
    kwargs = {"p": 2.0, "q": 0.5}
    return (_takes_everything(x, b=2.0, c=1.0), _takes_everything(x, 3.0, y, y, p=0.5),
            _takes_everything(*args, **kwargs), torch.clamp(x, min=-0.5, max=0.5))


def global_constants(x):
    return x * SCALE + SHIFTS[1], {NAMES[0]: x - SHIFTS[0]}


def list_comprehensions(xs, k):
    ys = [t * k for t in xs]
    evens = [t + i for i, t in enumerate(ys) if i % 2 == 0]
    nested = [a * b for a in xs[:2] for b in (1, 2)]
    return [t.sum() for t in evens], nested, sum([t.mean() for t in xs])


def dict_comprehensions(d, scale):
    scaled = {k: v * scale for k, v in d.items()}
    named = {f"{k}_{i}": v.relu() for i, (k, v) in enumerate(scaled.items()) if k != "skip"}
    return named, {k: len(k) for k in d}


def comprehension_closing_over_locals(x, ks):
    y = x + 1                              # a cell on 3.11 (the comprehension's closure), not on 3.12+
    terms = [y * k + x for k in ks]

    def later():
        return terms[0] * 2                # terms is a cell in every version
    return terms, later()


def returns_containers(x):
    y = x * 2
    return (x, y), {"sum": x + y, "nested": [y, (x - y,)]}, [y.relu(), {"k": y.t()}]


class Leaf(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)
        self.scale = 0.5
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.act(self.lin(x)) * self.scale


class Net(torch.nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.seq = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.ReLU(), torch.nn.Linear(d, d))
        self.blocks = torch.nn.ModuleList([Leaf(d), Leaf(d)])
        self.heads = torch.nn.ModuleDict({"mean": torch.nn.Linear(d, 2), "std": torch.nn.Linear(d, 2)})
        self.residual = True
        self.eps = 1e-3

    def mix(self, x, h):
        return x + h if self.residual else h

    def forward(self, x):
        h = self.seq(x)
        for block in self.blocks:
            h = self.mix(h, block(h))
        out = {name: head(h) for name, head in self.heads.items()}
        out["std"] = F.softplus(out["std"]) + self.eps
        return out, self.blocks[-1].lin.weight.sum()


def make_closure_over_module():
    lin = torch.nn.Linear(3, 3)
    act = torch.nn.ReLU()

    def f(x):
        return act(lin(x)) + lin.bias
    return f


class Case:
    def __init__(self, id, make, inputs, graphs=1):
        self.id, self.make, self.inputs, self.graphs = id, make, inputs, graphs


def _same_fn(fn):
    return lambda: fn


CASES = [
    Case("tensor_arith", _same_fn(tensor_arith), lambda: (r(3, 4), r(3, 4))),
    Case("torch_functions_and_methods", _same_fn(torch_functions_and_methods), lambda: (r(3, 4),)),
    Case("nn_sequential", lambda: torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)),
         lambda: (r(2, 4),)),
    Case("user_module_with_submodules", Net, lambda: (r(2, 4),)),
    Case("closure_over_module", make_closure_over_module, lambda: (r(2, 3),)),
    Case("closures_and_nested_functions", make_closures_and_nested_functions, lambda: (r(3),)),
    Case("lambdas_and_partial", _same_fn(lambdas_and_partial), lambda: (r(3),)),
    Case("for_loops", _same_fn(for_loops), lambda: ([r(2), r(2), r(2)], {"ab": r(2), "c": r(2)})),
    Case("build_and_unpack", _same_fn(build_and_unpack), lambda: (r(2), r(2))),
    Case("fstrings_on_constants", _same_fn(fstrings_on_constants), lambda: (r(2),)),
    Case("comparisons_and_checks", _same_fn(comparisons_and_checks), lambda: (r(2, 3),)),
    Case("conditionals_and_bool_ops", _same_fn(conditionals_and_bool_ops), lambda: (r(3),)),
    Case("tensor_slicing", _same_fn(tensor_slicing), lambda: (r(4, 5),)),
    Case("subscript_stores", _same_fn(subscript_stores), lambda: (r(2),)),
    Case("keyword_and_star_calls", _same_fn(keyword_and_star_calls), lambda: (r(2), r(2))),
    Case("global_constants", _same_fn(global_constants), lambda: (r(2),)),
    Case("list_comprehensions", _same_fn(list_comprehensions), lambda: ([r(2), r(2), r(2)], 3)),
    Case("dict_comprehensions", _same_fn(dict_comprehensions), lambda: ({"a": r(2), "skip": r(2), "b": r(2)}, 2.0)),
    Case("comprehension_closing_over_locals", _same_fn(comprehension_closing_over_locals), lambda: (r(2), (1, 2))),
    Case("returns_containers", _same_fn(returns_containers), lambda: (r(2, 3),)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_graph_is_the_same_on_every_python(case):
    tjc.reset()   # pytest --refleaks repeats the body under one fixture set-up: counters from zero
    torch.manual_seed(0)
    fn = case.make()
    rec = GraphRecorder()
    opt = tjc.compile(fn, backend=rec)
    for call in range(2):
        args = case.inputs()
        with torch.no_grad():
            expected = fn(*args)
        got = opt(*args)
        assert same(expected, got), (case.id, call, expected, got)
        if call == 0:
            first = tjc.stats()
    s = tjc.stats()
    assert (first["compiles"], first["graphs"], first["fallbacks"], first["graph_breaks"]) == (
        case.graphs, case.graphs, 0, 0), first
    assert s["hits"] - first["hits"] == 1 and s["compiles"] == first["compiles"], "the second call hit the cache"
    assert len(rec.graphs) == case.graphs
    got_text = rec.text()
    if UPDATE:
        sections = _read_sections()
        sections[case.id] = got_text
        _write_sections(sections)
        return
    expected_text = _read_sections().get(case.id)
    assert expected_text is not None, f"{EXPECTED.name} has no section '{case.id}': run with TJC_UPDATE_EXPECTED=1"
    assert got_text == expected_text


def test_expected_file_has_a_section_per_case():
    sections = _read_sections()
    ids = [c.id for c in CASES]
    if UPDATE:
        _write_sections({k: v for k, v in sections.items() if k in ids})
        sections = _read_sections()
    assert list(sections) == [i for i in ids if i in sections], "sections in table order"
    assert set(sections) == set(ids), "one section per case, no stale ones"
