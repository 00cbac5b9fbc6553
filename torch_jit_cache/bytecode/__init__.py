"""The bytecode layer: reading, analysing and writing CPython 3.11-3.13 bytecode, torch-free.

Three representations, each with an explicit conversion (the `bytecode` library's layering):
raw code objects; the library's symbolic instructions (`bytecode.Bytecode.from_code` undoes
EXTENDED_ARG, inline caches and jump offsets); and decoded `Inst`s, the version-neutral form the
tracer reads. The modules, lowest first:

  versions.py      one `VersionFacts` row per supported version: everything that differs in what
                   is decoded or emitted, read through `FACTS` (never a version number elsewhere)
  analysis.py      facts read off decoded code: stack effects, liveness, the with blocks of the
                   exception table, 3.13's superinstructions
  instructions.py  decoding: each raw instruction to one or more `Inst`s with the same stack effect
                   (`decode`, cached per code object)
  emitter.py       emitting: the primitives every generated code object is written with, and the one
                   place that spells a version's call sequence (NULL placement, PRECALL), LOAD_ATTR's
                   method flag, closure loads and MAKE_FUNCTION's parts
  resume.py        resume code: a code object that continues another at one of its instructions

Imports run one way, down this list; nothing here imports torch, the tracer or graph_break/.

Adding a Python version (3.14, say):
1. a row in versions.VERSIONS with its facts (add a field where the version differs in a way no
   field says yet, and read it where that difference matters: decoding, analysis or emitting);
2. its decoding rules in instructions.py: raw names that mean a normalized one (`_RENAMES`) and raw
   instructions whose decoding is more than a rename (`_EXPANSIONS`), each keeping the raw
   instruction's stack effect, and any stack effect the `bytecode` library gets wrong for it
   (analysis._EFFECT);
3. csrc/cpython/: the interpreter frame layout and shadow frames of the C++ hook.
tests/python/test_bytecode_*.py and test_cross_version_graphs.py then say what still differs.
"""
