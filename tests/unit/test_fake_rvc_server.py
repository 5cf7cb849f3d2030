"""FakeRvcServer over a real loopback socket: drops, waits across threads, the SSE feed."""

from __future__ import annotations

import contextlib
import json
import time

import httpx
import pytest

from fake_rvc import FakeRvcServer
from robot_mcp_kit.signing import signed_headers

SECRET = "s3cret"


def post(url: str, body: bytes, secret: str = SECRET) -> httpx.Response:
    headers = signed_headers("sleeper", secret, body, int(time.time()))
    return httpx.post(url, content=body, headers=headers, timeout=10)


@pytest.fixture
def rvc():
    with FakeRvcServer({"sleeper": SECRET}) as server:
        yield server


def test_urls_name_the_bound_port(rvc):
    """url and events_url point at the free port uvicorn listens on."""
    assert rvc.url == f"http://127.0.0.1:{rvc.port}"
    assert rvc.events_url == rvc.url + "/api/agent/events"
    assert httpx.get(rvc.url + "/api/fake/counters").json()["attempts"] == 0


def test_answers_do_not_wait_for_the_clients_delayed_ack(rvc, make_event):
    """Twenty posts on one connection take well under 40 ms each: TCP_NODELAY is on.

    Without it, each answer's body (written after its head) waits for the client's delayed
    ACK, about 40 ms on Linux: 0.8 s for twenty. The bound leaves a loaded machine 10x.
    """
    body = make_event().model_dump_json().encode()
    with httpx.Client(timeout=10) as client:
        client.get(rvc.url + "/api/fake/counters")  # connect first
        started = time.perf_counter()
        for _ in range(20):
            headers = signed_headers("sleeper", SECRET, body, int(time.time()))
            assert client.post(rvc.events_url, content=body, headers=headers).is_success
        elapsed = time.perf_counter() - started
    assert elapsed < 0.6, f"20 posts took {elapsed:.2f} s"


def test_url_before_start_raises():
    """Asking a server that is not started for its URL is a clear error."""
    with pytest.raises(RuntimeError, match="not started"):
        _ = FakeRvcServer({"sleeper": SECRET}).url


def test_drop_fault_is_a_connection_error_not_a_500(rvc, make_event):
    """An injected drop closes the connection: the client sees a transport error."""
    rvc.state.inject_fault("sleeper", drop=True)
    body = make_event().model_dump_json().encode()
    with pytest.raises(httpx.TransportError):
        post(rvc.events_url, body)
    assert [a.outcome for a in rvc.state.attempts()] == ["dropped"]
    assert rvc.state.attempts()[0].status is None
    # The server is fine afterwards and the retry is stored.
    assert post(rvc.events_url, body).status_code == 200
    assert len(rvc.state.events()) == 1


def test_drop_fault_over_http_api(rvc, make_event):
    """POST /api/fake/faults with drop: true drops the next post."""
    response = httpx.post(rvc.url + "/api/fake/faults", json={"server": "sleeper", "drop": True})
    assert response.status_code == 201
    with pytest.raises(httpx.TransportError):
        post(rvc.events_url, make_event().model_dump_json().encode())


def test_retry_attempt_times_are_recorded(rvc, make_event):
    """Two 500s then success: three attempts with increasing monotonic receive times."""
    rvc.state.inject_fault("sleeper", status=500, count=2)
    body = make_event().model_dump_json().encode()
    assert [post(rvc.events_url, body).status_code for _ in range(3)] == [500, 500, 200]
    attempts = rvc.state.attempts(server="sleeper")
    assert [a.status for a in attempts] == [500, 500, 200]
    monos = [a.received_mono for a in attempts]
    assert monos == sorted(monos)


def test_sync_wait_from_the_test_thread(rvc, make_event):
    """state.wait_for_event blocks the test thread while uvicorn's thread records."""
    body = make_event(type="task_done").model_dump_json().encode()
    assert post(rvc.events_url, body).status_code == 200
    found = rvc.state.wait_for_event("slee-1a2b3c", "task_done", timeout_s=5)
    assert found.event_id == json.loads(body)["event_id"]


def test_sse_stream_sends_attempts_live(rvc, make_event):
    """The page's SSE stream delivers a posted event and a rejected one as they arrive."""
    with (
        httpx.Client(timeout=10) as client,
        client.stream("GET", rvc.url + "/api/fake/stream") as stream,
    ):
        lines = stream.iter_lines()
        assert next(lines).startswith("retry:")
        body = make_event().model_dump_json().encode()
        post(rvc.events_url, body)
        post(rvc.events_url, make_event(seq=2).model_dump_json().encode(), secret="wrong")
        outcomes = []
        for line in lines:
            if line.startswith("data: ") and '"outcome"' in line:
                outcomes.append(json.loads(line[6:])["outcome"])
            if len(outcomes) == 2:
                break
        assert outcomes == ["accepted", "rejected"]


def test_stop_ends_open_streams(rvc):
    """stop() ends a page's open SSE stream instead of waiting on it (a hang hits the timeout)."""
    with (
        httpx.Client(timeout=10) as client,
        client.stream("GET", rvc.url + "/api/fake/stream") as stream,
    ):
        lines = stream.iter_lines()
        next(lines)
        rvc.stop()
        with contextlib.suppress(httpx.TransportError):
            for _ in lines:  # drains what was sent, then ends because the server closed it
                pass
    with pytest.raises(httpx.ConnectError):  # stopped for real, not just detached
        httpx.get(rvc.url + "/api/fake/counters", timeout=2)


def test_raw_header_injection_gets_400_and_server_keeps_serving(rvc, make_event):
    """A bare CR inside an X-RVC-Server value is refused with 400 at the HTTP layer."""
    import socket

    request = (
        b"POST /api/agent/events HTTP/1.1\r\nHost: x\r\n"
        b"X-RVC-Server: sleeper\rX-Injected: 1\r\nContent-Length: 2\r\n\r\n{}"
    )
    with socket.create_connection(("127.0.0.1", rvc.port), timeout=10) as sock:
        sock.sendall(request)
        reply = sock.recv(1024)
    assert reply.startswith(b"HTTP/1.1 400")
    assert post(rvc.events_url, make_event().model_dump_json().encode()).status_code == 200
