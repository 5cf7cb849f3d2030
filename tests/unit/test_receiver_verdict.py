"""robot_mcp_kit.receiver.check_post: the kit's one accept/refuse function (contract §4).

fake_rvc's own tests (test_fake_rvc_receive.py) hold it to every refusal; these hold the
parts only the kit's version has: an event of an unknown type is acknowledged and ignored
(§4.4), the one-parse fast path answers exactly as the diagnosing slow path would, and
``read_event`` reads a ``get_task_events`` entry the same way.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_mcp_kit import TaskEvent
from robot_mcp_kit.receiver import (
    KNOWN_EVENT_TYPES,
    BodyReason,
    Verdict,
    check_post,
    read_event,
    read_headers,
)
from robot_mcp_kit.receiver._verdict import _diagnose
from robot_mcp_kit.signing import signed_headers

NOW = 1_765_532_000
SECRETS = {"sleeper": "s3cret"}


def signed(body: bytes) -> dict[str, str]:
    return signed_headers("sleeper", "s3cret", body, NOW)


def decide(body: bytes) -> Verdict:
    return check_post(signed(body), body, SECRETS, NOW)


def as_dict(event: TaskEvent, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(event.model_dump_json())
    data.update(changes)
    return data


class TestUnknownTypes:
    def test_an_unknown_type_is_acknowledged_with_its_event(self, make_event):
        """§4.4: a well-formed event of a type the kit does not know: 200, marked."""
        body = json.dumps(as_dict(make_event(seq=4), type="battery_low")).encode()
        verdict = decide(body)
        assert (verdict.status, verdict.accepted, verdict.unknown_type) == (200, True, True)
        assert verdict.event is not None
        assert (verdict.event.type, verdict.event.seq) == ("battery_low", 4)
        assert "battery_low" not in KNOWN_EVENT_TYPES

    @pytest.mark.parametrize(
        ("changes", "reason"),
        [
            ({"type": "battery_low", "seq": 0}, BodyReason.INVALID_EVENT),
            ({"type": ""}, BodyReason.INVALID_EVENT),
            ({"type": 7}, BodyReason.INVALID_EVENT),
            ({"type": "battery_low", "server": "navigation"}, BodyReason.SERVER_MISMATCH),
            ({"type": "battery_low", "schema_version": 2}, BodyReason.BAD_SCHEMA_VERSION),
        ],
    )
    def test_an_unknown_type_with_another_fault_is_still_refused(self, make_event, changes, reason):
        """Only the type may be unknown: any other fault refuses the post as before."""
        body = json.dumps(as_dict(make_event(), **changes)).encode()
        verdict = decide(body)
        assert (verdict.status, verdict.reason) == (422, reason)

    def test_a_get_task_events_entry_is_read_the_same_way(self, make_event):
        """read_event: the event (of any type), or None; never raises."""
        event = make_event(seq=3)
        assert read_event(as_dict(event)) == event
        other = read_event(as_dict(event, type="battery_low"))
        assert other is not None
        assert (other.type, other.seq) == ("battery_low", 3)
        for bad in (None, [], "x", as_dict(event, seq="3"), as_dict(event, seq=0)):
            assert read_event(bad) is None


class TestOneParse:
    @pytest.mark.parametrize(
        ("mangle", "reason"),
        [
            (lambda d: d.pop("schema_version"), BodyReason.BAD_SCHEMA_VERSION),
            (lambda d: d.update(schema_version=2), BodyReason.BAD_SCHEMA_VERSION),
            (lambda d: d.update(schema_version=True), BodyReason.BAD_SCHEMA_VERSION),
            (lambda d: d.update(schema_version=1.0), BodyReason.BAD_SCHEMA_VERSION),
            (lambda d: d.update(seq="2"), BodyReason.INVALID_EVENT),
            (lambda d: d.update(payload=[]), BodyReason.INVALID_EVENT),
        ],
    )
    def test_what_the_fast_path_takes_is_what_the_contract_takes(self, make_event, mangle, reason):
        """A body TaskEvent would default or coerce is refused with the slow path's reason."""
        data = as_dict(make_event())
        mangle(data)
        verdict = decide(json.dumps(data).encode())
        assert (verdict.status, verdict.reason) == (422, reason)

    def test_nan_in_the_payload_is_refused_although_pydantic_would_take_it(self, make_event):
        """NaN and Infinity are not JSON (§4.4), though pydantic's JSON parser reads them."""
        body = make_event().model_dump_json().encode().replace(b'"eta_s":2', b'"eta_s":NaN')
        assert b"NaN" in body
        verdict = decide(body)
        assert (verdict.status, verdict.reason) == (422, BodyReason.INVALID_JSON)

    def test_nan_inside_a_string_is_fine(self, make_event):
        """The long way is taken for a body naming NaN, and it accepts a string that does."""
        event = make_event(payload={"note": "NaN and Infinity are words here"})
        verdict = decide(event.model_dump_json().encode())
        assert verdict.event == event

    @settings(max_examples=150, deadline=None)
    @given(
        st.dictionaries(
            st.sampled_from(
                ["schema_version", "event_id", "task_id", "server", "tool", "type", "seq", "ts"]
            ),
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(-2, 3),
                st.floats(allow_nan=False, allow_infinity=False),
                st.sampled_from(
                    ["", "x", "sleeper", "progress", "task_done", "2025-12-12T09:33:20.000Z"]
                ),
            ),
        )
    )
    def test_the_fast_path_agrees_with_the_slow_one(self, overrides):
        """For any body, the verdict is what the diagnosing path alone would say."""
        data: dict[str, Any] = {
            "schema_version": 1,
            "event_id": "e1",
            "task_id": "slee-1a2b3c",
            "server": "sleeper",
            "tool": "sleep",
            "type": "progress",
            "seq": 1,
            "ts": "2025-12-12T09:33:20.000Z",
            "payload": {},
        }
        data.update(overrides)
        body = json.dumps(data).encode()
        verdict = decide(body)
        slow = _diagnose(body, "sleeper")
        if isinstance(slow, Verdict):
            assert (verdict.status, verdict.reason) == (slow.status, slow.reason)
        else:
            assert verdict.event == slow or verdict.reason == BodyReason.SERVER_MISMATCH


class TestHeadersRead:
    def test_headers_read_once_are_taken_as_read(self, make_event):
        """check_post takes what read_headers made of the headers (the ASGI app reads them
        before the body, to refuse a Content-Length over the limit unread)."""
        body = make_event().model_dump_json().encode()
        head = read_headers(signed(body))
        assert not isinstance(head, Verdict)
        assert check_post(head, body, SECRETS, NOW).accepted
