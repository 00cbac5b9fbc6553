"""Python objects: user objects read from the frame or built in the trace, their attribute protocol
and hooks, classes, class statements and isinstance, functions, methods, partials, cells,
exceptions, generators, weak references, imports, compiled regexes, HuggingFace ModelOutputs, and
objects of classes the tracer has no model for (opaque, open).
"""
