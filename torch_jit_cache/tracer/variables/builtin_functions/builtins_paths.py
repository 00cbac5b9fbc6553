"""os.fspath in the trace: a str or bytes constant is its own path, an object whose class writes
__fspath__ in Python has it inlined (looked up on the type, as os.fspath does) and must return str
or bytes. Anything else (a C object's __fspath__, pathlib's included, or a result of another type,
which raises TypeError in eager) is a graph break, so eager's own behaviour and error stand."""
from __future__ import annotations

import os

from ..base import unsupported
from ..constant import ConstantVariable
from ..python_objects.functions import UserMethodVariable


def _path_constant(value) -> bool:
    return type(value) in (str, bytes)


def fspath(tx, args, kwargs):
    if kwargs or len(args) != 1:
        unsupported("os.fspath takes one argument")
    (path,) = args
    if path.is_python_constant() and _path_constant(path.as_python_constant()):
        return path
    if not hasattr(path, "type_method"):   # objects built in the trace or read from the frame
        unsupported(f"os.fspath of {path}")
    result = tx.call(UserMethodVariable(path.type_method(tx, "__fspath__"), path), [], {})
    if not (result.is_python_constant() and _path_constant(result.as_python_constant())):
        unsupported(f"os.fspath: __fspath__ of {path} returned {result}, not a str or bytes constant")
    return ConstantVariable(result.as_python_constant())


PATH_HANDLERS = {os.fspath: fspath}
