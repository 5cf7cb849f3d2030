"""The JSON-RPC body guard in front of the MCP message endpoints, as a plain ASGI app."""

from __future__ import annotations

import json

import pytest

from robot_mcp_memory.http._jsonrpc_guard import (
    JsonRpcBodyGuard,
    check_jsonrpc_body,
)

PARSE = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
INVALID = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'

NOT_JSON = {
    "syntax": b"not json{",
    "empty": b"",
    "invalid utf-8": b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}',
    "nested past the limit": b"[" * 100_000 + b"]" * 100_000,
    "nested 300 deep in params": b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":'
    + b"[" * 300
    + b"]" * 300
    + b"}}",
    "lone surrogate": b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
    "5000-digit id": b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
    "trailing garbage": PING + b" x",
    "byte order mark": b"\xef\xbb\xbf" + PING,
}
NOT_JSONRPC = {
    "array of junk": b'[1,"x",{}]',
    "batch": b"[" + PING + b"]",
    "number": b"42",
    "object without method": b'{"hello":"world"}',
    "wrong version": b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
}


class TestCheck:
    @pytest.mark.parametrize("body", NOT_JSON.values(), ids=NOT_JSON.keys())
    def test_not_json_is_a_parse_error(self, body):
        assert check_jsonrpc_body(body) == (-32700, "Parse error")

    @pytest.mark.parametrize("body", NOT_JSONRPC.values(), ids=NOT_JSONRPC.keys())
    def test_json_that_is_not_a_message_is_an_invalid_request(self, body):
        assert check_jsonrpc_body(body) == (-32600, "Invalid Request")

    @pytest.mark.parametrize(
        "body",
        [
            PING,
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            b'{"jsonrpc":"2.0","id":"a","result":{}}',
            b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":'
            + b"[" * 100
            + b"]" * 100
            + b"}}",
        ],
        ids=["request", "notification", "response", "nested 100 deep"],
    )
    def test_messages_pass(self, body):
        assert check_jsonrpc_body(body) is None


class Downstream:
    def __init__(self):
        self.bodies: list[bytes] = []
        self.calls = 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        if scope.get("method") == "POST":
            message = await receive()
            self.bodies.append(message["body"])
            assert message["more_body"] is False
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"Accepted"})


async def post(guard, body: bytes, *, path="/mcp", method="POST", chunk=None, headers=()):
    chunks = [body[i : i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    sent = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 5555),
    }
    await guard(scope, receive, send)
    if not sent:
        return None, None
    body_out = b"".join(m.get("body", b"") for m in sent[1:])
    return sent[0]["status"], body_out


@pytest.fixture
def downstream():
    return Downstream()


@pytest.fixture
def guard(downstream):
    return JsonRpcBodyGuard(downstream, paths=["/mcp", "/messages/"], max_body_bytes=1024)


class TestGuard:
    async def test_garbage_is_400_parse_error_and_never_reaches_the_app(self, guard, downstream):
        status, body = await post(guard, b"\xff garbage")
        assert (status, json.loads(body)) == (400, PARSE)
        assert downstream.calls == 0

    async def test_not_a_message_is_400_invalid_request(self, guard, downstream):
        status, body = await post(guard, b"[1,2]", path="/messages/")
        assert (status, json.loads(body)) == (400, INVALID)
        assert downstream.calls == 0

    async def test_a_message_is_replayed_whole_to_the_app(self, guard, downstream):
        """Sent in 7-byte chunks, the app gets the body in one piece."""
        status, _ = await post(guard, PING, path="/messages/", chunk=7)
        assert status == 202
        assert downstream.bodies == [PING]

    async def test_declared_oversize_is_413_before_reading(self, guard, downstream):
        status, body = await post(guard, PING, headers=[(b"content-length", b"999999")])
        assert status == 413
        assert json.loads(body)["error"]["message"] == "Request body too large"
        assert downstream.calls == 0

    async def test_streamed_oversize_is_413(self, guard, downstream):
        status, _ = await post(guard, b" " * 2000 + PING, chunk=100)
        assert status == 413
        assert downstream.calls == 0

    async def test_client_gone_mid_body_gets_nothing(self, guard, downstream):
        sent = []
        messages = [{"type": "http.request", "body": b"{", "more_body": True}]

        async def receive():
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
        await guard(scope, receive, send)
        assert sent == []
        assert downstream.calls == 0

    @pytest.mark.parametrize(
        ("method", "path"),
        [("GET", "/mcp"), ("DELETE", "/mcp"), ("GET", "/sse"), ("POST", "/healthz")],
    )
    async def test_other_requests_pass_untouched(self, guard, downstream, method, path):
        """Not a POST to a message endpoint: the app sees it, body unread."""
        status, _ = await post(guard, b"garbage", path=path, method=method)
        assert status == 202
        assert downstream.calls == 1

    async def test_paths_under_a_mount_are_guarded(self, guard, downstream):
        """The SSE transport mounts /messages/: what is under it is the same endpoint."""
        status, _ = await post(guard, b"garbage", path="/messages/x")
        assert status == 400
        assert downstream.calls == 0

    async def test_lifespan_passes(self, guard, downstream):
        async def receive():
            return {"type": "lifespan.startup"}

        async def send(message):
            pass

        await guard({"type": "lifespan"}, receive, send)
        assert downstream.calls == 1
