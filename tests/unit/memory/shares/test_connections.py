"""Issue 18: each robot's share of the HTTP server, and streamable sessions bound to their opener.

The bookkeeping (:class:`SessionBook`, :class:`ConnectionShares`) with a fake clock and fake
connection slots; the middleware in front of a fake session app that answers the way the
SDK's session manager does (a new session named in ``mcp-session-id``, 404 for an id it
does not know, DELETE ends one).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from robot_mcp_memory.http._auth import TenantAuthMiddleware, TokenAuth
from robot_mcp_memory.http._auth import _bearer_token as bearer_token
from robot_mcp_memory.http._sessions import IDLE_GRACE_S, PRUNE_INTERVAL_S, SessionBook
from robot_mcp_memory.shares import (
    RETRY_AFTER_S,
    ConnectionShares,
    Share,
    ShareLimits,
)
from robot_mcp_memory.tenant import ADMIN, TENANT_SCOPE_KEY, Tenant

RAP1 = Tenant.for_robot("rap-1")
RAP2 = Tenant.for_robot("rap-2")
TOK = "tok-admin-0123456789"
TOK_A = "tok-rap-1-0123456789"
TOK_B = "tok-rap-2-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TestSessionBook:
    def test_binds_each_session_to_its_opener(self):
        book = SessionBook(idle_timeout_s=None)
        book.bind("s1", RAP1)
        book.bind("s2", ADMIN)
        assert (book.owner("s1"), book.owner("s2"), book.owner("s3")) == (RAP1, ADMIN, None)
        assert book.held("rap-1") == (1, 1)
        book.forget("s1")
        assert book.owner("s1") is None
        assert book.held("rap-1") == (0, 0)
        assert len(book) == 1

    def test_a_request_in_flight_makes_a_session_busy(self):
        book = SessionBook(idle_timeout_s=None)
        book.bind("s1", RAP1)
        book.bind("s2", RAP1)
        book.begin("s1")
        assert book.held("rap-1") == (2, 1)
        book.end("s1")
        assert book.held("rap-1") == (2, 2)
        book.begin("unknown")  # no-op
        book.end("unknown")

    def test_victim_is_the_least_recently_used_idle_session_never_the_new_one(self):
        book = SessionBook(idle_timeout_s=None)
        for sid in ("s1", "s2", "s3"):
            book.bind(sid, RAP1)
        book.begin("s1")
        book.end("s1")  # s1 used last: s2 is now the least recently used
        book.bind("new", RAP1)
        assert book.pick_victim("rap-1", keep=2, spare="new") == "s2"
        assert book.held("rap-1").held == 3  # s2 is being evicted: no longer counted
        assert book.owner("s2") == RAP1  # ...but still bound until forgotten
        assert book.pick_victim("rap-1", keep=2, spare="new") == "s3"
        assert book.pick_victim("rap-1", keep=2, spare="new") is None

    def test_busy_sessions_are_picked_only_when_none_is_idle(self):
        book = SessionBook(idle_timeout_s=None)
        book.bind("s1", RAP1)
        book.bind("s2", RAP1)
        book.begin("s1")
        book.begin("s2")
        book.bind("new", RAP1)
        assert book.pick_victim("rap-1", keep=2, spare="new") == "s1"

    def test_keep_counts_a_victim_that_could_not_be_ended_again(self):
        book = SessionBook(idle_timeout_s=None)
        book.bind("s1", RAP1)
        book.bind("new", RAP1)
        assert book.pick_victim("rap-1", keep=1, spare="new") == "s1"
        book.keep("s1")
        assert book.held("rap-1").held == 2

    def test_other_robots_sessions_are_never_picked(self):
        book = SessionBook(idle_timeout_s=None)
        book.bind("b1", RAP2)
        book.bind("a1", RAP1)
        assert book.pick_victim("rap-1", keep=0, spare="x") == "a1"
        assert book.held("rap-2").held == 1

    def test_idle_sessions_are_forgotten_only_after_the_sdk_timeout_and_grace(self):
        clock = Clock()
        book = SessionBook(idle_timeout_s=60, clock=clock)
        book.bind("idle", RAP1)
        book.bind("busy", RAP1)
        book.begin("busy")
        clock.now += 60 + IDLE_GRACE_S - 1
        assert book.owner("idle") == RAP1  # the SDK may still hold it
        clock.now += PRUNE_INTERVAL_S + 1
        assert book.owner("idle") is None
        assert book.owner("busy") == RAP1  # a request in flight keeps it in the SDK too
        assert book.expired == 1

    def test_sessions_never_expire_without_an_sdk_timeout(self):
        clock = Clock()
        book = SessionBook(idle_timeout_s=None, clock=clock)
        book.bind("s1", ADMIN)
        clock.now += 10**6
        assert book.owner("s1") == ADMIN


class TestShareLimits:
    @pytest.mark.parametrize(
        "kwargs",
        [
            {"max_streams": 0},
            {"max_requests": 0},
            {"max_sessions": 0},
            {"admin_reserve": -1},
            {"max_streams": 5, "max_requests": 4},
        ],
    )
    def test_impossible_limits_are_refused(self, kwargs):
        with pytest.raises(ValueError, match="ShareLimits"):
            ShareLimits(**kwargs)

    def test_room_warning_names_the_variables_when_one_robot_can_fill_the_room(self):
        assert ShareLimits(max_requests=16, admin_reserve=16).room_warning(256) is None
        warning = ShareLimits(max_requests=16, admin_reserve=2).room_warning(8)
        assert warning is not None
        for name in ("MEMORY_ROBOT_MAX_REQUESTS=16", "MEMORY_MAX_CONNECTIONS=8", "6 connection"):
            assert name in warning


class TestRobotShares:
    def test_streams_past_the_share_are_refused_naming_robot_and_variable(self):
        shares = ConnectionShares(ShareLimits(max_streams=2, max_requests=4))
        assert shares.admit("rap-1", stream=True) is None
        assert shares.admit("rap-1", stream=True) is None
        refusal = shares.admit("rap-1", stream=True)
        assert refusal is not None
        assert (refusal.share, refusal.limit, refusal.retry_after_s) == (
            Share.STREAMS,
            2,
            RETRY_AFTER_S[Share.STREAMS],
        )
        assert "'rap-1'" in refusal.detail
        assert "MEMORY_ROBOT_MAX_STREAMS=2" in refusal.detail
        assert shares.admit("rap-2", stream=True) is None  # another robot's share is its own
        assert shares.admit("rap-1") is None  # a plain request still fits
        assert shares.streams("rap-1") == 2
        assert shares.requests("rap-1") == 3
        assert shares.refused == {Share.STREAMS: 1}

    def test_requests_include_streams_and_free_up_on_release(self):
        shares = ConnectionShares(ShareLimits(max_streams=2, max_requests=3))
        for stream in (True, True, False):
            assert shares.admit("rap-1", stream=stream) is None
        refusal = shares.admit("rap-1")
        assert refusal is not None
        assert refusal.share is Share.REQUESTS
        assert "MEMORY_ROBOT_MAX_REQUESTS=3" in refusal.detail
        shares.release("rap-1", stream=True)
        assert shares.admit("rap-1") is None
        assert (shares.streams("rap-1"), shares.requests("rap-1")) == (1, 3)

    def test_a_new_session_is_refused_only_when_every_held_one_is_busy(self):
        shares = ConnectionShares(ShareLimits(max_sessions=2))
        assert shares.admit("rap-1", sessions=SessionBook(idle_timeout_s=None).held("x")) is None
        assert shares.admit("rap-1", sessions=book_held(2, idle=1)) is None  # one is ended
        refusal = shares.admit("rap-1", sessions=book_held(2, idle=0))
        assert refusal is not None
        assert refusal.share is Share.SESSIONS
        assert "MEMORY_ROBOT_MAX_SESSIONS=2" in refusal.detail

    def test_robots_together_never_fill_the_reserved_slots(self):
        """Cap 8, reserve 2: robots together have at most 6 requests in progress."""
        shares = ConnectionShares(ShareLimits(max_requests=4, admin_reserve=2), max_connections=8)
        for robot in ("rap-1",) * 4 + ("rap-2",) * 2:
            assert shares.admit(robot) is None
        refusal = shares.admit("rap-3")
        assert refusal is not None
        assert (refusal.share, refusal.limit) == (Share.RESERVE, 6)
        for text in ("MEMORY_ADMIN_RESERVE=2", "MEMORY_MAX_CONNECTIONS=8", "'rap-3'"):
            assert text in refusal.detail
        assert shares.requests("rap-3") == 0  # a refusal counts nothing
        shares.release("rap-2")
        assert shares.admit("rap-3") is None
        assert shares.total == 6

    def test_without_a_cap_there_is_no_reserve_check(self):
        shares = ConnectionShares(ShareLimits(max_streams=1, max_requests=1, admin_reserve=100))
        assert shares.admit("rap-1") is None
        assert shares.admit("rap-2") is None

    def test_releasing_what_was_never_admitted_changes_nothing(self):
        shares = ConnectionShares(ShareLimits(), max_connections=8)
        shares.release("rap-1", stream=True)
        assert (shares.total, shares.requests("rap-1"), shares.streams("rap-1")) == (0, 0, 0)


def book_held(held: int, *, idle: int):
    book = SessionBook(idle_timeout_s=None)
    for n in range(held):
        book.bind(f"s{n}", RAP1)
        if n >= idle:
            book.begin(f"s{n}")
    return book.held("rap-1")


class FakeSessionManager:
    """Answers like the SDK's StreamableHTTPSessionManager: a POST without a session id
    opens ``s1``, ``s2``…; a known id is served (a GET waits until ``release`` is set);
    DELETE ends it; an unknown id is the SDK's 404."""

    NOT_FOUND = (
        b'{"jsonrpc":"2.0","id":"server-error",'
        b'"error":{"code":-32600,"message":"Session not found"}}'
    )

    def __init__(self) -> None:
        self.live: set[str] = set()
        self.seen: list[tuple[str, str | None, Tenant | None]] = []
        self.opened = 0
        self.release = anyio.Event()
        self.streaming = 0

    async def __call__(self, scope, receive, send):
        headers = dict(scope["headers"])
        raw = headers.get(b"mcp-session-id")
        sid = raw.decode("latin-1") if raw is not None else None
        self.seen.append((scope["method"], sid, scope.get(TENANT_SCOPE_KEY)))
        extra: list[tuple[bytes, bytes]] = []
        if sid is None and scope["method"] == "POST":
            self.opened += 1
            sid = f"s{self.opened}"
            self.live.add(sid)
            status, body = 200, b"{}"
            extra = [(b"mcp-session-id", sid.encode())]
        elif sid in self.live:
            status, body = 200, b"{}"
            if scope["method"] == "DELETE":
                self.live.discard(sid)
            elif scope["method"] == "GET":
                self.streaming += 1
                await self.release.wait()
                self.streaming -= 1
        else:
            status, body = 404, self.NOT_FOUND
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": body})


