"""Issue 9, finding 5: every validated identifier in the kit refuses a trailing newline.

A ``$``-anchored pattern also matches just before a final ``"\\n"``, so ``"events\\n"``
passed as ``"events"``'s twin. Each validation that decides what a name or header may be
must refuse the same value with a newline appended (while accepting the value itself).
fake_rvc's (the fake brain's) headers are covered in ``test_fake_rvc_hardening.py``.
"""

from __future__ import annotations

import pytest

from robot_mcp_kit import ConfigurationError, EventPoster, SignatureError
from robot_mcp_kit.signing import check, sign
from robot_mcp_kit.store import Kind, Table

TS = 1_765_532_000
BODY = b"{}"
SIG = "sha256=" + sign("s3cret", TS, BODY)


@pytest.mark.parametrize("suffix", ["", "\n"], ids=["plain", "trailing-newline"])
def test_table_name_is_matched_in_full(suffix):
    """A table named 'events\\n' is refused; 'events' is accepted."""
    ddl = "CREATE TABLE events (id INTEGER PRIMARY KEY, ts REAL)"
    if suffix:
        with pytest.raises(ValueError, match="plain SQL identifier"):
            Table("events" + suffix, Kind.RECORD, ddl, time_column="ts")
    else:
        assert Table("events", Kind.RECORD, ddl, time_column="ts").name == "events"


@pytest.mark.parametrize(
    ("kind", "column"),
    [(Kind.RECORD, "time_column"), (Kind.BELIEF, "epoch_column")],
)
def test_declared_columns_are_matched_in_full(kind, column):
    """A time_column or epoch_column 'ts\\n' is refused like any non-identifier."""
    ddl = "CREATE TABLE t (id INTEGER PRIMARY KEY, ts REAL)"
    assert getattr(Table("t", kind, ddl, **{column: "ts"}), column) == "ts"
    with pytest.raises(ValueError, match="plain SQL identifier"):
        Table("t", kind, ddl, **{column: "ts\n"})


def test_poster_server_name_with_a_trailing_newline_is_refused():
    """The X-RVC-Server value 'sleeper\\n' is refused at construction."""
    EventPoster("sleeper", "http://127.0.0.1:9/events", "s3cret")
    with pytest.raises(ConfigurationError, match="printable ASCII"):
        EventPoster("sleeper\n", "http://127.0.0.1:9/events", "s3cret")


@pytest.mark.parametrize(
    ("timestamp", "signature", "reason"),
    [
        (f"{TS}\n", SIG, "malformed_timestamp"),
        (str(TS), SIG + "\n", "malformed_signature"),
    ],
    ids=["timestamp", "signature"],
)
def test_signature_headers_with_a_trailing_newline_are_refused(timestamp, signature, reason):
    """Both signing headers are matched in full; without the newline they verify."""
    check("s3cret", str(TS), BODY, SIG, now_s=TS)
    with pytest.raises(SignatureError) as info:
        check("s3cret", timestamp, BODY, signature, now_s=TS)
    assert info.value.reason == reason
