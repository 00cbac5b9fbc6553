"""Compiled modules: what compile(module) returns (a CompiledModule) and compile_(module) (in place).

A CompiledModule IS the nn.Module it wraps, called compiled. It is an instance of a class made once
per wrapped class, `class Linear(CompiledModule, nn.Linear)` (same name, module and qualname, its
`__init_subclass__` not run), whose instance `__dict__` is the wrapped module's own dict (the same
dict object, as frontend/proxies.py does). So:

- it is an nn.Module and an instance of the wrapped class: `parent.child = compiled` and
  `nn.ModuleList(...)[i] = compiled` register it; `parent.parameters()`, `state_dict()`,
  `train()/eval()`, `to()`, `zero_grad()` walk it as they walk the module;
- every store and method of nn.Module and of the wrapped class runs on that shared dict:
  `_parameters`, `_buffers`, `_modules`, `training`, the hook dicts and plain attributes are the
  module's, so state_dict keys are the module's (no prefix), a checkpoint loads into either, a
  class's own `_apply`/`_load_from_state_dict`/`train` run as on the module, methods that return
  `self` return the compiled module;
- the wrapped module itself is not in `_modules` (its children are, once): no extra level in
  `named_modules()`, nothing counted twice.

What is the compiled module's own (instance slots, not in the shared dict): `_compiled_call_impl`,
which nn.Module.__call__ calls when it is set (torch's `Module.compile()` uses it too), here a C
CompiledFunction over the wrapped module's bound `_call_impl` (hooks, then forward, with this
compile's cache-miss callback installed); the wrapped module; its compiler (a FrameCompiler, the
compile() call's cache). `forward` is a property: `compiled.forward(x)` runs compiled too.

Rejected: a module holding the wrapped one as a child (torch.compile's OptimizedModule): every
state_dict key gets the `_orig_mod.` prefix, so checkpoints do not load across; and forwarding
attribute access by `__getattr__` without being an nn.Module (what this file did before: the
parent never saw the child's parameters, so they were never trained).

Lifetimes: the compiled module holds the wrapped module strongly; the wrapped module never refers to
the compiled one (the shared dict holds nothing of it), and the cache entries guard the wrapped
module weakly: dropping the compiled module (and the module) frees both by reference counting.

compile_(module) (`compile_in_place`) sets the module's own `_compiled_call_impl` to an InPlaceCall,
which reaches the module through a weak reference: a strong one (torch's `self._call_impl`) would
be a cycle module -> __dict__ -> callable -> module, freed only by the cycle collector. As for
torch's `Module.compile()`, nn.Module.__getstate__ drops `_compiled_call_impl`, so copies and pickles
of a module compiled in place are plain (uncompiled) modules.

Copies of a CompiledModule (copy.copy, copy.deepcopy, pickle, torch.save) are CompiledModules of a
copy of the wrapped module under a new compiler with the same options: each compiles on its own
cache. Pickling needs a picklable backend (a name always is).
"""
from __future__ import annotations

import copy
import functools
import pickle
import types
import warnings
import weakref

from torch import nn

from .. import _C

# compile()'s options that a copy is made with, read back from the FrameCompiler.
_OPTIONS = ("backend", "fullgraph", "dynamic", "cache_limit", "mode", "options")


