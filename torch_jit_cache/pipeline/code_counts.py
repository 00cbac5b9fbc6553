"""CodeCounts: a count per code object, for the compiler's memory per code (convert_frame.py)."""
from __future__ import annotations

import weakref


class CodeCounts:
    """A count per code object, keyed by identity and held weakly (WeakKeyDictionary keys by
    equality, and equal code objects are distinct caches)."""

    def __init__(self):
        self._counts: dict = {}   # id(code) -> [weakref to code, count]

    def get(self, code):
        item = self._counts.get(id(code))
        return item[1] if item is not None and item[0]() is code else None

    def setdefault(self, code, value):
        if self.get(code) is None:
            key = id(code)
            self._counts[key] = [weakref.ref(code, lambda _, key=key, d=self._counts: d.pop(key, None)), value]
        return self.get(code)

    def __setitem__(self, code, value):
        self.setdefault(code, value)
        self._counts[id(code)][1] = value
