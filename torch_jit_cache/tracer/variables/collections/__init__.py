"""Containers holding trackers: tuples and lists, dicts and their views, dict subclasses
(OrderedDict, defaultdict), sets, deques, namedtuples, ranges, and the iterators over them
(CPython's own checks of their methods: sequence_checks.py).
"""