class CompiledModule(nn.Module):
    """Base of the classes compile(module) makes; `isinstance(m, tjc.CompiledModule)` tells a
    compiled module. Never instantiated directly: compile(module) makes one."""

    __slots__ = ("_compiled_call_impl", "_tjc_module", "_tjc_compiler", "_tjc_rebuild")

    def __new__(cls, *args, **kwargs):
        # Called only by code of the wrapped class that builds another of its own kind through
        # `type(self)(...)` (Sequential and ModuleList slicing, `+`): that gets a plain module of
        # the wrapped class, uncompiled. compile() makes compiled modules without calling this.
        wrapped = cls.__dict__.get("_tjc_wrapped_class")
        if wrapped is None:
            raise TypeError(f"{cls.__name__} is made by torch_jit_cache.compile(module), not called")
        return wrapped(*args, **kwargs)

    def __init_subclass__(cls, **kwargs):
        # The wrapped class's own __init_subclass__ (a registry of subclasses, say) is not run:
        # the class made here adds no behaviour of its own that such a hook should see.
        pass

    # Few names of its own, each a data descriptor that wins over the shared dict: a method of the
    # wrapped class run on the compiled module reads them instead of a same-named attribute.
    @property
    def original_module(self):
        """The module this compiled module wraps (and shares every attribute with)."""
        return self._tjc_module

    @property
    def compile_options(self) -> dict:
        """backend, fullgraph, dynamic, cache_limit, mode and options, as given to compile()."""
        return {name: getattr(self._tjc_compiler, name) for name in _OPTIONS}

    # `compiled.forward(x)` runs compiled, as `compiled(x)` does (less the hooks, as in eager);
    # a forward set on the instance is the wrapped module's (the dict is shared).
    def _get_forward(self):
        forward = self._tjc_module.forward
        compiled = _C.CompiledFunction(forward, self._tjc_compiler)
        functools.update_wrapper(compiled, forward)   # inspect.signature(m.forward) sees forward's
        return compiled

    def _set_forward(self, value):
        setattr(self._tjc_module, "forward", value)

    def _del_forward(self):
        delattr(self._tjc_module, "forward")

    forward = property(_get_forward, _set_forward, _del_forward)

    def _replicate_for_data_parallel(self):
        # nn.DataParallel's replicas: plain modules over a copy of the dict (they run uncompiled).
        return self._tjc_module._replicate_for_data_parallel()

    # -- copies: a copy of the wrapped module, compiled anew with the same options -----------------
    def __copy__(self):
        return self._tjc_rebuild(copy.copy(self._tjc_module), self.compile_options)

    def __deepcopy__(self, memo):
        # The memo makes a module reached both directly and through this one copied once.
        return self._tjc_rebuild(copy.deepcopy(self._tjc_module, memo), self.compile_options)

    def __reduce_ex__(self, protocol):
        options = self.compile_options
        backend = options["backend"]
        if not isinstance(backend, str):
            try:
                pickle.dumps(backend, protocol)
            except Exception as e:
                raise pickle.PicklingError(
                    f"cannot pickle a compiled {type(self._tjc_module).__name__}: its backend {backend!r} is "
                    f"not picklable ({type(e).__name__}: {e}); compile with a backend name or a module-level "
                    "function, or pickle .original_module") from None
        return self._tjc_rebuild, (self._tjc_module, options)


