"""Python versions of lazy builtins and itertools/functools helpers, traced like user code.

map, filter, itertools.chain and itertools.product return iterators that run their functions
item by item, interleaved with whoever consumes them. Written as generator functions, they are
traced as such (generators.py: run lazily by a suspended child translator), so the order of calls
is Python's. functools.reduce is a plain loop. Each reads nothing from its module's globals (only
builtins, which resolve through the traced frame's builtins): the tracer inlines them without a
source for their globals.
"""


def map_(fn, *iterables):
    for args in zip(*iterables):
        yield fn(*args)


def filter_(fn, iterable):
    for item in iterable:
        if (item if fn is None else fn(item)):
            yield item


def chain_(*iterables):
    for iterable in iterables:
        for item in iterable:
            yield item


def chain_from_iterable_(iterables):
    for iterable in iterables:
        for item in iterable:
            yield item


def dict_fromkeys_(iterable, value=None):
    # dict.fromkeys: each key in the iterable's order, all mapped to the one value.
    result = {}
    for key in iterable:
        result[key] = value
    return result


def product_(*iterables, repeat=1):
    # Like itertools.product, every input is read to the end before the first item.
    pools = [tuple(pool) for pool in iterables] * repeat
    result = [()]
    for pool in pools:
        result = [prefix + (item,) for prefix in result for item in pool]
    for item in result:
        yield item


def reduce_(fn, iterable, *initial):
    it = iter(iterable)
    value = initial[0] if initial else next(it)
    for item in it:
        value = fn(value, item)
    return value


def zip_(*iterables):
    # zip over a generator: one item from each input in turn, stopping at the first exhausted one
    # (the inputs before it have given one item more, as in Python).
    its = [iter(iterable) for iterable in iterables]
    while its:
        items = []
        for it in its:
            for item in it:   # next(it), or return when it is exhausted
                items.append(item)
                break
            else:
                return
        yield tuple(items)


def enumerate_(iterable, start=0):
    index = start
    for item in iterable:
        yield (index, item)
        index += 1


def sequence_iter_(seq, item):
    # collections.abc.Sequence.__iter__: seq[0], seq[1], ... until seq[i] raises IndexError.
    # `item(seq, i)` is (True, seq[i]) or (False, None) where it raised IndexError, caught as
    # Sequence's own `except IndexError` catches it (user_object.py).
    i = 0
    while True:
        found, value = item(seq, i)
        if not found:
            return
        yield value
        i += 1


def sequence_iterator_(seq):
    # Python's own sequence iterator (iter() of an object with __getitem__ and no __iter__):
    # seq[0], seq[1], ... until seq[i] raises IndexError or StopIteration; exhausted for good then.
    i = 0
    while True:
        try:
            value = seq[i]
        except (IndexError, StopIteration):
            return
        yield value
        i += 1


def callable_iterator_(fn, sentinel):
    # iter(fn, sentinel): fn() until it returns the sentinel (identity, then sentinel == value) or
    # raises StopIteration; exhausted for good then.
    while True:
        try:
            value = fn()
        except StopIteration:
            return
        if value is sentinel or sentinel == value:
            return
        yield value


def iterator_items_(it):
    # An iterator's items, one next(it) each, until it raises StopIteration: a user class's
    # iterator read by a consumer that may stop early (enumerate, zip, any, all).
    while True:
        try:
            value = next(it)
        except StopIteration:
            return
        yield value


def sequence_reversed_(seq):
    # collections.abc.Sequence.__reversed__: by __len__, then seq[i] downwards.
    for i in reversed(range(len(seq))):
        yield seq[i]


def sequence_contains_(seq, value, item):
    # collections.abc.Sequence.__contains__: iteration (as sequence_iter_), `is` or `==`.
    i = 0
    while True:
        found, v = item(seq, i)
        if not found:
            return False
        if v is value or v == value:
            return True
        i += 1


def sequence_index_(seq, item, value, start=0, stop=None):
    # collections.abc.Sequence.index. The ValueError for a value not found is not traced (a break).
    if start is not None and start < 0:
        start = max(len(seq) + start, 0)
    if stop is not None and stop < 0:
        stop += len(seq)
    i = start
    while stop is None or i < stop:
        found, v = item(seq, i)
        if not found:
            break
        if v is value or v == value:
            return i
        i += 1
    raise ValueError


def sequence_count_(seq, item, value):
    # collections.abc.Sequence.count.
    n, i = 0, 0
    while True:
        found, v = item(seq, i)
        if not found:
            return n
        if v is value or v == value:
            n += 1
        i += 1


def repeat_(obj, times=None):
    # itertools.repeat: `obj` again and again, `times` times or without end.
    if times is None:
        while True:
            yield obj
    for _ in range(times):
        yield obj


def count_(start=0, step=1):
    # itertools.count: start, start + step, ... without end (each value the sum of the previous
    # one and `step`, as CPython adds them).
    value = start
    while True:
        yield value
        value += step


def cycle_(iterable):
    # itertools.cycle: the items once, remembered, then the remembered ones over and over.
    seen = []
    for item in iterable:
        yield item
        seen.append(item)
    while seen:
        for item in seen:
            yield item


