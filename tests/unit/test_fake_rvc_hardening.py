"""fake_rvc under hostile input (issue 9): precise 4xx answers, never exception text, never 500.

Driven in process through httpx ``ASGITransport`` with ``raise_app_exceptions=False``, so an
unexpected exception shows up as the 500 a real client would see instead of a raise.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from fake_rvc import Recorder, create_app, get_clock
from robot_mcp_kit.signing import sign, signed_headers

NOW = 1_765_532_000
SECRET = "s3cret"
URL = "/api/agent/events"

# What Python and pydantic put in their exception texts; none may reach a client.
EXCEPTION_TEXT = (
    "Traceback",
    "Error:",
    "Input should",
    "errors.pydantic.dev",
    "Expecting",
    "too large to convert",
    "invalid literal",
)


def assert_no_exception_text(response: httpx.Response, *sent: str) -> None:
    """The answer is a JSON {error, detail} body quoting no exception and none of ``sent``."""
    body = response.json()
    assert set(body) >= {"error", "detail"}, body
    assert "input" not in body
    for text in (*EXCEPTION_TEXT, *sent):
        assert text not in response.text, (text, response.text)


@pytest.fixture
def app():
    return create_app({"sleeper": SECRET}, clock=lambda: NOW, state=Recorder())


@pytest.fixture
async def client(app):
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://fake") as c:
        yield c


def event_body(**change: Any) -> bytes:
    event = {
        "schema_version": 1,
        "event_id": "e" * 32,
        "task_id": "slee-0a1b2c",
        "server": "sleeper",
        "tool": "sleep_task",
        "type": "progress",
        "seq": 1,
        "ts": "2025-12-12T09:33:20.000Z",
        "payload": {},
    }
    event.update(change)
    return json.dumps(event).encode()


def headers_with_timestamp(timestamp: str, body: bytes, signed_as: int = NOW) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-RVC-Server": "sleeper",
        "X-RVC-Timestamp": timestamp,
        "X-RVC-Signature": "sha256=" + sign(SECRET, signed_as, body),
    }


class TestTimestampHeader:
    """Finding 6: the timestamp header is 1 to 12 canonical ASCII digits, or a 401."""

    @pytest.mark.parametrize(
        "timestamp",
        [
            pytest.param("1" * 300, id="300-digits"),
            pytest.param("9" * 400, id="400-digits-overflowed-a-float"),
            pytest.param("1" * 13, id="13-digits"),
        ],
    )
    async def test_huge_timestamp_is_401_malformed_not_500(self, client, timestamp):
        """A timestamp of hundreds of digits is refused as malformed_timestamp, with a reason."""
        body = event_body()
        response = await client.post(
            URL, content=body, headers=headers_with_timestamp(timestamp, body)
        )
        assert response.status_code == 401, response.text
        assert response.json()["error"] == "malformed_timestamp"
        assert_no_exception_text(response)
        if len(timestamp) > 40:
            assert timestamp[:41] not in response.text  # quotes at most 40 characters

    @pytest.mark.parametrize(
        "timestamp",
        [f"0{NOW}", f"+{NOW}", "1_765_532_000", f"{NOW} ", f" {NOW}"],
        ids=["leading-zero", "plus", "underscores", "trailing-space", "leading-space"],
    )
    async def test_non_canonical_timestamp_with_a_valid_signature_is_401(self, client, timestamp):
        """Another spelling of the signed second is refused, though the HMAC would match."""
        body = event_body()
        headers = headers_with_timestamp(timestamp, body)
        response = await client.post(URL, content=body, headers=headers)
        assert response.status_code == 401, response.text
        assert response.json()["error"] == "malformed_timestamp"

    async def test_canonical_timestamp_is_still_accepted(self, client):
        """The control: the canonical spelling with the same signature is a 200."""
        body = event_body()
        response = await client.post(
            URL, content=body, headers=headers_with_timestamp(str(NOW), body)
        )
        assert response.status_code == 200, response.text


class TestFullStringMatching:
    """Finding 5: a header value with a trailing newline is not the same value."""

    @pytest.mark.parametrize("header", ["X-RVC-Server", "X-RVC-Timestamp", "X-RVC-Signature"])
    async def test_header_with_a_trailing_newline_is_400_invalid_header(self, client, header):
        """'sleeper\\n' is not 'sleeper': each X-RVC-* value must be printable ASCII throughout."""
        body = event_body()
        headers = signed_headers("sleeper", SECRET, body, NOW)
        headers[header] += "\n"
        response = await client.post(URL, content=body, headers=headers)
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "invalid_header"

    @pytest.mark.parametrize(
        "declared",
        [pytest.param("9" * 5000, id="5000-digits"), pytest.param(b"\xb2", id="superscript-two")],
    )
    async def test_odd_content_length_is_never_a_500(self, client, declared):
        """A Content-Length beyond int()'s digit limit, or a non-ASCII 'digit', is no crash."""
        body = event_body()
        headers: dict[str, Any] = {**signed_headers("sleeper", SECRET, body, NOW)}
        headers["Content-Length"] = declared
        response = await client.post(URL, content=body, headers=headers)
        assert response.status_code in (200, 413), response.text
        if response.status_code == 413:
            assert_no_exception_text(response)


