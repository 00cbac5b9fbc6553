"""SideEffects: what a trace does to objects outside the graph, in program order, for replay.

The one home of side effects. The tracer never touches a real object while tracing; instead it
records here, in program order:

  obj.name = v / del obj.name       on plain user objects and nn.Modules reached through a Source
                                    (attribute.py and nn_module.py decide what can be replayed)
  global name = v / del global name in the root frame's globals
  cell = v                          in the root frame's own cells (STORE_DEREF, `nonlocal` in a
                                    closure it made and the trace inlines). Its free variables'
                                    cells are shared with functions the trace may read through
                                    another path, so a store to one is refused (a graph break)
  list and dict mutation            of containers read from the frame (containers.py)
  set mutation                      each call of a changing set method, replayed as called (sets.py)
  next(it) on a builtin iterator    read from the frame, replayed as that many next() calls
                                    (variables/collections/frame_iterators.py)

and answers the reads that follow in the same trace: a stored attribute or global reads back as
the stored tracker, a deleted one is refused, and a mutated container is its own tracker (whose
items the trace updated). After the trace, `reconstruct(rebuild)` turns the log into
trace_result.SideEffect specs, and codegen replays them after the graph call: on the return path
before returning, at a graph break before the unsupported instruction (graph_break/__init__.py, step 2).
Replay loads every target and value first, then applies the effects in program order, so an
effect never changes what a later one loads (`self.a, self.b = self.b, self.a`). A container is
replayed once, with its final contents, at the place of its last mutation (no hook runs on a list
or dict store, so nothing can tell the two apart); attribute stores are replayed one by one, with
the type's own __setattr__ (nn.Module's registers a replaced buffer in `_buffers`).

Guards are taken from the real objects while tracing, so they describe the state at frame entry:
a list appended to has its entry length guarded, and the next call, which sees the replayed list,
misses when the length matters. What type guards cannot see is aliasing: a plain object, list or dict
is guarded by its type (and length, keys), not its identity, so two sources that are distinct
objects now may be one object at a later call (or the reverse), and a store through one would
change what the trace read through the other. Modules are guarded by identity, so they are exempt.
Where the trace's answer depends on such a relation, it is pinned by an identity-relation guard
(GuardKind.DISTINCT_FROM / ALIAS_OF: OBJECT_ALIASING, checked in C++ on the root after the tree,
holding no object): the trace is exact while the two sources alias as they did when compiled, and
a call where they do not recompiles. Only where a source is missing (a tracker with none) is the
read refused (a graph break).

  Attribute stores on plain objects are checked name by name (`_check_read`): a store through one
  tracker changes what another tracker reads only if that read names the same attribute and comes
  after the store, and the two objects have the same exact type (one object has one type, and
  types are guarded). So a read of `name` through a tracker that did not store it last depends on
  whether its object is the object of each tracker that stored or deleted `name` on that exact
  type: each such pair is pinned as it is now (same object: ALIAS_OF; distinct: DISTINCT_FROM).
  Reads before the store, reads of other names, and reads through the tracker that stored last
  see what Python would see whether or not the objects are one, and need nothing.

  Lists and dicts are checked coarsely: wrapping a container reads all its items at once, so reads
  cannot be ordered against a mutation. A mutated container must be a distinct object from every
  other container of its exact type the trace reads from the frame, before or after the mutation
  (`_check_alone`, `reached`): each pair is pinned DISTINCT_FROM. The same object reached through
  two sources has two trackers whose items would disagree after the mutation, so that is refused.

Imports nothing from variables/ (the log holds trackers opaquely): output_graph.py owns one.
"""
from __future__ import annotations

import enum

from ..guard.trace_result import ConstantOutput, DictOutput, EffectKind, GuardKind, ListOutput, SideEffect, Unsupported


class _Gone(enum.Enum):
    DELETED = "deleted"      # an attribute or global deleted earlier in the trace


def _unsupported(reason: str):
    raise Unsupported(reason)


def _distinct_cells(a, b, pin: bool, add_guard=None) -> bool:
    """Whether real cells `a` and `b` (distinct objects now) stay distinct at later calls: cells of
    variables of different names are (a cell is made for one variable of one scope; a closure put
    together by hand with types.FunctionType is the exception no guard sees); cells of one name are
    pinned DISTINCT_FROM through their sources where both have one (`pin`), else not known."""
    if a.cell_name != b.cell_name:
        return True
    if a.cell_source is None or b.cell_source is None or add_guard is None:
        return False
    if pin:
        first, second = sorted((a.cell_source, b.cell_source), key=str)
        if first != second:
            add_guard(first, GuardKind.DISTINCT_FROM, second)
    return True


