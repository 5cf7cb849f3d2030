"""Standard Webhooks headers and secret rotation (issue 14), judged by the real library.

The poster's ``webhook-*`` headers are verified by ``standardwebhooks.Webhook`` (the
Standard Webhooks reference library), not by our own code; fake_rvc accepts a post signed
only by that library; during a rotation every current secret verifies.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from fake_rvc import create_app
from robot_mcp_kit import EventPoster, TaskEvent
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.signing import (
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    check,
    sign_standard,
    signed_headers,
    standard_webhooks_secret,
    verify,
    verify_standard,
)

URL = "http://brain.test/api/agent/events"
OLD, NEW = "old-secret", "new-secret"


def event() -> TaskEvent:
    return TaskEvent(
        event_id=new_event_id(),
        task_id="slee-1a2b3c",
        server="sleeper",
        tool="sleep_task",
        type="progress",
        seq=1,
        ts=utc_now(),
        payload={"percent": 10},
    )


async def capture(**options: Any) -> tuple[bytes, httpx.Headers, TaskEvent]:
    """Post one event through a poster built with ``options``; return what was sent."""
    seen: list[httpx.Request] = []

    async def brain(request: httpx.Request) -> httpx.Response:
        await request.aread()
        seen.append(request)
        return httpx.Response(200)

    options.setdefault("secret", NEW)
    poster = EventPoster(
        "sleeper", URL, transport=httpx.MockTransport(brain), outbox=False, **options
    )
    sent = event()
    await poster.post(sent)
    await poster.flush()
    await poster.aclose()
    [request] = seen
    return request.content, request.headers, sent


class TestPosterHeaders:
    async def test_the_library_verifies_the_poster_s_headers(self):
        """webhook-id/-timestamp/-signature pass standardwebhooks.Webhook.verify; X-RVC too."""
        body, headers, sent = await capture(standard_webhooks=True)
        payload = Webhook(standard_webhooks_secret(NEW)).verify(body, dict(headers))
        assert payload["event_id"] == sent.event_id
        assert headers["webhook-id"] == sent.event_id
        assert headers["webhook-timestamp"] == headers[HEADER_TIMESTAMP]
        check(NEW, headers[HEADER_TIMESTAMP], body, headers[HEADER_SIGNATURE])

    async def test_another_secret_fails_the_library(self):
        """The control: the library refuses the same post under a different secret."""
        body, headers, _ = await capture(standard_webhooks=True)
        with pytest.raises(WebhookVerificationError):
            Webhook(standard_webhooks_secret("not-the-secret")).verify(body, dict(headers))

    async def test_off_by_default_the_headers_are_as_before(self):
        """Without standard_webhooks no webhook-* header is sent."""
        _, headers, _ = await capture()
        assert not [name for name in headers if name.lower().startswith("webhook-")]

    async def test_during_a_rotation_each_secret_verifies(self):
        """secret=[new, old]: the library verifies with either; X-RVC is signed with new."""
        body, headers, _ = await capture(standard_webhooks=True, secret=[NEW, OLD])
        assert len(headers["webhook-signature"].split(" ")) == 2
        for key in (NEW, OLD):
            Webhook(standard_webhooks_secret(key)).verify(body, dict(headers))
        assert verify(NEW, headers[HEADER_TIMESTAMP], body, headers[HEADER_SIGNATURE])
        assert not verify(OLD, headers[HEADER_TIMESTAMP], body, headers[HEADER_SIGNATURE])
        assert verify([OLD, NEW], headers[HEADER_TIMESTAMP], body, headers[HEADER_SIGNATURE])


class TestKnownAnswer:
    def test_sign_standard_matches_the_library(self):
        """Our v1 signature is byte for byte the library's, for a fixed id/time/body."""
        ts = 1_765_532_000
        body = b'{"event_id":"8c1f0e2a","seq":4}'
        ours = sign_standard(NEW, "8c1f0e2a", ts, body)
        theirs = Webhook(standard_webhooks_secret(NEW)).sign(
            "8c1f0e2a", datetime.fromtimestamp(ts, UTC), body.decode()
        )
        assert ours == theirs

    def test_verify_standard_takes_a_list_of_secrets(self):
        """Any current secret verifies a library-made signature; none of them: False."""
        ts = int(time.time())
        body = b"{}"
        signature = Webhook(standard_webhooks_secret(OLD)).sign(
            "msg_1", datetime.fromtimestamp(ts, UTC), body.decode()
        )
        assert verify_standard([NEW, OLD], "msg_1", str(ts), body, signature)
        assert not verify_standard([NEW], "msg_1", str(ts), body, signature)


def library_signed(secret: str, sent: TaskEvent) -> tuple[bytes, dict[str, str]]:
    """A post a foreign Standard Webhooks sender would make: no X-RVC header at all."""
    body = sent.model_dump_json().encode()
    now = datetime.now(UTC)
    signature = Webhook(standard_webhooks_secret(secret)).sign(sent.event_id, now, body.decode())
    return body, {
        "content-type": "application/json",
        "webhook-id": sent.event_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }


class TestFakeRvc:
    async def post(self, secrets: dict[str, Any], body: bytes, headers: dict[str, str]) -> Any:
        app = create_app(secrets)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rvc") as client:
            return await client.post("/api/agent/events", content=body, headers=headers)

    async def test_a_standard_webhooks_post_is_accepted(self):
        """Signed by the library only (server named by the body): 200 accepted."""
        sent = event()
        body, headers = library_signed(NEW, sent)
        response = await self.post({"sleeper": NEW}, body, headers)
        assert response.status_code == 200, response.text
        assert response.json()["accepted"] is True

    async def test_a_bad_standard_signature_is_401(self):
        """The control: the library's signature under another secret is refused."""
        body, headers = library_signed("wrong", event())
        response = await self.post({"sleeper": NEW}, body, headers)
        assert response.status_code == 401
        assert response.json()["error"] == "bad_signature"

    async def test_a_webhook_id_that_is_not_the_event_id_is_422(self):
        """webhook-id must be the body's event_id."""
        sent = event()
        other = sent.model_copy(update={"event_id": new_event_id()})
        body = sent.model_dump_json().encode()
        now = datetime.now(UTC)
        headers = {
            "webhook-id": other.event_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": Webhook(standard_webhooks_secret(NEW)).sign(
                other.event_id, now, body.decode()
            ),
        }
        response = await self.post({"sleeper": NEW}, body, headers)
        assert (response.status_code, response.json()["error"]) == (422, "webhook_id_mismatch")

    async def test_a_rotating_server_accepts_either_secret_in_either_scheme(self):
        """secrets {"sleeper": [old, new]}: X-RVC or Standard Webhooks under either key."""
        for key in (OLD, NEW):
            body, headers = library_signed(key, event())
            response = await self.post({"sleeper": [OLD, NEW]}, body, headers)
            assert response.status_code == 200, response.text
            sent = event()
            body = sent.model_dump_json().encode()
            x_rvc = signed_headers("sleeper", key, body, int(time.time()))
            response = await self.post({"sleeper": [OLD, NEW]}, body, x_rvc)
            assert response.status_code == 200, response.text
        body, headers = library_signed("retired", event())
        response = await self.post({"sleeper": [OLD, NEW]}, body, headers)
        assert response.status_code == 401
        assert json.loads(response.text)["error"] == "bad_signature"
