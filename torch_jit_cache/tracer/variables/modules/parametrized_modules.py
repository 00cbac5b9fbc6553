"""Modules parametrized with torch.nn.utils.parametrize (weight_norm, register_parametrization).

Parametrizing a module's tensor swaps the module's class for one parametrize derives from it
(ParametrizedConv1d from Conv1d) with a property per parametrized tensor, whose getter runs the
tensor's ParametrizationList (`m.parametrizations.weight()`, a module of torch.nn.utils.parametrize
whose forward calls the parametrization modules, such as torch.nn.utils.parametrizations'
_WeightNorm, on the original parameters). nn_module.py inlines all three as torch.nn modules are:
the property getter runs as Python (attribute.py), so the parametrized tensor is computed in the
graph from the original parameters, which are graph inputs.
"""
from __future__ import annotations

# torch.nn.utils' parametrizations (weight_norm, orthogonal, ...): their ParametrizationList and
# parametrization modules are plain modules whose forward computes the parametrized tensor.
PARAMETRIZATION_MODULES = frozenset({"torch.nn.utils.parametrize", "torch.nn.utils.parametrizations"})
_PARAMETRIZED_CLASS_DICT = frozenset({"__module__", "__doc__", "__getstate__", "__deepcopy__"})


def parametrized_original(cls: type) -> type | None:
    """The module class that torch.nn.utils.parametrize derived `cls` from (ParametrizedConv1d ->
    Conv1d) when it made `cls` for a parametrized module, else None. Such a class adds to its base
    only a property per parametrized tensor (read: the parametrization's forward) and its pickling
    hooks, so the module's forward is the base's."""
    if cls.__module__ != "torch.nn.utils.parametrize" or len(cls.__bases__) != 1:
        return None
    base = cls.__bases__[0]
    if cls.__name__ != f"Parametrized{base.__name__}":
        return None
    for name, value in vars(cls).items():
        if name not in _PARAMETRIZED_CLASS_DICT and not (
                type(value) is property and getattr(value.fget, "__module__", None) == cls.__module__):
            return None
    return base
