"""Delivery: one event's signed attempts under one deadline (httpx.MockTransport, FakeClock)."""

from __future__ import annotations

import httpx
import pytest

from robot_mcp_kit._backlog import QueuedEvent
from robot_mcp_kit._delivery import Delivery
from robot_mcp_kit._retry import RetryPolicy
from robot_mcp_kit.signing import verify
from robot_mcp_kit.testing import FakeClock

URL = "http://127.0.0.1:9/api/agent/events"
SECRET = "delivery-secret"


class Script:
    """A MockTransport handler answering a scripted list of statuses, recording requests."""

    def __init__(self, *answers: int | tuple[int, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        status, headers = answer if isinstance(answer, tuple) else (answer, {})
        return httpx.Response(status, headers=headers, content=b"ok")


def delivery(script: Script, clock: FakeClock, **kw: object) -> Delivery:
    return Delivery(
        "navigation",
        URL,
        [SECRET],
        retry=kw.pop("retry", RetryPolicy()),  # type: ignore[arg-type]
        clock=clock,
        timeout_s=5.0,
        transport=httpx.MockTransport(script),
        **kw,  # type: ignore[arg-type]
    )


def item(seq: int = 1) -> QueuedEvent:
    return QueuedEvent(f"ev-{seq}", "nav-1a2b3c", seq, b'{"seq": %d}' % seq)


async def test_503_503_200_is_delivered_on_the_third_attempt_each_signed_afresh():
    clock = FakeClock()
    script = Script(503, 503, 200)
    d = delivery(script, clock)
    result = await d.deliver(item())
    await d.aclose()
    assert (result.outcome, result.attempts, result.last_failure) == ("delivered", 3, "")
    assert clock.sleeps == [0.5, 2.0]
    assert (d.sent, d.retried, d.given_up) == (1, 2, 0)
    stamps = [r.headers["X-RVC-Timestamp"] for r in script.requests]
    assert stamps[0] != stamps[2]  # a fresh timestamp per attempt
    for request in script.requests:
        assert request.content == b'{"seq": 1}'
        assert request.headers["X-RVC-Server"] == "navigation"
        assert verify(
            SECRET,
            request.headers["X-RVC-Timestamp"],
            request.content,
            request.headers["X-RVC-Signature"],
            now_s=int(request.headers["X-RVC-Timestamp"]),
        )


async def test_retry_after_lengthens_the_pause_up_to_its_cap():
    clock = FakeClock()
    d = delivery(Script((503, {"Retry-After": "7"}), (429, {"Retry-After": "99"}), 200), clock)
    result = await d.deliver(item())
    assert result.outcome == "delivered"
    assert clock.sleeps == [7.0, 30.0]


async def test_the_cap_gives_up_with_the_last_failure_and_the_attempt_count():
    clock = FakeClock()
    policy = RetryPolicy(delays_s=(1.0,), then_every_s=1.0, give_up_after_s=3.0)
    d = delivery(Script(500), clock, retry=policy)
    result = await d.deliver(item())
    assert result.outcome == "given_up"
    assert result.attempts == 4
    assert result.last_failure == "status 500"
    assert d.given_up == 1


async def test_a_stop_time_ends_the_delivery_before_a_pause_that_would_pass_it():
    clock = FakeClock()
    script = Script(503, 503, 200)
    d = delivery(script, clock)
    result = await d.deliver(item(), stop_at=lambda: 1.0)  # 0.5 fits, then 0.5 + 2.0 does not
    assert (result.outcome, result.attempts, result.last_failure) == (
        "grace_expired",
        2,
        "status 503",
    )
    assert clock.sleeps == [0.5]
    assert d.sent == 0


async def test_a_recovered_event_counts_its_budget_from_its_first_enqueue():
    clock = FakeClock()
    d = delivery(Script(503), clock)
    old = item()
    old.enqueued_at = clock.time() - 660  # accepted 11 minutes ago
    result = await d.deliver(old)
    assert (result.outcome, result.attempts) == ("given_up", 1)


async def test_a_transport_error_is_a_failed_attempt_and_retried():
    clock = FakeClock()
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(204)

    d = Delivery(
        "navigation",
        URL,
        [SECRET],
        retry=RetryPolicy(),
        clock=clock,
        timeout_s=5.0,
        transport=httpx.MockTransport(handler),
    )
    result = await d.deliver(item())
    assert (result.outcome, result.attempts) == ("delivered", 2)


@pytest.mark.parametrize("standard", [False, True])
async def test_standard_webhooks_headers_only_when_asked(standard: bool):
    script = Script(200)
    d = delivery(script, FakeClock(), standard_webhooks=standard)
    await d.deliver(item())
    assert ("webhook-signature" in script.requests[0].headers) is standard
    assert script.requests[0].headers.get("webhook-id") == ("ev-1" if standard else None)
