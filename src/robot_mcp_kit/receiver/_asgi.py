"""Serving a :class:`~robot_mcp_kit.receiver.Receiver`: a plain ASGI app and a FastAPI router.

:class:`ReceiverApp` needs no web framework: ``POST <path>`` reads the headers, refuses a
``Content-Length`` over the limit before reading anything, reads at most the limit plus
one byte, and answers what :meth:`Receiver.receive
<robot_mcp_kit.receiver.Receiver.receive>` says; ``GET <inspect_path>?server=…&task_id=…``
is the contract's inspection hook (§5.5), when asked for. Its lifespan starts the
receiver and closes it. Serve it with any ASGI server (``uvicorn.run(app)``) or mount it.

:func:`fastapi_router` gives the same routes as a FastAPI ``APIRouter`` whose lifespan
starts and closes the receiver (``app.include_router(router)``); it imports fastapi.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, Protocol
from urllib.parse import parse_qs

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.receiver._exceptions import ReceiverClosed
from robot_mcp_kit.receiver._verdict import (
    PostHeaders,
    Verdict,
    body_too_large,
    check_declared_size,
    read_asgi_headers,
    read_headers,
)

__all__ = ["Answer", "ReceiverApp", "Serving", "fastapi_router"]

_log = get_logger("robot_mcp_kit.receiver")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Answer(Protocol):
    """What :meth:`Serving.receive` answers: a status and a JSON object."""

    @property
    def status(self) -> int: ...

    @property
    def body(self) -> dict[str, Any]: ...


class Serving(Protocol):
    """What the app needs of the receiver it serves (:class:`Receiver
    <robot_mcp_kit.receiver.Receiver>` is one)."""

    @property
    def max_body_bytes(self) -> int: ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def receive(self, headers: PostHeaders, body: bytes, /) -> Answer: ...

    def inspect(self, server: str, task_id: str, /) -> dict[str, Any]: ...


_CLOSED = {"error": "unavailable", "detail": "The receiver is shutting down; send it again."}


def _json(status: int, body: dict[str, Any]) -> tuple[int, bytes]:
    return status, json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


async def answer_post(
    receiver: Serving, head: PostHeaders | Verdict, body: bytes
) -> tuple[int, dict[str, Any], Answer | None]:
    """The answer to a post whose body was read (``head`` from :func:`read_headers`)."""
    if isinstance(head, Verdict):
        return head.status, {"error": str(head.reason), "detail": head.detail or ""}, None
    try:
        receipt = await receiver.receive(head, body)
    except ReceiverClosed:
        return 503, dict(_CLOSED), None
    return receipt.status, receipt.body, receipt


def inspect_answer(receiver: Serving, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
    """The inspection hook's answer to a query string's parameters."""
    server = (query.get("server") or [""])[0]
    task_id = (query.get("task_id") or [""])[0]
    if not server or not task_id:
        return 422, {
            "error": "invalid_request",
            "detail": "Give both query parameters: ?server=<X-RVC-Server>&task_id=<task_id>.",
        }
    try:
        return 200, receiver.inspect(server, task_id)
    except Exception as exc:  # a closed store: say so, not its text
        return 503, {
            "error": "unavailable",
            "detail": f"Cannot read the state ({type(exc).__name__}).",
        }


class ReceiverApp:
    """The receiver as an ASGI app (see the module docstring).

    Args:
        receiver: the receiver it serves.
        path: where events are posted (``/api/agent/events``).
        inspect_path: where the inspection hook answers (None: no hook). Serve it only
            where the servers and the public cannot reach it, or behind your own auth.
    """

    def __init__(
        self,
        receiver: Serving,
        *,
        path: str = "/api/agent/events",
        inspect_path: str | None = None,
    ) -> None:
        self.receiver = receiver
        self.path = path
        self.inspect_path = inspect_path

    def __repr__(self) -> str:
        return f"<ReceiverApp POST {self.path} inspect={self.inspect_path} {self.receiver!r}>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            return
        path, method = scope.get("path", ""), scope.get("method", "")
        if path == self.path:
            if method != "POST":
                await self._send(
                    send,
                    *_json(405, {"error": "method_not_allowed", "detail": f"{path} takes POST."}),
                )
                return
            await self._post(scope, receive, send)
        elif self.inspect_path is not None and path == self.inspect_path and method == "GET":
            query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
            await self._send(send, *_json(*inspect_answer(self.receiver, query)))
        else:
            await self._send(
                send, *_json(404, {"error": "not_found", "detail": f"Nothing at {path}."})
            )

    async def _post(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = read_asgi_headers(scope.get("headers", []))
        limit = self.receiver.max_body_bytes
        if not isinstance(head, Verdict):
            early = check_declared_size(head, limit)
            if early is not None:
                head = early
        body = b""
        if not isinstance(head, Verdict):
            read = await _read_capped(receive, limit)
            if read is None:
                head = body_too_large(head.server, limit)
            else:
                body = read
        status, answer, _receipt = await answer_post(self.receiver, head, body)
        await self._send(send, *_json(status, answer))

    async def _send(self, send: Send, status: int, body: bytes) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.receiver.start()
                except Exception as exc:
                    _log.exception("receiver_start_failed")
                    await send({"type": "lifespan.startup.failed", "message": type(exc).__name__})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.receiver.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _read_capped(receive: Receive, limit: int) -> bytes | None:
    """The body, or None as soon as more than ``limit`` bytes arrived."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def fastapi_router(
    receiver: Serving, *, path: str = "/api/agent/events", inspect_path: str | None = None
) -> Any:
    """The receiver's routes as a FastAPI ``APIRouter`` (``app.include_router(router)``).

    Its lifespan starts the receiver and closes it with the app. Needs fastapi.
    """
    import contextlib

    from fastapi import APIRouter, Request
    from fastapi.responses import JSONResponse

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        await receiver.start()
        try:
            yield
        finally:
            await receiver.aclose()

    router = APIRouter(lifespan=lifespan)

    async def receive_event(request: Request) -> JSONResponse:
        headers = list(request.headers.items())
        head = read_headers(headers)
        limit = receiver.max_body_bytes
        if not isinstance(head, Verdict):
            early = check_declared_size(head, limit)
            if early is not None:
                head = early
        body = b""
        if not isinstance(head, Verdict):
            chunks: list[bytes] = []
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    head = body_too_large(head.server, limit)
                    break
                chunks.append(chunk)
            body = b"".join(chunks)
        status, answer, _receipt = await answer_post(receiver, head, body)
        return JSONResponse(answer, status_code=status)

    # Plain routes: the endpoints take the request as it is (FastAPI would read the
    # postponed annotations against this module's globals, where Request is not).
    router.add_route(path, receive_event, methods=["POST"])
    if inspect_path is not None:

        async def inspect(request: Request) -> JSONResponse:
            query = {k: request.query_params.getlist(k) for k in ("server", "task_id")}
            status, answer = inspect_answer(receiver, query)
            return JSONResponse(answer, status_code=status)

        router.add_route(inspect_path, inspect, methods=["GET"])
    return router