class SideEffects:
    """Mutable per-trace state; the GIL is the only lock (one trace runs at a time per thread)."""

    def __init__(self, add_guard=None):
        # add_guard(source, kind, other_source): OutputGraph.add_guard, to pin identity relations;
        # None refuses where a relation would be needed.
        self._add_guard = add_guard
        # (kind, target tracker, name, value tracker): program order. A container has one entry,
        # moved to the end when it is mutated again.
        self._log: list = []
        self._attrs: dict = {}            # (id(real object), name) -> tracker | _Gone.DELETED
        self._globals: dict = {}          # name -> tracker | _Gone.DELETED
        self._foreign_globals: set = set()  # globals read through another function's __globals__
        # Plain objects, lists and dicts read from the frame: exact type -> id(object) -> trackers;
        # and the real object behind each such tracker.
        self._reached: dict = {}
        self._real: dict = {}             # id(tracker) -> real object
        self._mutated_types: set = set()  # container types mutated in this trace
        # (exact type, attribute name) -> the tracker whose store or deletion of that name on an
        # object of that type came last (by-identity targets, modules, are not recorded).
        self._last_store: dict = {}
        # (exact type, attribute name) -> {id(tracker): (tracker, real object)}: every tracker that
        # stored or deleted that name on an object of that type (by-identity targets excepted).
        self._storers: dict = {}
        self._mutated: dict = {}          # container type -> the trackers of mutated containers
        self._keepalive: list = []        # the objects whose ids key the dicts above
        # Real closure cells (the root frame's free variables, real functions' closures): one
        # tracker per cell object, and those the trace stored to (variables/python_objects/cells.py).
        self._cells: dict = {}            # id(cell) -> tracker
        self._stored_cells: list = []
        # Sources of objects made anew for each call (the root frame's **kwargs dict): they alias
        # nothing else the trace reaches, so their mutation needs no aliasing check.
        self._fresh: set = set()
        self._free_cells: set = set()     # root free variables stored (SET_CELL always replayed)

    def __bool__(self) -> bool:
        return bool(self._log)

    # -- reads in the same trace ----------------------------------------------------------------
    def attr(self, tracker, obj, name: str):
        """The tracker stored to `obj.name` earlier in the trace, or None if none was; `tracker` is
        obj's tracker, reading (Unsupported where the answer depends on aliasing, `_check_read`)."""
        self._check_read(tracker, obj, name)
        value = self._attrs.get((id(obj), name))
        if value is _Gone.DELETED:
            _unsupported(f"attribute {name!r} of {type(obj).__name__} read after the trace deleted it")
        return value

    def global_value(self, name: str):
        value = self._globals.get(name)
        if value is _Gone.DELETED:
            _unsupported(f"global {name!r} read after the trace deleted it")
        return value

    def touches_global(self, name: str) -> bool:
        return name in self._globals

    def note_foreign_global(self, name: str) -> None:
        """Global `name` was read through another function's __globals__, which may be the frame's
        own globals at a later call: a store to that name in this trace would go unseen there."""
        if name in self._globals:
            _unsupported(f"global {name!r} is read through another function's __globals__ after "
                         "the trace stored it")
        self._foreign_globals.add(name)

    # -- what the trace reads from the frame ----------------------------------------------------
    def fresh(self, source) -> None:
        """The object at `source` is made anew by each call (before it is first read)."""
        self._fresh.add(source)

    def reached(self, value, tracker) -> None:
        """A plain object, list or dict read from the frame (builder.wrap, once per source)."""
        cls = type(value)
        if tracker.source in self._fresh:
            self._real[id(tracker)] = value
            self._keepalive.append(value)
            return
        for mutated in self._mutated.get(cls, ()):
            if self._real[id(mutated)] is value:
                _unsupported(f"{tracker.source} is {mutated.source}, a {cls.__name__} this trace "
                             "mutates, reached again through another source")
            self._pin(tracker, False, mutated,
                      f"{tracker.source} is a {cls.__name__}, like an object this trace mutates")
        self._reached.setdefault(cls, {}).setdefault(id(value), []).append(tracker)
        self._real[id(tracker)] = value
        self._keepalive.append(value)

    def real_object(self, tracker):
        """The object behind a plain object, list or dict tracker read from the frame, or None."""
        return self._real.get(id(tracker))

    def made_each_call(self, tracker) -> bool:
        """Whether the object behind `tracker` is new at every call (`fresh`): no identity of it
        holds from one call to the next."""
        return tracker.source in self._fresh

    def has_any_attr_effect(self, obj) -> bool:
        """Whether the trace stored or deleted any attribute of `obj` (a real object) so far."""
        return any(key[0] == id(obj) for key in self._attrs)

    def pin(self, tracker, same: bool, other, what: str) -> None:
        """Guards that two trackers' sources reach one object (`same`) or two, as they do now."""
        self._pin(tracker, same, other, what)

    def _pin(self, tracker, same: bool, other, what: str) -> None:
        """Guards that `tracker`'s source and `other`'s reach one object (`same`) or two, as they
        do now; refuses (`what`: the refusal's start) where a relation cannot be guarded."""
        a, b = tracker.source, other.source
        if a == b:
            return
        if self._add_guard is None or a is None or b is None:
            _unsupported(f"{what}: guards cannot tell whether they are the same object at a later call")
        if str(b) < str(a):
            a, b = b, a
        self._add_guard(a, GuardKind.ALIAS_OF if same else GuardKind.DISTINCT_FROM, b)

    def _check_read(self, tracker, obj, name: str) -> None:
        key = (type(obj), name)
        last = self._last_store.get(key)
        if last is None or last is tracker:
            return
        # What this read sees depends on which storers' objects are obj: pin each as it is now.
        for other, stored_on in self._storers[key].values():
            if other is not tracker:
                self._pin(tracker, stored_on is obj, other,
                          f"{tracker.source}.{name} read after a store to {other.source}.{name}, "
                          f"another {type(obj).__name__}")

    def _note_store(self, target, obj, name: str) -> None:
        self._last_store[(type(obj), name)] = target
        self._storers.setdefault((type(obj), name), {})[id(target)] = (target, obj)

    def _check_alone(self, value, tracker) -> None:
        if tracker.source in self._fresh:
            return
        cls = type(value)
        for trackers in self._reached.get(cls, {}).values():
            for other in trackers:
                if other is tracker:
                    continue
                if self._real[id(other)] is value:
                    # Two trackers of one object: the other's items would not see this mutation.
                    _unsupported(f"mutation of {tracker.source} while the trace also reads it as "
                                 f"{other.source}, the same {cls.__name__}")
                self._pin(tracker, False, other,
                          f"mutation of {tracker.source} while the trace also reads "
                          f"{other.source}, another {cls.__name__}")
        self._mutated_types.add(cls)
        mutated = self._mutated.setdefault(cls, [])
        if tracker not in mutated:
            mutated.append(tracker)

    # -- recording --------------------------------------------------------------------------------
    def store_attr(self, target, obj, name: str, value, *, by_identity: bool,
                   kind: EffectKind = EffectKind.SET_ATTR) -> None:
        """`obj.name = value`, `target` being obj's tracker (with a source). `by_identity`: obj is
        guarded by identity (an nn.Module), so aliasing is pinned by the guards. `kind`: SET_ATTR
        (replayed through the type's __setattr__) or OBJECT_SET_ATTR (through object's)."""
        if not by_identity:
            self._note_store(target, obj, name)
        self._keepalive.append(obj)
        self._attrs[(id(obj), name)] = value
        self._log.append((kind, target, name, value))

    def delete_attr(self, target, obj, name: str, *, by_identity: bool,
                    kind: EffectKind = EffectKind.DEL_ATTR) -> None:
        if not by_identity:
            self._note_store(target, obj, name)
        self._keepalive.append(obj)
        self._attrs[(id(obj), name)] = _Gone.DELETED
        self._log.append((kind, target, name, None))

    def has_attr_effect(self, tracker, obj, name: str) -> bool:
        self._check_read(tracker, obj, name)
        return (id(obj), name) in self._attrs

    def stores_name(self, name: str) -> bool:
        """Whether the trace stored or deleted `name` on any object (replayed after the graph)."""
        return any(key[1] == name for key in self._attrs)

    def attr_deleted(self, obj, name: str) -> bool:
        """Whether the trace's last change to `obj.name` deleted it (after has_attr_effect)."""
        return self._attrs.get((id(obj), name)) is _Gone.DELETED

    def store_global(self, name: str, value) -> None:
        if name in self._foreign_globals:
            _unsupported(f"store to global {name!r}, which the trace also read through another "
                         "function's __globals__")
        self._globals[name] = value
        self._log.append((EffectKind.SET_GLOBAL, None, name, value))

    def delete_global(self, name: str) -> None:
        if name in self._foreign_globals:
            _unsupported(f"deletion of global {name!r}, which the trace also read through another "
                         "function's __globals__")
        self._globals[name] = _Gone.DELETED
        self._log.append((EffectKind.DEL_GLOBAL, None, name, None))

    def store_cell(self, name: str, value, free: bool = False) -> None:
        """A store to one of the root frame's own cells, or (`free`) to a free variable of it: a
        cell that outlives the frame, so its store is always replayed."""
        if free:
            self._free_cells.add(name)
        self._log.append((EffectKind.SET_CELL, None, name, value))

    # -- real closure cells -----------------------------------------------------------------------
    def real_cell(self, cell, where, make):
        """The one tracker of real cell object `cell`, reached at `where` (the cell's source, or
        None): made by `make()` the first time. A second path to it is pinned to the first
        (ALIAS_OF), or, where one has no source, marks the cell unpinned (a store is refused)."""
        found = self._cells.get(id(cell))
        if found is None:
            found = self._cells[id(cell)] = make()
            self._keepalive.append(cell)
            return found
        if where != found.cell_source:
            if where is None or found.cell_source is None or self._add_guard is None:
                if found in self._stored_cells:
                    _unsupported("a closure cell the trace stored to, reached again by a path whose identity "
                                 "no guard can pin")
                found.unpinned = True
            else:
                a, b = sorted((where, found.cell_source), key=str)
                self._add_guard(a, GuardKind.ALIAS_OF, b)
        return found

    def stored_real_cell(self, tracker) -> None:
        if getattr(tracker, "unpinned", False):
            _unsupported("store to a closure cell reached by two paths whose identity no guard can pin")
        for other in self._cells.values():
            if other is not tracker and not _distinct_cells(tracker, other, pin=False, add_guard=self._add_guard):
                _unsupported(f"store to closure cell {tracker.cell_name!r}, which another cell of that name "
                             "the trace reaches may be at a later call")
        if tracker not in self._stored_cells:
            self._stored_cells.append(tracker)

    def reading_real_cell(self, tracker) -> None:
        """A real cell is read: every other real cell the trace stored to must be another cell at
        each later call too (DISTINCT_FROM), or the read is refused."""
        for other in self._stored_cells:
            if other is not tracker and not _distinct_cells(tracker, other, pin=True, add_guard=self._add_guard):
                _unsupported("a closure cell read after a store to another cell that may be it at a later call")

    def mutate_container(self, tracker, kind: EffectKind) -> None:
        """A list (SET_LIST) or dict (SET_DICT) read from the frame is about to be mutated; its
        tracker holds the items from now on. Containers the trace built need nothing here: they are
        rebuilt from their items wherever they leave the trace."""
        if tracker.source is None:
            return
        real = self._real.get(id(tracker))
        if real is None:
            _unsupported(f"mutation of {tracker.source}, which was not read through wrap (tracer bug)")
        self._check_alone(real, tracker)
        self._log = [e for e in self._log if e[1] is not tracker or e[0] is not kind]
        self._log.append((kind, tracker, None, None))

    def call_set_method(self, tracker, name: str, args) -> None:
        """A set read from the frame is changed by `set.<name>(s, *args)` (`args`: a tracker of a
        tuple of constants, the operands as they are now). Each change is its own entry, replayed in
        program order, so the set's table ends as eager leaves it (a set's iteration order depends
        on the order of its changes, not on its final items alone)."""
        real = self._real.get(id(tracker))
        if real is None:
            _unsupported(f"mutation of {tracker.source}, which was not read through wrap (tracer bug)")
        self._check_alone(real, tracker)
        self._log.append((EffectKind.SET_METHOD, tracker, name, args))
    def advance_iterator(self, tracker) -> None:
        """A builtin iterator read from the frame (frame_iterators.py): the next() calls the trace
        makes on it (`tracker.steps`, final at the end of the trace) are replayed on it."""
        self._log.append((EffectKind.ADVANCE_ITER, tracker, None, None))

    # -- after the trace --------------------------------------------------------------------------
    def reconstruct(self, rebuild, cells=True) -> tuple:
        """The log as SideEffect specs; `rebuild(tracker)` gives a tracker's output spec (a
        container or object read from the frame: its source, so the very object is changed).
        `cells`: the own cells whose stores are kept (True: all, False: none)."""
        out = []
        for kind, target, name, value in self._log:
            if kind is EffectKind.SET_CELL and name not in self._free_cells and \
                    not (cells is True or cells and name in cells):
                continue
            if kind is EffectKind.ADVANCE_ITER:
                if target.steps:
                    out.append(SideEffect(kind, rebuild(target), None, ConstantOutput(target.steps)))
                continue
            if kind is EffectKind.SET_LIST:
                out.append(SideEffect(kind, rebuild(target), None,
                                      ListOutput(tuple(rebuild(i) for i in target.items))))
            elif kind is EffectKind.SET_DICT:
                out.append(SideEffect(kind, rebuild(target), None,
                                      DictOutput(tuple((k, rebuild(v)) for k, v in target.items.items()))))
            else:
                out.append(SideEffect(kind, None if target is None else rebuild(target), name,
                                      None if value is None else rebuild(value)))
        return tuple(out)

    def release(self) -> None:
        """Drops every tracker and user object (OutputGraph.release: nothing waits for gc)."""
        self._log.clear()
        self._attrs.clear()
        self._globals.clear()
        self._reached.clear()
        self._real.clear()
        self._last_store.clear()
        self._storers.clear()
        self._mutated.clear()
        self._fresh.clear()
        self._keepalive.clear()
        self._cells.clear()
        self._stored_cells.clear()
