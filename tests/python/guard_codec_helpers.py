"""Named objects for tests/python/test_guard_codec.py: a stored guard re-binds types, functions and
enum members by their importable name, so they live in a module of their own."""
import enum

import torch


class TaggedTensor(torch.Tensor):
    """A Tensor subclass with no behaviour of its own: TENSOR_MATCH compares its exact type."""


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    CRIMSON = 1   # an alias: Color.CRIMSON is Color.RED


class Perm(enum.Flag):
    R = 1
    W = 2


def helper(x):
    return x + 1


def other_helper(x):
    return x - 1


class Obj:
    """A weakly referenceable object, for the identity relations (SAME_AS, ALIAS_OF, DISTINCT_FROM)."""
