"""The kit's one logging style: event names with key-value fields, through stdlib logging."""

from __future__ import annotations

import logging

from robot_mcp_kit.log import get_logger


def test_event_renders_with_fields_and_carries_them_as_extra(caplog):
    """``_log.warning("poster_retry", server="x", attempt=2)`` renders structlog-style and
    puts the event name and each field on the record (a reserved name gets a ``_``)."""
    caplog.set_level(logging.DEBUG, logger="robot_mcp_kit.test")
    get_logger("robot_mcp_kit.test").warning("poster_retry", server="x", attempt=2, name="n")
    [record] = caplog.records
    assert record.getMessage() == "poster_retry server='x' attempt=2 name='n'"
    assert record.event == "poster_retry"
    assert (record.server, record.attempt, record.name_) == ("x", 2, "n")
    assert record.name == "robot_mcp_kit.test"
    assert record.filename == "test_kit_logging.py"  # the caller's line, not the helper's


def test_the_kit_configures_no_logging():
    """Importing the kit adds no handler and sets no level on its loggers."""
    import robot_mcp_kit
    import robot_mcp_kit.events
    import robot_mcp_kit.store  # noqa: F401

    for name in ("robot_mcp_kit.events", "robot_mcp_kit.tasks", "robot_mcp_kit.store"):
        logger = logging.getLogger(name)
        assert logger.handlers == []
        assert logger.level == logging.NOTSET


def test_warning_and_error_attach_the_exception_when_asked(caplog):
    """``exc_info=True`` (inside ``except``) or the exception itself puts its traceback on
    the record; without it the record carries none, and ``exc_info`` is not a field."""
    caplog.set_level(logging.DEBUG, logger="robot_mcp_kit.test")
    log = get_logger("robot_mcp_kit.test")
    try:
        raise ValueError("boom")
    except ValueError as exc:
        log.warning("with_flag", exc_info=True, tool="t")
        log.error("with_exception", exc_info=exc)
        log.warning("without")
    flagged, given, plain = caplog.records
    assert flagged.exc_info
    assert flagged.exc_info[0] is ValueError
    assert given.exc_info
    assert str(given.exc_info[1]) == "boom"
    assert not plain.exc_info
    assert flagged.getMessage() == "with_flag tool='t'"
    assert not hasattr(flagged, "exc_info_")
