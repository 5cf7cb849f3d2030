"""fake_rvc.check_post: every verdict of POST /api/agent/events, without HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fake_rvc import DEFAULT_MAX_BODY_BYTES, BodyReason, Verdict, check_post
from robot_mcp_kit import SignatureReason, TaskEvent
from robot_mcp_kit.signing import sign, signed_headers, standard_headers

NOW = 1_765_532_000
SECRETS = {"sleeper": "s3cret"}


def body_of(event: TaskEvent) -> bytes:
    return event.model_dump_json().encode()


def decide(headers: Any, body: bytes, **options: Any) -> Verdict:
    return check_post(headers, body, SECRETS, NOW, **options)


def signed(body: bytes, *, server: str = "sleeper", secret: str = SECRETS["sleeper"]):
    return signed_headers(server, secret, body, NOW)


def assert_rejected(verdict: Verdict, status: int, reason: str) -> None:
    assert (verdict.status, verdict.reason, verdict.accepted) == (status, reason, False)
    assert verdict.detail
    assert verdict.event is None


class TestAccepted:
    def test_signed_event_is_accepted_with_its_server(self, make_event):
        """A well-signed TaskEvent from a configured server verifies: 200 with the event."""
        event = make_event()
        body = body_of(event)
        verdict = decide(signed(body), body)
        assert verdict == Verdict(status=200, server="sleeper", event=event)
        assert verdict.accepted

    def test_header_pairs_are_read_case_insensitively(self, make_event):
        """Headers may come as (name, value) pairs in any case (Starlette's items())."""
        body = body_of(make_event())
        pairs = [(name.lower(), value) for name, value in signed(body).items()]
        assert decide(pairs, body).accepted

    def test_standard_webhooks_post_names_its_server_in_the_body(self, make_event):
        """Signed with the Standard Webhooks headers only, the body's server is the server."""
        event = make_event()
        body = body_of(event)
        verdict = decide(standard_headers(event.event_id, "s3cret", body, NOW), body)
        assert (verdict.status, verdict.server) == (200, "sleeper")

    def test_the_deepest_payload_the_contract_allows_is_accepted(self, make_event):
        """§3.2 allows a payload 32 levels deep (the kit sends one): with the envelope, 33."""
        deep: dict[str, Any] = {}
        for _ in range(31):
            deep = {"d": deep}
        body = body_of(make_event(payload=deep))
        assert decide(signed(body), body).accepted
        deeper = body_of(make_event(payload={"d": deep}))
        assert_rejected(decide(signed(deeper), deeper), 422, BodyReason.TOO_DEEP)

    def test_any_current_secret_of_a_rotation_signs(self, make_event):
        """During a rotation every listed secret is accepted."""
        body = body_of(make_event())
        verdict = check_post(signed(body, secret="new"), body, {"sleeper": ["old", "new"]}, NOW)
        assert verdict.accepted


class TestHeaders:
    def test_header_sent_twice_is_duplicate_header(self, make_event):
        """A signature header sent twice: 400 duplicate_header, no server recorded."""
        body = body_of(make_event())
        pairs = [*signed(body).items(), ("X-RVC-Timestamp", str(NOW))]
        verdict = decide(pairs, body)
        assert_rejected(verdict, 400, SignatureReason.DUPLICATE_HEADER)
        assert verdict.server is None

    def test_control_character_in_server_is_invalid_header(self, make_event):
        """A control character in X-RVC-Server: 400 invalid_header, that value recorded."""
        body = body_of(make_event())
        verdict = decide({**signed(body), "X-RVC-Server": "sleeper\x01"}, body)
        assert_rejected(verdict, 400, SignatureReason.INVALID_HEADER)
        assert verdict.server == "sleeper\x01"

    def test_non_ascii_in_another_header_is_invalid_header_without_server(self, make_event):
        """Non-ASCII in X-RVC-Signature: 400 invalid_header; the server is not yet read."""
        body = body_of(make_event())
        verdict = decide({**signed(body), "X-RVC-Signature": "sha256=é"}, body)
        assert_rejected(verdict, 400, SignatureReason.INVALID_HEADER)
        assert verdict.server is None


class TestSize:
    def test_declared_length_over_the_cap_is_too_large(self, make_event):
        """Content-Length above max_body_bytes: 413 too_large, whatever the body."""
        body = body_of(make_event())
        headers = {**signed(body), "Content-Length": str(DEFAULT_MAX_BODY_BYTES + 1)}
        assert_rejected(decide(headers, body), 413, BodyReason.TOO_LARGE)

    def test_body_over_the_cap_is_too_large(self, make_event):
        """A body longer than max_body_bytes: 413 too_large, naming the limit."""
        body = body_of(make_event())
        verdict = decide(signed(body), body, max_body_bytes=10)
        assert_rejected(verdict, 413, BodyReason.TOO_LARGE)
        assert "10-byte limit" in (verdict.detail or "")


class TestSignature:
    def test_missing_server_header_is_unknown_server(self, make_event):
        """No X-RVC-Server: 401 unknown_server."""
        body = body_of(make_event())
        headers = {k: v for k, v in signed(body).items() if k != "X-RVC-Server"}
        assert_rejected(decide(headers, body), 401, SignatureReason.UNKNOWN_SERVER)

    def test_unconfigured_server_is_unknown_server_listing_the_known(self, make_event):
        """A server without a secret: 401 unknown_server naming the configured ones."""
        body = body_of(make_event(server="other"))
        verdict = decide(signed(body, server="other"), body)
        assert_rejected(verdict, 401, SignatureReason.UNKNOWN_SERVER)
        assert "known: sleeper" in (verdict.detail or "")

    @pytest.mark.parametrize(
        ("drop", "reason"),
        [
            ("X-RVC-Timestamp", SignatureReason.MISSING_TIMESTAMP),
            ("X-RVC-Signature", SignatureReason.MISSING_SIGNATURE),
        ],
    )
    def test_missing_signature_header_is_named(self, make_event, drop, reason):
        """Without the timestamp or the signature header: 401 with that header's reason."""
        body = body_of(make_event())
        headers = {k: v for k, v in signed(body).items() if k != drop}
        assert_rejected(decide(headers, body), 401, reason)

    @pytest.mark.parametrize(
        ("timestamp", "signature", "reason"),
        [
            ("soon", None, SignatureReason.MALFORMED_TIMESTAMP),
            (str(NOW - 1000), None, SignatureReason.STALE_TIMESTAMP),
            (str(NOW + 1000), None, SignatureReason.FUTURE_TIMESTAMP),
            (str(NOW), "sha256=zz", SignatureReason.MALFORMED_SIGNATURE),
            (str(NOW), "sha256=" + "0" * 64, SignatureReason.BAD_SIGNATURE),
        ],
    )
    def test_signature_check_reasons_are_answered(self, make_event, timestamp, signature, reason):
        """A timestamp or signature the kit's check refuses: 401 with the kit's reason."""
        body = body_of(make_event())
        ts = int(timestamp) if timestamp.isdigit() else NOW
        headers = {
            "X-RVC-Server": "sleeper",
            "X-RVC-Timestamp": timestamp,
            "X-RVC-Signature": signature or sign("s3cret", ts, body),
        }
        verdict = decide(headers, body)
        assert_rejected(verdict, 401, reason)
        assert verdict.server == "sleeper"

    def test_webhook_signature_without_its_id_is_missing_webhook_headers(self, make_event):
        """webhook-signature without webhook-id: 401 missing_webhook_headers."""
        event = make_event()
        body = body_of(event)
        headers = standard_headers(event.event_id, "s3cret", body, NOW)
        del headers["webhook-id"]
        assert_rejected(decide(headers, body), 401, SignatureReason.MISSING_WEBHOOK_HEADERS)


class TestBody:
    @pytest.mark.parametrize(
        ("body", "reason"),
        [
            (b"\xff\xfe", BodyReason.INVALID_ENCODING),
            (b"[" * 40 + b"]" * 40, BodyReason.TOO_DEEP),
            (b'{"seq": ', BodyReason.INVALID_JSON),
            (b'{"seq": NaN}', BodyReason.INVALID_JSON),
            (b"[1, 2]", BodyReason.NOT_AN_OBJECT),
            (b'{"schema_version": 2}', BodyReason.BAD_SCHEMA_VERSION),
            (b'{"schema_version": 1, "seq": -1}', BodyReason.INVALID_EVENT),
        ],
    )
    def test_signed_body_that_is_no_task_event_is_422(self, body, reason):
        """A well-signed body that is not a TaskEvent: 422 with the reason naming why."""
        verdict = decide(signed(body), body)
        assert_rejected(verdict, 422, reason)
        assert verdict.server == "sleeper"

    def test_invalid_event_detail_names_fields_not_values(self):
        """The invalid_event detail names fields and error types, never the value sent."""
        body = json.dumps({"schema_version": 1, "seq": "secret-value"}).encode()
        verdict = decide(signed(body), body)
        assert "seq" in (verdict.detail or "")
        assert "secret-value" not in (verdict.detail or "")

    def test_webhook_id_other_than_the_event_id_is_webhook_id_mismatch(self, make_event):
        """Standard Webhooks with a webhook-id that is not the body's event_id: 422."""
        body = body_of(make_event())
        headers = standard_headers("another-id", "s3cret", body, NOW)
        assert_rejected(decide(headers, body), 422, BodyReason.WEBHOOK_ID_MISMATCH)

    def test_body_server_other_than_the_header_is_server_mismatch(self, make_event):
        """The body's server differs from X-RVC-Server: 422 server_mismatch."""
        body = body_of(make_event(server="navigation"))
        verdict = decide(signed(body), body)
        assert_rejected(verdict, 422, BodyReason.SERVER_MISMATCH)


def unknown_type_body(make_event: Any, **changes: Any) -> bytes:
    """A TaskEvent's JSON with ``type`` "zone_left" (no type of this kit), then ``changes``."""
    data = json.loads(body_of(make_event())) | {"type": "zone_left"} | changes
    return json.dumps(data).encode()


class TestUnknownType:
    """docs/contract.md §4.4: an event of a type the receiver does not know is acknowledged."""

    def test_a_well_formed_event_of_an_unknown_type_is_acknowledged(self, make_event):
        """Signed and well formed, only its type new: 200 with the event, marked unknown_type."""
        body = unknown_type_body(make_event)
        verdict = decide(signed(body), body)
        assert (verdict.status, verdict.server, verdict.accepted) == (200, "sleeper", True)
        assert verdict.unknown_type
        assert verdict.event is not None
        assert verdict.event.type == "zone_left"
        assert isinstance(verdict.event, TaskEvent)

    def test_a_known_type_is_not_marked_unknown(self, make_event):
        """Every type of this kit verifies without the mark."""
        body = body_of(make_event(type="input_answered"))
        verdict = decide(signed(body), body)
        assert verdict.accepted
        assert not verdict.unknown_type

    def test_an_unknown_type_is_verified_first(self, make_event):
        """A bad signature is 401 whatever the type: the type is read only after verifying."""
        body = unknown_type_body(make_event)
        headers = signed(body, secret="not-the-secret")
        assert_rejected(decide(headers, body), 401, SignatureReason.BAD_SIGNATURE)

    @pytest.mark.parametrize(
        ("changes", "field"),
        [
            ({"seq": 0}, "seq"),
            ({"type": ""}, "type"),
            ({"type": 7}, "type"),
            ({"type": None}, "type"),
            ({"payload": []}, "payload"),
            ({"ts": "yesterday"}, "ts"),
        ],
    )
    def test_an_unknown_type_with_a_malformed_envelope_is_422(self, make_event, changes, field):
        """The envelope is checked as strictly as any event's: a bad field is invalid_event."""
        body = unknown_type_body(make_event, **changes)
        verdict = decide(signed(body), body)
        assert_rejected(verdict, 422, BodyReason.INVALID_EVENT)
        assert field in (verdict.detail or "")

    def test_an_unknown_type_without_seq_is_422(self, make_event):
        """A missing field is named, for an unknown type as for a known one."""
        data = json.loads(unknown_type_body(make_event))
        del data["seq"]
        body = json.dumps(data).encode()
        verdict = decide(signed(body), body)
        assert_rejected(verdict, 422, BodyReason.INVALID_EVENT)
        assert "seq is missing" in (verdict.detail or "")

    def test_an_unknown_type_of_another_server_is_server_mismatch(self, make_event):
        """A server posting in another's name is refused, whatever the type."""
        body = unknown_type_body(make_event, server="navigation")
        assert_rejected(decide(signed(body), body), 422, BodyReason.SERVER_MISMATCH)
