"""Small programs of every kind model code is made of, for measuring capture (benchmarks/capture.py)
and checking it differentially (test_capture_programs.py beside it).

Each program is a function or a module with the inputs it is called with: plain Python around
tensor ops (control flow, containers, builtins, iteration, closures, classes, context managers,
exceptions, enums, dataclasses, numpy, built-in modules). Written here, for this project, to cover
the classes of code issue 25 names; none is tuned to what the tracer handles. A program returns
everything it changed (a list it appended to, an attribute it set), so comparing outputs with eager
also compares side effects.

`PROGRAMS`: name -> Program(category, make), where make() returns (callable, args) built afresh
(seeded), so each compiler and eager run on equal, independent objects.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import functools
import itertools
import math
import operator
from typing import Callable, NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class Program(NamedTuple):
    category: str
    make: Callable


PROGRAMS: dict[str, Program] = {}


def program(category, *shapes, module=None):
    """Registers a function (called with seeded randn tensors of `shapes`) or, with module=, a
    module factory (called with them)."""
    def add(fn):
        def make():
            torch.manual_seed(0)
            args = [torch.randn(*s) for s in shapes]
            target = fn() if module else fn
            return target, args
        PROGRAMS[fn.__name__] = Program(category, make)
        return fn
    return add


# --- control flow -------------------------------------------------------------------------------

@program("control flow", (4, 4))
def if_on_shape(x):
    if x.shape[0] > 2:
        return x.relu()
    return x.sigmoid()


@program("control flow", (4,))
def while_loop_constant(x):
    i = 0
    while i < 3:
        x = x * 2
        i += 1
    return x


@program("control flow", (4,))
def for_range_break(x):
    for i in range(10):
        if i == 3:
            break
        x = x + i
    return x


@program("control flow", (4,))
def for_else(x):
    for i in range(3):
        x = x + i
    else:
        x = x * 10
    return x


@program("control flow", (4,))
def ternary_and_boolops(x):
    a = x.dim() == 1 and x.numel() > 2
    b = None or 5
    return x * (2 if a else 3) + b


@program("control flow", (4,))
def nested_functions_with_defaults(x):
    def scale(t, k=3):
        return t * k

    def shift(t, *, by=1):
        return t + by
    return shift(scale(x), by=2)


# --- containers ---------------------------------------------------------------------------------

@program("containers", (3,))
def dict_items_comprehension(x):
    d = {"a": x, "b": x * 2, "c": x * 3}
    return {k: v + 1 for k, v in d.items()}


@program("containers", (3,))
def dict_keys_values(x):
    d = {"a": x, "b": x * 2}
    total = sum(d.values())
    return total, sorted(d.keys())


@program("containers", (3,))
def list_mutation(x):
    out = []
    for i in range(3):
        out.append(x + i)
    out.insert(0, x)
    out.extend([x * 2])
    out.pop(1)
    return out


@program("containers", (3,))
def ordered_dict(x):
    d = collections.OrderedDict()
    d["w"] = x
    d["v"] = x + 1
    d.move_to_end("w")
    return list(d.values())


@program("containers", (3,))
def defaultdict_accumulate(x):
    d = collections.defaultdict(list)
    for i, name in enumerate(["a", "b", "a"]):
        d[name].append(x * i)
    return {k: torch.stack(v).sum(0) for k, v in d.items()}


@program("containers", (3,))
def tuple_unpack_star(x):
    a, *rest = (x, x + 1, x + 2)
    return a + sum(rest)


@program("containers", (3,))
def set_membership(x):
    names = {"relu", "gelu"}
    if "relu" in names and "tanh" not in names:
        return x.relu()
    return x


@program("containers", (3,))
def frozenset_constant(x):
    keep = frozenset({1, 3})
    return [x * i for i in range(4) if i in keep]


@program("containers", (3,))
def namedtuple_fields(x):
    Pair = collections.namedtuple("Pair", ["a", "b"])
    p = Pair(x, x * 2)
    return p.a + p.b, p._replace(a=x * 0).a


@program("containers", (3,))
def slicing_lists(x):
    xs = [x * i for i in range(6)]
    return xs[1:4], xs[::-2], xs[-1]


@program("containers", (3,))
def dict_update_and_get(x):
    d = {"a": x}
    d.update(b=x + 1)
    d.setdefault("c", x + 2)
    return d.get("b"), d.get("z", None), len(d)


# --- builtins -----------------------------------------------------------------------------------

@program("builtins", (3,))
def zip_enumerate(x):
    ws = [1.0, 2.0, 3.0]
    ts = [x, x + 1, x + 2]
    acc = x * 0
    for i, (w, t) in enumerate(zip(ws, ts)):
        acc = acc + w * t * i
    return acc


@program("builtins", (3,))
def map_filter_lambda(x):
    ts = list(map(lambda i: x * i, range(4)))
    ts = list(filter(lambda t: t is not None, ts))
    return torch.stack(ts)


@program("builtins", (3,))
def reversed_and_sorted(x):
    ks = sorted([3, 1, 2], reverse=True)
    return [x * k for k in reversed(ks)]


@program("builtins", (3,))
def min_max_abs_round(x):
    a = max(2, 5, 3)
    b = min([4, 1, 7])
    c = abs(-3)
    d = round(2.6)
    return x * (a + b + c + d)


@program("builtins", (3,))
def isinstance_and_type_checks(x):
    parts = [x, 2, 3.0]
    out = x * 0
    for p in parts:
        if isinstance(p, torch.Tensor):
            out = out + p
        elif isinstance(p, (int, float)):
            out = out + p
    return out, type(parts[1]) is int


@program("builtins", (3,))
def any_all_generators(x):
    sizes = [2, 3, 4]
    if all(s > 1 for s in sizes) and any(s == 3 for s in sizes):
        return x + 1
    return x - 1


@program("builtins", (3,))
def getattr_setattr_hasattr(x):
    class Box:
        pass
    b = Box()
    setattr(b, "val", x)
    if hasattr(b, "val") and not hasattr(b, "other"):
        return getattr(b, "val") * 2, getattr(b, "other", 5)
    return x


@program("builtins", (3,))
def string_formatting(x):
    name = f"layer_{2}.{'w'}"
    key = "{}_{}".format("a", 3)
    return x * len(name) + len(key), name.upper(), key.split("_")


@program("builtins", (3,))
def math_module(x):
    return x * math.sqrt(16) + math.pi * math.floor(2.5) + math.log(math.e)


@program("builtins", (3,))
def operator_module(x):
    return functools.reduce(operator.add, [x, x, x]), operator.getitem([x, 2], 1)


@program("builtins", (3,))
def itertools_chain_product(x):
    out = []
    for a, b in itertools.product([1, 2], [3]):
        out.append(x * a * b)
    return list(itertools.chain(out, [x]))


@program("builtins", (3,))
def divmod_pow_int_ops(x):
    q, r = divmod(17, 5)
    return x * (q ** 2) + r // 2 + (7 % 3)


# --- iteration ----------------------------------------------------------------------------------

@program("iteration", (3,))
def iter_next(x):
    it = iter([x, x + 1, x + 2])
    a = next(it)
    b = next(it)
    return a + b + next(it, x)


@program("iteration", (3,))
def nested_comprehension(x):
    return [[x * i * j for j in range(2)] for i in range(3)]


@program("iteration", (3,))
def comprehension_over_zip(x):
    return [a * b for a, b in zip([x, x + 1], [2, 3])]


@program("iteration", (3,))
def generator_expression_sum(x):
    return sum(x * i for i in range(4))


@program("iteration", (3,))
def user_generator(x):
    def gen(t):
        for i in range(3):
            yield t * i
    return list(gen(x))


@program("iteration", (2, 3))
def iterate_tensor_rows(x):
    return [row.sum() for row in x]


@program("iteration", (3,))
def dict_iteration_in_loop(x):
    d = {"a": 1, "b": 2}
    out = x
    for k in d:
        out = out + d[k]
    for k, v in d.items():
        out = out * v
    return out


# --- closures and functions --------------------------------------------------------------------

@program("functions", (3,))
def closure_counter(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count
    return bump(bump(x)), count


@program("functions", (3,))
def partial_application(x):
    add3 = functools.partial(torch.add, other=3)
    return add3(x)


@program("functions", (3,))
def decorator_wrapping(x):
    def twice(fn):
        @functools.wraps(fn)
        def wrapper(t):
            return fn(fn(t))
        return wrapper

    @twice
    def inc(t):
        return t + 1
    return inc(x), inc.__name__


@program("functions", (3,))
def kwargs_unpacking(x):
    def f(a, b=1, **kw):
        return a * b + kw.get("c", 0)
    opts = {"b": 2, "c": 5}
    return f(x, **opts), f(*[x], c=1)


@program("functions", (3,))
def recursion(x):
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)
    return x * fact(4)


@program("functions", (3,))
def lambda_sort_key(x):
    items = [("b", 2), ("a", 3), ("c", 1)]
    items.sort(key=lambda kv: kv[1])
    return [x * v for _, v in items]


# --- classes ------------------------------------------------------------------------------------

class Config:
    def __init__(self, hidden=4, act="gelu"):
        self.hidden = hidden
        self.act = act


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, t):
        return t * self.k

    @property
    def double(self):
        return self.k * 2

    @staticmethod
    def offset():
        return 1

    @classmethod
    def make(cls):
        return cls(3)


@program("classes", (3,))
def user_object_methods(x):
    s = Scaler.make()
    return s(x) + s.double + Scaler.offset()


@program("classes", (3,))
def config_object_branch(x):
    cfg = Config(act="relu")
    act = F.relu if cfg.act == "relu" else F.gelu
    return act(x) * cfg.hidden


class WithGetattr:
    def __init__(self):
        self._store = {"scale": 2.0}

    def __getattr__(self, name):
        if name in self.__dict__.get("_store", {}):
            return self._store[name]
        raise AttributeError(name)


@program("classes", (3,))
def custom_getattr(x):
    o = WithGetattr()
    return x * o.scale


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


@program("classes", (3,))
def truthiness_of_len(x):
    if Sized(0):
        return x - 1
    if Sized(2):
        return x + len(Sized(2))
    return x


class Flag:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


@program("classes", (3,))
def truthiness_of_bool(x):
    return x + 1 if Flag(True) else x - 1


@program("classes", (3,))
def object_equality_dunder(x):
    class V:
        def __init__(self, v):
            self.v = v

        def __eq__(self, other):
            return self.v == other.v

        def __add__(self, other):
            return V(self.v + other.v)
    a = V(2) + V(3)
    return x * a.v, a == V(5)


@program("classes", (3,))
def inheritance_super(x):
    class Base:
        def f(self, t):
            return t + 1

    class Child(Base):
        def f(self, t):
            return super().f(t) * 2
    return Child().f(x)


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    aux: float = 0.5


@program("classes", (3,))
def dataclass_output(x):
    out = Output(logits=x * 2)
    out.aux = 1.5
    return out.logits + out.aux, dataclasses.fields(out)[0].name


class Mode(enum.Enum):
    TRAIN = 1
    EVAL = 2


@program("classes", (3,))
def enum_comparison(x):
    mode = Mode.EVAL
    if mode == Mode.TRAIN:
        return x * 2
    if mode is Mode.EVAL:
        return x + mode.value
    return x


@program("classes", (3,))
def enum_by_value(x):
    return x * Mode(2).value, Mode["TRAIN"].name


# --- context managers and exceptions -----------------------------------------------------------

@program("contexts", (3,))
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + 1


@program("contexts", (3,))
def nullcontext_block(x):
    with contextlib.nullcontext():
        y = x * 2
    return y + 1


class Recorder:
    def __init__(self):
        self.events = []

    def __enter__(self):
        self.events.append("enter")
        return self

    def __exit__(self, *exc):
        self.events.append("exit")
        return False


@program("contexts", (3,))
def user_context_manager(x):
    rec = Recorder()
    with rec as r:
        y = x * 2
        r.events.append("body")
    return y, rec.events


@contextlib.contextmanager
def tagged(events):
    events.append("in")
    yield
    events.append("out")


@program("contexts", (3,))
def generator_context_manager(x):
    events = []
    with tagged(events):
        y = x + 1
    return y, events


@program("contexts", (3,))
def inference_mode_block(x):
    with torch.inference_mode():
        y = x * 2
    return y.clone() + 1


@program("contexts", (3,))
def try_except_caught(x):
    try:
        d = {}
        v = d["missing"]
    except KeyError:
        v = 3
    return x * v


@program("contexts", (3,))
def try_finally(x):
    out = []
    try:
        y = x + 1
    finally:
        out.append("done")
    return y, out


@program("contexts", (3,))
def raise_and_catch_custom(x):
    class Stop(Exception):
        pass
    try:
        if x.dim() == 1:
            raise Stop("one dim")
        y = x
    except Stop as e:
        y = x * len(str(e))
    return y


def _check_rank(x, rank):
    if x.dim() != rank:
        raise ValueError(f"expected rank {rank}, got {x.dim()}")
    return x


@program("contexts", (2, 3))
def validation_error_caught(x):
    # A shape check in a helper, and a caller that falls back when it fails.
    try:
        y = _check_rank(x, 3).sum(-1)
    except ValueError as e:
        y = x.mean(-1) * len(str(e))
    finally:
        y = y + 1
    return y


@program("contexts", (3,))
def parse_with_fallbacks(x):
    # Settings read as text, each with a fallback where it does not parse or is missing.
    settings = {"scale": "2.5", "steps": "three"}
    out = []
    for key, default in (("scale", 1.0), ("steps", 2), ("shift", 0.0)):
        try:
            out.append(float(settings[key]))
        except (KeyError, ValueError):
            out.append(default)
    return x * out[0] + out[1] - out[2]


@program("contexts", (4,))
def autocast_cpu_block(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(x.view(2, 2), x.view(2, 2))
    return y.float()


# --- tensor API breadth --------------------------------------------------------------------------

@program("tensor api", (4, 4))
def tensor_method_through_class(x):
    return torch.Tensor.add(x, 1), torch.Tensor.view(x, 16)


@program("tensor api", (4, 4))
def inplace_on_clone(x):
    y = x.clone()
    y.mul_(2).add_(1)
    y[0] = 0
    return y


@program("tensor api", (4, 4))
def shape_arithmetic(x):
    b, n = x.shape
    return x.reshape(b * n // 2, 2), x.size(-1) * 2, x.ndim


@program("tensor api", (4, 4))
def indexing_masks(x):
    m = x > 0
    return torch.where(m, x, torch.zeros_like(x)), x[:, 1:3], x[..., None].shape


@program("tensor api", (4, 4))
def dtype_device_branches(x):
    if x.dtype == torch.float32 and x.device.type == "cpu":
        return x.to(torch.float64).sum()
    return x.sum()


@program("tensor api", (4, 4))
def new_tensors_from_python(x):
    t = torch.tensor([1.0, 2.0, 3.0, 4.0])
    r = torch.arange(4, dtype=x.dtype)
    return x @ t + r, torch.full((2,), 3.0), torch.ones(2, 2, dtype=torch.int64)


@program("tensor api", (4, 4))
def tensor_list_ops(x):
    parts = x.chunk(2, dim=0)
    return torch.cat([p * i for i, p in enumerate(parts)], dim=0), len(parts)


@program("tensor api", (4, 4))
def einsum_and_softmax(x):
    att = torch.einsum("ij,kj->ik", x, x) / math.sqrt(x.shape[-1])
    return att.softmax(dim=-1)


@program("tensor api", (4,))
def item_in_python_arith(x):
    s = x.sum().item()
    return x * s


@program("tensor api", (4,))
def numpy_interop(x):
    import numpy as np
    a = np.arange(4, dtype=np.float32)
    return x + torch.from_numpy(a) * np.float32(2.0)


@program("tensor api", (4,))
def python_scalars_and_tensors(x):
    eps = 1e-5
    return x / (x.norm() + eps), float(x.shape[0]) ** 0.5


# --- modules -------------------------------------------------------------------------------------

class MobileBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.act = nn.Hardswish()
        self.gate = nn.Hardsigmoid()
        self.clip = nn.ReLU6()

    def forward(self, x):
        h = self.act(self.norm(self.conv(x)))
        return self.clip(h * self.gate(h))


@program("modules", (1, 3, 8, 8), module=True)
def mobile_block():
    return MobileBlock().eval()


class MishTanh(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.mish = nn.Mish()
        self.ht = nn.Hardtanh(-0.5, 0.5)

    def forward(self, x):
        return self.ht(self.mish(self.fc(x)))


@program("modules", (2, 4), module=True)
def mish_hardtanh():
    return MishTanh().eval()


class DictOfLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Linear(4, 4)})

    def forward(self, x):
        for name, layer in self.layers.items():
            x = layer(x) if name != "b" else layer(x).relu()
        return x


@program("modules", (2, 4), module=True)
def module_dict_items():
    return DictOfLayers().eval()


class ParamNames(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        names = [n for n, _ in self.named_parameters()]
        return self.fc(x), names


@program("modules", (2, 4), module=True)
def named_parameters_keys():
    return ParamNames().eval()


class WithConfig(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config(hidden=4, act="relu")
        self.fc = nn.Linear(4, self.config.hidden)

    def forward(self, x):
        h = self.fc(x)
        return F.relu(h) if self.config.act == "relu" else F.gelu(h)


@program("modules", (2, 4), module=True)
def module_reading_config():
    return WithConfig().eval()


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(4, 4), nn.GELU()) for _ in range(3)])
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            x = x + self.drop(b(x)) * (0.5 if i % 2 else 1.0)
        return x


@program("modules", (2, 4), module=True)
def module_list_residual():
    return Residual().eval()


class Pooling(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.bn = nn.BatchNorm2d(3)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        return self.pool(self.bn(self.up(x))).flatten(1)


@program("modules", (1, 3, 4, 4), module=True)
def pooling_upsample():
    return Pooling().eval()


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.heads = 2

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, t, c)


@program("modules", (2, 5, 8), module=True)
def attention_generator_unpack():
    return Attention().eval()


class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.fc.register_forward_hook(lambda m, i, o: o * 2)

    def forward(self, x):
        return self.fc(x)


@program("modules", (2, 4), module=True)
def forward_hook():
    return Hooked().eval()


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.register_buffer("pos", torch.arange(3))

    def forward(self, x):
        ids = (x.abs() * 3).long().clamp(max=9)[:, :3]
        return self.emb(ids) + self.emb(self.pos)


@program("modules", (2, 4), module=True)
def embedding_with_buffer():
    return Embed().eval()
