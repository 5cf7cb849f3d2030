"""Issue 18 (findings 1 and 9): a fair share of the HTTP server per robot token, sessions bound
to their opener, tokens without stray Unicode spaces — against the real server process over
real SSE and streamable HTTP.

A noisy robot holds streams, sessions and requests in progress (a complete request head
whose body never comes is a request in progress: nothing times it out) past its shares and
is refused ``429`` with ``Retry-After`` and a sentence; a robot of another group and the
admin keep working meanwhile. With a small ``MEMORY_MAX_CONNECTIONS``, robots together are
refused before the admin's reserved slots.
"""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest

pytestmark = pytest.mark.slow

ADMIN = "integration-token-7f3a"  # the admin token the conftest's spawn() sets
TOKENS = {f"rap-{n}": f"robot-token-rap-{n}-{'x' * 12}" for n in range(1, 5)}
ROBOT_TOKENS = ",".join(f"{robot}:{token}" for robot, token in TOKENS.items())
NOISY, NEIGHBOUR = "rap-1", "rap-3"  # groups line-a and line-b
SHARES = {
    "MEMORY_ROBOT_TOKENS": ROBOT_TOKENS,
    "MEMORY_ROBOT_MAX_STREAMS": "2",
    "MEMORY_ROBOT_MAX_REQUESTS": "4",
    "MEMORY_ROBOT_MAX_SESSIONS": "2",
}
PROTOCOL = "2025-06-18"
STREAM_ACCEPT = {"Accept": "text/event-stream"}
POST_ACCEPT = {"Accept": "application/json, text/event-stream"}
DEADLINE_S = 15.0  # a hang guard for what should happen at once


def auth(robot: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[robot] if robot else ADMIN}"}


def doc(id: str, robot: str) -> str:
    return (
        f"---\nid: {id}\ntitle: Fetch the parcel ({id})\nrobot: {robot}\n"
        "source_mission_id: m-1\n---\n\n## Steps\n1. go to the mailroom\n"
    )


def assert_share_refusal(reply: httpx.Response, robot: str, variable: str) -> None:
    """429, Retry-After, {"error": "too_many_requests", "detail": <names robot and variable>}."""
    assert reply.status_code == 429, reply.text
    assert int(reply.headers["retry-after"]) >= 1
    body = reply.json()
    assert body["error"] == "too_many_requests"
    assert f"robot '{robot}'" in body["detail"]
    assert variable in body["detail"]


@contextmanager
def held_requests(
    port: int, token: str, path: str, count: int, **headers: str
) -> Iterator[list[socket.socket]]:
    """``count`` requests in progress: complete heads of POSTs whose bodies never come."""
    socks: list[socket.socket] = []
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Authorization: Bearer {token}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Content-Length: 100",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n{").encode()
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            socks.append(sock)
            sock.sendall(head)
        yield socks
    finally:
        for sock in socks:
            sock.close()


class Streamable:
    """Raw streamable-HTTP requests as one token (below the official client, to hold
    sessions and streams exactly)."""

    def __init__(self, http: httpx.Client, robot: str | None) -> None:
        self.http = http
        self.headers = auth(robot)

    def initialize(self) -> httpx.Response:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        return self.http.post("/mcp", json=body, headers={**POST_ACCEPT, **self.headers})

    def open(self) -> str:
        reply = self.initialize()
        assert reply.status_code == 200, reply.text
        session = reply.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert self.post(session, initialized).status_code == 202
        return session

    def session_headers(self, session: str) -> dict[str, str]:
        return {**self.headers, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL}

    def post(self, session: str, body: dict) -> httpx.Response:
        headers = {**POST_ACCEPT, **self.session_headers(session)}
        return self.http.post("/mcp", json=body, headers=headers)

    def call(self, session: str, tool: str, **arguments: object) -> httpx.Response:
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        return self.post(session, body)

    def delete(self, session: str) -> httpx.Response:
        return self.http.delete("/mcp", headers=self.session_headers(session))

    def stream(self, session: str):
        headers = {**STREAM_ACCEPT, **self.session_headers(session)}
        return self.http.stream("GET", "/mcp", headers=headers)


def tool_result(reply: httpx.Response) -> dict:
    text = reply.text
    if "data:" in text:
        text = next(x[5:] for x in text.splitlines() if x.startswith("data:"))
    return json.loads(json.loads(text)["result"]["content"][0]["text"])


