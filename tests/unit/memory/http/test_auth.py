"""The bearer gate: constant-time token check, 401 shape, tenant bound for exactly the request."""

from __future__ import annotations

import json

import pytest

from robot_mcp_memory._exceptions import TokenMapError
from robot_mcp_memory.http._auth import (
    TenantAuthMiddleware,
    TokenAuth,
)
from robot_mcp_memory.tenant import (
    ADMIN,
    TENANT_SCOPE_KEY,
    Tenant,
    current_tenant,
    parse_robot_tokens,
)

TOKEN = "tok-admin-0123456789"


class RecordingApp:
    """A downstream ASGI app that records each call and the tenant it saw, and answers 200."""

    def __init__(self):
        self.calls: list[tuple[str, Tenant | None]] = []

    async def __call__(self, scope, receive, send):
        self.calls.append((scope["type"], current_tenant.get()))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})


def http_scope(path="/sse", headers=()):
    return {
        "type": "http",
        "method": "GET",
        "path": path,
        "headers": [(k.encode(), v.encode()) for k, v in headers],
        "client": ("127.0.0.1", 5555),
    }


async def call(mw, scope):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await mw(scope, receive, send)
    return sent


def response(sent):
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body


@pytest.fixture
def app():
    return RecordingApp()


@pytest.fixture
def gate(app):
    return TenantAuthMiddleware(app, TokenAuth({TOKEN: ADMIN}))


class TestTenantBinding:
    async def test_tenant_is_empty_before_set_during_and_empty_after(self, app, gate):
        """The tenant is bound only while the downstream app runs."""
        assert current_tenant.get() is None
        sent = await call(gate, http_scope(headers=[("authorization", f"Bearer {TOKEN}")]))
        assert app.calls == [("http", ADMIN)]
        assert response(sent)[0] == 200
        assert current_tenant.get() is None

    async def test_tenant_is_reset_when_the_app_raises(self, gate):
        """An exception downstream still unbinds the tenant."""

        async def boom(scope, receive, send):
            assert current_tenant.get() == ADMIN
            raise RuntimeError("downstream failed")

        gate.app = boom
        with pytest.raises(RuntimeError):
            await call(gate, http_scope(headers=[("authorization", f"Bearer {TOKEN}")]))
        assert current_tenant.get() is None

    async def test_scheme_is_case_insensitive(self, app, gate):
        """'bearer' works like 'Bearer' (RFC 6750 schemes are case-insensitive)."""
        await call(gate, http_scope(headers=[("Authorization", f"bearer {TOKEN}")]))
        assert app.calls == [("http", ADMIN)]

    async def test_resolver_picks_the_tenant_of_the_matching_token(self, app):
        """With several tokens (the future per-robot map), each resolves to its own tenant."""
        rap1 = Tenant(name="rap-1", robot="rap-1")
        gate = TenantAuthMiddleware(app, TokenAuth({TOKEN: ADMIN, "tokA": rap1}))
        await call(gate, http_scope(headers=[("authorization", "Bearer tokA")]))
        await call(gate, http_scope(headers=[("authorization", f"Bearer {TOKEN}")]))
        assert [t for _, t in app.calls] == [rap1, ADMIN]
        assert rap1.scoped
        assert not ADMIN.scoped


