"""torch values: tensors and the graph ops on them, the attributes users store on tensors,
torch.tensor of Python data, numpy arrays traced as tensors and numpy calls on constants, symbolic
sizes, ops whose output size depends on values, torch's context managers (grad modes, autocast,
TorchDynamo's own) and custom autograd Functions.
"""
