"""The `handler` decorator: registers a function for one or more opnames in a family's table."""


def make_registry():
    table = {}

    def handler(*opnames):
        def register(fn):
            for name in opnames:
                table[name] = fn
            return fn
        return register
    return table, handler
