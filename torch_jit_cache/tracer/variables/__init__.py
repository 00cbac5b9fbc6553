"""Variable trackers: the symbolic values the tracer manipulates (see base.py for the protocol)."""
from .base import VariableTracker
from .builder import wrap, wrap_constant
from .builtins import BuiltinVariable
from .constant import ConstantVariable
from .cells import CellVariable
from .containers import ListVariable, TupleVariable
from .dicts import DictVariable, DictViewVariable
from .functions import (NestedFunctionVariable, PythonModuleVariable, UserFunctionVariable,
                        UserMethodVariable)
from .iterators import IteratorVariable
from .nn_module import NNModuleVariable
from .pure import fold
from .ranges import RangeVariable
from .tensor import TensorVariable, TorchFunctionVariable

__all__ = ["VariableTracker", "wrap", "wrap_constant", "fold", "BuiltinVariable", "ConstantVariable", "CellVariable",
           "DictVariable", "DictViewVariable", "IteratorVariable", "ListVariable", "RangeVariable", "TupleVariable",
           "NestedFunctionVariable", "PythonModuleVariable", "UserFunctionVariable",
           "UserMethodVariable", "NNModuleVariable", "TensorVariable", "TorchFunctionVariable"]