def islice_(iterable, *args):
    # itertools.islice(iterable, stop) or (iterable, start, stop[, step]): the items whose index
    # is start, start + step, ... below stop. What it takes from `iterable` is CPython's: before
    # each item it skips to that item's index, the next index is never past stop, and it ends
    # once it has taken `stop` items, so a finished islice has consumed exactly up to stop.
    bounds = slice(*args)
    start = 0 if bounds.start is None else bounds.start
    step = 1 if bounds.step is None else bounds.step
    stop = bounds.stop
    for bound in (start, step, stop):
        if bound is not None and (type(bound) is not int or bound < 0):
            raise ValueError("Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    if step == 0:
        raise ValueError("Step for islice() must be a positive integer or None.")
    it = iter(iterable)
    taken = 0
    wanted = start
    while True:
        while taken < wanted:
            for _ in it:
                break
            else:
                return
            taken += 1
        if stop is not None and taken >= stop:
            return
        for item in it:
            break
        else:
            return
        taken += 1
        yield item
        wanted += step
        if stop is not None and wanted > stop:
            wanted = stop


def accumulate_(iterable, func=None, *, initial=None):
    # itertools.accumulate: running totals (func(total, item), + by default), after `initial`.
    total = initial
    started = initial is not None
    if started:
        yield total
    for item in iterable:
        if not started:
            total, started = item, True
        else:
            total = total + item if func is None else func(total, item)
        yield total


def takewhile_(predicate, iterable):
    for item in iterable:
        if not predicate(item):
            return
        yield item


def dropwhile_(predicate, iterable):
    dropping = True
    for item in iterable:
        if dropping and predicate(item):
            continue
        dropping = False
        yield item


def filterfalse_(predicate, iterable):
    for item in iterable:
        if not (item if predicate is None else predicate(item)):
            yield item


def compress_(data, selectors):
    for item, keep in zip(data, selectors):
        if keep:
            yield item


def starmap_(fn, iterable):
    for args in iterable:
        yield fn(*args)


def pairwise_(iterable):
    it = iter(iterable)
    for previous in it:
        for item in it:
            yield previous, item
            previous = item
        return


def groupby_(iterable, key=None):
    # itertools.groupby: (key, group) for each run of items whose keys are equal (`is`, then ==).
    # All groups read one shared iterator: `state` holds the item read last and its key
    # (`pending`: a key was computed; `unread`: its item was not handed out yet), and the number
    # of the group handed out last: once the next group is asked for, an older group yields
    # nothing more, as CPython's does; advancing skips what is left of the current one.
    state = {"it": iter(iterable), "item": None, "key": None, "pending": False, "unread": False, "group": 0}

    def advance():
        for item in state["it"]:
            state["key"] = item if key is None else key(item)
            state["item"], state["pending"], state["unread"] = item, True, True
            return True
        return False

    def group(target, number):
        while state["group"] == number:
            if not state["unread"] and not advance():
                return
            if not (state["key"] is target or state["key"] == target):
                return
            state["unread"] = False
            yield state["item"]

    target, started = None, False
    while True:
        state["group"] += 1   # asked for the next group: the one handed out last ends
        while not (state["pending"] and (not started or not (state["key"] is target or state["key"] == target))):
            if not advance():
                return
        target, started = state["key"], True
        yield target, group(target, state["group"])


def tee_(iterable, n=2):
    # itertools.tee: n iterators over one input, each item read once from it and kept for the
    # iterators that have not yet passed it (one list per iterator).
    copies = range(n)   # TypeError for an n that is not an int, as tee's own
    if n < 0:
        raise ValueError("n must be >= 0")
    it = iter(iterable)
    pending = [[] for _ in copies]

    def one(mine):
        while True:
            if not mine:
                for item in it:
                    for waiting in pending:
                        waiting.append(item)
                    break
                else:
                    return
            yield mine.pop(0)

    return tuple([one(mine) for mine in pending])


def combinations_(pool, r):
    # itertools.combinations over its pool, read whole when it was made (a tuple): the r-item
    # selections of positions, each increasing, in lexicographic order of the positions.
    n = len(pool)
    if r > n:
        return
    chosen = list(range(r))
    while True:
        yield tuple([pool[i] for i in chosen])
        k = r - 1
        while k >= 0 and chosen[k] == n - r + k:   # the last position that can still move right
            k -= 1
        if k < 0:
            return
        chosen[k] += 1
        for j in range(k + 1, r):
            chosen[j] = chosen[j - 1] + 1


def combinations_with_replacement_(pool, r):
    # As combinations_, with positions that may repeat: each selection non-decreasing.
    n = len(pool)
    if r and not n:
        return
    chosen = [0] * r
    while True:
        yield tuple([pool[i] for i in chosen])
        k = r - 1
        while k >= 0 and chosen[k] == n - 1:
            k -= 1
        if k < 0:
            return
        step = chosen[k] + 1
        for j in range(k, r):
            chosen[j] = step


def permutations_(pool, r):
    # itertools.permutations over its pool (a tuple read whole when made): r distinct positions,
    # in lexicographic order of the positions, found by counting in base n and keeping the
    # counts whose digits are all different.
    n = len(pool)
    if r > n:
        return
    chosen = list(range(r))
    while True:
        yield tuple([pool[i] for i in chosen])
        while True:
            k = r - 1
            while k >= 0 and chosen[k] == n - 1:
                chosen[k] = 0
                k -= 1
            if k < 0:
                return
            chosen[k] += 1
            if len(set(chosen)) == r:
                break


def zip_longest_(*iterators, fillvalue=None):
    # itertools.zip_longest over the iterators it took when made: one item of each per tuple, an
    # exhausted one giving fillvalue from then on, until all are exhausted.
    active = len(iterators)
    finished = [False] * len(iterators)
    while active:
        items = []
        for k in range(len(iterators)):
            if finished[k]:
                items.append(fillvalue)
                continue
            try:
                items.append(next(iterators[k]))
            except StopIteration:
                finished[k] = True
                active -= 1
                if not active:
                    return
                items.append(fillvalue)
        yield tuple(items)
