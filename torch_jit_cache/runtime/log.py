"""TJC_LOG=recompiles,guards,graph,bytecode,fallbacks,skips,graph_breaks: why code recompiled, what
ran, what did not.

`fallbacks` names frames that ran uncompiled after a trace; `skips` names frames the trace rules left
alone and the rule that did; `graph_breaks` names each graph break once, with its place and reason;
`disk_cache` says what was stored in or loaded from the on-disk cache, and why an entry was not stored.

Each topic is printed through the `torch_jit_cache` logger (handler to stderr added when TJC_LOG is
set); `enabled(topic)` keeps the formatting work off the path when a topic is off.
"""
import logging
import sys

from ..config import config

TOPICS = ("recompiles", "guards", "graph", "bytecode", "fallbacks", "skips", "graph_breaks", "dynamic",
          "disk_cache")

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


# Keys already warned or logged once (warn_once, log_once); tjc.reset() forgets them, so the
# reasons show again for what compiles again.
_SEEN: set = set()


def warn_once(key, message: str) -> None:
    """A warning logged once per key (a code object's id and reason, say), until reset()."""
    if ("warn", key) in _SEEN:
        return
    _SEEN.add(("warn", key))
    logger.warning("%s", message)


def describe_code(code) -> str:
    """How messages name a code object: its qualified name, file and first line."""
    return f"'{code.co_qualname}' ({code.co_filename}:{code.co_firstlineno})"


def log_once(topic: str, key, message: str) -> None:
    """`log(topic, message)` once per (topic, key), until reset()."""
    if not enabled(topic) or (topic, key) in _SEEN:
        return
    _SEEN.add((topic, key))
    log(topic, message)


def forget_once() -> None:
    """Forget what warn_once/log_once have said (tjc.reset())."""
    _SEEN.clear()
