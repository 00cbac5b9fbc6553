"""TJC_LOG=recompiles,guards,graph,bytecode,fallbacks,skips,graph_breaks: why code recompiled, what
ran, what did not.

`fallbacks` names frames that ran uncompiled after a trace; `skips` names frames the trace rules left
alone and the rule that did; `graph_breaks` names each graph break once, with its place and reason.

Each topic is printed through the `torch_jit_cache` logger (handler to stderr added when TJC_LOG is
set); `enabled(topic)` keeps the formatting work off the path when a topic is off.
"""
import logging
import sys

from .config import config

TOPICS = ("recompiles", "guards", "graph", "bytecode", "fallbacks", "skips", "graph_breaks")

logger = logging.getLogger("torch_jit_cache")


def enabled(topic: str) -> bool:
    return topic in config.log or "all" in config.log


def _ensure_handler() -> None:
    if config.log and not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[torch_jit_cache] %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def log(topic: str, message: str) -> None:
    if enabled(topic):
        _ensure_handler()
        logger.info("%s: %s", topic, message)


def warn_once(key, message: str, _seen=set()) -> None:  # noqa: B006 - the set is the memo
    """A warning logged once per key (a code object's id and reason, say) for the process."""
    if key in _seen:
        return
    _seen.add(key)
    logger.warning("%s", message)


def log_once(topic: str, key, message: str, _seen=set()) -> None:  # noqa: B006 - the set is the memo
    """`log(topic, message)` once per (topic, key) for the process."""
    if not enabled(topic) or (topic, key) in _seen:
        return
    _seen.add((topic, key))
    log(topic, message)