class TestRejection:
    @pytest.mark.parametrize(
        ("headers", "detail"),
        [
            ([], "missing bearer token"),
            ([("authorization", "Bearer wrong")], "invalid bearer token"),
            ([("authorization", f"Bearer {TOKEN}x")], "invalid bearer token"),
            ([("authorization", f"Basic {TOKEN}")], "missing bearer token"),
            ([("authorization", "Bearer ")], "missing bearer token"),
        ],
    )
    async def test_bad_or_missing_token_is_401_without_calling_the_app(
        self, app, gate, headers, detail
    ):
        """401 JSON with WWW-Authenticate: Bearer, and the downstream app never runs."""
        status, resp_headers, body = response(await call(gate, http_scope(headers=headers)))
        assert status == 401
        assert resp_headers[b"www-authenticate"].startswith(b"Bearer")
        assert resp_headers[b"content-type"] == b"application/json"
        assert json.loads(body) == {"error": "unauthorized", "detail": detail}
        assert int(resp_headers[b"content-length"]) == len(body)
        assert app.calls == []

    async def test_wrong_token_challenge_says_invalid_token(self, gate):
        """A presented but wrong token gets error="invalid_token" in the challenge."""
        _, headers, _ = response(
            await call(gate, http_scope(headers=[("authorization", "Bearer x")]))
        )
        assert b'error="invalid_token"' in headers[b"www-authenticate"]

    async def test_post_messages_is_gated_too(self, app, gate):
        """Every path but /healthz needs the token, including the SSE message endpoint."""
        scope = http_scope(path="/messages/")
        scope["method"] = "POST"
        status, _, _ = response(await call(gate, scope))
        assert status == 401
        assert app.calls == []

    async def test_websocket_without_token_is_closed(self, app, gate):
        """A websocket scope without a token is closed with 1008, not passed on."""
        sent = await call(gate, {"type": "websocket", "path": "/ws", "headers": []})
        assert sent == [{"type": "websocket.close", "code": 1008}]
        assert app.calls == []


class TestPassThrough:
    async def test_healthz_needs_no_token(self, app, gate):
        """GET /healthz reaches the app without a token and without a tenant."""
        status, _, _ = response(await call(gate, http_scope(path="/healthz")))
        assert status == 200
        assert app.calls == [("http", None)]

    async def test_lifespan_scope_passes_through(self, app, gate):
        """Non-HTTP scopes (lifespan) are not gated."""
        await call(gate, {"type": "lifespan"})
        assert app.calls == [("lifespan", None)]


class TestTokenAuth:
    def test_unknown_token_resolves_to_none(self):
        """Only an exact match resolves."""
        auth = TokenAuth({TOKEN: ADMIN})
        assert auth(TOKEN) == ADMIN
        assert auth(TOKEN[:-1]) is None
        assert auth("") is None
        assert len(auth) == 1

    def test_empty_token_is_refused_at_construction(self):
        """An empty configured token would admit anyone; constructing it fails."""
        with pytest.raises(ValueError, match="empty token"):
            TokenAuth({"": ADMIN})


TOK_A = "tokA-0123456789abcdef"
TOK_B = "tokB-0123456789abcdef"
TOK = "admin-token-0123456789"


class TestParseRobotTokens:
    def test_entries_map_token_to_robot(self):
        """'rap-1:tokA, rap-2:tokB,' is {tokA: rap-1, tokB: rap-2}; blanks are skipped."""
        assert parse_robot_tokens(f" rap-1:{TOK_A} , rap-2 : {TOK_B},") == {
            TOK_A: "rap-1",
            TOK_B: "rap-2",
        }
        assert parse_robot_tokens("") == {}
        assert parse_robot_tokens(f"\trap-1 :\r\n{TOK_A}\f,\v") == {TOK_A: "rap-1"}

    @pytest.mark.parametrize(
        ("text", "names"),
        [
            (f"rap-1{TOK_A}", "entry 1 has no ':'"),
            (f"rap-1:{TOK_A},:{TOK_B}", "entry 2: robot id ''"),
            (f"rap 1:{TOK_A}", "entry 1: robot id 'rap 1'"),
            ("rap\n-1:" + TOK_A, "robot id"),
            ("rap-1:short", "entry 1 (robot 'rap-1'): the token must be at least 16"),
            (f"rap-1:{TOK_A} x", "at least 16 visible ASCII"),
            (
                f"rap-1:{TOK_A},rap-1:{TOK_B}",
                "robot 'rap-1' is given twice",
            ),
            (f"rap-1:{TOK_A},rap-2:{TOK_A}", "already robot 'rap-1'"),
            (f"rap-1:{TOK}", "equals MEMORY_TOKEN"),
            # Issue 18: only ASCII whitespace around a part is dropped; a Unicode space
            # (a pasted non-breaking space, NEL) stays and makes the part invalid.
            (f"rap-1:\xa0{TOK_A}", "at least 16 visible ASCII"),
            (f"rap-1:{TOK_A}\x85", "at least 16 visible ASCII"),
            (f"rap-1:{TOK_A}\u2003", "at least 16 visible ASCII"),
            (f"\xa0rap-1:{TOK_A}", "entry 1: robot id '\\xa0rap-1'"),
            (f"rap-1\x85:{TOK_A}", "entry 1: robot id"),
            (f"rap-1:{TOK_A},\u3000", "entry 2 has no ':'"),
        ],
    )
    def test_malformed_maps_name_the_entry_never_the_token(self, text, names):
        """Each refusal names the bad entry, and no message ever contains a token."""
        with pytest.raises(TokenMapError) as info:
            parse_robot_tokens(text, admin_token=TOK)
        message = str(info.value)
        assert names in message
        for token in (TOK_A, TOK_B, TOK):
            assert token not in message
        assert "\n" not in message


