"""`import x`, `import x.y as z`, `from x import y` inside a traced function (IMPORT_NAME,
IMPORT_FROM), for modules already in sys.modules.

Importing a module that is already imported runs no code: `__import__` finds every part of the
dotted name in sys.modules and returns the top package (or the module itself with a fromlist), so
the trace can answer it. Anything that would run an import (a module not loaded yet, a fromlist
name that is a submodule not loaded yet, a module still initializing, a replaced `__import__`) is
refused, which makes a graph break before the instruction: Python imports it there, as written.

What the trace relies on: that `__import__` is the builtin one (ID_MATCH on B['__import__']).
The module's attributes are guarded as a global module's are, through a source: the function's
global when its globals hold the very module; else the module's entry in sys.modules, reached
from B['__import__'] (`_sys_modules_source`), guarded by identity, so a module replaced in
sys.modules or an attribute monkeypatched later recompiles. torch and math are trusted
(functions.py) and need none.
"""
from __future__ import annotations

import builtins
import importlib.util
import sys
import types

from ....guard.sources import AttrSource, BuiltinSource, ItemSource
from ....guard.trace_result import GuardKind, Unsupported
from ..base import unsupported
from .functions import PythonModuleVariable, is_trusted_module

_REAL_IMPORT = builtins.__import__


def _loaded(name: str) -> types.ModuleType:
    module = sys.modules.get(name)
    if not isinstance(module, types.ModuleType):
        unsupported(f"import of {name}, which is not imported yet (importing runs code)")
    if getattr(getattr(module, "__spec__", None), "_initializing", False):
        unsupported(f"import of {name} while it is still initializing")
    return module


def _guard_import_builtin(tx) -> None:
    found = tx.output.root_builtins
    found = found if isinstance(found, dict) else vars(found)
    if found.get("__import__") is not _REAL_IMPORT or "__import__" in tx.output.root_globals:
        unsupported("import with a replaced __import__")
    tx.output.add_guard(BuiltinSource("__import__"), GuardKind.ID_MATCH, _REAL_IMPORT)


def _absolute(tx, name: str, level: int) -> str:
    if level == 0:
        return name
    package = tx.f_globals.get("__package__")
    if package is None:
        spec = tx.f_globals.get("__spec__")
        package = getattr(spec, "parent", None)
    if not package:
        unsupported("relative import outside a package")
    try:
        return importlib.util.resolve_name("." * level + name, package)
    except ImportError as e:
        unsupported(f"relative import: {e}")


def module_variable(tx, module: types.ModuleType) -> PythonModuleVariable:
    """The tracker for `module`, with a source when the function's globals hold the very module
    (guarded by identity there); without one otherwise."""
    short = module.__name__.rpartition(".")[2]
    names = [short] + [k for k, v in tx.f_globals.items() if v is module and k != short]
    for name in names:
        if tx.f_globals.get(name) is module:
            try:
                found = tx.load_global(name)   # as LOAD_GLOBAL reads it: guarded by identity
            except Unsupported:
                continue
            if isinstance(found, PythonModuleVariable) and found.module is module:
                return found
    if is_trusted_module(module):
        return PythonModuleVariable(module, None)
    if sys.modules.get(module.__name__) is not module:
        unsupported(f"module {module.__name__} is not sys.modules[{module.__name__!r}] "
                    "(its attributes could not be guarded)")
    return tx.wrap(module, _sys_modules_source(module.__name__))


def _sys_modules_source(name: str):
    """`sys.modules[name]`, from a root every frame has: B['__import__'] (pinned to the real one by
    `_guard_import_builtin`) is a builtin function whose __self__ is the builtins module; its
    __loader__ is importlib's BuiltinImporter, whose methods' globals are importlib._bootstrap's,
    which hold `sys` (bound in `_setup`, on 3.11-3.13 alike). The frame's own globals need not
    hold sys, and a new kind of root would need a C++ guard accessor."""
    bootstrap = AttrSource(AttrSource(AttrSource(AttrSource(BuiltinSource("__import__"), "__self__"),
                                                 "__loader__"), "find_spec"), "__globals__")
    return ItemSource(AttrSource(ItemSource(bootstrap, "sys"), "modules"), name)


def import_name(tx, name: str, fromlist, level: int) -> PythonModuleVariable:
    """IMPORT_NAME: what `__import__(name, globals, None, fromlist, level)` returns."""
    _guard_import_builtin(tx)
    full = _absolute(tx, name, level)
    parts = full.split(".")
    for i in range(1, len(parts) + 1):
        _loaded(".".join(parts[:i]))
    module = _loaded(full)
    if fromlist:
        for item in fromlist:
            if item == "*":
                unsupported("from ... import *")
            if not hasattr(module, item) and hasattr(module, "__path__"):
                _loaded(f"{full}.{item}")   # a submodule: imported already, or refused
        return module_variable(tx, module)
    if level:
        unsupported("relative import without a fromlist (tracer bug)")
    return module_variable(tx, sys.modules[parts[0]])   # `import a.b` binds the top package


def import_from(tx, module_var, name: str):
    """IMPORT_FROM: `module.name`, or the submodule of that name from sys.modules."""
    if not isinstance(module_var, PythonModuleVariable):
        unsupported(f"IMPORT_FROM {name} of {module_var}")
    module = module_var.module
    if hasattr(module, name):
        return module_var.var_getattr(tx, name)
    sub = sys.modules.get(f"{module.__name__}.{name}")
    if sub is None:
        unsupported(f"ImportError: cannot import name {name!r} from {module.__name__}")
    return module_variable(tx, sub)


def class_import_source(tx, cls):
    """A source for a class the trace holds without one (`type(t)` of a tensor an op made): the
    class as an import finds it, `sys.modules[cls.__module__].<qualname>`, where that path reaches
    this very class (never a class made inside a function); guarded by identity there, so its
    attributes can be read through it and guarded. None where no such path reaches it."""
    module_name, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", "")
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    if not isinstance(module, types.ModuleType) or "<" in qualname:
        return None
    found = module
    for part in qualname.split("."):
        found = vars(found).get(part) if isinstance(found, (types.ModuleType, type)) else None
        if found is None:
            return None
    if found is not cls:
        return None
    _guard_import_builtin(tx)
    source = _sys_modules_source(module_name)
    for part in qualname.split("."):
        source = AttrSource(source, part)
    tx.output.add_guard(source, GuardKind.ID_MATCH, cls)
    return source
