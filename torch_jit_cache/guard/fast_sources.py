"""Rewrites sources through nn.Module attributes into dict lookups, for cheap guards and loads.

`L['self'].layers[3].weight` reads, at every call, through nn.Module.__getattr__ — Python code run
once per attribute, by the guards and by the transformed code that loads graph inputs. The same
objects live in the modules' dicts: `L['self'].__dict__['_modules']['layers'].__dict__['_modules']['3']
.__dict__['_parameters']['weight']` reaches them with C dict lookups only. The rewrite is exact:
it is applied only where normal attribute lookup would end in those dicts (guard/attribute_lookup.py:
the name is not an instance attribute and the class defines nothing of that name), and a guard on the rewritten path
still fails when the attribute is reassigned (nn.Module.__setattr__ writes the same dicts).
Instance attributes of modules (`training`, `scale`) are read from `__dict__` directly when the
class has no data descriptor of that name.
"""
from __future__ import annotations

from .attribute_lookup import Where, lookup
from .sources import AttrSource, ItemSource, Source

_MISSING = object()
_MODULE_DICTS = ("_parameters", "_buffers", "_modules")


def _module_type():
    try:
        import torch
    except ImportError:
        return None
    return torch.nn.Module


class SourceRewriter:
    """`rewrite(source)` with memo; `resolve(source)` gives the value a source names in the frame."""

    def __init__(self, resolve):
        self._resolve = resolve
        self._memo: dict[Source, Source] = {}
        self._module = _module_type()

    def rewrite(self, source: Source) -> Source:
        if self._module is None:
            return source
        done = self._memo.get(source)
        if done is None:
            done = self._memo[source] = self._rewrite(source)
        return done

    def _rewrite(self, source: Source) -> Source:
        if source.base is None:
            return source
        base = self.rewrite(source.base)
        if isinstance(source, AttrSource):
            try:
                obj = self._resolve(source.base)
            except Exception:  # noqa: BLE001 - a source we cannot evaluate here stays as it is
                obj = _MISSING
            if obj is not _MISSING and isinstance(obj, self._module):
                path = self._module_path(obj, base, source.attr)
                if path is not None:
                    return path
        return source if base is source.base else source.with_base(base)

    def _module_path(self, obj, base: Source, name: str):
        # Rewritten only where Python's own lookup ends (attribute_lookup: a class attribute of
        # the same name wins over _modules/_parameters; a data descriptor over the instance dict).
        found = lookup(obj, name)
        dict_source = AttrSource(base, "__dict__")
        if found.where is Where.INSTANCE_DICT:
            return ItemSource(dict_source, name)
        if found.where is not Where.GETATTR or found.value is not self._module.__getattr__:
            return None
        instance = vars(obj)
        for dict_name in _MODULE_DICTS:
            holder = instance.get(dict_name)
            if holder is not None and name in holder:
                return ItemSource(ItemSource(dict_source, dict_name), name)
        return None
