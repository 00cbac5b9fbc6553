"""Python's builtin functions and operators in the trace, and the standard library's functions
it answers: BuiltinVariable (len, isinstance, getattr, ...), operators, the table of C functions
run on constants (pure.py), their Python versions (polyfills.py), copy.deepcopy, itertools.tee,
id(), os.fspath and the interpreter-state readers. They dispatch to every other kind of value.
"""
