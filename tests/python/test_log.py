"""runtime/log.py: TJC_LOG's topics, printed through the `torch_jit_cache` logger.

The contract: a topic prints only while config.log names it (or "all"); `enabled(topic)` answers
that, so callers skip formatting when it is off; log_once / warn_once say a thing once per key
until tjc.reset() forgets, so a reason shows again for what compiles again; the first message of a
topic that is on gives the logger a stderr handler. Torch-free.
"""
import logging

import pytest


import torch_jit_cache as tjc
from torch_jit_cache.runtime import log
from torch_jit_cache.config import config


@pytest.fixture
def topics(monkeypatch, caplog):
    """Sets config.log for the test; the logger's handlers and what it said once are restored."""
    saved = list(log.logger.handlers)
    caplog.set_level(logging.INFO, logger="torch_jit_cache")
    log.forget_once()

    def set_topics(*names):
        monkeypatch.setattr(config, "log", frozenset(names))
    yield set_topics
    log.logger.handlers[:] = saved
    log.forget_once()


def test_every_topic_is_off_unless_named(topics):
    topics("graph")
    assert log.enabled("graph")
    assert [t for t in log.TOPICS if log.enabled(t)] == ["graph"]
    topics("all")
    assert all(log.enabled(t) for t in log.TOPICS)
    topics()
    assert not any(log.enabled(t) for t in log.TOPICS)


def test_a_topic_prints_with_its_name_only_while_on(topics, caplog):
    topics("recompiles")
    log.log("recompiles", "L['x'] changed")
    log.log("guards", "not printed")
    assert [r.getMessage() for r in caplog.records] == ["recompiles: L['x'] changed"]


def test_log_once_says_a_key_once_until_forgotten(topics, caplog):
    topics("fallbacks")
    for _ in range(3):
        log.log_once("fallbacks", ("code", 1), "ran uncompiled")
    log.log_once("fallbacks", ("code", 2), "another code")
    assert [r.getMessage() for r in caplog.records] == ["fallbacks: ran uncompiled", "fallbacks: another code"]
    tjc.reset()
    log.log_once("fallbacks", ("code", 1), "ran uncompiled")
    assert len(caplog.records) == 3, "reset() forgets what was said once"


def test_log_once_while_off_does_not_use_up_the_key(topics, caplog):
    topics()
    log.log_once("skips", "k", "quiet")
    topics("skips")
    log.log_once("skips", "k", "now said")
    assert [r.getMessage() for r in caplog.records] == ["skips: now said"]


def test_warn_once_warns_whatever_the_topics(topics, caplog):
    topics()
    log.warn_once("limit", "cache limit reached")
    log.warn_once("limit", "cache limit reached")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.WARNING, "cache limit reached")]


def test_the_first_message_of_an_enabled_topic_adds_a_stderr_handler(topics, capsys):
    log.logger.handlers.clear()
    topics("graph")
    log.log("graph", "a graph")
    log.log("graph", "another")
    assert len(log.logger.handlers) == 1
    err = capsys.readouterr().err
    assert "[torch_jit_cache] graph: a graph" in err and "[torch_jit_cache] graph: another" in err


def test_config_log_refuses_what_is_not_a_set_of_topics():
    with pytest.raises(TypeError, match="config.log must be a set of topic names"):
        config.log = "graph"