class TestNoExceptionTextToClients:
    """Finding 7: reason codes and fixed sentences, never an exception's text or the input."""

    async def test_invalid_json_is_described_by_position(self, client):
        """Not JSON: 422 invalid_json at a line and column, not json's own message."""
        body = b'{"seq": 1, oops}'
        response = await client.post(
            URL, content=body, headers=signed_headers("sleeper", SECRET, body, NOW)
        )
        assert response.status_code == 422
        assert response.json()["error"] == "invalid_json"
        assert "line 1, column 12" in response.json()["detail"]
        assert_no_exception_text(response)

    async def test_utf16_looking_body_is_invalid_json_not_a_decode_error(self, client):
        """Valid UTF-8 that json.loads(bytes) would guess is UTF-16 is plain invalid_json."""
        body = b"\x00{\x00}"
        response = await client.post(
            URL, content=body, headers=signed_headers("sleeper", SECRET, body, NOW)
        )
        assert response.status_code == 422
        assert response.json()["error"] == "invalid_json"
        assert_no_exception_text(response, "utf-16", "codec")

    @pytest.mark.parametrize(
        ("change", "field"),
        [
            ({"ts": "MARKER-yesterday"}, "ts"),
            ({"seq": "MARKER"}, "seq"),
            ({"type": ["MARKER"]}, "type"),
            ({"type": "MARKER", "seq": "MARKER"}, "seq"),
            ({"payload": ["MARKER"]}, "payload"),
            ({"seq": 0, "tool": None}, "tool"),
        ],
    )
    async def test_invalid_event_names_the_field_not_pydantic_or_the_value(
        self, client, change, field
    ):
        """Not a TaskEvent: 422 invalid_event naming the field; no pydantic text, no value."""
        body = event_body(**change)
        response = await client.post(
            URL, content=body, headers=signed_headers("sleeper", SECRET, body, NOW)
        )
        assert response.status_code == 422
        assert response.json()["error"] == "invalid_event"
        assert field in response.json()["detail"]
        assert_no_exception_text(response, "MARKER")

    @pytest.mark.parametrize(
        ("method", "path", "kwargs", "field"),
        [
            ("POST", "/api/fake/faults", {"content": b"{MARKER"}, "body"),
            ("POST", "/api/fake/faults", {"json": {"server": "x", "status": "MARKER"}}, "status"),
            ("POST", "/api/fake/faults", {"json": {"server": "x", "delay_s": "1e999"}}, "delay_s"),
            (
                "GET",
                "/api/fake/wait",
                {"params": {"task_id": "t", "timeout_s": "nan"}},
                "timeout_s",
            ),
            ("GET", "/api/fake/events", {"params": {"type": ""}}, "type"),
        ],
    )
    async def test_inspection_api_422_is_invalid_request_without_echo(
        self, client, method, path, kwargs, field
    ):
        """FastAPI's default 422 echoes the input and pydantic's text; ours names the field."""
        response = await client.request(method, path, **kwargs)
        assert response.status_code == 422
        assert response.json()["error"] == "invalid_request"
        assert field in response.json()["detail"]
        assert_no_exception_text(response, "MARKER", "1e999")

    async def test_unexpected_error_is_500_internal_with_an_id_the_log_names(
        self, app, client, caplog
    ):
        """An unexpected exception answers 500 internal + error_id; the text stays in the log."""

        def broken_clock() -> Any:
            def clock() -> float:
                raise OverflowError("Python int too large to convert to C int")

            return clock

        app.dependency_overrides[get_clock] = broken_clock
        body = event_body()
        with caplog.at_level(logging.ERROR, logger="fake_rvc"):
            response = await client.post(
                URL, content=body, headers=signed_headers("sleeper", SECRET, body, NOW)
            )
        assert response.status_code == 500
        answer = response.json()
        assert answer["error"] == "internal"
        assert_no_exception_text(response, "OverflowError")
        error_id = answer["error_id"]
        assert len(error_id) == 8
        assert error_id in answer["detail"]
        [record] = [r for r in caplog.records if error_id in r.getMessage()]
        assert record.exc_info is not None
        assert isinstance(record.exc_info[1], OverflowError)

    def test_a_secret_that_cannot_be_encoded_is_refused_at_creation(self):
        """A lone surrogate in a secret fails create_app, not the first request."""
        with pytest.raises(ValueError, match="UTF-8"):
            create_app({"sleeper": "\ud800"})
