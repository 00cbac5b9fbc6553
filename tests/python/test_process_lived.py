"""torch_jit_cache/guard/process_lived.py: which objects a guard may hold because they live as long as
the process. Library singletons (typing's special forms, ABCs, module-level functions of the
standard library or an installed package) qualify; nothing a user made does, whatever it claims
to be; dict keys must also hash and compare by identity, and are registered with the guard tree."""
import collections
import math
import operator
import collections.abc
import enum
import os
import types
import typing
import weakref

import pytest

from torch_jit_cache import _C
from torch_jit_cache.guard import process_lived


class UserKey:
    pass


class Impostor:
    """A user class that names itself typing.Union: its own module is this file."""
    __module__ = "typing"
    __qualname__ = "Union"


class Colour(enum.Enum):
    RED = 1


@pytest.mark.parametrize("value", [typing.Union, typing.Literal, typing.Optional, typing.Any,
                                   collections.abc.Sequence, collections.OrderedDict, os.path.join,
                                   os, types.UnionType])
def test_library_singletons_live_for_the_process_and_are_holdable_keys(value):
    assert process_lived.lives_for_the_process(value)
    assert process_lived.holdable_key(value)
    assert _C.is_process_lived(value)


@pytest.mark.parametrize("make", [UserKey, lambda: UserKey, lambda: Impostor(), lambda: Impostor,
                                  lambda: Colour.RED, lambda: collections.OrderedDict(), lambda: object(),
                                  lambda: (lambda: 1)],
                         ids=["user-object", "user-class", "impostor", "impostor-class", "user-enum",
                              "library-class-instance", "object", "lambda"])
def test_what_a_user_made_is_never_vouched_for(make):
    value = make()
    assert not process_lived.lives_for_the_process(value)
    assert not process_lived.holdable_key(value)
    assert not _C.is_process_lived(value)


def test_refusing_a_user_object_keeps_no_reference_to_it():
    obj = UserKey()
    ref = weakref.ref(obj)
    assert not process_lived.holdable_key(obj)
    del obj
    assert ref() is None


def test_library_modules():
    assert process_lived.is_library_module("typing")
    assert process_lived.is_library_module("collections.abc")
    assert not process_lived.is_library_module(__name__)
    assert not process_lived.is_library_module("__main__")
    assert not process_lived.is_library_module(None)


@pytest.mark.parametrize("value", [len, operator.add, math.sqrt, None],
                         ids=["len", "operator.add", "math.sqrt", "torch.sin"])
def test_library_c_functions_are_holdable_keys(value):
    # A C function bound to a module or a static type hashes and compares by what it is bound to
    # and its C function: no code runs, and the module keeps it for the process.
    if value is None:
        torch = pytest.importorskip("torch")
        value = torch.sin
    assert process_lived.holdable_key(value)
    assert _C.is_process_lived(value)


def test_c_methods_bound_to_an_object_are_not_holdable_keys():
    items = []
    assert not process_lived.holdable_key(items.append)
    assert not process_lived.holdable_key({}.get)


def test_a_pybind11_function_a_module_names_is_a_holdable_key():
    # pybind11 binds each function to its own function record (not a module or a type): found
    # under its module's name, it lives for the process and hashes by identity all the same.
    torch = pytest.importorskip("torch")
    value = torch._C._set_autograd_fallback_mode
    assert not isinstance(value.__self__, (type, types.ModuleType))
    assert process_lived.holdable_key(value)
    assert _C.is_process_lived(value)