async def neighbours_keep_working(server, mcp_call) -> None:
    """Robot rap-3 (another group) and the admin: a session each, calls that succeed."""
    async with server.session(TOKENS[NEIGHBOUR]) as s:
        saved = await mcp_call(s, "save_process", markdown=doc("neighbour-doc", "unknown"))
        assert saved["robot"] == NEIGHBOUR
        found = await mcp_call(s, "find_processes", query="parcel")
        assert [p["id"] for p in found["processes"]] == ["neighbour-doc"]
    async with server.session() as admin:
        assert len((await mcp_call(admin, "list_processes"))["processes"]) == 1
        await mcp_call(admin, "upsert_group", group_id="line-a")


def wait_for_events(server, event: str) -> list[dict]:
    """The server's log events named ``event``, once there is at least one."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = [e for e in server.log_events() if e.get("event") == event]
        if found or time.monotonic() > deadline:
            assert found, f"no {event} in the server log"
            return found
        time.sleep(0.05)


def refused_events(server) -> list[dict]:
    return [e for e in server.log_events() if e.get("event") == "robot_share_refused"]


async def test_a_noisy_robot_on_sse_is_held_to_its_share_while_others_work(spawn, mcp_call):
    """rap-1 holds 2 SSE streams and 2 requests in progress (a third is refused): its next
    stream and its next request are 429 with Retry-After and the sentence; rap-3 and the
    admin are served."""
    server = spawn(transport="sse", env=SHARES)
    with ExitStack() as held, httpx.Client(base_url=server.base, timeout=10) as http:
        endpoints = []
        for _ in range(2):
            stream = held.enter_context(http.stream("GET", "/sse", headers=auth(NOISY)))
            assert stream.status_code == 200
            lines = stream.iter_lines()
            held.callback(lines.close)
            line = next(x for x in lines if x.startswith("data: /messages/"))
            endpoints.append(line.removeprefix("data: "))
        with http.stream("GET", "/sse", headers=auth(NOISY)) as third:
            assert third.status_code == 429  # before reading: a stream would never end
            third.read()
            assert_share_refusal(third, NOISY, "MEMORY_ROBOT_MAX_STREAMS=2")

        socks = held.enter_context(held_requests(server.port, TOKENS[NOISY], endpoints[0], 3))
        assert_one_refused_past_the_request_share(socks)
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        refused = http.post(endpoints[1], json=ping, headers=auth(NOISY))
        assert_share_refusal(refused, NOISY, "MEMORY_ROBOT_MAX_REQUESTS=4")

        await neighbours_keep_working(server, mcp_call)
        again = http.post(endpoints[1], json=ping, headers=auth(NOISY))
        assert_share_refusal(again, NOISY, "MEMORY_ROBOT_MAX_REQUESTS=4")

    shares = {e["share"] for e in refused_events(server) if e["robot"] == NOISY}
    assert shares == {"streams", "requests"}
    assert not [e for e in refused_events(server) if e["robot"] != NOISY]


async def test_a_noisy_robot_on_streamable_http_is_held_to_its_share_while_others_work(
    spawn, mcp_call
):
    """rap-1 at 2 sessions: a third ends its least recently used idle one; with both busy
    (a GET stream each) a new one is 429; a third stream and a fifth request in progress
    are 429; rap-3 and the admin are served throughout."""
    server = spawn(transport="streamable-http", env=SHARES)
    with ExitStack() as held, httpx.Client(base_url=server.base, timeout=10) as http:
        noisy = Streamable(http, NOISY)
        first, second = noisy.open(), noisy.open()
        third = noisy.open()  # past the share: `first` (idle, least recently used) is ended
        # (After the answer to `initialize`: a request on `first` before then would make it
        # the most recently used, and `second` would go instead.)
        [evicted] = wait_for_events(server, "robot_session_evicted")
        assert (evicted["robot"], evicted["status"]) == (NOISY, 200)
        assert noisy.call(first, "list_processes").status_code == 404
        assert noisy.call(second, "list_processes").status_code == 200

        for session in (second, third):
            stream = held.enter_context(noisy.stream(session))
            assert stream.status_code == 200
        assert_share_refusal(noisy.initialize(), NOISY, "MEMORY_ROBOT_MAX_SESSIONS=2")
        with noisy.stream(third) as extra:
            assert extra.status_code == 429  # before reading: a stream would never end
            extra.read()
            assert_share_refusal(extra, NOISY, "MEMORY_ROBOT_MAX_STREAMS=2")

        socks = held.enter_context(
            held_requests(server.port, TOKENS[NOISY], "/mcp", 3, **{"mcp-session-id": third})
        )
        assert_one_refused_past_the_request_share(socks)
        refused = noisy.call(third, "list_processes")
        assert_share_refusal(refused, NOISY, "MEMORY_ROBOT_MAX_REQUESTS=4")

        await neighbours_keep_working(server, mcp_call)

    shares = {e["share"] for e in refused_events(server) if e["robot"] == NOISY}
    assert shares == {"sessions", "streams", "requests"}
    assert not [e for e in refused_events(server) if e["robot"] != NOISY]


@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
async def test_robots_together_leave_the_reserved_slots_to_the_admin(spawn, mcp_call, transport):
    """10 connections, 4 kept for the admin: rap-1 and rap-2 send 4 requests each that stay
    in progress; 6 are served, 2 are refused 429; rap-4 is refused naming
    MEMORY_ADMIN_RESERVE; the admin still opens sessions and calls (unfixed, the robots
    hold 8 of the 10 slots and the admin's session can be refused 503)."""
    env = {
        "MEMORY_ROBOT_TOKENS": ROBOT_TOKENS,
        "MEMORY_MAX_CONNECTIONS": "10",
        "MEMORY_ADMIN_RESERVE": "4",
        "MEMORY_ROBOT_MAX_REQUESTS": "4",
    }
    server = spawn(transport=transport, env=env)
    path = "/mcp" if transport == "streamable-http" else f"/messages/?session_id={uuid.uuid4().hex}"
    with ExitStack() as held, httpx.Client(base_url=server.base, timeout=10) as http:
        socks = [
            *held.enter_context(held_requests(server.port, TOKENS["rap-1"], path, 4)),
            *held.enter_context(held_requests(server.port, TOKENS["rap-2"], path, 4)),
        ]
        answered = answers_within(socks, count=2)
        assert all(a.startswith(b"HTTP/1.1 429 ") for a in answered.values()), answered
        assert len(answered) == 2  # the other 6 are in progress: every slot robots may use

        refused = http.get("/none", headers=auth("rap-4"))
        assert_share_refusal(refused, "rap-4", "MEMORY_ADMIN_RESERVE=4")
        assert "MEMORY_MAX_CONNECTIONS=10" in refused.json()["detail"]
        for _ in range(3):  # the admin, again and again, while the robots hold their slots
            async with server.session() as admin:
                assert (await mcp_call(admin, "list_robots"))["robots"] == []
        assert_share_refusal(http.get("/none", headers=auth("rap-4")), "rap-4", "RESERVE")
    reserve = [e for e in refused_events(server) if e["share"] == "reserve"]
    assert "rap-4" in {e["robot"] for e in reserve}


def assert_one_refused_past_the_request_share(socks: list[socket.socket]) -> None:
    """Of 3 requests sent beside 2 open streams, one is refused (429, the request share,
    its connection closed) and 2 stay in progress: the robot holds exactly its share."""
    answered = answers_within(socks, count=1)
    assert len(answered) == 1, answered
    [answer] = answered.values()
    assert answer.startswith(b"HTTP/1.1 429 "), answer
    assert b"MEMORY_ROBOT_MAX_REQUESTS=4" in answer
    assert b"connection: close" in answer.lower()  # its body never came: the slot is freed


def answers_within(socks: list[socket.socket], *, count: int) -> dict[int, bytes]:
    """Wait until ``count`` of ``socks`` have an answer (then a moment more for any other);
    the first bytes each answered socket received, by index."""
    answered: dict[int, bytes] = {}
    deadline = time.monotonic() + DEADLINE_S
    settle: float | None = None
    while time.monotonic() < (settle or deadline):
        for index, sock in enumerate(socks):
            if index in answered:
                continue
            sock.settimeout(0.02)
            try:
                data = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                data = b"<reset>"
            answered[index] = data or b"<closed>"
        if settle is None and len(answered) >= count:
            settle = time.monotonic() + 1.5  # longer than the server's 1 s refusal drain
    return answered


def test_another_token_can_neither_end_nor_stream_nor_post_into_a_streamable_session(spawn):
    """rap-3 and the admin with rap-1's session id: DELETE, GET stream and POST are answered
    exactly like an unknown session id (404) and never reach it; rap-1's session works on."""
    server = spawn(transport="streamable-http", env={"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS})
    with httpx.Client(base_url=server.base, timeout=10) as http:
        owner = Streamable(http, NOISY)
        session = owner.open()
        unknown = Streamable(http, NEIGHBOUR).delete(uuid.uuid4().hex)
        assert unknown.status_code == 404
        for intruder in (Streamable(http, NEIGHBOUR), Streamable(http, None)):
            for reply in (
                intruder.delete(session),
                intruder.call(session, "save_process", markdown=doc("hijack", "unknown")),
                intruder.post(session, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
            ):
                assert (reply.status_code, reply.content) == (404, unknown.content)
            with intruder.stream(session) as stream:
                assert stream.status_code == 404  # before reading: a stream would never end
                stream.read()
                assert (stream.status_code, stream.content) == (404, unknown.content)

        listed = owner.call(session, "list_processes")
        assert listed.status_code == 200
        assert tool_result(listed)["processes"] == []  # "hijack" was never saved
        with owner.stream(session) as stream:  # the server-to-client stream is still its own
            assert stream.status_code == 200
        assert owner.delete(session).status_code == 200
        assert owner.call(session, "list_processes").status_code == 404
    mismatches = [e for e in server.log_events() if e.get("event") == "session_tenant_mismatch"]
    assert {e["tenant"] for e in mismatches} == {f"robot:{NEIGHBOUR}", "admin"}
    assert {e["transport"] for e in mismatches} == {"streamable-http"}
    assert server.documents() == 0


@pytest.mark.parametrize(
    "value",
    [b"Bearer \xa0%s", b"Bearer %s\x85", b"Bearer %s\xa0"],
    ids=["nbsp-before", "nel-after", "nbsp-after"],
)
def test_a_token_wrapped_in_unicode_spaces_is_401(spawn, value):
    """A robot's or the admin's token with a non-breaking space or NEL around it does not
    authenticate (unfixed, str.strip() removed them and the request was served)."""
    server = spawn(transport="streamable-http", env={"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS})
    with httpx.Client(base_url=server.base, timeout=10) as http:
        for token in (TOKENS[NOISY], ADMIN):
            headers = {"Authorization": value % token.encode(), **POST_ACCEPT}
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            reply = http.post("/mcp", json=body, headers=headers)
            assert reply.status_code == 401, value
            assert reply.json()["detail"] == "invalid bearer token"
        plain = Streamable(http, NOISY).initialize()
        assert plain.status_code == 200


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MEMORY_ROBOT_TOKENS": f"rap-1:\xa0{TOKENS['rap-1']}"}, "MEMORY_ROBOT_TOKENS"),
        ({"MEMORY_ROBOT_TOKENS": f"rap-1:{TOKENS['rap-1']}\x85"}, "MEMORY_ROBOT_TOKENS"),
        ({"MEMORY_ROBOT_TOKENS": f"\u2003rap-1:{TOKENS['rap-1']}"}, "MEMORY_ROBOT_TOKENS"),
        ({"MEMORY_TOKEN": f"{ADMIN}\xa0"}, "MEMORY_TOKEN"),
        ({"MEMORY_TOKEN": f"\x85{ADMIN}"}, "MEMORY_TOKEN"),
    ],
    ids=["robot-nbsp", "robot-nel", "robot-emspace", "admin-nbsp", "admin-nel"],
)
def test_a_token_variable_with_unicode_spaces_refuses_to_start(
    tmp_path, run_memory_server, env, variable
):
    """Exit 2 with one line naming the variable, never the token, and nothing written."""
    full = {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_TOKEN": ADMIN, **env}
    result = run_memory_server(full)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"invalid {variable}=<hidden>" in result.stderr
    for secret in (*TOKENS.values(), ADMIN):
        assert secret not in result.stderr
    assert not (tmp_path / "index.db").exists()


def test_http_limits_line_reports_the_shares(spawn):
    """The startup line carries every share, the reserve defaulting to a quarter of a small cap."""
    server = spawn(
        transport="sse",
        env={**SHARES, "MEMORY_MAX_CONNECTIONS": "32"},
    )
    [line] = [e for e in server.log_events() if e.get("event") == "http_limits"]
    assert (line["robot_max_streams"], line["robot_max_requests"]) == (2, 4)
    assert (line["robot_max_sessions"], line["admin_reserve"]) == (2, 8)
    assert not [e for e in server.log_events() if e.get("event") == "robot_share_exceeds_room"]


def test_a_share_larger_than_the_robots_room_is_said_at_startup(spawn):
    """MEMORY_ROBOT_MAX_REQUESTS above cap minus reserve: one warning line naming both."""
    env = {"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS, "MEMORY_MAX_CONNECTIONS": "8"}
    server = spawn(transport="sse", env=env)
    [line] = [e for e in server.log_events() if e.get("event") == "robot_share_exceeds_room"]
    assert re.search(r"MEMORY_ROBOT_MAX_REQUESTS=16 is more than the 6 connection", line["detail"])
