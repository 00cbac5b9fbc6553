"""torch.nn.Module values: modules read from the frame (nn_module.py) and built in forward, their
hooks and parametrizations, slices of a ModuleList, nn classes' functions read as values, and
modules or functions called as one opaque node of the graph.
"""