def sse_app(session_hex: str, during_stream):
    """A fake SSE endpoint: GET announces a session like the SDK's transport, then awaits
    ``during_stream()`` while the stream is open; POSTs are recorded with their tenant."""
    posts: list[Tenant | None] = []

    async def app(scope, receive, send):
        if scope["method"] == "GET":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            body = f"event: endpoint\r\ndata: /messages/?session_id={session_hex}\r\n\r\n"
            await send({"type": "http.response.body", "body": body.encode(), "more_body": True})
            await during_stream()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            posts.append(scope.get(TENANT_SCOPE_KEY))
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b"Accepted"})

    return app, posts


class TestSseSessionBinding:
    SESSION = "0123456789abcdef0123456789abcdef"

    def gate(self, app):
        auth = TokenAuth.from_settings(TOK, {TOK_A: "rap-1", TOK_B: "rap-2"})
        return TenantAuthMiddleware(app, auth)

    def post(self, token, session=SESSION):
        scope = http_scope(path="/messages/", headers=[("authorization", f"Bearer {token}")])
        scope["method"] = "POST"
        scope["query_string"] = f"session_id={session}".encode()
        return scope

    async def test_a_post_with_another_token_is_403_and_not_processed(self):
        """While rap-1's stream is open, rap-2's and the admin's posts to it are refused."""
        checked = []

        async def during_stream():
            for token in (TOK_B, TOK):
                status, _, body = response(await call(gate, self.post(token)))
                assert status == 403, token
                assert json.loads(body)["error"] == "forbidden"
            assert posts == []
            s = self.SESSION
            dashed = "{" + "-".join([s[:8], s[8:12], s[12:16], s[16:20], s[20:]]).upper() + "}"
            status, _, _ = response(await call(gate, self.post(TOK_B, dashed)))
            assert status == 403  # any spelling uuid.UUID accepts is the same session
            status, _, _ = response(await call(gate, self.post(TOK_A)))
            assert status == 202
            assert posts == [Tenant.for_robot("rap-1")]
            checked.append(True)

        app, posts = sse_app(self.SESSION, during_stream)
        gate = self.gate(app)
        get = http_scope(path="/sse", headers=[("authorization", f"Bearer {TOK_A}")])
        await call(gate, get)
        assert checked == [True]
        # Once the stream has ended, the binding is gone (the SDK answers unknown sessions).
        status, _, _ = response(await call(gate, self.post(TOK_B)))
        assert status == 202

    async def test_from_settings_makes_admin_and_scoped_tenants(self):
        """MEMORY_TOKEN is the unscoped admin; each robot token its robot's scoped tenant."""
        auth = TokenAuth.from_settings(TOK, {TOK_A: "rap-1"})
        assert auth(TOK) == ADMIN
        assert auth(TOK_A) == Tenant.for_robot("rap-1")
        assert auth(TOK_A)
        assert auth(TOK_A[:-1]) is None
        assert len(TokenAuth.from_settings(None, {TOK_A: "rap-1"})) == 1
