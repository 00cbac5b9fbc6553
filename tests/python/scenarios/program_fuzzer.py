"""A differential fuzzer: random small programs in the style of model code, compiled and run against
eager, over calls between which the things guards must notice change.

    python tests/python/scenarios/program_fuzzer.py --count 2000 --seed 0    # a long run, prints a summary
    TJC_FUZZ_COUNT=500 pytest tests/python/scenarios/test_program_fuzzer.py  # the suite's test, more programs

A program is source text: globals, helpers (plain, `*args` with keyword-only parameters, closure
factories, lambdas), a user config object with attributes and a method, an nn.Module with a
ModuleList of blocks (Linear, buffers, plain attributes, a `training` branch), and a function `f(x,
y, n, cfg, model)` made of random statements: tensor expressions, Python control flow on Python
values (ints, flags, globals, attributes), loops, lists/dicts/tuples, in-place updates of fresh
tensors, of an input and of a buffer, `no_grad` blocks, branches on an input's properties
(is_contiguous, is_inference, strides, storage offset), sizes that depend on tensor values
(nonzero, a boolean mask, arange to a count), `locals()`/`vars()` read after a graph break, a raise
on a path the inputs never take, dict views read after their dict changed, lazy iterators (map,
filter, iter, enumerate, zip) over a list that grows before they are consumed, sizes read from
`.item()` with config.capture_scalar_outputs on (kind 17: unbacked symbols, one graph for
every value), and a return of a tensor, tuple, list or dict. Each program is built twice from the same seed (two namespaces, two models with equal
weights): one side runs eagerly, the other through tjc.compile. Call 1 runs both; then one or two
changes are applied to both sides (a new batch size, another `n`, a global, an attribute, training
mode, a patched method, a forward hook, aliased, non-contiguous, non-dense, offset or inference-mode
inputs, requires_grad, grad mode) and calls 2 and 3 run both again. Some programs compile the
model's blocks as child modules on the compiled side (`blocks[i] = tjc.compile(block)`, or
`tjc.compile_(block)` in place), with `f` compiled too or left eager (a compiled child inside an
eager parent). A program is exec'd from its text, or (check_program's `folder`) written to a file and
imported as a module, so that the on-disk cache can store its entries (scenarios/test_warm_start.py).
Outputs (structure, values, dtype, requires_grad), the inputs
after the call (mutation), the model's buffers and the config's attributes must all be equal.
A mismatch raises Mismatch with the seed, the change and the program text.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import pathlib
import random
import sys
import textwrap
import time
import types

import torch

import torch_jit_cache as tjc

D = 4  # feature size of every tensor: (batch, D)


class Mismatch(AssertionError):
    pass


# --- program text ----------------------------------------------------------------------------------

PRELUDE = '''
import torch
import torch.nn as nn

SCALE = {scale}
FLAG = {flag}


def helper(t, k=2.0):
    return torch.tanh(t) * k


def cat_sum(*ts, dim=-1, keep=True):
    return torch.cat(ts, dim=dim).sum(dim=dim, keepdim=keep)


def shift(first, *rest, by=1.0, **extra):
    out = first - by
    for r in rest:
        out = out + r * extra.get("w", 1.0)
    return out


def make_scaler(k):
    def scaler(t):
        return t * k
    return scaler


class Cfg:
    def __init__(self):
        self.alpha = {alpha}
        self.flag = {cfg_flag}
        self.depth = {depth}

    def factor(self):
        return self.alpha * 2.0


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.register_buffer("seen", torch.zeros(d))
        self.alpha = {block_alpha}

    def forward(self, h):
{block_body}


class Model(nn.Module):
    def __init__(self, d, nblocks):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(nblocks)])
        self.proj = nn.Linear(d, d)

    def forward(self, x, cfg, n):
        h = x
        for blk in self.blocks:
            h = blk(h)
        if self.training:
            h = h * 0.5
{model_tail}
'''

BLOCK_BODIES = [
    "h = torch.relu(self.lin(h)) * self.alpha\nreturn h",
    "h = self.lin(h) + h\nreturn torch.tanh(h)",
    "out = torch.sigmoid(self.lin(h))\nself.seen.add_(out.detach().mean(0))\nreturn out * self.alpha",
    "if self.alpha > 0.5:\n    h = h + self.lin(h)\nelse:\n    h = h - self.lin(h)\nreturn h",
]

MODEL_TAILS = [
    "return self.proj(h)",
    "return self.proj(h) * cfg.factor() + n",
    "if cfg.flag:\n    h = h + 1.0\nreturn self.proj(h)",
]


class ProgramWriter:
    """Writes the body of f(x, y, n, cfg, model) from a seeded random.Random."""

    UNARY = ["torch.relu({})", "torch.tanh({})", "torch.sigmoid({})", "-{}", "{}.abs()", "({} * 0.5)",
             "{}.sum(dim=-1, keepdim=True) + {}"]
    BINARY = ["({} + {})", "({} - {})", "({} * {})", "torch.maximum({}, {})", "torch.where({} > 0, {}, {})"]

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.tensors = ["x", "y"]
        self.lines: list[str] = []
        self.counter = 0
        self.mutates_x = False

    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def number(self) -> str:
        return repr(round(self.rng.uniform(-2, 2), 2))

    def tensor_expr(self, depth: int = 0) -> str:
        r = self.rng
        pick = r.random()
        if depth >= 2 or pick < 0.25:
            return r.choice(self.tensors)
        sub = lambda: self.tensor_expr(depth + 1)  # noqa: E731
        choices = [
            lambda: r.choice(self.UNARY).format(*(sub(),) * 2),
            lambda: self._binary(sub),
            lambda: f"({sub()} * {self.number()})",
            lambda: f"({sub()} + SCALE)",
            lambda: f"helper({sub()})",
            lambda: f"helper({sub()}, k={self.number()})",
            lambda: f"cat_sum({sub()}, {sub()}) + {sub()}",
            lambda: f"cat_sum({sub()}, dim=0, keep=False) + {sub()}",
            lambda: f"shift({sub()}, {sub()}, by={self.number()}, w={self.number()})",
            lambda: f"make_scaler({self.number()})({sub()})",
            lambda: f"(lambda t: t + {self.number()})({sub()})",
            lambda: f"({sub()} * cfg.alpha)",
            lambda: f"({sub()} * cfg.factor())",
            lambda: f"model.proj({sub()})",
            lambda: f"model({sub()}, cfg, n)",
            lambda: f"({sub()} * n)",
        ]
        return r.choice(choices)()

    def _binary(self, sub) -> str:
        template = self.rng.choice(self.BINARY)
        return template.format(*(sub() for _ in range(template.count("{}"))))

    def emit(self, line: str, indent: int = 0) -> None:
        self.lines.append("    " * indent + line)

    def assign(self, indent: int = 0) -> str:
        name = self.fresh()
        self.emit(f"{name} = {self.tensor_expr()}", indent)
        return name

    def statement(self) -> None:
        r = self.rng
        kind = r.randrange(17)
        if kind == 0:  # branch on a Python int argument
            name = self.fresh()
            self.emit(f"if n > {r.randrange(0, 4)}:")
            self.emit(f"{name} = {self.tensor_expr()}", 1)
            self.emit("else:")
            self.emit(f"{name} = {self.tensor_expr()}", 1)
            self.tensors.append(name)
        elif kind == 1:  # branch on a flag read from a global or an attribute
            name = self.fresh()
            cond = r.choice(["FLAG", "cfg.flag", "not cfg.flag", "cfg.depth >= 2", "SCALE > 0"])
            self.emit(f"{name} = {self.tensor_expr()}")
            self.emit(f"if {cond}:")
            self.emit(f"{name} = {name} + {self.tensor_expr()}", 1)
            self.tensors.append(name)
        elif kind == 2:  # a loop over range(n)
            name = self.fresh()
            self.emit(f"{name} = {r.choice(self.tensors)} * 1.0")
            self.emit("for i in range(n):")
            self.emit(f"{name} = {name} + {self.tensor_expr()} * (i + 1)", 1)
            self.tensors.append(name)
        elif kind == 3:  # a loop over a list of tensors, an accumulator starting as a Python number
            name = self.fresh()
            items = ", ".join(r.sample(self.tensors, min(len(self.tensors), 3)))
            self.emit(f"{name} = 0")
            self.emit(f"for t in [{items}]:")
            self.emit(f"{name} = {name} + t", 1)
            self.tensors.append(name)
        elif kind == 4:  # lists and dicts
            name, box = self.fresh(), self.fresh()
            if r.random() < 0.5:
                self.emit(f"{box} = [{self.tensor_expr()}, {self.tensor_expr()}]")
                self.emit(f"{box}.append({self.tensor_expr()})")
                self.emit(f"{name} = {box}[0] + {box}[-1] * len({box})")
            else:
                self.emit(f"{box} = {{'a': {self.tensor_expr()}, 'b': {self.tensor_expr()}}}")
                self.emit(f"{box}['c'] = {box}['a'] * {box}['b']")
                self.emit(f"{name} = sum({box}[k] for k in sorted({box}))")
            self.tensors.append(name)
        elif kind == 5:  # tuple unpacking
            a, b = self.fresh(), self.fresh()
            self.emit(f"{a}, {b} = {self.tensor_expr()}, {self.tensor_expr()}")
            self.tensors += [a, b]
        elif kind == 6:  # in-place update of a fresh tensor
            name = self.fresh()
            self.emit(f"{name} = {self.tensor_expr()}.clone()")
            self.emit(f"{name}.{r.choice(['add_', 'mul_', 'sub_'])}({self.number()})")
            self.tensors.append(name)
        elif kind == 7 and not self.mutates_x:  # in-place update of an input (x never requires grad)
            self.mutates_x = True
            self.emit(f"x.mul_({round(r.uniform(0.5, 1.5), 2)})")
        elif kind == 11:  # a branch on a property of an input the guards must pin
            name = self.fresh()
            cond = r.choice(["x.is_contiguous()", "not x.is_inference()", "x.stride(0) == 4",
                             "x.storage_offset() > 0", "x.is_contiguous(memory_format=torch.contiguous_format)",
                             "y.is_contiguous() and x.is_contiguous()"])
            self.emit(f"if {cond}:")
            self.emit(f"{name} = {self.tensor_expr()}", 1)
            self.emit("else:")
            self.emit(f"{name} = {self.tensor_expr()} * {self.number()}", 1)
            self.tensors.append(name)
        elif kind == 12:  # a size that depends on tensor values: a graph break, never a constant
            name = self.fresh()
            size = r.choice(["x.nonzero().shape[0]", "len(x[x > 0])", "torch.arange(0, (x > 0).sum()).numel()",
                             "torch.unique((y > 0).long()).shape[0]", "x.masked_select(x > 0.5).size(0)",
                             "torch.repeat_interleave(torch.ones(2), (x[0, :2] > 0).long()).shape[0]"])
            self.emit(f"{name} = {self.tensor_expr()} + {size}")
            self.tensors.append(name)
        elif kind == 8:  # no_grad block
            name = self.fresh()
            self.emit("with torch.no_grad():")
            self.emit(f"{name} = {self.tensor_expr()}", 1)
            self.tensors.append(name)
        elif kind == 13:  # locals() / vars() read after a graph break (eager's locals)
            name = self.fresh()
            self.emit('print("", end="")')
            read = r.choice([f"locals()[{r.choice(self.tensors)!r}]", f"vars()[{r.choice(self.tensors)!r}]",
                             f"({self.tensor_expr()} * len(locals()))"])
            self.emit(f"{name} = {read} + {self.tensor_expr()}")
            self.tensors.append(name)
        elif kind == 14:  # a raise on a path the inputs never take (n <= 4), after tensor work
            name = self.assign()
            self.emit(f"if n > {r.randrange(5, 8)} or {name}.dim() > 3:")
            self.emit(f"raise {r.choice(['ValueError', 'RuntimeError', 'KeyError'])}('unreachable')", 1)
            self.tensors.append(name)
        elif kind == 15:  # a dict view read after its dict changed
            self.dict_view()
        elif kind == 16:  # a lazy iterator over a list that grows
            self.lazy_iterator()
        else:
            self.tensors.append(self.assign())

    def item_size(self, rng: random.Random) -> None:
        """Kind 17: a size read from a tensor's value with `.item()`, traced as an unbacked
        SymInt under config.capture_scalar_outputs (the program turns it on: Program.captures). Drawn
        from its own generator and rebinding an existing tensor, so the other draws stay as they were."""
        count, name = self.fresh(), rng.choice(self.tensors)
        self.emit(f"{count} = {rng.choice(['(x > 0).sum()', '(y.abs() > 0.5).sum()', 'x.argmax()'])}.item()")
        use = rng.choice([f"torch.ones({count} + 1).sum() * 0.5", f"x.flatten()[:{count}].sum()",
                          f"x.flatten().narrow(0, 0, {count}).sum()", f"torch.arange({count}).sum()"])
        self.emit(f"{name} = {name} + {use}")

    def dict_view(self) -> None:
        """A dict view taken before the dict changes, read after (live in Python)."""
        r = self.rng
        name, box, view = self.fresh(), self.fresh(), self.fresh()
        kind = r.choice(["keys", "values", "items"])
        self.emit(f"{box} = {{'a': {self.tensor_expr()}, 'b': {self.tensor_expr()}}}")
        self.emit(f"{view} = {box}.{kind}()")
        self.emit(r.choice([f"{box}['c'] = {self.tensor_expr()}", f"del {box}['a']",
                            f"{box}.update(d={self.tensor_expr()})", f"{box}.pop('b')",
                            f"{box}['a'] = {self.tensor_expr()}"]))
        if kind == "keys":
            self.emit(f"{name} = {self.tensor_expr()} * len({view}) + (1.0 if 'c' in {view} else -1.0)")
        elif kind == "values":
            self.emit(f"{name} = sum({view}, x * 0.0) + len(list({view}))")
        else:
            self.emit(f"{name} = x * 0.0")
            self.emit(f"for k, t in {view}:")
            self.emit(f"{name} = {name} + t * len(k)", 1)
        self.tensors.append(name)

    def lazy_iterator(self) -> None:
        """A lazy iterator over a list that grows before (or while) it is consumed."""
        r = self.rng
        name, box, it = self.fresh(), self.fresh(), self.fresh()
        self.emit(f"{box} = [{self.tensor_expr()}, {self.tensor_expr()}]")
        kind = r.randrange(6)
        if kind == 5:   # the list extended by a generator over itself: stops at four items
            self.emit(f"{box}.extend(t * {self.number()} for t in {box} if len({box}) < 4)")
            self.emit(f"{name} = sum({box}, x * 0.0) + len({box})")
            self.tensors.append(name)
            return
        self.emit(f"{it} = " + ["map(lambda t: t * {k}, {box})", "iter({box})", "filter(lambda t: {k} > 0, {box})",
                                "enumerate({box})", "zip({box}, [1.0, 2.0, 3.0])"][kind].format(k=self.number(), box=box))
        if r.random() < 0.5:
            self.emit(f"{name} = next({it})")
            self.emit(f"{name} = {name}[1] if isinstance({name}, tuple) else {name}")
        else:
            self.emit(f"{name} = x * 0.0")
        self.emit(f"{box}.append({self.tensor_expr()})")
        self.emit(f"for item in {it}:")
        self.emit(f"{name} = {name} + (item[0] * item[1] if isinstance(item, tuple) else item)", 1)
        self.tensors.append(name)

    def ret(self) -> None:
        r = self.rng
        picks = lambda k: [r.choice(self.tensors) for _ in range(k)]  # noqa: E731
        shape = r.randrange(4)
        if shape == 0:
            self.emit(f"return {picks(1)[0]}")
        elif shape == 1:
            self.emit(f"return {', '.join(picks(2))}, n")
        elif shape == 2:
            self.emit(f"return [{', '.join(picks(3))}]")
        else:
            a, b = picks(2)
            self.emit(f"return {{'out': {a}, 'aux': ({b}, cfg.depth)}}")


@dataclasses.dataclass
class Program:
    seed: int
    source: str
    nblocks: int
    batch: int
    n: int
    y_requires_grad: bool
    # How the compiled side compiles the model's blocks (COMPILED_BLOCKS), or None.
    compiled_blocks: str | None = None
    # Whether the program reads sizes with .item() (kind 17): it runs with the capture switches on.
    captures: bool = False


# Compiled child modules: the compiled side's blocks behind tjc.compile as children of the ModuleList,
# or compiled in place; with "...; f eager" only the blocks are compiled, f runs as written.
COMPILED_BLOCKS = ["compile", "compile_", "compile; f eager", "compile_; f eager"]


def write_program(seed: int) -> Program:
    r = random.Random(seed)
    indent = lambda text, k: textwrap.indent(text, "    " * k)  # noqa: E731
    prelude = PRELUDE.format(
        scale=round(r.uniform(-1, 1), 2), flag=r.random() < 0.5, alpha=round(r.uniform(0.1, 1.5), 2),
        cfg_flag=r.random() < 0.5, depth=r.randrange(4), block_alpha=round(r.uniform(0, 1), 2),
        block_body=indent(r.choice(BLOCK_BODIES), 2), model_tail=indent(r.choice(MODEL_TAILS), 2))
    writer = ProgramWriter(r)
    for _ in range(r.randint(2, 6)):
        writer.statement()
    items = random.Random(f"item sizes {seed}")   # its own generator, as `blocks` below
    captures = items.random() < 0.2
    if captures:
        writer.item_size(items)
    writer.ret()
    body = indent("\n".join(writer.lines), 1)
    source = f"{prelude}\n\ndef f(x, y, n, cfg, model):\n{body}\n"
    # A generator of its own, so that the programs and draws above stay what they were.
    blocks = random.Random(f"compiled blocks {seed}").choice([None] * 6 + COMPILED_BLOCKS)
    return Program(seed, source, nblocks=r.randint(1, 3), batch=r.randint(2, 5), n=r.randint(0, 3),
                   y_requires_grad=r.random() < 0.3, compiled_blocks=blocks, captures=captures)


# --- one side: the program's namespace, its objects and inputs ---------------------------------------

def module_name(program: Program, compiled: bool) -> str:
    return f"fuzz_program_{program.seed}" + ("" if compiled else "_eager")


def namespace(program: Program, compiled: bool, folder=None) -> dict:
    """The program's globals: exec'd from a string, or with `folder`, imported from a file there
    (the compiled side's module in sys.modules under module_name), as the on-disk cache needs:
    it stores only code whose source file it can read, and re-binds functions by module name."""
    name = module_name(program, compiled)
    if folder is None:
        ns = {"__name__": name}
        exec(compile(program.source, f"<fuzz program {program.seed}>", "exec"), ns)
        return ns
    path = pathlib.Path(folder, f"fuzz_program_{program.seed}.py")
    if not path.exists() or path.read_text() != program.source:   # a warm run reads what a cold one wrote
        path.write_text(program.source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if compiled:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.__dict__


class Side:
    def __init__(self, program: Program, compiled: bool, backend="eager", folder=None):
        self.ns = namespace(program, compiled, folder)
        self.program, self.compiled, self.backend = program, compiled, backend
        self.model = self.new_model()
        self.cfg = self.ns["Cfg"]()
        mode = program.compiled_blocks if compiled else None
        self.fn = tjc.compile(self.ns["f"], backend=backend) if compiled and "f eager" not in (mode or "") \
            else self.ns["f"]
        self.n = program.n
        self.grad_enabled = True
        self.hooks = []

    def new_model(self):
        """The program's model, with the program's seed (so equal weights on both sides), its
        blocks compiled as the program says on the compiled side."""
        torch.manual_seed(self.program.seed)
        model = self.ns["Model"](D, self.program.nblocks)
        mode = self.program.compiled_blocks if self.compiled else None
        if mode is not None:
            for i, block in enumerate(model.blocks):
                if mode.startswith("compile_"):
                    tjc.compile_(block, backend=self.backend)
                else:
                    model.blocks[i] = tjc.compile(block, backend=self.backend)
        return model

    def call(self, x, y):
        with torch.set_grad_enabled(self.grad_enabled):
            return self.fn(x, y, self.n, self.cfg, self.model)


def make_inputs(seed: int, batch: int, y_requires_grad: bool, noncontiguous=False, aliased=False,
                strided=False, offset=False, inference=False):
    """x is (batch, D): transposed (noncontiguous), a non-dense view (strided: every other column
    of a wider tensor), a view at a storage offset (offset: rows of a taller tensor), or made under
    inference_mode (inference); y is x (aliased) or another tensor."""
    g = torch.Generator().manual_seed(seed)
    if noncontiguous:
        x = torch.randn(D, batch, generator=g).t()
    elif strided:
        x = torch.randn(batch, 2 * D, generator=g)[:, ::2]
    elif offset:
        x = torch.randn(batch + 2, D, generator=g)[2:]
    else:
        x = torch.randn(batch, D, generator=g)
    if inference:
        with torch.inference_mode():
            x = _same_layout(x)
    y = x if aliased else torch.randn(batch, D, generator=g).requires_grad_(y_requires_grad)
    return x, y


def _same_layout(x):
    """A copy of x with its sizes, strides and storage offset (under the caller's inference mode)."""
    span = 1 + sum((n - 1) * s for n, s in zip(x.shape, x.stride())) if x.numel() else 0
    base = torch.empty(x.storage_offset() + span)
    out = base.as_strided(x.shape, x.stride(), x.storage_offset())
    out.copy_(x.detach())
    return out


def clone_inputs(x, y):
    """Equal, independent inputs for the other side (aliasing, layout, offset and inference-ness
    kept)."""
    if x.is_inference():
        with torch.inference_mode():
            x2 = _same_layout(x)
    else:
        x2 = _same_layout(x)
    y2 = x2 if y is x else y.detach().clone().requires_grad_(y.requires_grad)
    return x2, y2


# --- changes between calls -------------------------------------------------------------------------

def _set_global(name, value):
    def change(side, state):
        side.ns[name] = value
    return change


def _set_attr(getter, name, value):
    def change(side, state):
        setattr(getter(side), name, value)
    return change


def _patch_instance_method(side, state):
    side.cfg.factor = lambda: 7.0


def _patch_class_method(side, state):
    side.ns["Cfg"].factor = lambda self: self.alpha - 3.0


def _add_forward_hook(side, state):
    side.hooks.append(side.model.blocks[0].register_forward_hook(lambda m, args, out: out * 2.0))


def _add_forward_pre_hook(side, state):
    side.hooks.append(side.model.proj.register_forward_pre_hook(lambda m, args: (args[0] + 1.0,)))


def _train(mode):
    def change(side, state):
        side.model.train(mode)
    return change


def _set_n(value):
    def change(side, state):
        side.n = value
    return change


def _another_model(alpha=None):
    """The calls go on with a new instance of the model (modules are guarded by what the trace
    read, not identity: an equal one may share the entry, one that differs must not)."""
    def change(side, state):
        side.model = side.new_model()
        if alpha is not None:
            side.model.blocks[0].alpha = alpha
    return change


def _no_grad(side, state):
    side.grad_enabled = False


def _input_change(**kw):
    def change(side, state):
        state.update(kw)
    return change


CHANGES = {
    "batch size": lambda r: _input_change(batch=r.choice([1, 3, 6, 7])),
    "n": lambda r: _set_n(r.choice([0, 1, 2, 4])),
    "global SCALE": lambda r: _set_global("SCALE", round(r.uniform(-1, 1), 2)),
    "global FLAG": lambda r: _set_global("FLAG", r.random() < 0.5),
    "cfg.alpha": lambda r: _set_attr(lambda s: s.cfg, "alpha", round(r.uniform(-1, 2), 2)),
    "cfg.flag": lambda r: _set_attr(lambda s: s.cfg, "flag", r.random() < 0.5),
    "cfg.depth": lambda r: _set_attr(lambda s: s.cfg, "depth", r.randrange(4)),
    "block alpha": lambda r: _set_attr(lambda s: s.model.blocks[0], "alpha", round(r.uniform(0, 1), 2)),
    "eval mode": lambda r: _train(False),
    "an equal model": lambda r: _another_model(),
    "another model, block alpha": lambda r: _another_model(round(r.uniform(0, 1), 2)),
    "patched instance method": lambda r: _patch_instance_method,
    "patched class method": lambda r: _patch_class_method,
    "forward hook": lambda r: _add_forward_hook,
    "forward pre-hook": lambda r: _add_forward_pre_hook,
    "aliased inputs": lambda r: _input_change(aliased=True),
    "non-contiguous x": lambda r: _input_change(noncontiguous=True),
    "non-dense x": lambda r: _input_change(strided=True),
    "x at an offset": lambda r: _input_change(offset=True),
    "inference x": lambda r: _input_change(inference=True),
    "y requires grad": lambda r: _input_change(y_requires_grad=True),
    "no_grad": lambda r: _no_grad,
    "nothing": lambda r: (lambda side, state: None),
}


# --- comparing --------------------------------------------------------------------------------------

def assert_same(expected, got, where: str) -> None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise Mismatch(f"{where}: expected a tensor, got {type(got).__name__}")
        if expected.requires_grad != got.requires_grad:
            raise Mismatch(f"{where}: requires_grad {got.requires_grad}, eager {expected.requires_grad}")
        if expected.dtype != got.dtype or expected.shape != got.shape:
            raise Mismatch(f"{where}: {got.dtype}{tuple(got.shape)}, eager {expected.dtype}{tuple(expected.shape)}")
        if not torch.allclose(expected.detach(), got.detach(), rtol=1e-4, atol=1e-5, equal_nan=True):
            raise Mismatch(f"{where}: values differ\n  eager:    {expected}\n  compiled: {got}")
    elif isinstance(expected, (list, tuple)):
        if type(expected) is not type(got) or len(expected) != len(got):
            raise Mismatch(f"{where}: expected {type(expected).__name__} of {len(expected)}, got {got!r}")
        for i, (e, g) in enumerate(zip(expected, got)):
            assert_same(e, g, f"{where}[{i}]")
    elif isinstance(expected, dict):
        if type(got) is not dict or list(expected) != list(got):
            raise Mismatch(f"{where}: expected keys {list(expected)}, got {got!r}")
        for k in expected:
            assert_same(expected[k], got[k], f"{where}[{k!r}]")
    elif expected != got or type(expected) is not type(got):
        raise Mismatch(f"{where}: {got!r}, eager {expected!r}")


def run_side(side: Side, x, y):
    try:
        return "ok", side.call(x, y)
    except Exception as e:  # eager's exception must be the compiled side's too
        return "raised", type(e)


def compare_call(eager: Side, comp: Side, state: dict, seed: int, where: str) -> None:
    x, y = make_inputs(seed, state["batch"], state["y_requires_grad"], state["noncontiguous"], state["aliased"],
                       state["strided"], state["offset"], state["inference"])
    x2, y2 = clone_inputs(x, y)
    expected, got = run_side(eager, x, y), run_side(comp, x2, y2)
    if expected[0] != got[0]:
        raise Mismatch(f"{where}: eager {expected}, compiled {got}")
    if expected[0] == "raised":
        if expected[1] is not got[1]:
            raise Mismatch(f"{where}: eager raised {expected[1].__name__}, compiled {got[1].__name__}")
        return
    assert_same(expected[1], got[1], f"{where}: output")
    assert_same(x, x2, f"{where}: x after the call")
    assert_same(y, y2, f"{where}: y after the call")
    for (name, b1), (_, b2) in zip(eager.model.named_buffers(), comp.model.named_buffers()):
        assert_same(b1, b2, f"{where}: buffer {name}")
    assert_same(vars(eager.cfg).get("alpha"), vars(comp.cfg).get("alpha"), f"{where}: cfg.alpha")


@dataclasses.dataclass
class Outcome:
    changes: list
    graphs: int
    fallbacks: int
    disk_cache_stores: int = 0
    disk_cache_hits: int = 0


def check_program(seed: int, change_names=None, backend="eager", folder=None, draw=0) -> Outcome:
    """Builds program `seed`, runs it eagerly and compiled over three calls with changes between the
    first and the second; raises Mismatch with the program text on any difference. With `folder`,
    the program is a module imported from a file there (namespace()); `draw` picks other changes
    for the same program (0: the suite's own)."""
    program = write_program(seed)
    r = random.Random(seed * 7919 + 1) if draw == 0 else random.Random(f"changes {seed} draw {draw}")
    names = change_names or r.sample(sorted(CHANGES), r.choice([1, 1, 2]))
    tjc.reset()
    try:
        with _capturing(program.captures):
            return _check(program, seed, r, names, backend, folder)
    finally:
        sys.modules.pop(module_name(program, compiled=True), None)


@contextlib.contextmanager
def _capturing(on: bool):
    """config.capture_* on for a program with kind 17, as it was after."""
    saved = tjc.config.capture_scalar_outputs, tjc.config.capture_dynamic_output_shape_ops
    if on:
        tjc.config.capture_scalar_outputs = tjc.config.capture_dynamic_output_shape_ops = True
    try:
        yield
    finally:
        tjc.config.capture_scalar_outputs, tjc.config.capture_dynamic_output_shape_ops = saved


def _check(program: Program, seed: int, r: random.Random, names: list, backend: str, folder) -> Outcome:
    eager = Side(program, compiled=False, folder=folder)
    comp = Side(program, compiled=True, backend=backend, folder=folder)
    state = {"batch": program.batch, "y_requires_grad": program.y_requires_grad,
             "noncontiguous": False, "aliased": False, "strided": False, "offset": False, "inference": False}
    try:
        compare_call(eager, comp, state, seed, "call 1")
        for name in names:
            change = CHANGES[name](r)
            change(eager, state)
            change(comp, state)
        compare_call(eager, comp, state, seed + 1, f"call 2 (after {', '.join(names)})")
        compare_call(eager, comp, state, seed + 2, f"call 3 (after {', '.join(names)})")
    except Mismatch as e:
        blocks = f", blocks: {program.compiled_blocks}" if program.compiled_blocks else ""
        raise Mismatch(f"program seed {seed}, changes {names}{blocks}: {e}\n--- program ---\n{program.source}") \
            from None
    stats = tjc.stats()
    tjc.reset()
    return Outcome(names, stats["graphs"], stats["fallbacks"], stats["disk_cache_stores"], stats["disk_cache_hits"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="first program seed")
    parser.add_argument("--keep-going", action="store_true", help="report every mismatch, not just the first")
    args = parser.parse_args(argv)
    t0, failures, compiled = time.perf_counter(), 0, 0
    for seed in range(args.seed, args.seed + args.count):
        try:
            outcome = check_program(seed)
        except Mismatch as e:
            failures += 1
            print(e, file=sys.stderr)
            if not args.keep_going:
                break
            continue
        compiled += outcome.graphs > 0
    elapsed = time.perf_counter() - t0
    print(f"{args.count} programs from seed {args.seed}: {failures} mismatches, {compiled} made graphs, "
          f"{elapsed:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
