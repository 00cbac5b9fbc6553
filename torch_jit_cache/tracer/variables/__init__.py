"""Variable trackers: the symbolic values the tracer manipulates (see base.py for the protocol)."""
from .base import VariableTracker
from .builder import wrap, wrap_constant
from .builtin_functions.builtins import BuiltinVariable
from .constant import ConstantVariable
from .python_objects.cells import CellVariable
from .collections.containers import ListVariable, TupleVariable
from .collections.dicts import DictVariable, DictViewVariable
from .python_objects.functions import (NestedFunctionVariable, PythonModuleVariable, UserFunctionVariable,
                                       UserMethodVariable)
from .collections.iterators import IteratorVariable
from .modules.nn_module import NNModuleVariable
from .builtin_functions.pure import fold
from .collections.ranges import RangeVariable
from .torch_objects.tensor import TensorVariable, TorchFunctionVariable

__all__ = ["VariableTracker", "wrap", "wrap_constant", "fold", "BuiltinVariable", "ConstantVariable", "CellVariable",
           "DictVariable", "DictViewVariable", "IteratorVariable", "ListVariable", "RangeVariable", "TupleVariable",
           "NestedFunctionVariable", "PythonModuleVariable", "UserFunctionVariable",
           "UserMethodVariable", "NNModuleVariable", "TensorVariable", "TorchFunctionVariable"]