class _DelegatingCompiledModule(CompiledModule):
    """The compiled module of a class no subclass can be made of (its own `__slots__` conflict,
    a metaclass that refuses): nn.Module's machinery over the shared dict, the rest of the
    wrapped class reached through the module."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return nn.Module.__getattr__(self, name)
        except AttributeError:
            return getattr(self._tjc_module, name)

    def _apply(self, fn, recurse=True):
        self._tjc_module._apply(fn, recurse)
        return self

    def train(self, mode=True):
        self._tjc_module.train(mode)
        return self

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self._tjc_module._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, *args, **kwargs):
        self._tjc_module._load_from_state_dict(*args, **kwargs)

    def extra_repr(self):
        return self._tjc_module.extra_repr()

    def _get_name(self):
        return self._tjc_module._get_name()


# A wrapped class -> a weak reference to its compiled class. Weak both ways: the compiled class
# (which holds the wrapped one as a base) lives while a compiled module of it does.
_CLASSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _compiled_class(cls):
    ref = _CLASSES.get(cls)
    made = ref() if ref is not None else None
    if made is not None:
        return made
    namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__slots__": (),
                 "__doc__": cls.__doc__, "_tjc_wrapped_class": cls}
    try:
        made = types.new_class(cls.__name__, (CompiledModule, cls), exec_body=lambda ns: ns.update(namespace))
    except Exception as e:   # noqa: BLE001 - any refusal of the class machinery: the fallback below
        warnings.warn(f"torch_jit_cache.compile: cannot subclass {cls.__qualname__} ({type(e).__name__}: {e}); "
                      "the compiled module is not an instance of it and reaches its methods through the "
                      "module", RuntimeWarning, stacklevel=4)
        made = _DelegatingCompiledModule
    _CLASSES[cls] = weakref.ref(made)
    return made


def wrap(module, compiler, rebuild):
    """The compiled module of `module`, calling it under `compiler` (a FrameCompiler). Its copies
    and unpickling call `rebuild(module, options)` (api.rebuild_compiled_module, a module-level
    function so that pickles name it): passed in, so this module never imports the api above it."""
    if isinstance(module, CompiledModule):
        module = module._tjc_module
    compiled = object.__new__(_compiled_class(type(module)))
    # object.__setattr__, not nn.Module's: a module stored through it would become a child.
    object.__setattr__(compiled, "__dict__", module.__dict__)
    object.__setattr__(compiled, "_tjc_module", module)
    object.__setattr__(compiled, "_tjc_compiler", compiler)
    object.__setattr__(compiled, "_tjc_rebuild", rebuild)
    # nn.Module.__call__ calls this when set: the module's own __call__ path (hooks, forward),
    # with the callback installed. A bound method of the module: no reference back to `compiled`.
    object.__setattr__(compiled, "_compiled_call_impl", _C.CompiledFunction(module._call_impl, compiler))
    return compiled


class InPlaceCall:
    """A module's `_compiled_call_impl` after compile_(module): its `_call_impl` under the
    compiler's callback, the module reached weakly (held strongly, it would be a cycle)."""

    __slots__ = ("_module", "_call", "compiler", "__weakref__")

    def __init__(self, module, compiler):
        self._module = weakref.ref(module)
        self._call = _C.CompiledFunction(type(module)._call_impl, compiler)
        self.compiler = compiler

    def __call__(self, *args, **kwargs):
        return self._call(self._module(), *args, **kwargs)

    def __reduce__(self):   # nn.Module.__getstate__ drops it first; anything else must not copy it
        raise pickle.PicklingError("a module's in-place compiled call is not picklable")


def compile_in_place(module, compiler):
    """Make calls of `module` (directly or from its parent) run compiled under `compiler`."""
    if isinstance(module, CompiledModule):
        object.__setattr__(module, "_tjc_compiler", compiler)
        object.__setattr__(module, "_compiled_call_impl",
                           _C.CompiledFunction(module._tjc_module._call_impl, compiler))
        return
    # object.__setattr__: into the instance dict, as nn.Module's own compile() stores it, without a
    # class's own __setattr__ seeing a name it does not know.
    object.__setattr__(module, "_compiled_call_impl", InPlaceCall(module, compiler))


def compiler_of(obj):
    """The FrameCompiler a compiled module, or a module compiled in place, calls under; else None."""
    if isinstance(obj, CompiledModule):
        return obj._tjc_compiler
    if isinstance(obj, nn.Module):
        call = obj.__dict__.get("_compiled_call_impl")
        if isinstance(call, InPlaceCall):
            return call.compiler
    return None


def unwrap(obj):
    """The module a compiled module wraps; anything else as it is."""
    return obj._tjc_module if isinstance(obj, CompiledModule) else obj


def own_compiled_call(obj):
    """The `_compiled_call_impl` that compile(module) or compile_(module) set on `obj`, while it is
    still that one; else None (a plain module, or a call set by anything else).

    The tracer inlines a call of such a module as a call of `unwrap(obj)` (hooks, then forward: what
    the compiled call runs, on its own cache), and guards this object by identity (held weakly), so
    a call set anew afterwards is noticed."""
    if isinstance(obj, CompiledModule):
        call = getattr(obj, "_compiled_call_impl", None)
        ours = type(call) is _C.CompiledFunction and \
            call._torch_jit_cache_original == obj._tjc_module._call_impl
        return call if ours else None
    if isinstance(obj, nn.Module):
        call = obj.__dict__.get("_compiled_call_impl")
        if isinstance(call, InPlaceCall) and call._module() is obj:
            return call
    return None
