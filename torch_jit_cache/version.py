"""The package's version: one home, at the bottom of the layers, for every module that reads it.

Equal to pyproject.toml's `version`; the package's `__init__` checks that _C was built for it."""
__version__ = "0.1.0"
