"""CompiledModule: what compile(module) returns — behaves like the module, compiles its forward.

Attribute reads and writes, state_dict(), train()/eval(), parameters() and the rest pass through to
the module itself; calling the wrapper calls the module (hooks included) with the cache-miss
callback installed, so `forward` is compiled. The wrapper holds the module strongly (the user holds
the wrapper); the cached entries guard it weakly, so dropping both frees the module and evicts them.
"""
from __future__ import annotations

from . import _C


class CompiledModule:
    __slots__ = ("_torch_jit_cache_module", "_torch_jit_cache_callback", "_call", "__weakref__")

    def __init__(self, module, callback):
        object.__setattr__(self, "_torch_jit_cache_module", module)
        object.__setattr__(self, "_torch_jit_cache_callback", callback)
        object.__setattr__(self, "_call", _C.CompiledFunction(module, callback))

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return _C.CompiledFunction(self._torch_jit_cache_module.forward, self._torch_jit_cache_callback)(
            *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._torch_jit_cache_module, name)

    def __setattr__(self, name, value):
        setattr(self._torch_jit_cache_module, name, value)

    def __delattr__(self, name):
        delattr(self._torch_jit_cache_module, name)

    def __dir__(self):
        return dir(self._torch_jit_cache_module)

    def __repr__(self):
        return f"CompiledModule({self._torch_jit_cache_module!r})"

    @property
    def original_module(self):
        return self._torch_jit_cache_module