def request(method: str, token: str | None, *, session: str | None = None, path: str = "/mcp"):
    headers = [(b"host", b"127.0.0.1:9103")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if session is not None:
        headers.append((b"mcp-session-id", session.encode()))
    return {
        "type": "http",
        "method": method,
        "path": path,
        "headers": headers,
        "query_string": b"",
        "client": ("127.0.0.1", 5555),
    }


async def call(mw, scope) -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[dict[str, Any]] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await mw(scope, receive, send)
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


def gate(app, **limits: int) -> TenantAuthMiddleware:
    auth = TokenAuth.from_settings(TOK, {TOK_A: "rap-1", TOK_B: "rap-2"})
    shares = ConnectionShares(ShareLimits(**limits)) if limits else None
    return TenantAuthMiddleware(app, auth, shares=shares)


class TestSessionBinding:
    async def test_another_token_gets_the_unknown_session_answer_and_never_reaches_it(self):
        """rap-2 (and the admin) with rap-1's session id: POST, GET and DELETE are answered
        exactly like an unknown id; the app never sees them; rap-1's session lives on."""
        app = FakeSessionManager()
        mw = gate(app)
        status, headers, _ = await call(mw, request("POST", TOK_A))
        assert (status, headers[b"mcp-session-id"]) == (200, b"s1")
        unknown = await call(mw, request("POST", TOK_B, session="s999"))
        assert unknown[0] == 404
        seen = len(app.seen)
        for token in (TOK_B, TOK):
            for method in ("POST", "GET", "DELETE"):
                refused = await call(mw, request(method, token, session="s1"))
                assert (refused[0], refused[2]) == (404, unknown[2]), (token, method)
        assert len(app.seen) == seen  # none of them reached the session manager
        assert app.live == {"s1"}
        assert (await call(mw, request("POST", TOK_A, session="s1")))[0] == 200

    async def test_an_admin_session_is_bound_too(self):
        app = FakeSessionManager()
        mw = gate(app)
        await call(mw, request("POST", TOK))
        assert (await call(mw, request("DELETE", TOK_A, session="s1")))[0] == 404
        assert app.live == {"s1"}

    async def test_delete_and_a_404_release_the_binding(self):
        app = FakeSessionManager()
        mw = gate(app)
        await call(mw, request("POST", TOK_A))
        assert (await call(mw, request("DELETE", TOK_A, session="s1")))[0] == 200
        assert mw.sessions.owner("s1") is None
        await call(mw, request("POST", TOK_A))
        app.live.clear()  # the SDK ended s2 on its own (idle timeout)
        assert (await call(mw, request("POST", TOK_A, session="s2")))[0] == 404
        assert mw.sessions.owner("s2") is None

    async def test_a_refused_opening_binds_nothing(self):
        async def refuse(scope, receive, send):
            await send({"type": "http.response.start", "status": 400, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        mw = gate(refuse)
        await call(mw, request("POST", TOK_A))
        assert len(mw.sessions) == 0


class TestSessionShare:
    async def test_past_the_share_the_least_recently_used_idle_session_is_deleted(self):
        """Sessions s1..s3 at a share of 2: opening s3 DELETEs s1 through the app."""
        app = FakeSessionManager()
        mw = gate(app, max_sessions=2)
        for _ in range(3):
            assert (await call(mw, request("POST", TOK_A)))[0] == 200
        assert app.live == {"s2", "s3"}
        assert ("DELETE", "s1", RAP1) in app.seen
        assert mw.evicted == 1
        assert mw.sessions.owner("s1") is None
        assert mw.sessions.held("rap-1").held == 2
        # The admin and other robots keep theirs.
        await call(mw, request("POST", TOK))
        await call(mw, request("POST", TOK_B))
        assert {"s4", "s5"} <= app.live

    async def test_when_every_session_is_busy_a_new_one_is_429(self):
        app = FakeSessionManager()
        mw = gate(app, max_sessions=2, max_streams=2, max_requests=8)
        await call(mw, request("POST", TOK_A))
        await call(mw, request("POST", TOK_A))
        async with anyio.create_task_group() as tg:
            for sid in ("s1", "s2"):
                tg.start_soon(call, mw, request("GET", TOK_A, session=sid))
            with anyio.fail_after(5):
                while app.streaming < 2:
                    await anyio.sleep(0.01)
            status, headers, body = await call(mw, request("POST", TOK_A))
            assert status == 429
            assert headers[b"retry-after"] == str(RETRY_AFTER_S[Share.SESSIONS]).encode()
            assert "MEMORY_ROBOT_MAX_SESSIONS=2" in json.loads(body)["detail"]
            app.release.set()
        assert app.live == {"s1", "s2"}


class TestRefusals:
    async def test_429_has_retry_after_and_a_sentence_and_never_calls_the_app(self):
        app = FakeSessionManager()
        mw = gate(app, max_streams=1, max_requests=2)
        await call(mw, request("POST", TOK_A))
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, mw, request("GET", TOK_A, session="s1"))
            with anyio.fail_after(5):
                while app.streaming < 1:
                    await anyio.sleep(0.01)
            seen = len(app.seen)
            status, headers, body = await call(mw, request("GET", TOK_A, session="s1"))
            assert status == 429
            assert headers[b"retry-after"] == b"5"
            assert headers[b"content-type"] == b"application/json"
            answer = json.loads(body)
            assert answer["error"] == "too_many_requests"
            assert "'rap-1'" in answer["detail"]
            assert "MEMORY_ROBOT_MAX_STREAMS=1" in answer["detail"]
            assert len(app.seen) == seen
            # The admin and another robot are not held to rap-1's share.
            assert (await call(mw, request("GET", TOK, path="/other")))[0] == 404
            await call(mw, request("POST", TOK_B))
            assert app.opened == 2
            app.release.set()
        assert mw.shares.streams("rap-1") == 0
        assert mw.shares.requests("rap-1") == 0

    async def test_the_share_is_given_back_when_the_app_raises(self):
        async def boom(scope, receive, send):
            raise RuntimeError("x")

        mw = gate(boom, max_streams=1, max_requests=1)
        with pytest.raises(RuntimeError):
            await call(mw, request("GET", TOK_A, path="/sse"))
        assert mw.shares.requests("rap-1") == 0

    async def test_a_refusal_does_not_wait_for_a_body_that_never_comes(self):
        """A robot past its share that never sends its body is answered within the drain
        bound, not held (the connection would stay busy for ever)."""
        app = FakeSessionManager()
        mw = gate(app, max_streams=1, max_requests=1)
        shares = mw.shares
        assert shares.admit("rap-1") is None  # one request in progress already
        sent: list[dict[str, Any]] = []

        async def receive():
            await anyio.sleep_forever()

        async def send(message):
            sent.append(message)

        with anyio.fail_after(5):
            await mw(request("POST", TOK_A, session="s1"), receive, send)
        assert sent[0]["status"] == 429
        assert (b"connection", b"close") in sent[0]["headers"]  # the slot is given back


class TestBearerWhitespace:
    @pytest.mark.parametrize(
        "value",
        [
            b"Bearer \xa0" + TOK_A.encode(),
            b"Bearer " + TOK_A.encode() + b"\x85",
            b"Bearer " + TOK_A.encode() + b"\xa0",
            b"\xa0Bearer " + TOK_A.encode(),
            b"Bearer \x0b" + TOK_A.encode(),
        ],
    )
    async def test_non_ascii_or_odd_spaces_around_the_token_are_part_of_it(self, value):
        scope = request("GET", None, path="/sse")
        scope["headers"].append((b"authorization", value))
        app = FakeSessionManager()
        status, _, _ = await call(gate(app), scope)
        assert status == 401
        assert app.seen == []

    def test_ascii_spaces_and_tabs_around_the_token_are_ignored(self):
        scope = request("GET", None)
        scope["headers"].append((b"authorization", b" \tBearer  \t" + TOK_A.encode() + b" \t"))
        assert bearer_token(scope) == TOK_A
